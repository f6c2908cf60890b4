//! The cluster's pieces: N nodes, each with its Ray in its container (or on
//! the host), turned into one Ray cluster for vLLM with tensor parallelism
//! over RoCE (the workflows over every node are [`crate::fleet`]).
//!
//! [`config`] reads `cluster.toml` ([`vars`]: its variables), [`env`](mod@env)
//! computes a node's NCCL/Ray settings from its own facts, [`view`] is what
//! RCCL will see where Ray runs, [`plan`] builds the commands (pure) and
//! [`preflight`] the verdict over every node's report (pure), [`join`] is
//! `cluster join` on a node (the report and Ray's start, through halobox
//! inside the container), [`run`] reaches the nodes over ssh (each node's
//! runner, every node's report, the head's Ray table), [`carry`] writes
//! vLLM's list of per-node variables, and [`auth`] keeps Ray's token
//! authentication; [`resume`] is what `cluster up` finds already there (a
//! stopped container started, a running Ray head kept).
//! [`image_sync`] is `image sync` (the image once to every node, over the
//! model sync's chain), [`image_store`] a node's side of it and
//! [`refresh_image`] `cluster refresh`'s first step (the image moved once).

pub mod auth;
pub mod carry;
pub mod config;
pub mod env;
pub mod image_store;
pub mod image_sync;
pub mod join;
pub mod plan;
pub mod preflight;
pub mod refresh_image;
pub mod resume;
pub mod run;
pub mod vars;
pub mod view;

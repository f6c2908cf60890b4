//! The cluster: N nodes, each with its Ray in its container (or on the host),
//! turned into one Ray cluster for vLLM with tensor parallelism over RoCE.
//!
//! [`config`] reads `cluster.toml` ([`vars`]: its variables), [`env`](mod@env)
//! computes a node's NCCL/Ray settings from its own facts, [`view`] is what
//! RCCL will see where Ray runs, [`plan`] builds the commands (pure) and
//! [`preflight`] the verdict over every node's report (pure), [`join`] is
//! `cluster join` on a node (the report and Ray's start, through halobox
//! inside the container), [`run`] executes the plans over ssh, [`carry`]
//! writes vLLM's list of per-node variables, and [`auth`] keeps Ray's token
//! authentication; [`up`] and [`down`] ([`lifecycle`]) are `cluster up` and
//! `cluster down`, and [`resume`] is what `up` finds already there (a
//! stopped container started, a running Ray head kept); [`metrics_nodes`]
//! starts `halobox metrics` on every node's host as `up` starts (a detached
//! `sh` program over ssh) and stops it as `down` does; [`boot`] is `cluster
//! enable`/`disable` (systemd units that bring it back at boot).
//!
//! Every node at once: [`refresh`](mod@refresh) is `cluster refresh` (the
//! image moved once first, [`refresh_image`]; then stage everywhere, then
//! swap everywhere or nowhere; [`refresh_verify`]: while a serve is recorded,
//! the serve proves the new containers or every node goes back), [`ray_state`] whether Ray
//! runs (the head's table, else Ray's daemons in every node's processes),
//! [`install`] `cluster install`, [`doctor`] the probe, cross-node checks
//! and table (pure) and [`doctor_run`] every node's probe over ssh,
//! [`bench`](mod@bench) pairs, matrices and flagged links with causes (pure) and
//! [`bench_run`] one pair at a time over ssh, its saved run unpacked here.
//! [`image_sync`] is `image sync` (the image once to every node, over the
//! model sync's chain) and [`image_store`] a node's side of it.
//! [`crate::serve`] runs vLLM or llama.cpp on the head.

pub mod auth;
pub mod bench;
pub mod bench_run;
pub mod boot;
pub mod carry;
pub mod config;
pub mod doctor;
pub mod doctor_run;
pub mod env;
pub mod image_store;
pub mod image_sync;
pub mod install;
pub mod join;
pub mod lifecycle;
pub mod metrics_nodes;
pub mod plan;
pub mod preflight;
pub mod ray_state;
pub mod refresh;
pub mod refresh_image;
pub mod refresh_verify;
pub mod resume;
pub mod run;
pub mod vars;
pub mod view;

pub use lifecycle::{down, up};

//! The cluster: N nodes, each with its Ray in its container (or on the host),
//! turned into one Ray cluster for vLLM with tensor parallelism over RoCE.
//!
//! [`config`] reads `cluster.toml`, [`env`](mod@env) computes a node's NCCL/Ray
//! settings from its own facts, [`view`] is what RCCL will see where Ray
//! runs, [`plan`] builds the commands (pure) and [`preflight`] the verdict
//! over every node's report, [`run`] executes them over ssh (and, on a
//! node, halobox inside its container), [`carry`] writes vLLM's list of
//! per-node variables, and [`auth`] keeps Ray's token authentication;
//! [`up`] and [`down`] are `cluster up` and `cluster down`, [`boot`]
//! `cluster enable`/`disable` (systemd units that bring it back at boot);
//! [`crate::serve`] runs vLLM on the head.

pub mod auth;
pub mod bench;
pub mod bench_run;
pub mod boot;
pub mod carry;
pub mod config;
pub mod doctor;
pub mod doctor_run;
pub mod env;
pub mod install;
pub mod join;
pub mod lifecycle;
pub mod metrics_nodes;
pub mod plan;
pub mod preflight;
pub mod ray_state;
pub mod refresh;
pub mod resume;
pub mod run;
pub mod vars;
pub mod view;

pub use lifecycle::{down, up};

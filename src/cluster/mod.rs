//! The cluster: N nodes, each with its Ray in its container (or on the host),
//! turned into one Ray cluster for vLLM with tensor parallelism over RoCE.
//!
//! [`config`] reads `cluster.toml`, [`env`] computes a node's NCCL/Ray
//! settings from its own facts, [`plan`] builds the commands and the
//! preflight verdict (pure), [`run`] executes them over ssh, and [`serve`]
//! runs vLLM on the head.

pub mod config;
pub mod env;
pub mod plan;
pub mod run;
pub mod serve;

//! Operations on every node of cluster.toml at once.

pub mod install;
pub mod refresh;

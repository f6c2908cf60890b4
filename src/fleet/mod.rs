//! Operations on every node of cluster.toml at once.

pub mod bench;
pub mod bench_run;
pub mod doctor;
pub mod doctor_run;
pub mod install;
pub mod ray_state;
pub mod refresh;

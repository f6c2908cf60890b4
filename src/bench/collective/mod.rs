//! `halobox bench collective`: all-reduce and all-gather across every node
//! of cluster.toml with torch.distributed, one rank per node in its halobox
//! container, as tensor parallelism feels the link.
//!
//! [`plan`] decides what runs (pure), [`run`] runs it over ssh and saves
//! it, [`report`] derives the results (nccl-tests' bandwidths, the check of
//! the sums, the transport RCCL used) and [`nccl`] reads RCCL's log.
//! [`PROGRAM`] is what each rank runs (`collective.py`, sent on stdin).

pub mod nccl;
pub mod plan;
pub mod report;
pub mod run;

/// The rank program (Python), sent on each rank's stdin.
pub const PROGRAM: &str = include_str!("collective.py");

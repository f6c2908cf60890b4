//! The workflows over the cluster: each `cluster` subcommand's flow, run
//! over every node through the pieces below it ([`crate::cluster`]'s plans
//! and node runner, [`crate::serve`], [`crate::bench`], [`crate::metrics`]).
//!
//! [`up`] and [`down`] ([`lifecycle`]) are `cluster up` and `cluster down`:
//! the engine's cluster by one of its two executors, [`ray_up`] (Ray on
//! every node) or [`rpc_up`] (llama.cpp's RPC servers on the workers), and
//! [`metrics_nodes`] (`halobox metrics` on every node's host, which is
//! [`exporter`]: the host's figures and what the node runs); [`ray_state`]
//! says whether Ray runs (the head's table, else Ray's daemons in every
//! node's processes). [`refresh`](mod@refresh) is `cluster refresh` (the
//! image moved once first, stage everywhere, then swap everywhere or
//! nowhere; [`refresh_verify`]: while a serve is recorded, the serve proves
//! the new containers or every node goes back), [`install`] `cluster
//! install`, [`boot`] `cluster enable`/`disable` (systemd units that bring
//! the cluster back at boot), [`doctor`] the probe, cross-node checks and
//! table (pure) and [`doctor_run`] every node's probe over ssh, and
//! [`bench`](mod@bench) pairs, matrices and flagged links with causes
//! (pure) and [`bench_run`] one pair at a time over ssh.
//!
//! Over a serve: [`supervisor`] is `serve`'s one door (the serve started,
//! then watched, and under `--restart` brought back, lost nodes through
//! `cluster up` first), and [`serving_ab`] is `bench serving
//! --ab-transport` (the cluster and the serve restarted on each transport).

pub mod bench;
pub mod bench_run;
pub mod boot;
pub mod doctor;
pub mod doctor_run;
pub mod exporter;
pub mod install;
pub mod lifecycle;
pub mod metrics_nodes;
pub mod ray_state;
pub mod ray_up;
pub mod refresh;
pub mod refresh_verify;
pub mod rpc_up;
pub mod serving_ab;
pub mod supervisor;

pub use lifecycle::{down, up};

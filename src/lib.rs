//! halobox: inspect, containerise and cluster AMD Strix Halo (gfx1151) nodes
//! for vLLM over RoCE v2.
//!
//! Layout: [`host`] reads facts into plain data, [`dataplane`] and
//! [`doctor`] turn facts into decisions, [`cmd`] wires commands to output.

pub mod bench;
pub mod cli;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod confine;
pub mod container;
pub mod dataplane;
pub mod doctor;
pub mod engine;
pub mod host;
pub mod image;
pub mod image_ref;
pub mod proc;
pub mod refresh;
pub mod shell;
pub mod ssh;
pub mod units;

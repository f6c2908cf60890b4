//! halobox: inspect, containerise and cluster AMD Strix Halo (gfx1151) nodes
//! for vLLM over RoCE v2.
//!
//! Calls go one way: [`cli`] defines the command line, [`cmd`] (one module
//! per command) parses it, calls one library entry point and prints; no
//! library module names [`cmd`]. Facts, then a pure plan, then an executor:
//!
//! - facts: [`host`] reads the machine (or a `--sysroot` snapshot) into
//!   plain data; [`config`] the user's settings;
//! - decisions (pure): [`dataplane`] and [`doctor`] from host facts,
//!   [`check`] from what its probe saw inside a container, and the
//!   plans in [`container::spec`], [`refresh::plan`], [`cluster::plan`],
//!   [`bench::plan`] and [`image`];
//! - effects: [`engine`] (the container engine's API), [`check::run`],
//!   [`refresh::run`], [`cluster::join`], [`cluster::run`], [`fleet`] (every
//!   node at once), [`bench::run`], [`metrics`] (a node's figures for
//!   Prometheus, read like [`host`]'s facts),
//!   over [`ssh`], [`remote`], [`proc`] and [`shell`];
//! - shared: [`error`] (usage errors, exit status 2), [`image_ref`],
//!   [`units`].
//!
//! README.md's Layout table names every room.

pub mod bench;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod confine;
pub mod container;
pub mod dataplane;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod fleet;
pub mod host;
pub mod image;
pub mod image_ref;
pub mod metrics;
pub mod model;
pub mod proc;
pub mod refresh;
pub mod remote;
pub mod serve;
pub mod setup;
pub mod shell;
pub mod ssh;
pub mod units;

//! halobox: inspect, containerise and cluster AMD Strix Halo (gfx1151) nodes
//! for vLLM and llama.cpp over RoCE v2.
//!
//! Calls go one way: [`cli`] defines the command line (and turns flags into
//! the library's requests), [`cmd`] (one module per command, a folder per
//! family) calls one library entry point and prints; no library module
//! names [`cmd`], and each workflow speaks through a [`reporter`]. Facts,
//! then a pure plan, then an executor:
//!
//! - facts: [`host`] reads the machine (or a `--sysroot` snapshot) into
//!   plain data; [`config`] the user's settings, [`backend`] the container
//!   backends;
//! - decisions (pure): [`dataplane`] and [`doctor`] from host facts,
//!   [`check`] from what its probe saw inside a container, and the plans in
//!   [`container::spec`], [`refresh::plan`], [`cluster::plan`],
//!   [`serve::plan`], [`model::plan`], [`bench::plan`] and [`image`];
//! - effects: [`engine`] (the container engine's API), [`container`] (the
//!   containers themselves), [`setup`], [`check::run`], [`refresh`] (one
//!   container replaced: [`refresh::run`]), [`cluster`] (each node's
//!   side: [`cluster::join`], and the node runner [`cluster::run`]),
//!   [`fleet`] (the workflows over every node: `cluster up`'s executors
//!   [`fleet::ray_up`] and [`fleet::rpc_up`], refresh, install, doctor,
//!   bench, the serve's supervisor), [`serve`] (vLLM or
//!   llama.cpp on the head), [`model`] (weights on every node), [`metrics`]
//!   (a node's figures for Prometheus, read like [`host`]'s facts), over
//!   [`ssh`], [`remote`], [`http`], [`proc`] and [`shell`];
//! - the library's entry points (the doors each [`cmd`] file calls, listed
//!   in `DOORS` in `tests/layering.rs`) for commands over the cluster:
//!   [`fleet::up`], [`fleet::down`], [`fleet::refresh`],
//!   [`fleet::supervisor::serve`], [`bench::collective::run()`],
//!   [`fleet::serving_ab`] and [`mod@bench`]; for the others:
//!   [`refresh::flow`], [`setup::flow`], [`bench::flow`], [`model::flow`],
//!   [`image::publish_flow`] and [`image::add_layer`], each asking through
//!   a [`reporter::Ask`] where it asks;
//! - shared: [`error`] (usage errors, exit status 2), [`image_ref`],
//!   [`confine`] (paths confined to a root), [`units`], [`fan_out`] (a
//!   step on every node at once), [`lock`] (one run
//!   at a time, by `flock`: refresh, rm, setup) and [`signals`] (SIGINT and
//!   SIGTERM caught, named and raised again: refresh, snapshot, serve).
//!
//! CONTRIBUTING.md's Layout table names every room and script, and draws
//! the floors `tests/layering.rs` checks.

pub mod backend;
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
pub mod fan_out;
pub mod fleet;
pub mod host;
pub mod http;
pub mod image;
pub mod image_ref;
pub mod lock;
pub mod metrics;
pub mod model;
pub mod proc;
pub mod refresh;
pub mod remote;
pub mod reporter;
pub mod serve;
pub mod setup;
pub mod shell;
pub mod signals;
pub mod ssh;
pub mod units;

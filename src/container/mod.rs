//! Containers: the spec (a pure plan from host facts and options), its
//! request and command-line forms, and the backends.

pub mod api;
pub mod backend;
pub mod cli;
pub mod distrobox;
pub mod memlock;
pub mod spec;
pub mod toolbox;

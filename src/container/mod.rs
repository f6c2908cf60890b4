//! Containers: the spec (a pure plan from host facts and options), its
//! request and command-line forms, the backends, which container a command
//! means, and running a command or a script inside one.

pub mod api;
pub mod backend;
pub mod capture;
pub mod cli;
pub mod distrobox;
pub mod enter;
pub mod memlock;
pub mod model;
pub mod name;
pub mod spec;
pub mod toolbox;

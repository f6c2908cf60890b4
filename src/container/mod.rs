//! Containers: the spec (a pure plan from host facts and options), its
//! request and command-line forms, the backends, what halobox binds in
//! (itself, the Hugging Face cache), which container a command
//! means, and running a command or a script inside one (interactively,
//! output collected, or guarded with stdin attached).

pub mod api;
pub mod binds;
pub mod capture;
pub mod cli;
pub mod distrobox;
pub mod enter;
pub mod inside;
pub mod memlock;
pub mod model;
pub mod name;
pub mod ops;
pub mod owner;
pub mod spec;
pub mod staged;
pub mod toolbox;
pub mod volume;

//! Containers: the spec (a pure plan from host facts and options), its
//! request and command-line forms, the backends, what halobox binds in
//! (itself, the Hugging Face cache), which container a command
//! means, and running a command or a script inside one (interactively,
//! output collected, or guarded with stdin attached).
//!
//! `model.rs` holds the spec's types and `spec.rs` the pure plan; the API
//! and command-line forms (`api.rs`, `cli.rs`), the toolbx and distrobox
//! shapes, memlock requests; `binds.rs` what halobox binds in, `volume.rs`
//! the user's own bind mounts (`--volume`, config `volumes`), `name.rs`
//! which container a command means, `owner.rs` whether halobox made it,
//! `enter.rs` running a command inside with its backend's tool and
//! `inside.rs` guarded with stdin attached; `ops.rs` the containers
//! through the engine (create, start, check, rename, remove; inspect and
//! list read podman's JSON themselves over a unix socket).

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

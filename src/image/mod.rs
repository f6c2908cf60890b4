//! Images halobox makes: definitions (`images/<name>.toml`), the build plan,
//! reproducible layers added without a rebuild, image archives both podman
//! and docker load, and the publish plan.

pub mod archive;
pub mod build;
pub mod cleanup;
pub mod compose;
pub mod definition;
pub mod layer;
pub mod publish;
pub mod rewrite;

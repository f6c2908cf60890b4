//! Images halobox makes: definitions (`images/<name>.toml`), the build plan,
//! reproducible layers added without a rebuild (`image add-layer` from start
//! to end: [`add_layer`]), a new config from a base, image archives both
//! podman and docker load (OCI and docker), rewriting an image (layers and
//! labels; an archive or loaded), the publish plan and `halobox publish` from start to
//! end ([`publish_flow`]), a channel moved to a proven candidate's digest
//! ([`promote`]), and the git revision they are labelled with.

pub mod add_layer;
pub mod archive;
pub mod build;
pub mod cleanup;
pub mod compose;
pub mod definition;
pub mod git;
pub mod layer;
pub mod promote;
pub mod publish;
pub mod publish_flow;
pub mod rewrite;

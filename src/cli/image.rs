//! `build`, `image add-layer` and `publish`: making and shipping images.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{Channel, EngineArgs, PlanOutputArgs};

/// `halobox build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Image name (images/<name>.toml) or a definition file.
    #[arg(default_value = "vllm-therock-gfx1151")]
    pub image: String,
    /// Stage to build (default: the definition's target).
    #[arg(long, value_name = "STAGE")]
    pub target: Option<String>,
    /// Override a build arg (KEY=VALUE; pins are checked like the definition's).
    #[arg(long, value_name = "KEY=VALUE")]
    pub build_arg: Vec<String>,
    /// Tag of the result (repeatable; default: localhost/<name>:latest).
    #[arg(long, value_name = "REF")]
    pub tag: Vec<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

/// `halobox image` subcommands.
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Add one reproducible layer of local files to an image, without a rebuild.
    #[command(
        after_help = "Examples:\n  halobox image add-layer localhost/vllm-therock-gfx1151:latest --add ./librccl.so.1:/opt/rocm/lib/librccl.so.1:0644 --tag localhost/vllm-therock-gfx1151:rccl --load\n  halobox image add-layer base.tar --add ./tool:/usr/local/bin/tool --output image.tar\n\nSame inputs, same digests: entries sorted, uid/gid 0, mtime SOURCE_DATE_EPOCH (or 0), modes 0644/0755 unless given.\nThe archive holds an OCI layout and docker's manifest.json: `podman load` and `docker load` both take it."
    )]
    AddLayer(AddLayerArgs),
    /// Put an image on every node of the cluster, each link carrying its bytes once, digest kept.
    #[command(
        after_help = "Examples:\n  halobox image sync localhost/vllm-therock-gfx1151:latest --dry-run\n  halobox image sync ghcr.io/OWNER/halobox:stable\n\nThe head gets the image once (skopeo copy --preserve-digests from its registry, or its own localhost/ image) into its blob store; every other node receives only the blobs it lacks over the data plane, along a chain (each node passes the stream on while it writes), each checked against its sha256, then imports it with skopeo --preserve-digests: a registry image keeps the registry's digest everywhere, a localhost/ image the same image id. A node whose stream failed keeps its old image; a rerun sends only what is missing."
    )]
    Sync(ImageSyncArgs),
    /// (run by halobox on the head) Copies an image into this node's blob store.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-export ghcr.io/OWNER/halobox:stable    (what `image sync` runs on the head over ssh)"
    )]
    NodeExport {
        /// The image.
        image: String,
    },
    /// (run by halobox on a node) Reports the image its engine holds under a name, if any.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-held localhost/vllm-therock-gfx1151:latest    (what `image sync` of a localhost/ image runs on each node over ssh first)"
    )]
    NodeHeld {
        /// The image.
        image: String,
    },
    /// (run by halobox on a node) Reports its blob store and engine image (the request on stdin).
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-prepare < request.json    (what `image sync` runs on each node over ssh)"
    )]
    NodePrepare,
    /// (run by halobox on a node) Receives an image sync stream (the job on stdin).
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-receive < job.json    (what `image sync` runs on each receiving node over ssh)"
    )]
    NodeReceive,
    /// (run by halobox on a node) Sends an image sync stream (the job on stdin).
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-send < job.json    (what `image sync` runs on the head over ssh)"
    )]
    NodeSend,
    /// (run by halobox on a node) Imports a complete image from its blob store.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-import IMAGE --commit C --digest sha256:D    (what `image sync` runs on each node over ssh)"
    )]
    NodeImport {
        /// The image's name in the engine.
        image: String,
        /// Its snapshot in the store.
        #[arg(long)]
        commit: String,
        /// The digest it must end with (podman's storage).
        #[arg(
            long,
            required_unless_present = "docker_id",
            conflicts_with = "docker_id"
        )]
        digest: Option<String>,
        /// Load it into docker instead, ending with this image id.
        #[arg(long)]
        docker_id: Option<String>,
    },
    /// (run by halobox on a node) Imports an image's first layers beside the stream, as they arrive.
    #[command(
        hide = true,
        after_help = "Examples:\n  halobox image node-stage --digest sha256:D    (what `image sync` runs on each receiving node over ssh, beside the stream)"
    )]
    NodeStage {
        /// The image's manifest digest.
        #[arg(long)]
        digest: String,
    },
}

/// `halobox image sync`.
#[derive(Debug, Args)]
pub struct ImageSyncArgs {
    /// The image (a registry reference, or localhost/NAME:TAG of the head's engine).
    pub image: String,
    #[command(flatten)]
    pub file: super::common::ClusterFileArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

/// `halobox image add-layer`.
#[derive(Debug, Args)]
pub struct AddLayerArgs {
    /// Base image: a reference in the engine, or an image archive file (OCI or docker).
    pub base: String,
    /// SRC:DEST[:MODE] — a local file or folder, its absolute path in the image, an octal mode.
    /// A SRC that is a symlink adds the file it points to (as COPY and cp -L do).
    #[arg(long, value_name = "SRC:DEST[:MODE]", required = true)]
    pub add: Vec<crate::image::layer::AddSpec>,
    /// Refuse an --add SRC that is a symlink instead of adding what it points to.
    #[arg(long)]
    pub no_dereference: bool,
    /// Name of the new image (required with --load).
    #[arg(long, value_name = "REF")]
    pub tag: Option<String>,
    /// Label to set (KEY=VALUE, repeatable; KEY= removes it).
    #[arg(long, value_name = "KEY=VALUE")]
    pub label: Vec<String>,
    /// Write the image archive here.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Load the result into the engine.
    #[arg(long)]
    pub load: bool,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

/// `halobox publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// The local image to publish.
    #[arg(
        required_unless_present_any = ["promote", "promote_digest"],
        conflicts_with_all = ["promote", "promote_digest"]
    )]
    pub reference: Option<String>,
    /// Channel tag to move to this image (with --promote-digest: to that digest).
    #[arg(long, value_enum, required_unless_present_any = ["promote", "candidate"])]
    pub channel: Option<Channel>,
    /// Publish a candidate: the dated and `sha-` tags only, no channel; the
    /// channel moves later with --promote-digest, once the candidate is proven.
    #[arg(long, conflicts_with_all = ["channel", "promote", "promote_digest"])]
    pub candidate: bool,
    /// Move --channel to this candidate's digest (sha256:…), only when the
    /// `sha-<revision>` tag is at it; by digest, nothing rebuilt.
    #[arg(
        long,
        value_name = "DIGEST",
        requires = "channel",
        conflicts_with = "promote"
    )]
    pub promote_digest: Option<String>,
    /// With --promote-digest when no Strix Halo check ran: the moved image
    /// gets the label io.halobox.verified=false (a new config, same layers),
    /// and `halobox refresh` warns about it.
    #[arg(long, requires = "promote_digest")]
    pub unverified: bool,
    /// Repository to push to (default: config `image` or HALOBOX_IMAGE).
    #[arg(long, value_name = "REPO")]
    pub to: Option<String>,
    /// Re-tag the image of one channel as another (pull FROM, push as TO), without a rebuild.
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"], value_enum, conflicts_with = "channel")]
    pub promote: Vec<Channel>,
    /// Git commit for `sha-<7 hex>` and the revision label (default: `git rev-parse HEAD`).
    #[arg(long, value_name = "SHA")]
    pub revision: Option<String>,
    /// Source URL label (default: the `origin` remote, or the image's label).
    #[arg(long, value_name = "URL")]
    pub source: Option<String>,
    /// Version label (default: the image's, else the date tag).
    #[arg(long, value_name = "V")]
    pub version: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub mode: PlanOutputArgs,
}

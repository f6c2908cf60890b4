//! The four ways halobox can make a node's container.

use std::fmt;

use clap::ValueEnum;
use serde::Serialize;

use crate::engine::EngineKind;

/// How the container is made and entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A toolbx container (created through the API so memlock can be set),
    /// entered with `toolbox enter`.
    Toolbox,
    /// A distrobox container made with `distrobox create`, entered with
    /// `distrobox enter`.
    Distrobox,
    /// A plain long-running Podman container, entered with an API exec.
    Podman,
    /// A plain long-running Docker container, entered with an API exec.
    Docker,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Toolbox => "toolbox",
            Backend::Distrobox => "distrobox",
            Backend::Podman => "podman",
            Backend::Docker => "docker",
        })
    }
}

impl Backend {
    /// The default for an engine: toolbox when installed and the engine is
    /// Podman (what the guides use), else the engine itself.
    pub fn default_for(engine: EngineKind, toolbox_installed: bool) -> Backend {
        match engine {
            EngineKind::Podman if toolbox_installed => Backend::Toolbox,
            EngineKind::Podman => Backend::Podman,
            EngineKind::Docker => Backend::Docker,
        }
    }

    /// Whether this backend can run on `engine`.
    pub fn supports(self, engine: EngineKind) -> bool {
        match self {
            Backend::Toolbox | Backend::Podman => engine == EngineKind::Podman,
            Backend::Docker => engine == EngineKind::Docker,
            Backend::Distrobox => true,
        }
    }
}

//! What `cluster enable` wrote, per node, and the serve it keeps for boot:
//! one file per cluster file in halobox's state folder (0600), read by
//! `cluster disable` (to remove exactly those files) and by `serve
//! --recorded` (the serve the boot unit starts). No secret is in it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Scope;
use crate::serve::request::Spec;

/// The files and units of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// The node's name in cluster.toml.
    pub node: String,
    /// Its ssh target (the node is found by it when cluster.toml changed).
    pub ssh: String,
    /// System or user units.
    pub scope: Scope,
    /// Every file written there.
    pub files: Vec<String>,
}

/// Everything `enable` wrote for a cluster file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The cluster file.
    pub cluster: String,
    /// Per node.
    pub nodes: Vec<NodeEntry>,
    /// The serve the boot unit starts (`serve --recorded`).
    #[serde(default)]
    pub serve: Option<Spec>,
}

fn path(cluster: &Path) -> Option<PathBuf> {
    use sha2::Digest as _;
    let key = hex::encode(&sha2::Sha256::digest(cluster.display().to_string().as_bytes())[..8]);
    dirs::state_dir().map(|d| d.join(format!("halobox/boot/{key}.json")))
}

/// The manifest of `cluster`, when `enable` wrote one.
pub fn load(cluster: &Path) -> Option<Manifest> {
    serde_json::from_str(&std::fs::read_to_string(path(cluster)?).ok()?).ok()
}

/// Keeps `m` for `cluster` (written beside, then renamed; 0600).
pub fn save(cluster: &Path, m: &Manifest) -> std::io::Result<()> {
    crate::serve::state::write(
        path(cluster),
        &serde_json::to_string_pretty(m).expect("serialises"),
    )
}

/// Forgets the manifest of `cluster`.
pub fn remove(cluster: &Path) -> std::io::Result<()> {
    match path(cluster) {
        Some(p) => match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        None => Ok(()),
    }
}

//! What a running `serve` recorded on the head, for `serve status`,
//! `logs` and `stop` from later runs: the cluster file, model, endpoint,
//! start time, the engine's pid in the head's container and the arguments
//! that start it again (never a secret). One serve per cluster file; the
//! file lives in halobox's state folder (0600).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One serve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeState {
    /// The cluster file it serves from.
    pub cluster: String,
    /// The engine (`vllm`).
    pub engine: String,
    /// The model as given.
    pub model: String,
    /// `http://ADDR:PORT`.
    pub endpoint: String,
    /// Start time, seconds since the epoch.
    pub started: u64,
    /// The engine's pid in the head's container.
    pub pid: u32,
    /// The head's container.
    pub container: String,
    /// Whether the API wants a key.
    pub api_key: bool,
    /// Left running by `--detach` (else a foreground halobox watches it).
    pub detached: bool,
    /// The arguments that start it again (absent in a record of an older
    /// halobox).
    #[serde(default)]
    pub args: Option<super::request::Spec>,
}

fn dir() -> Option<PathBuf> {
    dirs::state_dir().map(|d| d.join("halobox/serve"))
}

/// The state file for the cluster file `cluster`.
fn path(cluster: &Path) -> Option<PathBuf> {
    use sha2::Digest as _;
    let key = hex::encode(&sha2::Sha256::digest(cluster.display().to_string().as_bytes())[..8]);
    dir().map(|d| d.join(format!("{key}.json")))
}

/// What was recorded for `cluster`.
pub fn load(cluster: &Path) -> Option<ServeState> {
    let text = std::fs::read_to_string(path(cluster)?).ok()?;
    serde_json::from_str(&text).ok()
}

/// Records `s` (written beside, then renamed; 0600).
pub fn save(cluster: &Path, s: &ServeState) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let p = path(cluster)
        .ok_or_else(|| std::io::Error::other("no state folder (set XDG_STATE_HOME or HOME)"))?;
    std::fs::create_dir_all(p.parent().expect("parent"))?;
    let tmp = p.with_extension(format!("json.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(
        serde_json::to_string_pretty(s)
            .expect("serialises")
            .as_bytes(),
    )?;
    std::fs::rename(tmp, p)
}

/// Forgets the serve of `cluster`.
pub fn remove(cluster: &Path) {
    if let Some(p) = path(cluster) {
        let _ = std::fs::remove_file(p);
    }
}

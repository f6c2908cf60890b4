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
    /// The foreground halobox that watches it (absent when detached, and
    /// in a record of an older halobox).
    #[serde(default)]
    pub watcher: Option<Process>,
    /// The arguments that start it again (absent in a record of an older
    /// halobox).
    #[serde(default)]
    pub args: Option<super::request::Spec>,
    /// Plan's count of the KV cache for this serve (absent when the model's
    /// cache could not be counted, and in a record of an older halobox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_plan: Option<super::kv_check::PlanKv>,
    /// The engine's KV-cache figures against plan's, once it was ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<super::kv_check::KvCheck>,
}

/// A process on this machine, told apart from a later one that reuses its
/// pid by its start time (`/proc/PID/stat` field 22, in clock ticks since
/// boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Its pid.
    pub pid: u32,
    /// Its start time.
    pub start: u64,
}

impl Process {
    /// This halobox.
    pub fn this() -> Option<Process> {
        Process::of(std::process::id())
    }

    /// Process `pid` as it runs now (`None`: there is none).
    pub fn of(pid: u32) -> Option<Process> {
        Some(Process {
            pid,
            start: stat(pid)?.1,
        })
    }

    /// Whether it still runs: its pid names a process that started at the
    /// recorded time and is not a zombie (after `kill -9` the pid is gone,
    /// a zombie, or another process's).
    pub fn lives(&self) -> bool {
        stat(self.pid).is_some_and(|(state, start)| start == self.start && !"ZXx".contains(state))
    }
}

/// Process `pid`'s state letter and start time, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(") ")?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.nth(18)?.parse().ok()?))
}

fn dir() -> Option<PathBuf> {
    dirs::state_dir().map(|d| d.join("halobox/serve"))
}

/// The state file for the cluster file `cluster`.
fn path(cluster: &Path) -> Option<PathBuf> {
    file(cluster, "json")
}

/// The file `KEY.suffix` of the cluster file `cluster` in the state folder.
pub fn file(cluster: &Path, suffix: &str) -> Option<PathBuf> {
    use sha2::Digest as _;
    let key = hex::encode(&sha2::Sha256::digest(cluster.display().to_string().as_bytes())[..8]);
    dir().map(|d| d.join(format!("{key}.{suffix}")))
}

/// The restarts of `cluster`'s serve (`--restart`), as its supervisor
/// recorded them.
pub fn restarts(cluster: &Path) -> super::restart_policy::Restarts {
    file(cluster, "restarts.json")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// Records the restarts of `cluster`'s serve (0600, written beside and
/// renamed).
pub fn save_restarts(cluster: &Path, r: &super::restart_policy::Restarts) -> std::io::Result<()> {
    write(
        file(cluster, "restarts.json"),
        &serde_json::to_string_pretty(r).expect("serialises"),
    )
}

/// Forgets the restarts of `cluster`'s serve (a new serve starts afresh).
pub fn remove_restarts(cluster: &Path) {
    if let Some(p) = file(cluster, "restarts.json") {
        let _ = std::fs::remove_file(p);
    }
}

/// The supervisor of `cluster`'s serve, as its pid file records it
/// (`None`: there is none, or the file names no process that lives).
pub fn supervisor(cluster: &Path) -> Option<Process> {
    let text = std::fs::read_to_string(file(cluster, "supervisor")?).ok()?;
    let p: Process = serde_json::from_str(&text).ok()?;
    (p.pid > 1 && p.lives()).then_some(p)
}

/// Records `p` as the supervisor of `cluster`'s serve.
pub fn save_supervisor(cluster: &Path, p: &Process) -> std::io::Result<()> {
    write(
        file(cluster, "supervisor"),
        &serde_json::to_string(p).expect("serialises"),
    )
}

/// Removes the supervisor's pid file when it names `me`.
pub fn remove_supervisor(cluster: &Path, me: &Process) {
    let Some(p) = file(cluster, "supervisor") else {
        return;
    };
    let mine = std::fs::read_to_string(&p)
        .ok()
        .and_then(|t| serde_json::from_str::<Process>(&t).ok())
        .is_some_and(|r| r == *me);
    if mine {
        let _ = std::fs::remove_file(p);
    }
}

/// `text` to `p` in halobox's state folder (0600, written beside, then
/// renamed); `None`: there is no state folder.
pub fn write(p: Option<PathBuf>, text: &str) -> std::io::Result<()> {
    let p =
        p.ok_or_else(|| std::io::Error::other("no state folder (set XDG_STATE_HOME or HOME)"))?;
    std::fs::create_dir_all(p.parent().expect("parent"))?;
    crate::confine::write_atomic(&p, text.as_bytes(), 0o600)
}

/// What was recorded for `cluster`.
pub fn load(cluster: &Path) -> Option<ServeState> {
    let text = std::fs::read_to_string(path(cluster)?).ok()?;
    serde_json::from_str(&text).ok()
}

/// Records `s` (written beside, then renamed; 0600).
pub fn save(cluster: &Path, s: &ServeState) -> std::io::Result<()> {
    write(
        path(cluster),
        &serde_json::to_string_pretty(s).expect("serialises"),
    )
}

/// Forgets the serve of `cluster`.
pub fn remove(cluster: &Path) {
    if let Some(p) = path(cluster) {
        let _ = std::fs::remove_file(p);
    }
}

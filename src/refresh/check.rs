//! "It runs" means it stays running: start the container, wait until the
//! engine says it runs, wait for toolbx's readiness stamp where the backend
//! is toolbox, then watch it for a settle window: it must still run with
//! the same StartedAt and no restart at the end. A container that exits or
//! restarts in that time fails the check.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::container::ops::START_TIMEOUT;
use crate::engine::lifecycle::RunState;
use crate::engine::{Engine, EngineError};

/// How often the state is read while waiting.
const POLL: Duration = Duration::from_millis(100);
/// How long toolbx's init-container may take to write its stamp.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the check waits for beyond "running".
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    /// toolbx writes `container-initialized-<entry point pid>` here on the
    /// host when its init-container is done (`toolbox run`/`enter` wait on
    /// the same file).
    pub toolbox_stamps: Option<PathBuf>,
    /// How long it must keep running. `refresh` defaults to 3 s: measured
    /// on podman 4.3, a container that exits 2 s after its start is seen as
    /// ended 50-210 ms later, so a 2 s window would let it through.
    pub settle: Duration,
}

fn fail(name: &str, why: String) -> EngineError {
    EngineError::Stream {
        context: format!("container {name} did not stay up"),
        message: why,
    }
}

async fn state(engine: &Engine, id: &str) -> Result<RunState, EngineError> {
    engine
        .run_state(id)
        .await?
        .ok_or_else(|| fail(id, "it is gone".into()))
}

/// The state of a container that stopped running, once the engine has
/// recorded how it ended (podman passes through `stopping`/`stopped` before
/// its exit code is known).
async fn end_of(engine: &Engine, id: &str, mut s: RunState) -> RunState {
    let deadline = Instant::now() + Duration::from_secs(2);
    while matches!(s.status.as_str(), "stopping" | "stopped") && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        match engine.run_state(id).await {
            Ok(Some(next)) => s = next,
            _ => break,
        }
    }
    s
}

/// Why a container that ran has stopped: its exit code and the engine's error.
fn ended(s: &RunState) -> String {
    let mut why = format!("it exited with code {}", s.exit_code);
    if !s.error.is_empty() {
        why.push_str(&format!(": {}", s.error));
    }
    why
}

/// True when `stamp` exists and was written after the container started (a
/// stamp left by an earlier container whose pid was reused does not count).
fn fresh(stamp: &Path, started_at: &str) -> bool {
    let Ok(modified) = std::fs::metadata(stamp).and_then(|m| m.modified()) else {
        return false;
    };
    let Ok(started) = chrono::DateTime::parse_from_rfc3339(started_at) else {
        return true;
    };
    chrono::DateTime::<chrono::Utc>::from(modified) + chrono::Duration::seconds(1) >= started
}

/// Starts container `id` and checks it keeps running as [`Readiness`] says.
pub async fn start_and_settle(
    engine: &Engine,
    id: &str,
    ready: &Readiness,
) -> Result<RunState, EngineError> {
    engine.start(id).await?;
    let begun = Instant::now();
    let first = loop {
        let s = state(engine, id).await?;
        if s.running {
            break s;
        }
        if !s.started_at.is_empty() && !s.started_at.starts_with("0001-") {
            let s = end_of(engine, id, s).await;
            return Err(fail(&s.name, ended(&s)));
        }
        if begun.elapsed() >= START_TIMEOUT {
            return Err(fail(
                &s.name,
                format!("not running after {}s", START_TIMEOUT.as_secs()),
            ));
        }
        tokio::time::sleep(POLL).await;
    };
    if let Some(dir) = &ready.toolbox_stamps {
        let stamp = dir.join(format!("container-initialized-{}", first.pid));
        let waited = Instant::now();
        while !fresh(&stamp, &first.started_at) {
            let s = state(engine, id).await?;
            if !s.running || s.started_at != first.started_at {
                let s = end_of(engine, id, s).await;
                return Err(fail(
                    &s.name,
                    format!(
                        "toolbox's init-container stopped before it was ready: {}",
                        ended(&s)
                    ),
                ));
            }
            if waited.elapsed() >= READY_TIMEOUT {
                return Err(fail(
                    &s.name,
                    format!(
                        "toolbox's init-container did not write {} within {}s",
                        stamp.display(),
                        READY_TIMEOUT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
    let settled = Instant::now() + ready.settle;
    loop {
        let s = state(engine, id).await?;
        if s.started_at != first.started_at || s.restart_count != first.restart_count {
            return Err(fail(
                &s.name,
                format!(
                    "it restarted within the {:.1}s settle window (started {}, then {})",
                    ready.settle.as_secs_f64(),
                    first.started_at,
                    s.started_at
                ),
            ));
        }
        if !s.running {
            let s = end_of(engine, id, s).await;
            return Err(fail(
                &s.name,
                format!(
                    "it stopped within the {:.1}s settle window: {}",
                    ready.settle.as_secs_f64(),
                    ended(&s)
                ),
            ));
        }
        let now = Instant::now();
        if now >= settled {
            return Ok(s);
        }
        tokio::time::sleep(POLL.min(settled - now)).await;
    }
}

//! A container's life after create: start, stop, the run state a start
//! check reads (running, StartedAt, restarts, exit), and what it changed in
//! its own filesystem (for a prompt that says what a removal loses).

use std::time::Duration;

use bollard::query_parameters::{InspectContainerOptionsBuilder, StopContainerOptionsBuilder};
use hyper::{Method, StatusCode};
use serde_json::Value;

use super::discover::unix_path;
use super::{Context, Engine, EngineError, EngineKind, libpod};

/// What a container is doing now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunState {
    /// Container id.
    pub id: String,
    /// Name (without the leading `/`).
    pub name: String,
    /// The engine's state word (`running`, `exited`, podman's transient
    /// `stopping`/`stopped`, …).
    pub status: String,
    /// The engine says it runs.
    pub running: bool,
    /// When it was last started (RFC 3339, as the engine reports it).
    pub started_at: String,
    /// How often the engine restarted it.
    pub restart_count: i64,
    /// Host pid of its first process (0 when not running).
    pub pid: i64,
    /// Exit code of its last run.
    pub exit_code: i64,
    /// The engine's error for its last start, if any.
    pub error: String,
}

/// A container's own filesystem changes (its writable layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changes {
    /// Paths added, changed or deleted.
    pub paths: usize,
    /// Bytes in its writable layer, when the engine reports them.
    pub bytes: Option<i64>,
}

/// True for an HTTP status from the engine.
fn status_is(e: &bollard::errors::Error, code: u16) -> bool {
    matches!(e, bollard::errors::Error::DockerResponseServerError { status_code, .. } if *status_code == code)
}

impl Engine {
    /// Starts a container (one that already runs is fine).
    pub async fn start(&self, id: &str) -> Result<(), EngineError> {
        match self.docker.start_container(id, None).await {
            Err(e) if status_is(&e, 304) => Ok(()),
            r => r.ctx(|| format!("starting container {id}")),
        }
    }

    /// Stops a container: SIGTERM, then SIGKILL after `grace` (one that is
    /// not running is fine).
    pub async fn stop(&self, id: &str, grace: Duration) -> Result<(), EngineError> {
        let t = i32::try_from(grace.as_secs()).unwrap_or(i32::MAX);
        let opts = StopContainerOptionsBuilder::new().t(t).build();
        match self.docker.stop_container(id, Some(opts)).await {
            Err(e) if status_is(&e, 304) => Ok(()),
            r => r.ctx(|| format!("stopping container {id}")),
        }
    }

    /// The run state of a container; `Ok(None)` when there is none. Podman
    /// is asked through its own API: its transient `stopped` state is not a
    /// word bollard's types accept.
    pub async fn run_state(&self, id: &str) -> Result<Option<RunState>, EngineError> {
        if self.info.kind == EngineKind::Podman
            && let Some(socket) = unix_path(&self.info.address)
        {
            let path = format!("/containers/{id}/json");
            let (status, v) = libpod::request(socket, Method::GET, &path, None)
                .await
                .map_err(|message| EngineError::Stream {
                    context: format!("inspecting container {id}"),
                    message,
                })?;
            if status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(EngineError::Stream {
                    context: format!("inspecting container {id}"),
                    message: format!("HTTP {status}: {v}"),
                });
            }
            let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
            let int = |p: &str| v.pointer(p).and_then(Value::as_i64).unwrap_or_default();
            return Ok(Some(RunState {
                id: text("/Id").to_string(),
                name: text("/Name").trim_start_matches('/').to_string(),
                status: text("/State/Status").to_string(),
                running: v.pointer("/State/Running").and_then(Value::as_bool) == Some(true),
                started_at: text("/State/StartedAt").to_string(),
                restart_count: int("/RestartCount"),
                pid: int("/State/Pid"),
                exit_code: int("/State/ExitCode"),
                error: text("/State/Error").to_string(),
            }));
        }
        let c = match self.docker.inspect_container(id, None).await {
            Err(e) if status_is(&e, 404) => return Ok(None),
            r => r.ctx(|| format!("inspecting container {id}"))?,
        };
        let s = c.state.unwrap_or_default();
        Ok(Some(RunState {
            id: c.id.unwrap_or_default(),
            name: c
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            status: s.status.map(|v| v.to_string()).unwrap_or_default(),
            running: s.running == Some(true),
            started_at: s.started_at.unwrap_or_default(),
            restart_count: c.restart_count.unwrap_or_default(),
            pid: s.pid.unwrap_or_default(),
            exit_code: s.exit_code.unwrap_or_default(),
            error: s.error.unwrap_or_default(),
        }))
    }

    /// What the container changed in its filesystem.
    pub async fn changes(&self, id: &str) -> Result<Changes, EngineError> {
        let paths = self
            .docker
            .container_changes(id)
            .await
            .ctx(|| format!("listing the changes of container {id}"))?
            .map_or(0, |c| c.len());
        let sized = self
            .docker
            .inspect_container(
                id,
                Some(InspectContainerOptionsBuilder::new().size(true).build()),
            )
            .await
            .ctx(|| format!("inspecting container {id}"))?;
        Ok(Changes {
            paths,
            bytes: sized.size_rw,
        })
    }
}

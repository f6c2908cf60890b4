//! Containers: create, start, check, rename, remove, list and inspect.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
    RenameContainerOptionsBuilder,
};
use serde::Serialize;

use super::{Context, Engine, EngineError, EngineKind};
use crate::container::api::{compat_body, libpod_body};
use crate::container::model::ContainerSpec;

/// What halobox needs to know about an existing container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerInfo {
    /// Container id.
    pub id: String,
    /// Name (without the leading `/`).
    pub name: String,
    /// Image id it runs.
    pub image_id: String,
    /// Image reference it was created from.
    pub image: String,
    /// Labels.
    pub labels: HashMap<String, String>,
    /// State (`running`, `exited`, `created`).
    pub state: String,
    /// Memlock soft limit set on the container (`-1` unlimited), when set.
    pub memlock: Option<i64>,
    /// Devices passed through.
    pub devices: Vec<String>,
    /// OCI annotations.
    pub annotations: HashMap<String, String>,
}

/// How long a new container may take to reach `running`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

impl Engine {
    /// Inspects a container; `Ok(None)` when there is none of that name.
    pub async fn container(&self, name: &str) -> Result<Option<ContainerInfo>, EngineError> {
        let c = match self.docker.inspect_container(name, None).await {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                return Ok(None);
            }
            Err(e) => {
                return Err(EngineError::Api {
                    context: format!("inspecting container {name}"),
                    error: e,
                });
            }
        };
        let host = c.host_config.unwrap_or_default();
        let config = c.config.unwrap_or_default();
        Ok(Some(ContainerInfo {
            id: c.id.unwrap_or_default(),
            name: c
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            image_id: c.image.unwrap_or_default(),
            image: config.image.unwrap_or_default(),
            labels: config.labels.unwrap_or_default(),
            state: c
                .state
                .and_then(|s| s.status)
                .map(|s| s.to_string())
                .unwrap_or_default(),
            memlock: host
                .ulimits
                .unwrap_or_default()
                .into_iter()
                // docker says `memlock`, podman's compatible API `RLIMIT_MEMLOCK`.
                .find(|u| {
                    u.name.as_deref().is_some_and(|n| {
                        n.eq_ignore_ascii_case("memlock")
                            || n.eq_ignore_ascii_case("rlimit_memlock")
                    })
                })
                .and_then(|u| u.soft),
            devices: host
                .devices
                .unwrap_or_default()
                .into_iter()
                .filter_map(|d| d.path_on_host)
                .collect(),
            annotations: host.annotations.unwrap_or_default(),
        }))
    }

    /// Every container carrying `label` (`key` or `key=value`), stopped ones too.
    pub async fn containers_with_label(
        &self,
        label: &str,
    ) -> Result<Vec<ContainerInfo>, EngineError> {
        let mut filters = HashMap::new();
        filters.insert("label".to_string(), vec![label.to_string()]);
        let list = self
            .docker
            .list_containers(Some(
                ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&filters)
                    .build(),
            ))
            .await
            .ctx(|| "listing containers".into())?;
        let mut out = Vec::new();
        for c in list {
            if let Some(name) = c.names.and_then(|n| n.into_iter().next())
                && let Some(info) = self.container(name.trim_start_matches('/')).await?
            {
                out.push(info);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Image ids used by any container (to never remove those).
    pub async fn images_in_use(&self) -> Result<Vec<String>, EngineError> {
        let list = self
            .docker
            .list_containers(Some(ListContainersOptionsBuilder::new().all(true).build()))
            .await
            .ctx(|| "listing containers".into())?;
        Ok(list.into_iter().filter_map(|c| c.image_id).collect())
    }

    /// Creates the container of `spec` (podman: through libpod, which keeps
    /// annotations and toolbx's host-file options; docker: the Docker API),
    /// after creating the host directories it binds.
    pub async fn create(&self, spec: &ContainerSpec) -> Result<String, EngineError> {
        for dir in &spec.ensure_dirs {
            std::fs::create_dir_all(dir).map_err(|e| EngineError::Stream {
                context: format!("creating {dir} for container {}", spec.name),
                message: e.to_string(),
            })?;
        }
        match self.info.kind {
            EngineKind::Podman => self.libpod_create(&spec.name, &libpod_body(spec)).await,
            EngineKind::Docker => {
                let opts = CreateContainerOptionsBuilder::new()
                    .name(&spec.name)
                    .build();
                self.docker
                    .create_container(Some(opts), compat_body(spec))
                    .await
                    .map(|r| r.id)
                    .ctx(|| format!("creating container {}", spec.name))
            }
        }
    }

    /// Starts a container and waits (bounded) until it runs; a container
    /// that exits instead is an error carrying its exit code.
    pub async fn start_and_check(&self, name: &str) -> Result<(), EngineError> {
        self.docker
            .start_container(name, None)
            .await
            .ctx(|| format!("starting container {name}"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        let mut pause = Duration::from_millis(20);
        loop {
            let c = self
                .docker
                .inspect_container(name, None)
                .await
                .ctx(|| format!("inspecting container {name}"))?;
            let state = c.state.unwrap_or_default();
            if state.running == Some(true) {
                return Ok(());
            }
            if state.exit_code.is_some_and(|c| c != 0)
                || state.error.as_deref().is_some_and(|e| !e.is_empty())
            {
                return Err(EngineError::Stream {
                    context: format!("container {name} did not stay up"),
                    message: format!(
                        "exit code {}{}",
                        state.exit_code.unwrap_or_default(),
                        state
                            .error
                            .filter(|e| !e.is_empty())
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default()
                    ),
                });
            }
            if Instant::now() >= deadline {
                return Err(EngineError::Stream {
                    context: format!("container {name} did not start"),
                    message: format!("not running after {}s", START_TIMEOUT.as_secs()),
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Renames a container.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), EngineError> {
        self.docker
            .rename_container(from, RenameContainerOptionsBuilder::new().name(to).build())
            .await
            .ctx(|| format!("renaming container {from} to {to}"))
    }

    /// Removes a container (stopping it first).
    pub async fn remove(&self, name: &str) -> Result<(), EngineError> {
        self.docker
            .remove_container(
                name,
                Some(RemoveContainerOptionsBuilder::new().force(true).build()),
            )
            .await
            .ctx(|| format!("removing container {name}"))
    }
}

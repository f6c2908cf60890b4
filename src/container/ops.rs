//! Containers: create, start, check, rename, remove, list and inspect.
//! Inspect and list read the engine's JSON themselves over a unix socket:
//! podman reports states (`stopped`, `configured`, `initialized`, …) that
//! bollard's enums reject.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, RenameContainerOptionsBuilder,
};
use hyper::Method;
use serde::Serialize;
use serde_json::Value;

use crate::container::api::{compat_body, libpod_body};
use crate::container::model::ContainerSpec;
use crate::container::owner::{self, Owner};
use crate::container::spec::LABEL_MANAGED;
use crate::engine::discover::unix_path;
use crate::engine::{Engine, EngineError, EngineKind, bound, raw};

/// What halobox needs to know about an existing container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
    /// State as the engine says it (`running`, `exited`, `created`, and
    /// podman's `stopped`, `stopping`, `configured`, …).
    pub state: String,
    /// Memlock soft limit set on the container (`-1` unlimited), when set.
    pub memlock: Option<i64>,
    /// Devices passed through.
    pub devices: Vec<String>,
    /// OCI annotations.
    pub annotations: HashMap<String, String>,
    /// Who made it: halobox, or only its image's labels say so, or someone else.
    pub owner: Owner,
    /// The environment it was created with (`HOME=…`; not printed).
    #[serde(skip)]
    pub env: Vec<String>,
    /// Its command (not printed).
    #[serde(skip)]
    pub cmd: Vec<String>,
}

/// How long a new container may take to reach `running`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

fn text(v: &Value, pointer: &str) -> String {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn strings(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn map(v: &Value, pointer: &str) -> HashMap<String, String> {
    v.pointer(pointer)
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A container inspect answer (Docker's schema, as podman's compat API
/// gives it too) as [`ContainerInfo`], owner not yet decided.
pub fn info_from_inspect(v: &Value) -> ContainerInfo {
    let memlock = v
        .pointer("/HostConfig/Ulimits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|u| {
            let n = u.get("Name").and_then(Value::as_str).unwrap_or_default();
            n.to_ascii_lowercase().trim_start_matches("rlimit_") == "memlock"
        })
        .and_then(|u| u.get("Soft").and_then(Value::as_i64));
    let devices = v
        .pointer("/HostConfig/Devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| d.get("PathOnHost").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    ContainerInfo {
        id: text(v, "/Id"),
        name: text(v, "/Name").trim_start_matches('/').to_string(),
        image_id: text(v, "/Image"),
        image: text(v, "/Config/Image"),
        labels: map(v, "/Config/Labels"),
        state: text(v, "/State/Status"),
        memlock,
        devices,
        annotations: map(v, "/HostConfig/Annotations"),
        owner: Owner::Foreign,
        env: strings(v, "/Config/Env"),
        cmd: strings(v, "/Config/Cmd"),
    }
}

impl Engine {
    /// `GET path` (under the negotiated API version) as JSON; `None` on 404.
    /// Over a unix socket halobox reads the answer itself; elsewhere
    /// `typed` asks bollard (whose enums know Docker's states only).
    async fn get_json<T: Serialize>(
        &self,
        what: &str,
        path: &str,
        typed: impl std::future::Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<Option<Value>, EngineError> {
        let Some(socket) = unix_path(&self.info.address) else {
            return match self.within(bound::CALL, what, typed).await? {
                Ok(t) => Ok(serde_json::to_value(t).ok()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => Ok(None),
                Err(error) => Err(EngineError::Api {
                    context: what.to_string(),
                    error,
                }),
            };
        };
        let full = format!("/v{}{path}", self.info.api_version);
        let (status, bytes) = self
            .within(
                bound::CALL,
                what,
                raw::request(socket, Method::GET, &full, None),
            )
            .await?
            .map_err(|message| EngineError::Stream {
                context: what.to_string(),
                message,
            })?;
        if status == hyper::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            let message = json
                .as_ref()
                .and_then(|j| j.get("message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            // A container removed while podman reads it (another process's
            // `rm` between a list and this inspect) is answered with 500
            // "... does not exist in database: no such container": gone.
            if message.ends_with("no such container") {
                return Ok(None);
            }
            return Err(EngineError::Stream {
                context: what.to_string(),
                message: format!("HTTP {status}: {message}"),
            });
        }
        json.map(Some).ok_or_else(|| EngineError::Stream {
            context: what.to_string(),
            message: format!(
                "the engine answered something that is not JSON: {}",
                String::from_utf8_lossy(&bytes)
            ),
        })
    }

    /// The raw inspect answer of a container; `None` when there is none.
    pub(crate) async fn inspect_json(&self, name: &str) -> Result<Option<Value>, EngineError> {
        self.get_json(
            &format!("inspecting container {name}"),
            &format!("/containers/{}/json", raw::query_value(name)),
            self.docker
                .inspect_container(name, None::<InspectContainerOptions>),
        )
        .await
    }

    /// Inspects a container (any state the engine reports) and decides who
    /// made it; `Ok(None)` when there is none of that name.
    pub async fn container(&self, name: &str) -> Result<Option<ContainerInfo>, EngineError> {
        let Some(v) = self.inspect_json(name).await? else {
            return Ok(None);
        };
        let mut info = info_from_inspect(&v);
        if info.labels.contains_key(LABEL_MANAGED) {
            let image = self.image(&info.image_id).await?;
            let image_labels = image.map(|i| i.labels).unwrap_or_default();
            info.owner = owner::decide(&info.labels, &image_labels);
        }
        Ok(Some(info))
    }

    /// Every container carrying `label` (`key` or `key=value`), stopped ones too.
    pub async fn containers_with_label(
        &self,
        label: &str,
    ) -> Result<Vec<ContainerInfo>, EngineError> {
        let mut out = Vec::new();
        for name in self.container_names(Some(label)).await? {
            if let Some(info) = self.container(&name).await? {
                out.push(info);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The list of containers (all states) as JSON, filtered by `label`.
    async fn list_json(&self, label: Option<&str>) -> Result<Vec<Value>, EngineError> {
        let mut filters = HashMap::new();
        if let Some(l) = label {
            filters.insert("label".to_string(), vec![l.to_string()]);
        }
        let query = serde_json::to_string(&filters).unwrap_or_default();
        let typed = self.docker.list_containers(Some(
            ListContainersOptionsBuilder::new()
                .all(true)
                .filters(&filters)
                .build(),
        ));
        let list = self
            .get_json(
                "listing containers",
                &format!(
                    "/containers/json?all=1&filters={}",
                    raw::query_value(&query)
                ),
                typed,
            )
            .await?;
        Ok(list
            .as_ref()
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// Names of the containers carrying `label` (all when `None`).
    async fn container_names(&self, label: Option<&str>) -> Result<Vec<String>, EngineError> {
        Ok(self
            .list_json(label)
            .await?
            .iter()
            .filter_map(|c| c.pointer("/Names/0").and_then(Value::as_str))
            .map(|n| n.trim_start_matches('/').to_string())
            .collect())
    }

    /// Image ids used by any container (to never remove those).
    pub async fn images_in_use(&self) -> Result<Vec<String>, EngineError> {
        Ok(self
            .list_json(None)
            .await?
            .iter()
            .filter_map(|c| c.get("ImageID").and_then(Value::as_str))
            .map(str::to_string)
            .collect())
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
                self.call(
                    &format!("creating container {}", spec.name),
                    self.docker.create_container(Some(opts), compat_body(spec)),
                )
                .await
                .map(|r| r.id)
            }
        }
    }

    /// Renames a container.
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), EngineError> {
        self.call(
            &format!("renaming container {from} to {to}"),
            self.docker
                .rename_container(from, RenameContainerOptionsBuilder::new().name(to).build()),
        )
        .await
    }

    /// Removes a container (stopping it first).
    pub async fn remove(&self, name: &str) -> Result<(), EngineError> {
        self.call(
            &format!("removing container {name}"),
            self.docker.remove_container(
                name,
                Some(RemoveContainerOptionsBuilder::new().force(true).build()),
            ),
        )
        .await
    }
}

//! The few calls that need podman's own API (`/v4.0.0/libpod/…`) on the same
//! socket: bollard speaks only the Docker-compatible API, which in podman
//! drops annotations and cannot express toolbx's `--no-hosts`/`--dns none`.

use hyper::Method;
use serde_json::Value;

use super::discover::unix_path;
use super::{Engine, EngineError, EngineKind, bound, raw};

/// The libpod API version prefix halobox uses (podman ≥ 4).
const LIBPOD: &str = "/v4.0.0/libpod";

impl Engine {
    /// Creates a container from a libpod SpecGenerator body; returns its id.
    pub async fn libpod_create(&self, name: &str, body: &Value) -> Result<String, EngineError> {
        let what = format!("creating container {name}");
        let fail = |message: String| EngineError::Stream {
            context: what.clone(),
            message,
        };
        if self.info.kind != EngineKind::Podman {
            return Err(fail(
                "the libpod API is podman's; this engine is docker".into(),
            ));
        }
        let socket = unix_path(&self.info.address)
            .ok_or_else(|| fail("podman's own API is used over a unix socket only".into()))?;
        let path = format!("{LIBPOD}/containers/create");
        let (status, bytes) = self
            .within(
                bound::CALL,
                &what,
                raw::request(socket, Method::POST, &path, Some(body)),
            )
            .await?
            .map_err(fail)?;
        let json: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        if status.is_success() {
            json.get("Id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| fail(format!("no Id in the answer: {json}")))
        } else {
            let message = json
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| json.to_string());
            Err(fail(format!("HTTP {status}: {message}")))
        }
    }
}

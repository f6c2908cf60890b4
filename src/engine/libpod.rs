//! The few calls that need podman's own API (`/v4.0.0/libpod/…`) on the same
//! socket: bollard speaks only the Docker-compatible API, which in podman
//! drops annotations and cannot express toolbx's `--no-hosts`/`--dns none`.

use std::path::Path;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyperlocal::{UnixClientExt, UnixConnector};
use serde_json::Value;

use super::discover::unix_path;
use super::{Engine, EngineError, EngineKind};

/// The libpod API version prefix halobox uses (podman ≥ 4).
const LIBPOD: &str = "/v4.0.0/libpod";

/// One libpod request over the unix socket: status and JSON answer.
pub async fn request(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(StatusCode, Value), String> {
    let client: Client<UnixConnector, Full<Bytes>> = Client::unix();
    let uri: hyper::Uri = hyperlocal::Uri::new(socket, &format!("{LIBPOD}{path}")).into();
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("Content-Type", "application/json")
        .body(Full::new(Bytes::from(
            body.map(Value::to_string).unwrap_or_default(),
        )))
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, json))
}

impl Engine {
    /// Creates a container from a libpod SpecGenerator body; returns its id.
    pub async fn libpod_create(&self, name: &str, body: &Value) -> Result<String, EngineError> {
        let fail = |message: String| EngineError::Stream {
            context: format!("creating container {name}"),
            message,
        };
        if self.info.kind != EngineKind::Podman {
            return Err(fail(
                "the libpod API is podman's; this engine is docker".into(),
            ));
        }
        let socket = unix_path(&self.info.address)
            .ok_or_else(|| fail("podman's own API is used over a unix socket only".into()))?;
        let (status, json) = request(socket, Method::POST, "/containers/create", Some(body))
            .await
            .map_err(fail)?;
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

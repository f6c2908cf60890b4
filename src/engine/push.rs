//! Push one tag (`POST /images/{name}/push`) with per-layer progress and the
//! pushed digest. The request is made directly (bollard's push answer drops
//! the layer id and the digest); credentials go only into `X-Registry-Auth`.

use base64::Engine as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::TokioExecutor;
use hyperlocal::UnixConnector;
use serde_json::Value;

use super::auth::Credentials;
use super::discover::{Transport, transport};
use super::progress::LayerProgress;
use super::tls;
use super::{Engine, EngineError};
use crate::image_ref::ImageRef;

/// What a finished push reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The reference pushed.
    pub reference: String,
    /// The manifest digest the registry stored.
    pub digest: String,
}

/// The digest in a `TAG: digest: sha256:… size: N` status line.
pub fn digest_in_status(status: &str) -> Option<String> {
    let (_, rest) = status.split_once("digest: ")?;
    let d = rest.split_whitespace().next()?;
    d.starts_with("sha256:").then(|| d.to_string())
}

/// A hint for messages that mean the registry refused the credentials.
pub fn auth_hint(message: &str, registry: &str, creds: Option<&Credentials>) -> Option<String> {
    let m = message.to_ascii_lowercase();
    let auth = [
        "unauthorized",
        "authentication required",
        "no basic auth",
        "denied",
    ]
    .iter()
    .any(|w| m.contains(w));
    auth.then(|| match creds {
        Some(c) => format!(
            "hint: {registry} refused user {:?} from {}; fix the password there \
             (HALOBOX_REGISTRY_USER/HALOBOX_REGISTRY_PASSWORD, or `podman login {registry}`)",
            c.username, c.source
        ),
        None => format!(
            "hint: no credentials were sent to {registry}: set HALOBOX_REGISTRY={registry} with \
             HALOBOX_REGISTRY_USER and HALOBOX_REGISTRY_PASSWORD, or `podman login {registry}` / \
             `docker login {registry}`"
        ),
    })
}

impl Engine {
    /// Pushes `image` (repository and tag), showing per-layer progress; an
    /// error anywhere (HTTP status or inside the stream) fails the push.
    pub async fn push(
        &self,
        image: &ImageRef,
        creds: Option<&Credentials>,
    ) -> Result<Pushed, EngineError> {
        let reference = image.to_string();
        let tag = image.tag.as_deref().unwrap_or("latest");
        let registry = super::auth::registry_of(&image.repository);
        let fail = |message: String| {
            let hint = auth_hint(&message, &registry, creds)
                .map(|h| format!("\n  {h}"))
                .unwrap_or_default();
            EngineError::Stream {
                context: format!("pushing {reference}"),
                message: format!("{}{hint}", message.trim()),
            }
        };
        let auth_json = serde_json::to_vec(&creds.map(Credentials::to_docker).unwrap_or_default())
            .map_err(|e| fail(e.to_string()))?;
        let header = base64::engine::general_purpose::URL_SAFE.encode(auth_json);
        let path = format!(
            "/v{}/images/{}/push?tag={tag}",
            self.info.api_version, image.repository
        );
        let mut progress = LayerProgress::new(&format!("push {reference}"));
        let mut digest = None;
        let mut error = None;
        let activity = super::bound::Activity::new();
        let pushing = self.stream_post(&path, &header, |item| {
            activity.touch();
            if let Some(m) = item
                .pointer("/errorDetail/message")
                .or_else(|| item.get("error"))
                .and_then(Value::as_str)
            {
                error.get_or_insert_with(|| m.to_string());
                return;
            }
            if let Some(d) = item.pointer("/aux/Digest").and_then(Value::as_str) {
                digest = Some(d.to_string());
            }
            let status = item.get("status").and_then(Value::as_str).unwrap_or("");
            if let Some(d) = digest_in_status(status) {
                digest.get_or_insert(d);
            }
            if status.is_empty() {
                return;
            }
            let num = |k: &str| {
                item.pointer(&format!("/progressDetail/{k}"))
                    .and_then(Value::as_i64)
            };
            progress.update(
                item.get("id").and_then(Value::as_str),
                status,
                num("current"),
                num("total"),
            );
        });
        let result = self
            .progressing(
                &format!("pushing {reference}"),
                &activity,
                super::bound::STREAM_IDLE,
                pushing,
            )
            .await;
        progress.finish();
        let (status, body) = result?.map_err(fail)?;
        if let Some(e) = error {
            return Err(fail(e));
        }
        if !status.is_success() {
            let msg = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| {
                    v.get("message")
                        .or_else(|| v.pointer("/errorDetail/message"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            return Err(fail(format!("HTTP {status}: {msg}")));
        }
        let digest = digest.ok_or_else(|| {
            fail(
                "the engine reported no error but no digest either: the push is not confirmed"
                    .into(),
            )
        })?;
        Ok(Pushed { reference, digest })
    }

    /// POSTs to the engine and feeds each JSON line of a success answer to
    /// `on_item`; returns the status and, for an error answer, its body.
    async fn stream_post(
        &self,
        path: &str,
        auth: &str,
        on_item: impl FnMut(Value),
    ) -> Result<(hyper::StatusCode, Vec<u8>), String> {
        let tls = tls::from_env();
        let how = transport(&self.info.address, tls.is_some())?;
        let uri = |base: &str| -> Result<hyper::Uri, String> {
            format!("{base}{path}")
                .parse()
                .map_err(|e| format!("{base}{path}: {e}"))
        };
        match (how, tls) {
            (Transport::Unix(socket), _) => {
                let client: Client<UnixConnector, Full<Bytes>> =
                    Client::builder(TokioExecutor::new()).build(UnixConnector);
                let uri: hyper::Uri = hyperlocal::Uri::new(socket, path).into();
                send(client, uri, auth, on_item).await
            }
            (Transport::Plain(base), _) => {
                let client: Client<HttpConnector, Full<Bytes>> =
                    Client::builder(TokioExecutor::new()).build(HttpConnector::new());
                send(client, uri(&base)?, auth, on_item).await
            }
            (Transport::Tls(base), Some(files)) => {
                let client: Client<_, Full<Bytes>> =
                    Client::builder(TokioExecutor::new()).build(files.connector()?);
                send(client, uri(&base)?, auth, on_item).await
            }
            (Transport::Tls(_), None) => Err("no TLS files for an https address".into()),
        }
    }
}

async fn send<C: Connect + Clone + Send + Sync + 'static>(
    client: Client<C, Full<Bytes>>,
    uri: hyper::Uri,
    auth: &str,
    mut on_item: impl FnMut(Value),
) -> Result<(hyper::StatusCode, Vec<u8>), String> {
    let req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header("Content-Type", "application/json")
        .header("X-Registry-Auth", auth)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let mut raw = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if !status.is_success() {
            raw.extend_from_slice(&data);
            continue;
        }
        buf.extend_from_slice(&data);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                on_item(v);
            }
        }
    }
    if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
        on_item(v);
    }
    if !status.is_success() {
        // Podman answers some errors as a JSON stream with errorDetail.
        for line in raw.split(|b| *b == b'\n') {
            if let Ok(v) = serde_json::from_slice::<Value>(line)
                && v.pointer("/errorDetail/message").is_some()
            {
                on_item(v);
            }
        }
    }
    Ok((status, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_in_status_lines() {
        assert_eq!(
            digest_in_status("1: digest: sha256:74fa size: 348").as_deref(),
            Some("sha256:74fa")
        );
        assert_eq!(digest_in_status("Pushing"), None);
        assert!(auth_hint("unauthorized: authentication required", "r", None).is_some());
        assert!(auth_hint("connection refused", "r", None).is_none());
    }
}

//! One request over the engine's unix socket with the answer as bytes: for
//! podman's own API and for answers bollard's types cannot read (podman
//! reports container states such as `stopped` that bollard's enum lacks).
//! Callers bound it ([`super::bound`]).

use std::path::Path;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyperlocal::{UnixClientExt, UnixConnector};
use serde_json::Value;

/// Sends `method path` (with a JSON `body`) to the engine on `socket`.
pub async fn request(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Result<(StatusCode, Bytes), String> {
    let client: Client<UnixConnector, Full<Bytes>> = Client::unix();
    let uri: hyper::Uri = hyperlocal::Uri::new(socket, path).into();
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
    Ok((status, bytes))
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved).
pub fn query_value(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_filters() {
        assert_eq!(
            query_value(r#"{"label":["a.b=true"]}"#),
            "%7B%22label%22%3A%5B%22a.b%3Dtrue%22%5D%7D"
        );
    }
}

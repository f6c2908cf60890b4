//! `GET /_ping`: one cheap request that tells podman from docker, the engine
//! version and its API version from the response headers (`/version` and
//! `/info` make podman run helper binaries and take hundreds of milliseconds).

use std::path::Path;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyperlocal::{UnixClientExt, UnixConnector};

/// What `/_ping` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    /// `Api-Version` (major, minor).
    pub api: (usize, usize),
    /// A `Libpod-Api-Version` header was present.
    pub podman: bool,
    /// The engine version from the `Server` header (`Libpod/4.3.1 (linux)`).
    pub version: String,
}

/// Pings the engine on a unix socket, within [`super::bound::PING`].
pub async fn unix(socket: &Path) -> Result<Ping, String> {
    let limit = super::bound::PING;
    tokio::time::timeout(limit, ask(socket))
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "accepted the connection but did not answer /_ping within {}s: the engine is wedged \
                 (check it with `curl --unix-socket {} http://d/_ping`, restart its service)",
                limit.as_secs(),
                socket.display()
            ))
        })
}

async fn ask(socket: &Path) -> Result<Ping, String> {
    let client: Client<UnixConnector, Full<Bytes>> = Client::unix();
    let uri: hyper::Uri = hyperlocal::Uri::new(socket, "/_ping").into();
    let req = Request::builder()
        .method(Method::GET)
        .uri(uri)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = client.request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let api = header("Api-Version");
    let podman = header("Libpod-Api-Version").is_some();
    let server = header("Server").unwrap_or_default();
    let _ = resp.into_body().collect().await;
    if !status.is_success() {
        return Err(format!("/_ping answered HTTP {status}"));
    }
    let api = api
        .as_deref()
        .and_then(parse_api_version)
        .ok_or("no Api-Version header: not a Docker-compatible engine")?;
    Ok(Ping {
        api,
        podman,
        version: parse_server_version(&server),
    })
}

/// `1.41` → (1, 41).
pub fn parse_api_version(v: &str) -> Option<(usize, usize)> {
    let (major, minor) = v.trim().split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// `Libpod/4.3.1 (linux)` or `Docker/20.10.24+dfsg1 (linux)` → the version.
pub fn parse_server_version(server: &str) -> String {
    server
        .split_whitespace()
        .next()
        .and_then(|p| p.split_once('/'))
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers() {
        assert_eq!(parse_api_version("1.41"), Some((1, 41)));
        assert_eq!(parse_api_version("x"), None);
        assert_eq!(parse_server_version("Libpod/4.3.1 (linux)"), "4.3.1");
        assert_eq!(
            parse_server_version("Docker/20.10.24+dfsg1 (linux)"),
            "20.10.24+dfsg1"
        );
        assert_eq!(parse_server_version(""), "");
    }
}

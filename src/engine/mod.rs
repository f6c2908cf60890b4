//! The container engine client: Podman's Docker-compatible API or Docker,
//! through bollard. One client for every command that talks to an engine:
//! discovery and connecting (`--engine`, config, sockets), the runtime for
//! sync callers, the bound on every call (`bound.rs`), one raw request over
//! the socket (`raw.rs`), images, containers' lifecycle (start, stop, run
//! state, filesystem changes), exec, logs, build, push, load, podman's own
//! API (`libpod.rs`), registry credentials (`auth.rs`) and progress.

pub mod auth;
pub mod bound;
pub mod build;
pub mod capture;
pub mod discover;
pub mod exec;
pub mod images;
pub mod libpod;
pub mod lifecycle;
pub mod load;
pub mod local;
pub mod logs;
pub mod ping;
pub mod progress;
pub mod push;
pub mod raw;
mod runtime;
mod select;
pub mod tls;

pub use runtime::block_on;
pub use select::connect;

use std::fmt;

use bollard::Docker;

use discover::{Candidate, DiscoveryEnv, Transport, candidates, unix_path};

/// bollard's own limit on waiting for an answer's headers: only a backstop,
/// every call carries its own bound ([`bound`]), and an upload (load) may
/// rightly take longer than any fixed time.
const API_TIMEOUT_SECS: u64 = 86_400;

/// Which engine answers on the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Podman (compat API).
    Podman,
    /// Docker Engine.
    Docker,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
        })
    }
}

/// What halobox learned about the engine when it connected.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineInfo {
    /// The address connected to.
    pub address: String,
    /// Podman or Docker.
    pub kind: EngineKind,
    /// The engine's own version (`4.3.1`, `20.10.24`).
    pub version: String,
    /// The negotiated API version (`1.41`).
    pub api_version: String,
    /// The OCI runtime (`crun`, `runc`), when known (podman: containers.conf).
    pub oci_runtime: Option<String>,
    /// The engine runs rootless (its socket is a user's, or its process is).
    pub rootless: bool,
}

/// Why no engine could be used.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Nothing answered at any candidate address.
    #[error("{}", no_engine_message(.0))]
    NotFound(Vec<(Candidate, String)>),
    /// An address halobox will not use (plain tcp:// across the network).
    #[error("{}: {}", .candidate.source, .reason)]
    Refused {
        /// The address and where it came from.
        candidate: Candidate,
        /// Why, with the fix.
        reason: String,
    },
    /// An error reported inside a streamed response (pull, push, build).
    #[error("{context}: {message}")]
    Stream {
        /// What halobox was doing.
        context: String,
        /// The engine's message.
        message: String,
    },
    /// The engine answered with an error.
    #[error("{context}: {error}")]
    Api {
        /// What halobox was doing.
        context: String,
        /// The engine's error (shown in the message, so not chained again).
        error: bollard::errors::Error,
    },
    /// The engine did not answer in time (see [`bound`]).
    #[error("{}", bound::timeout_message(.address, .what, *.secs, *.idle))]
    Timeout {
        /// The engine's address.
        address: String,
        /// What halobox was doing.
        what: String,
        /// The limit, in seconds.
        secs: u64,
        /// The limit was on silence (a stream), not on the whole call.
        idle: bool,
    },
}

fn no_engine_message(tried: &[(Candidate, String)]) -> String {
    let mut s = String::from("no container engine API answered; tried:\n");
    for (c, why) in tried {
        s.push_str(&format!("  {} ({}): {why}\n", c.address, c.source));
    }
    s.push_str(
        "  hint: start podman's API socket: `systemctl --user enable --now podman.socket` \
         (rootless) or `sudo systemctl enable --now podman.socket` (rootful), or start docker; \
         or name the socket with --engine unix:///path/to/sock",
    );
    s
}

/// A connected engine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The bollard client (API version negotiated).
    pub docker: Docker,
    /// What answered.
    pub info: EngineInfo,
}

/// Adds what halobox was doing to a bollard error.
pub trait Context<T> {
    /// Wraps the error with `context`.
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, EngineError>;
}

impl<T> Context<T> for Result<T, bollard::errors::Error> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, EngineError> {
        self.map_err(|error| EngineError::Api {
            context: context(),
            error,
        })
    }
}

impl Engine {
    /// Connects to the first engine that answers, in discovery order.
    /// A `tcp://` address that is not loopback is refused unless TLS is
    /// configured ([`tls::from_env`]).
    pub async fn connect(env: &DiscoveryEnv) -> Result<Engine, EngineError> {
        let tls = tls::from_env();
        let mut tried = Vec::new();
        for c in candidates(env) {
            let checked =
                discover::transport(&c.address, tls.is_some()).and_then(|how| match (&how, &tls) {
                    (Transport::Tls(_), Some(files)) => files.check().map(|()| how),
                    _ => Ok(how),
                });
            let how = match checked {
                Ok(how) => how,
                Err(reason) => {
                    return Err(EngineError::Refused {
                        candidate: c,
                        reason,
                    });
                }
            };
            match Self::connect_one(&c.address, &how, tls.as_ref()).await {
                Ok(engine) => return Ok(engine),
                Err(why) => tried.push((c, why)),
            }
        }
        Err(EngineError::NotFound(tried))
    }

    async fn connect_one(
        address: &str,
        how: &Transport,
        tls: Option<&tls::TlsFiles>,
    ) -> Result<Engine, String> {
        let (docker, ping) = if let Transport::Unix(path) = how {
            if !path.exists() {
                return Err("no such socket".into());
            }
            let ping = ping::unix(path)
                .await
                .map_err(|e| format!("not answering: {e}"))?;
            let server = bollard::ClientVersion {
                major_version: ping.api.0,
                minor_version: ping.api.1,
            };
            let version = if server < *bollard::API_DEFAULT_VERSION {
                server
            } else {
                *bollard::API_DEFAULT_VERSION
            };
            let docker = Docker::connect_with_unix(address, API_TIMEOUT_SECS, &version)
                .map_err(|e| e.to_string())?;
            (docker, ping)
        } else {
            let docker = match (how, tls) {
                (Transport::Tls(url), Some(files)) => {
                    files.docker(url, API_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)?
                }
                (Transport::Plain(url), _) => {
                    Docker::connect_with_http(url, API_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                        .map_err(|e| e.to_string())?
                }
                _ => return Err("no TLS files for an https address".into()),
            }
            .negotiate_version()
            .await
            .map_err(|e| format!("not answering: {}", causes(&e)))?;
            let v = docker.version().await.map_err(|e| e.to_string())?;
            let podman = v
                .components
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|c| c.name.to_ascii_lowercase().contains("podman"));
            let api = docker.client_version();
            let ping = ping::Ping {
                api: (api.major_version, api.minor_version),
                podman,
                version: v.version.unwrap_or_default(),
            };
            (docker, ping)
        };
        let api = docker.client_version();
        Ok(Engine {
            info: EngineInfo {
                address: address.to_string(),
                kind: if ping.podman {
                    EngineKind::Podman
                } else {
                    EngineKind::Docker
                },
                version: ping.version,
                api_version: format!("{}.{}", api.major_version, api.minor_version),
                oci_runtime: None,
                rootless: looks_rootless(address),
            },
            docker,
        })
    }
}

/// An error with its causes (`client error (Connect): invalid peer
/// certificate: UnknownIssuer`): hyper's own text hides TLS failures.
fn causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(c) = next {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        next = c.source();
    }
    s
}

/// A socket under a user's runtime directory (`/run/user/<uid>/…`) belongs
/// to a rootless engine; [`EngineInfo::rootless`] starts from this guess and
/// callers that know the engine's process refine it.
pub fn looks_rootless(address: &str) -> bool {
    let Some(path) = unix_path(address) else {
        return false;
    };
    path.starts_with("/run/user/")
        || std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|d| !d.is_empty() && std::path::Path::new(d) != std::path::Path::new("/run"))
            .is_some_and(|d| path.starts_with(d))
}

//! The serving API's key: the engine's variable (`VLLM_API_KEY`,
//! `LLAMA_API_KEY`) from this environment when set,
//! else one made once per cluster and kept 0600 next to its file
//! (`cluster.toml` → `cluster.api-key`), unless the user turns it off
//! (`--no-api-key`). The key only ever goes to the engine on stdin and to
//! the API in a header, and that only to a listener proven this user's
//! ([`get`], [`post_json`]); plans and messages name where it is, never
//! its value. vLLM's own `--api-key` guards a few route prefixes only, so
//! halobox adds [`VLLM_MIDDLEWARE`], which asks for the key on every route
//! but `GET /health`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cluster::auth;
use crate::http::{self, HttpError, Reply, Why};

/// The Python module (its file's stem) that holds [`VLLM_MIDDLEWARE`].
pub const VLLM_MODULE: &str = "halobox_require_key";
/// `vllm serve --middleware`'s import path of halobox's key check.
pub const VLLM_MIDDLEWARE: &str = "halobox_require_key.RequireKey";
/// The module's source: a pure ASGI middleware that answers 401 to every
/// request without `Authorization: Bearer $VLLM_API_KEY` (constant-time
/// compare) but `GET`/`HEAD /health`, and closes such a WebSocket.
pub const VLLM_MODULE_SOURCE: &str = include_str!("require_key.py");

/// `GET path` on the serve's API at `api`: with `key` only when its
/// listener is proven this user's ([`http::get_ours`]), else plain.
pub fn get(
    api: SocketAddr,
    path: &str,
    key: Option<&str>,
    timeout: Duration,
) -> Result<Reply, HttpError> {
    match key {
        Some(k) => http::get_ours(api, path, k, timeout, http::BODY_LIMIT),
        None => http::get(api, path, None, timeout),
    }
}

/// `POST path` with a JSON `body` on the serve's API at `api`, the key
/// sent as [`get`] sends it.
pub fn post_json(
    api: SocketAddr,
    path: &str,
    body: &str,
    key: Option<&str>,
    timeout: Duration,
) -> Result<Reply, HttpError> {
    match key {
        Some(k) => http::post_json_ours(api, path, body, k, timeout),
        None => http::post_json(api, path, body, None, timeout),
    }
}

/// Why a request of [`get`] or [`post_json`] sent nothing: its listener is
/// not proven this user's (`None` for any other failure).
pub fn not_ours(e: &HttpError) -> Option<String> {
    matches!(e.why, Why::NotOurs(_)).then(|| e.to_string())
}

/// Where a serve's key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// This environment variable (the engine's: `VLLM_API_KEY`, `LLAMA_API_KEY`).
    Env(&'static str),
    /// The cluster's key file (made on the first serve).
    File(PathBuf),
    /// No key: `--no-api-key`.
    Off,
}

impl Source {
    /// Chooses the source: off with `no_key`, the environment variable
    /// `env` when it is set, else the cluster's file.
    pub fn choose(no_key: bool, env: Option<&'static str>, cluster: &Path) -> Source {
        if no_key {
            Source::Off
        } else if let Some(name) = env {
            Source::Env(name)
        } else {
            Source::File(path(cluster))
        }
    }

    /// How a `curl` line sends the key (empty without one).
    pub fn curl_header(&self) -> String {
        match self {
            Source::Env(name) => format!(" -H \"Authorization: Bearer ${name}\""),
            Source::File(p) => format!(
                " -H \"Authorization: Bearer $(cat {})\"",
                crate::shell::quote(&p.display().to_string())
            ),
            Source::Off => String::new(),
        }
    }

    /// One line for `--dry-run` and the ready message: whether a key is in
    /// force and where it is (never the key).
    pub fn describe(&self) -> String {
        match self {
            Source::Env(name) => {
                format!("an API key is required (from {name} in this environment)")
            }
            Source::File(p) => format!(
                "an API key is required (the cluster's, kept 0600 in {}; made on the first serve)",
                p.display()
            ),
            Source::Off => {
                "no API key (--no-api-key): anyone who reaches the port may use the API".into()
            }
        }
    }
}

/// The cluster's key file: next to the cluster file (`cluster.toml` →
/// `cluster.api-key`).
pub fn path(cluster: &Path) -> PathBuf {
    auth::beside_cluster_file(cluster, "api-key")
}

/// The key of `source`: the environment's value (`env`), the cluster file's
/// (made now when missing), or none.
pub fn load(source: &Source, env: Option<&str>) -> anyhow::Result<Option<String>> {
    Ok(match source {
        Source::Off => None,
        Source::Env(_) => env.map(str::to_string),
        Source::File(p) => Some(
            auth::load_or_create_secret(
                p,
                "the serving API's key for this cluster",
                "the next `halobox serve` makes a new one",
            )?
            .secret()
            .to_string(),
        ),
    })
}

/// The warning a serve without a key (`--no-api-key`) earns on anything but
/// loopback.
pub fn no_key_warning(source: &Source, host: IpAddr) -> Option<String> {
    (*source == Source::Off && !host.is_loopback()).then(|| {
        format!(
            "warning: --no-api-key on {host}: the API has NO key; anyone who reaches {host} can use the model (and its GPU time)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_follows_the_flags_and_never_shows_a_key() {
        let c = Path::new("/x/cluster.toml");
        assert_eq!(Source::choose(true, Some("K"), c), Source::Off);
        assert_eq!(Source::choose(false, Some("K"), c), Source::Env("K"));
        let f = Source::choose(false, None, c);
        assert_eq!(f, Source::File(PathBuf::from("/x/cluster.api-key")));
        assert_eq!(
            f.curl_header(),
            " -H \"Authorization: Bearer $(cat /x/cluster.api-key)\""
        );
        assert!(no_key_warning(&Source::Off, "127.0.0.1".parse().unwrap()).is_none());
        assert!(no_key_warning(&Source::Off, "10.0.0.1".parse().unwrap()).is_some());
        assert!(no_key_warning(&f, "10.0.0.1".parse().unwrap()).is_none());
    }

    /// A planted link in place of the key file is not used: `serve` would
    /// otherwise send the planter's key (or read any file of the user's).
    #[test]
    fn a_linked_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("mine");
        auth::write_private(&real, &format!("{}\n", "ab".repeat(32))).unwrap();
        let p = path(&dir.path().join("c.toml"));
        std::os::unix::fs::symlink(&real, &p).unwrap();
        let e = load(&Source::File(p), None).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link: not used"), "{e}");
        assert!(!e.contains(&"ab".repeat(32)), "{e}");
    }

    #[test]
    fn the_cluster_key_is_made_once_and_kept_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let src = Source::File(path(&dir.path().join("c.toml")));
        let a = load(&src, None).unwrap().unwrap();
        let b = load(&src, None).unwrap().unwrap();
        assert_eq!(a, b);
        let m = std::fs::metadata(dir.path().join("c.api-key")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        std::fs::set_permissions(
            dir.path().join("c.api-key"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let e = load(&src, None).unwrap_err().to_string();
        assert!(
            e.contains("can be read by others") && !e.contains(&a),
            "{e}"
        );
    }
}

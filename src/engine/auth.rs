//! Registry credentials: from `HALOBOX_REGISTRY_USER`/`HALOBOX_REGISTRY_PASSWORD`
//! for the one registry they belong to (`HALOBOX_REGISTRY`), else the
//! engines' auth files (`$XDG_RUNTIME_DIR/containers/auth.json`,
//! `~/.docker/config.json`), matched by exact host. Credentials are only
//! ever sent to the engine, for that registry; their [`fmt::Debug`] form is
//! masked so they cannot reach a log.

use std::fmt;
use std::path::PathBuf;

use base64::Engine as _;
use bollard::auth::DockerCredentials;
use serde::Deserialize;

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Registry host (`127.0.0.1:5001`).
    pub registry: String,
    /// User name.
    pub username: String,
    password: String,
    /// Where they came from (shown to the user instead of the secret).
    pub source: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credentials {{ registry: {}, username: {}, password: ***, source: {} }}",
            self.registry, self.username, self.source
        )
    }
}

impl Credentials {
    /// The form bollard sends in `X-Registry-Auth`.
    pub fn to_docker(&self) -> DockerCredentials {
        DockerCredentials {
            username: Some(self.username.clone()),
            password: Some(self.password.clone()),
            serveraddress: Some(self.registry.clone()),
            ..Default::default()
        }
    }
}

#[derive(Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: std::collections::HashMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    auth: Option<String>,
}

/// The environment variables that name credentials, as shown to users.
pub const ENV_PAIR: &str = "HALOBOX_REGISTRY_USER/HALOBOX_REGISTRY_PASSWORD";

/// The registry host of a repository (`docker.io` when it has none).
pub fn registry_of(repository: &str) -> String {
    match repository.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            normalise_host(first)
        }
        _ => "docker.io".to_string(),
    }
}

/// The path of a repository inside its registry (`kyuz0/x`; Docker Hub's
/// official images are `library/NAME`).
fn repository_path(repository: &str) -> String {
    match repository.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            rest.to_string()
        }
        Some(_) => repository.to_string(),
        None => format!("library/{repository}"),
    }
}

/// A registry name as auth files and `HALOBOX_REGISTRY` write it, reduced to
/// its host: scheme and path dropped, lower case, `host:port` kept, and
/// Docker Hub's names (`index.docker.io`, `registry-1.docker.io`,
/// `https://index.docker.io/v1/`) all `docker.io`.
pub fn normalise_host(name: &str) -> String {
    let s = name.trim();
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = s.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".into(),
        _ => host,
    }
}

/// What [`lookup`] decided for one registry.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    /// The credentials to send, if any.
    pub credentials: Option<Credentials>,
    /// Why `HALOBOX_REGISTRY_USER/PASSWORD`, although set, were not sent
    /// (a warning with the fix); `None` when they were sent or not set.
    pub withheld: Option<String>,
}

/// Credentials for pulling from or pushing to `repository`.
///
/// `HALOBOX_REGISTRY_USER/PASSWORD` belong to one registry: the host named
/// by `HALOBOX_REGISTRY`, else `named` (the registry the user named on the
/// command line for this operation, e.g. `publish --to`). They are never
/// sent anywhere else, so an image reference from a config file or
/// `HALOBOX_IMAGE` cannot collect them. Otherwise the engines' auth files
/// are searched for an entry of exactly this host.
pub fn lookup(repository: &str, named: Option<&str>) -> Lookup {
    let registry = registry_of(repository);
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut withheld = None;
    if let (Some(username), Some(password)) = (
        env("HALOBOX_REGISTRY_USER"),
        env("HALOBOX_REGISTRY_PASSWORD"),
    ) {
        let bound = env("HALOBOX_REGISTRY")
            .map(|r| (normalise_host(&r), "HALOBOX_REGISTRY"))
            .or_else(|| {
                named.map(|n| (normalise_host(n), "the registry named on the command line"))
            });
        match bound {
            Some((host, _)) if host == registry => {
                return Lookup {
                    credentials: Some(Credentials {
                        registry: registry.clone(),
                        username,
                        password,
                        source: format!("{ENV_PAIR} (for {host})"),
                    }),
                    withheld: None,
                };
            }
            Some((host, why)) => {
                withheld = Some(format!(
                    "{ENV_PAIR} belong to {host} ({why}), so they are not sent to {registry}\n  \
                     hint: to use them for {registry}: `export HALOBOX_REGISTRY={registry}`"
                ));
            }
            None => {
                withheld = Some(format!(
                    "{ENV_PAIR} are set but HALOBOX_REGISTRY is not, so they are not sent to {registry}\n  \
                     hint: name the registry they belong to, e.g. `export HALOBOX_REGISTRY={registry}`"
                ));
            }
        }
    }
    let credentials = auth_files().into_iter().find_map(|path| {
        let text = std::fs::read_to_string(&path).ok()?;
        from_auth_file(&text, repository).map(|(username, password)| Credentials {
            registry: registry.clone(),
            username,
            password,
            source: path.display().to_string(),
        })
    });
    Lookup {
        credentials,
        withheld,
    }
}

/// Auth files, in the order podman and docker read them.
pub fn auth_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(p));
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        out.push(PathBuf::from(dir).join("containers/auth.json"));
    }
    if let Some(home) = dirs::home_dir() {
        out.push(home.join(".config/containers/auth.json"));
        out.push(home.join(".docker/config.json"));
    }
    out
}

/// How well an auth-file key fits `repository`: `None` when it is for
/// another host; else the length of its namespace (`quay.io/org` keys are
/// for repositories under `org/`; a key with a scheme is docker's URL form,
/// whose path is not a namespace).
fn key_fits(key: &str, repository: &str) -> Option<usize> {
    if normalise_host(key) != registry_of(repository) {
        return None;
    }
    if key.starts_with("https://") || key.starts_with("http://") {
        return Some(0);
    }
    let namespace = key
        .split_once('/')
        .map(|(_, p)| p.trim_end_matches('/'))
        .unwrap_or_default();
    let path = repository_path(repository);
    let inside = namespace.is_empty()
        || path == namespace
        || path
            .strip_prefix(namespace)
            .is_some_and(|rest| rest.starts_with('/'));
    inside.then_some(namespace.len())
}

/// User and password for `repository` in an auth file's text: the entry
/// for exactly its host (the most specific namespace when several fit).
pub fn from_auth_file(text: &str, repository: &str) -> Option<(String, String)> {
    let file: AuthFile = serde_json::from_str(text).ok()?;
    let mut fits: Vec<(usize, &String, &AuthEntry)> = file
        .auths
        .iter()
        .filter_map(|(k, v)| key_fits(k, repository).map(|n| (n, k, v)))
        .collect();
    fits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let entry = fits.first()?.2;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(entry.auth.as_deref()?)
        .ok()?;
    let (user, pass) = String::from_utf8(decoded)
        .ok()?
        .split_once(':')
        .map(|(u, p)| (u.to_string(), p.to_string()))?;
    Some((user, pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries() {
        assert_eq!(registry_of("docker.io/kyuz0/x"), "docker.io");
        assert_eq!(registry_of("index.docker.io/kyuz0/x"), "docker.io");
        assert_eq!(registry_of("kyuz0/x"), "docker.io");
        assert_eq!(registry_of("127.0.0.1:5001/halobox/test"), "127.0.0.1:5001");
        assert_eq!(registry_of("localhost/x"), "localhost");
        assert_eq!(registry_of("GHCR.io/a/b"), "ghcr.io");
        for hub in [
            "docker.io",
            "index.docker.io",
            "registry-1.docker.io",
            "https://index.docker.io/v1/",
            "http://docker.io",
        ] {
            assert_eq!(normalise_host(hub), "docker.io", "{hub}");
        }
        assert_eq!(normalise_host("https://ghcr.io/v2/"), "ghcr.io");
        assert_eq!(normalise_host("127.0.0.1:5001"), "127.0.0.1:5001");
    }

    fn file(entries: &[(&str, &str)]) -> String {
        let auths: serde_json::Map<String, serde_json::Value> = entries
            .iter()
            .map(|(k, up)| {
                let auth = base64::engine::general_purpose::STANDARD.encode(up);
                (k.to_string(), serde_json::json!({ "auth": auth }))
            })
            .collect();
        serde_json::json!({ "auths": auths }).to_string()
    }

    #[test]
    fn auth_file_entries_match_the_exact_host() {
        let text = file(&[("127.0.0.1:5001", "halobox:s3cret")]);
        assert_eq!(
            from_auth_file(&text, "127.0.0.1:5001/halobox/x"),
            Some(("halobox".into(), "s3cret".into()))
        );
        assert_eq!(from_auth_file(&text, "127.0.0.1:5000/halobox/x"), None);
        // Substrings of a host are other hosts.
        for key in ["io", "docker", "ocker.io", "index.docker", "1:5001"] {
            let text = file(&[(key, "u:p")]);
            assert_eq!(from_auth_file(&text, "docker.io/kyuz0/x"), None, "{key}");
            assert_eq!(from_auth_file(&text, "kyuz0/x"), None, "{key}");
            assert_eq!(from_auth_file(&text, "127.0.0.1:5001/x"), None, "{key}");
        }
        for key in [
            "https://index.docker.io/v1/",
            "registry-1.docker.io",
            "docker.io",
        ] {
            let text = file(&[(key, "hub:pw")]);
            assert_eq!(
                from_auth_file(&text, "kyuz0/x"),
                Some(("hub".into(), "pw".into())),
                "{key}"
            );
        }
        // Namespaced keys: the most specific one that holds the repository.
        let text = file(&[
            ("quay.io", "any:1"),
            ("quay.io/org", "org:2"),
            ("quay.io/org/team", "team:3"),
            ("quay.io/other", "other:4"),
        ]);
        let user = |r: &str| from_auth_file(&text, r).map(|(u, _)| u);
        assert_eq!(user("quay.io/org/team/img").as_deref(), Some("team"));
        assert_eq!(user("quay.io/org/img").as_deref(), Some("org"));
        assert_eq!(user("quay.io/organic/img").as_deref(), Some("any"));
        let creds = Credentials {
            registry: "r".into(),
            username: "u".into(),
            password: "s3cret".into(),
            source: "env".into(),
        };
        assert!(!format!("{creds:?}").contains("s3cret"));
    }
}

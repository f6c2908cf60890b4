//! Registry credentials: from `HALOBOX_REGISTRY_USER`/`HALOBOX_REGISTRY_PASSWORD`,
//! else the engines' auth files (`$XDG_RUNTIME_DIR/containers/auth.json`,
//! `~/.docker/config.json`). Credentials are only ever sent to the engine;
//! their [`fmt::Debug`] form is masked so they cannot reach a log.

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

/// The registry host of a repository (`docker.io` when it has none).
pub fn registry_of(repository: &str) -> String {
    match repository.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first.to_string()
        }
        _ => "docker.io".to_string(),
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

/// Finds credentials for `registry`.
pub fn lookup(registry: &str) -> Option<Credentials> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let (Some(username), Some(password)) = (
        env("HALOBOX_REGISTRY_USER"),
        env("HALOBOX_REGISTRY_PASSWORD"),
    ) {
        return Some(Credentials {
            registry: registry.to_string(),
            username,
            password,
            source: "HALOBOX_REGISTRY_USER/HALOBOX_REGISTRY_PASSWORD".into(),
        });
    }
    auth_files().into_iter().find_map(|path| {
        let text = std::fs::read_to_string(&path).ok()?;
        from_auth_file(&text, registry).map(|(username, password)| Credentials {
            registry: registry.to_string(),
            username,
            password,
            source: path.display().to_string(),
        })
    })
}

/// User and password for `registry` in an auth file's text.
pub fn from_auth_file(text: &str, registry: &str) -> Option<(String, String)> {
    let file: AuthFile = serde_json::from_str(text).ok()?;
    let docker_hub = [
        "docker.io",
        "index.docker.io",
        "https://index.docker.io/v1/",
    ];
    let entry = file.auths.iter().find_map(|(k, v)| {
        let host = k
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or(k);
        let same = host == registry
            || (docker_hub.contains(&registry) && docker_hub.iter().any(|h| h.contains(host)));
        same.then_some(v)
    })?;
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
        assert_eq!(registry_of("kyuz0/x"), "docker.io");
        assert_eq!(registry_of("127.0.0.1:5001/halobox/test"), "127.0.0.1:5001");
        assert_eq!(registry_of("localhost/x"), "localhost");
    }

    #[test]
    fn auth_file_entries() {
        // "halobox:s3cret" in base64
        let text = r#"{"auths":{"127.0.0.1:5001":{"auth":"aGFsb2JveDpzM2NyZXQ="}}}"#;
        assert_eq!(
            from_auth_file(text, "127.0.0.1:5001"),
            Some(("halobox".into(), "s3cret".into()))
        );
        assert_eq!(from_auth_file(text, "127.0.0.1:5000"), None);
        let creds = Credentials {
            registry: "r".into(),
            username: "u".into(),
            password: "s3cret".into(),
            source: "env".into(),
        };
        assert!(!format!("{creds:?}").contains("s3cret"));
    }
}

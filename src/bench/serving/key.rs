//! The serving API's key for a benchmark: where it comes from (the
//! engine's variable, else the cluster's key file; never an argument) and
//! the key itself (never printed).

use std::path::{Path, PathBuf};

use super::client::Key;
use crate::serve::{api_key, state};

/// The variables a serve's key may be in, by engine.
const KEY_VARS: [(&str, &str); 2] = [("vllm", "VLLM_API_KEY"), ("llama.cpp", "LLAMA_API_KEY")];

/// Where the key comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFrom {
    /// This environment variable.
    Env(&'static str),
    /// The cluster's key file.
    File(PathBuf),
    /// No key, and why.
    Off(String),
}

impl KeyFrom {
    /// Where the key is (never the key).
    pub fn describe(&self) -> String {
        match self {
            KeyFrom::Env(v) => format!("sent as a bearer token, from {v} in this environment"),
            KeyFrom::File(p) => format!("sent as a bearer token, from {}", p.display()),
            KeyFrom::Off(why) => format!("none ({why})"),
        }
    }
}

/// Chooses the key: none with `--no-api-key` or for a serve recorded
/// without one; else the recorded engine's variable, else either engine's
/// variable that is set, else the cluster's key file when it exists.
pub fn key_from(
    no_key: bool,
    serve: Option<&state::ServeState>,
    cluster: Option<&Path>,
    set: impl Fn(&str) -> bool,
) -> KeyFrom {
    if no_key {
        return KeyFrom::Off("--no-api-key".into());
    }
    if serve.is_some_and(|s| !s.api_key) {
        return KeyFrom::Off("the serve was started with --no-api-key".into());
    }
    let engine = serve.map(|s| s.engine.as_str());
    let var = KEY_VARS
        .iter()
        .filter(|(e, _)| engine.is_none_or(|want| want == *e))
        .find(|(_, v)| set(v));
    if let Some((_, v)) = var {
        return KeyFrom::Env(v);
    }
    match cluster.map(api_key::path) {
        Some(p) if p.exists() => KeyFrom::File(p),
        _ => KeyFrom::Off(
            "VLLM_API_KEY and LLAMA_API_KEY are unset and there is no cluster key file".into(),
        ),
    }
}

/// The key `from` names (never printed).
pub fn load_key(from: &KeyFrom) -> anyhow::Result<Option<Key>> {
    Ok(match from {
        KeyFrom::Off(_) => None,
        KeyFrom::Env(v) => std::env::var(v).ok().map(Key),
        KeyFrom::File(p) => Some(Key(crate::cluster::auth::load_or_create_secret(
            p,
            "the serving API's key for this cluster",
            "the next `halobox serve` makes a new one",
        )?
        .secret()
        .to_string())),
    })
}

/// Whether the variable `v` is set (and not empty) here.
pub fn is_set(v: &str) -> bool {
    std::env::var_os(v).is_some_and(|x| !x.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(engine: &str, key: bool) -> state::ServeState {
        state::ServeState {
            cluster: "/c.toml".into(),
            engine: engine.into(),
            model: "m".into(),
            endpoint: "http://10.0.0.1:8000".into(),
            started: 0,
            pid: 1,
            container: "vllm".into(),
            api_key: key,
            detached: true,
            watcher: None,
            args: None,
            kv_plan: None,
            kv_cache: None,
        }
    }

    #[test]
    fn the_key_follows_the_serve_and_the_environment() {
        let none = |_: &str| false;
        let all = |_: &str| true;
        let llama = |v: &str| v == "LLAMA_API_KEY";
        assert_eq!(
            key_from(true, None, None, all),
            KeyFrom::Off("--no-api-key".into())
        );
        assert!(matches!(
            key_from(false, Some(&serve("vllm", false)), None, all),
            KeyFrom::Off(_)
        ));
        assert_eq!(
            key_from(false, Some(&serve("llama.cpp", true)), None, all),
            KeyFrom::Env("LLAMA_API_KEY")
        );
        assert_eq!(
            key_from(false, None, None, all),
            KeyFrom::Env("VLLM_API_KEY")
        );
        assert_eq!(
            key_from(false, None, None, llama),
            KeyFrom::Env("LLAMA_API_KEY")
        );
        // vLLM's serve does not take llama.cpp's variable.
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("cluster.toml");
        assert!(matches!(
            key_from(false, Some(&serve("vllm", true)), Some(&c), llama),
            KeyFrom::Off(_)
        ));
        std::fs::write(dir.path().join("cluster.api-key"), "x").unwrap();
        assert_eq!(
            key_from(false, None, Some(&c), none),
            KeyFrom::File(dir.path().join("cluster.api-key"))
        );
    }
}

//! A serve as asked for: [`Spec`], what the serve is (recorded, started
//! again from the record), and [`Request`], the spec with what this one
//! start asks besides. The CLI's flags become a [`Request`] in one place
//! (`ServeArgs::request`); the cluster menu and `bench serving
//! --ab-transport` build one without flags.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cluster::config::Engine;

/// What a serve is: the model and the flags that shape it, as a serve
/// records it ([`super::state::ServeState::args`]) and `bench serving
/// --ab-transport` starts it again. No secret (those come from the
/// environment or the key file at every start), nor what one start alone
/// asks ([`Request`]'s other fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The model as given.
    pub model: String,
    /// `--tp`.
    #[serde(default)]
    pub tp: Option<u32>,
    /// `--max-model-len`.
    #[serde(default)]
    pub max_model_len: Option<u32>,
    /// `--max-model-len auto`: the longest context `plan` says fits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub max_model_len_auto: bool,
    /// `--gpu-memory-utilization`, when not the default.
    #[serde(default)]
    pub gpu_memory_utilization: Option<f64>,
    /// `--no-eager`.
    #[serde(default)]
    pub no_eager: bool,
    /// `--host`.
    #[serde(default)]
    pub host: Option<IpAddr>,
    /// `--port`.
    pub port: u16,
    /// `--no-api-key`.
    #[serde(default)]
    pub no_api_key: bool,
    /// `--nccl-debug`.
    #[serde(default)]
    pub nccl_debug: bool,
    /// `--timeout` (seconds).
    pub timeout: u64,
    /// `--no-fit-check`: start even when the fit check refuses.
    #[serde(default)]
    pub no_fit_check: bool,
    /// `--restart on-failure[:MAX]`: a supervisor restarts the serve
    /// after a failure ([`super::restart`]).
    #[serde(default)]
    pub restart: Option<super::restart::Policy>,
    /// `--stall-timeout` (seconds), when not the default.
    #[serde(default)]
    pub stall_timeout: Option<u64>,
    /// The engine's own arguments (after `--`).
    #[serde(default)]
    pub extra: Vec<String>,
}

impl Spec {
    /// `serve …` as it starts this serve again, detached, from the cluster
    /// file `cluster` (the words after `halobox`).
    pub fn argv(&self, cluster: &Path) -> Vec<String> {
        let mut a = vec![
            "serve".to_string(),
            self.model.clone(),
            format!("--cluster={}", cluster.display()),
        ];
        let mut flag = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(format!("--{name}={v}"));
            }
        };
        flag("tp", self.tp.map(|v| v.to_string()));
        flag(
            "max-model-len",
            match (self.max_model_len_auto, self.max_model_len) {
                (true, _) => Some("auto".into()),
                (false, v) => v.map(|v| v.to_string()),
            },
        );
        flag(
            "gpu-memory-utilization",
            self.gpu_memory_utilization.map(|v| v.to_string()),
        );
        flag("host", self.host.map(|v| v.to_string()));
        flag("port", Some(self.port.to_string()));
        flag("timeout", Some(self.timeout.to_string()));
        flag("restart", self.restart.map(|p| p.to_string()));
        flag("stall-timeout", self.stall_timeout.map(|v| v.to_string()));
        for (on, name) in [
            (self.no_eager, "--no-eager"),
            (self.no_api_key, "--no-api-key"),
            (self.nccl_debug, "--nccl-debug"),
            (self.no_fit_check, "--no-fit-check"),
        ] {
            if on {
                a.push(name.into());
            }
        }
        a.push("--detach".into());
        if !self.extra.is_empty() {
            a.push("--".into());
            a.extend(self.extra.iter().cloned());
        }
        a
    }
}

impl Spec {
    /// The share of GPU memory vLLM may take (the safe default unless
    /// given).
    pub fn gpu_memory(&self) -> f64 {
        self.gpu_memory_utilization
            .unwrap_or(super::plan::SAFE_GPU_MEMORY)
    }

    /// `--stall-timeout`, or its default.
    pub fn stall(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.stall_timeout
                .unwrap_or(super::restart::DEFAULT_STALL_S),
        )
    }
}

/// `--max-model-len`: a number of tokens, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxLen {
    /// This many tokens.
    Tokens(u32),
    /// The longest context the chosen split fits ([`super::decide`]).
    Auto,
}

impl std::str::FromStr for MaxLen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(MaxLen::Auto);
        }
        s.parse()
            .map(MaxLen::Tokens)
            .map_err(|_| format!("{s}: a number of tokens, or auto"))
    }
}

/// One start of a serve: the [`Spec`] and what this start alone asks.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// What the serve is.
    pub spec: Spec,
    /// `--engine`: the engine the user expects cluster.toml to name.
    pub engine: Option<Engine>,
    /// `--clear-cache`: erase vLLM's compile cache first.
    pub clear_cache: bool,
    /// `--preflight`: a collective across every node before vLLM starts.
    pub preflight: bool,
    /// `--detach`: leave it running once its API answers.
    pub detach: bool,
    /// `--dry-run`: report the plan, start nothing.
    pub dry_run: bool,
    /// `--sysroot`: the head's facts from a snapshot (dry run only).
    pub sysroot: Option<PathBuf>,
    /// A supervisor's restart: refused while a deliberate stop holds the
    /// serve ([`super::program::HELD_FILE`]).
    pub restarted: bool,
}

impl Request {
    /// The recorded serve `spec`, started again detached, with nothing
    /// one-off.
    pub fn again(spec: Spec) -> Request {
        Request {
            spec,
            engine: None,
            clear_cache: false,
            preflight: false,
            detach: true,
            dry_run: false,
            sysroot: None,
            restarted: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_model_len_auto_is_recorded_and_started_again_as_auto() {
        assert_eq!("auto".parse::<MaxLen>(), Ok(MaxLen::Auto));
        assert_eq!("4096".parse::<MaxLen>(), Ok(MaxLen::Tokens(4096)));
        assert!("lots".parse::<MaxLen>().unwrap_err().contains("or auto"));
        let spec: Spec =
            serde_json::from_str(r#"{"model": "m", "port": 8000, "timeout": 600}"#).unwrap();
        assert!(!spec.max_model_len_auto);
        let auto = Spec {
            max_model_len_auto: true,
            ..spec
        };
        let argv = auto.argv(Path::new("/c.toml"));
        assert!(
            argv.contains(&"--max-model-len=auto".to_string()),
            "{argv:?}"
        );
        let back: Spec = serde_json::from_str(&serde_json::to_string(&auto).unwrap()).unwrap();
        assert!(back.max_model_len_auto);
    }
}

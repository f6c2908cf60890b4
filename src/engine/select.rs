//! The engine a command talks to: the flag, else the config file's, else
//! discovered.

use super::discover::{DiscoveryEnv, candidates};
use super::{Engine, EngineError, bound};

/// Connects to the engine: `flag` (`--engine`), else the config file's
/// `engine`, else discovered (see [`super::discover`]). Each unix socket's
/// `/_ping` has its own bound; the whole search is bounded too (a `tcp://`
/// engine that accepts and never answers).
pub async fn connect(flag: Option<&str>) -> anyhow::Result<Engine> {
    let cfg = crate::config::load(crate::config::path().as_deref())?;
    let explicit = flag.map(str::to_string).or(cfg.engine);
    let env = DiscoveryEnv::from_process(explicit);
    let tried = candidates(&env);
    let tries = u32::try_from(tried.len()).unwrap_or(u32::MAX);
    let limit = bound::PING.saturating_mul(tries.saturating_add(1));
    match tokio::time::timeout(limit, Engine::connect(&env)).await {
        Ok(engine) => Ok(engine?),
        Err(_) => Err(EngineError::Timeout {
            address: tried
                .iter()
                .map(|c| c.address.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            what: "connecting".into(),
            secs: limit.as_secs(),
            idle: false,
        }
        .into()),
    }
}

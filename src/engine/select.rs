//! The engine a command talks to: the flag, else the config file's, else
//! discovered.

use super::Engine;
use super::discover::DiscoveryEnv;

/// Connects to the engine: `flag` (`--engine`), else the config file's
/// `engine`, else discovered (see [`super::discover`]).
pub async fn connect(flag: Option<&str>) -> anyhow::Result<Engine> {
    let cfg = crate::config::load(crate::config::path().as_deref())?;
    let explicit = flag.map(str::to_string).or(cfg.engine);
    let env = DiscoveryEnv::from_process(explicit);
    Ok(Engine::connect(&env).await?)
}

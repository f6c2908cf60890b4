//! Which container a command means: the argument, else the config file's
//! `name`, else `vllm`; checked to be a name engines accept.

use crate::config;
use crate::error::UsageError;

/// The container name: the argument, else the config file's, else `vllm`.
pub fn resolve(arg: Option<&str>) -> anyhow::Result<String> {
    let cfg = config::load(config::path().as_deref())?;
    let name = arg
        .map(str::to_string)
        .or(cfg.name)
        .unwrap_or_else(|| config::DEFAULT_NAME.to_string());
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !valid {
        return Err(UsageError(format!(
            "{name:?} is not a container name: use letters, digits, '_', '.' and '-', starting with a letter or digit"
        ))
        .into());
    }
    Ok(name)
}

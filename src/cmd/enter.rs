//! `halobox enter [NAME] [-- CMD…]`: a shell or a command in the container,
//! through `toolbox`/`distrobox` for those backends and an API exec otherwise.
//! The command's exit code becomes halobox's.

use std::process::ExitCode;

use crate::cli::EnterArgs;
use crate::container::enter;

/// Enters the container.
pub fn run(args: &EnterArgs) -> anyhow::Result<ExitCode> {
    let code = enter::run(
        args.name.as_deref(),
        args.engine.engine.as_deref(),
        &args.command,
    )?;
    Ok(ExitCode::from(code))
}

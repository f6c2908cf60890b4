//! `halobox enter [NAME] [-- CMD…]`: a shell or a command in the container,
//! through `toolbox`/`distrobox` for those backends and an API exec otherwise.
//! The command's exit code becomes halobox's. What an interrupted refresh
//! left under the name is repaired first.

use std::process::ExitCode;

use crate::cli::EnterArgs;
use crate::container::{enter, name};
use crate::engine::{block_on, connect};
use crate::refresh::repair;

/// Enters the container.
pub fn run(args: &EnterArgs) -> anyhow::Result<ExitCode> {
    let name = name::resolve(args.name.as_deref())?;
    let engine_arg = args.engine.engine.as_deref();
    let lines = block_on(async {
        let engine = connect(engine_arg).await?;
        anyhow::Ok(repair::heal_name(&engine, &name).await?)
    })??;
    for line in lines {
        eprintln!("halobox: {line}");
    }
    crate::container::staged::refresh_if_present();
    let code = enter::run(Some(&name), engine_arg, &args.command)?;
    Ok(ExitCode::from(code))
}

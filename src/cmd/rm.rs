//! `halobox rm NAME`: remove a container halobox made (asks unless `--yes`).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::RmArgs;
use crate::container::owner::Owner;
use crate::engine::{block_on, connect};
use crate::error::UsageError;

/// Removes the container.
pub fn run(args: &RmArgs) -> anyhow::Result<ExitCode> {
    block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        let Some(c) = engine.container(&args.name).await? else {
            return Err(UsageError(format!(
                "there is no container {}\n  hint: halobox list shows halobox's containers",
                args.name
            ))
            .into());
        };
        match c.owner {
            Owner::Halobox => {}
            Owner::Inherited => {
                return Err(UsageError(format!(
                    "{} was not made by halobox: it carries halobox's labels only because its image {} does (a commit of a halobox container?); halobox removes only its own containers\n  hint: use {} rm {} yourself if you mean it",
                    c.name, c.image, engine.info.kind, c.name
                ))
                .into());
            }
            Owner::Foreign => {
                return Err(UsageError(format!(
                    "{} was not made by halobox; halobox removes only its own containers\n  hint: use {} rm {} yourself if you mean it",
                    c.name, engine.info.kind, c.name
                ))
                .into());
            }
        }
        if !args.confirm.yes {
            if !std::io::stdin().is_terminal() {
                return Err(UsageError(format!(
                    "not removing {} without confirmation: pass --yes",
                    c.name
                ))
                .into());
            }
            let go = dialoguer::Confirm::new()
                .with_prompt(format!("Remove container {} ({})?", c.name, c.image))
                .default(false)
                .interact()
                .context("reading the answer")?;
            if !go {
                eprintln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
        }
        engine.remove(&c.name).await?;
        println!("removed {}", c.name);
        Ok(ExitCode::SUCCESS)
    })?
}

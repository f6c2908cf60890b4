//! `halobox rm NAME`: remove a container halobox made, and the `NAME-prev`
//! a refresh kept of it (asks unless `--yes`). Takes the refresh lock of
//! the name, so it never races a refresh.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::RmArgs;
use crate::container::owner::Owner;
use crate::engine::{block_on, connect};
use crate::error::UsageError;
use crate::lock;
use crate::refresh::plan::{PREV_SUFFIX, is_managed};

/// Removes the container.
pub fn run(args: &RmArgs) -> anyhow::Result<ExitCode> {
    block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        let base = args.name.strip_suffix(PREV_SUFFIX).unwrap_or(&args.name);
        let _lock = lock::try_acquire(&engine.info.address, base)??;
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
        let kept = engine
            .container(&format!("{}{PREV_SUFFIX}", args.name))
            .await?
            .filter(is_managed);
        let mut what = format!("{} ({})", c.name, c.image);
        if let Some(k) = &kept {
            what.push_str(&format!(
                " and {} ({}, kept by the last refresh)",
                k.name, k.image
            ));
        }
        if !args.confirm.yes {
            if !std::io::stdin().is_terminal() {
                return Err(UsageError(format!(
                    "not removing {what} without confirmation: pass --yes"
                ))
                .into());
            }
            let go = dialoguer::Confirm::new()
                .with_prompt(format!("Remove {what}?"))
                .default(false)
                .interact()
                .context("reading the answer")?;
            if !go {
                eprintln!("nothing changed");
                return Ok(ExitCode::FAILURE);
            }
        }
        for victim in std::iter::once(&c).chain(kept.as_ref()) {
            engine.remove(&victim.id).await?;
            println!("removed {}", victim.name);
        }
        Ok(ExitCode::SUCCESS)
    })?
}

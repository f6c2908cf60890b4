//! `halobox list`: the containers halobox made (after repairing what an
//! interrupted refresh left; not those that carry its labels only because
//! their image does).

use std::process::ExitCode;

use crate::cli::ListArgs;
use crate::container::owner::Owner;
use crate::container::spec::{
    LABEL_BACKEND, LABEL_CHANNEL, LABEL_IMAGE, LABEL_MANAGED, LABEL_MEMLOCK,
};
use crate::engine::{block_on, connect};
use crate::refresh::repair;

/// Lists halobox's containers.
pub fn run(args: &ListArgs) -> anyhow::Result<ExitCode> {
    block_on(async {
        let engine = connect(args.engine.engine.as_deref()).await?;
        let label = format!("{LABEL_MANAGED}=true");
        let mut list = engine.containers_with_label(&label).await?;
        let repairs = repair::heal_all(&engine, &list).await?;
        if !repairs.is_empty() {
            for line in &repairs {
                eprintln!("halobox: {line}");
            }
            list = engine.containers_with_label(&label).await?;
        }
        list.retain(|c| c.owner == Owner::Halobox);
        if args.output.json {
            println!("{}", serde_json::to_string_pretty(&list)?);
            return Ok(ExitCode::SUCCESS);
        }
        if list.is_empty() {
            println!(
                "no halobox containers on {} ({})",
                engine.info.address, engine.info.kind
            );
            println!("create one with: halobox refresh");
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "{:<20} {:<10} {:<9} {:<8} {:<10} IMAGE",
            "NAME", "BACKEND", "STATE", "CHANNEL", "MEMLOCK"
        );
        for c in &list {
            let label = |k: &str| c.labels.get(k).map(String::as_str).unwrap_or("-");
            println!(
                "{:<20} {:<10} {:<9} {:<8} {:<10} {}",
                c.name,
                label(LABEL_BACKEND),
                c.state,
                label(LABEL_CHANNEL),
                label(LABEL_MEMLOCK),
                label(LABEL_IMAGE)
            );
        }
        Ok(ExitCode::SUCCESS)
    })?
}

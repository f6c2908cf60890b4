//! `halobox setup`: the flags become [`flow::Options`], [`flow::run`] does
//! the rest; the questions before a change are asked on the terminal.

use std::process::ExitCode;

use crate::cli::SetupArgs;
use crate::reporter::{Prompt, Terminal};
use crate::setup::flow;

/// Runs `halobox setup`.
pub fn run(args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let o = flow::Options {
        root: args.source.root()?,
        dry_run: args.plan.dry_run(),
        json: args.plan.json(),
        yes: args.confirm.yes,
        only: args.only.clone(),
        skip: args.skip.clone(),
        ip: args.ip,
        user: args.user.clone(),
        usb4_address: args.usb4_address,
        undo: args.undo,
    };
    Ok(match flow::run(&o, &mut Terminal, &mut Prompt)? {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

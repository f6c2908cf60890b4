//! `halobox refresh`: the flags become [`Options`], [`flow::run`] does the
//! rest; the question before a container is replaced is asked here, on
//! the terminal.

use std::process::ExitCode;

use crate::cli::RefreshArgs;
use crate::refresh::flow::{self, Ended, Options};
use crate::refresh::prepare::RefreshRequest;
use crate::reporter::{Prompt, Terminal};

/// Runs `halobox refresh`.
pub fn run(args: &RefreshArgs, color: bool) -> anyhow::Result<ExitCode> {
    let o = Options {
        request: RefreshRequest {
            image: args.image.clone(),
            channel: args.channel.tag().to_string(),
            name: args.name.clone(),
            backend: args.backend,
            memlock: args.memlock,
            memlock_clamp: args.memlock_clamp,
            keep: args.keep,
            rollback: args.rollback,
            adopt: args.adopt,
            settle: args.settle,
            volumes: args.volume.clone(),
            pull: args.pull,
        },
        engine: args.engine.engine.clone(),
        dry_run: args.mode.dry_run(),
        json: args.mode.json(),
        check: args.check,
        wait: args.wait,
        stage: args.stage,
        discard_staged: args.discard_staged,
        yes: args.confirm.yes,
        color,
    };
    Ok(match flow::run(&o, &mut Terminal, &mut Prompt)? {
        Ended::Done => ExitCode::SUCCESS,
        Ended::Declined | Ended::CheckFailed => ExitCode::FAILURE,
    })
}

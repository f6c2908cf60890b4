//! `halobox refresh`: the flags become [`Options`], [`flow::run`] does the
//! rest; the question before a container is replaced is asked here, on
//! the terminal.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cli::RefreshArgs;
use crate::refresh::flow::{self, Ask, Ended, Options};
use crate::refresh::prepare::RefreshRequest;
use crate::reporter::Terminal;

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

/// The question on the terminal (dialoguer), when stdin is one.
struct Prompt;

impl Ask for Prompt {
    fn can_ask(&self) -> bool {
        std::io::stdin().is_terminal()
    }
    fn ask(&mut self, lines: &[String], question: &str) -> anyhow::Result<bool> {
        for line in lines {
            eprintln!("{line}");
        }
        dialoguer::Confirm::new()
            .with_prompt(question)
            .default(false)
            .interact()
            .context("reading the answer")
    }
}

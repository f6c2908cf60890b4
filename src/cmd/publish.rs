//! `halobox publish`: the flags become [`flow::Options`], [`flow::run`]
//! tags, labels and pushes (or promotes a channel).

use std::process::ExitCode;

use crate::cli::PublishArgs;
use crate::image::publish_flow as flow;
use crate::reporter::Terminal;

/// Runs `halobox publish`.
pub fn run(args: &PublishArgs) -> anyhow::Result<ExitCode> {
    let channel = args.channel.map(|c| c.tag().to_string());
    let what = match (args.promote.as_slice(), &args.promote_digest) {
        ([from, to], _) => flow::What::Promote {
            from: from.tag().to_string(),
            to: to.tag().to_string(),
        },
        (_, Some(digest)) => flow::What::PromoteDigest {
            digest: digest.clone(),
            channel: channel.expect("clap requires --channel with --promote-digest"),
            unverified: args.unverified,
        },
        _ => flow::What::Publish {
            reference: args
                .reference
                .clone()
                .expect("clap requires REF without --promote"),
            channel,
        },
    };
    let o = flow::Options {
        what,
        to: args.to.clone(),
        revision: args.revision.clone(),
        source: args.source.clone(),
        version: args.version.clone(),
        engine: args.engine.engine.clone(),
        dry_run: args.mode.dry_run(),
        json: args.mode.json(),
    };
    flow::run(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}

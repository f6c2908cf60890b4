//! `halobox image add-layer`: the flags become [`add_layer::Options`],
//! [`add_layer::run`] does the rest.

use std::process::ExitCode;

use crate::cli::{AddLayerArgs, ImageCommand};
use crate::image::add_layer;
use crate::reporter::Terminal;

/// Runs `halobox image …`.
pub fn run(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ImageCommand::AddLayer(args) => run_add_layer(&args),
    }
}

fn run_add_layer(args: &AddLayerArgs) -> anyhow::Result<ExitCode> {
    let o = add_layer::Options {
        base: args.base.clone(),
        add: args.add.clone(),
        no_dereference: args.no_dereference,
        tag: args.tag.clone(),
        label: args.label.clone(),
        output: args.output.clone(),
        load: args.load,
        engine: args.engine.engine.clone(),
        dry_run: args.mode.dry_run(),
        json: args.mode.json(),
    };
    add_layer::run(&o, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
}

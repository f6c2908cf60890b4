//! The effects of `halobox check`: find the container and its image's
//! labels, run the probe inside the way `halobox enter` gets in, then judge.

use std::time::Duration;

use anyhow::Context as _;

use super::probe::{self, Probe};
use super::{Context, Report, judge, ray_pin, tail};
use crate::container::capture::{ScriptRun, run_script};
use crate::container::enter::missing;
use crate::container::spec::LABEL_BACKEND;
use crate::doctor::Summary;
use crate::engine::Engine;
use crate::engine::discover::unix_path;
use crate::host::HostFacts;
use crate::remote::printable;

/// The longest the probe may take (its Python parts are bounded at 120 s each).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(480);

/// The probe's output when it printed no fact at all: the way in is broken.
fn unusable(name: &str, run: &ScriptRun) -> anyhow::Error {
    let how = match run.code {
        Some(c) => format!("exit {c}"),
        None => format!("no end within {} s", PROBE_TIMEOUT.as_secs()),
    };
    anyhow::anyhow!(
        "the probe did not run in {name} through {} ({how}): {}\n  hint: `halobox enter {name} -- sh -c 'echo ok'` must print ok; /bin/sh must exist in the image",
        run.via,
        tail(&run.log, 4)
    )
}

/// Checks container `name` on `engine`. `host` is this machine's facts; they
/// are used only when the engine runs here (a unix socket).
pub async fn check(
    engine: &Engine,
    name: &str,
    host: Option<&HostFacts>,
) -> anyhow::Result<Report> {
    let container = engine.container(name).await?.ok_or_else(|| missing(name))?;
    let image = engine
        .image(&container.image_id)
        .await?
        .with_context(|| format!("the image of {name} ({}) is gone", container.image_id))?;
    let run = run_script(engine, &container, &probe::script(), PROBE_TIMEOUT).await?;
    let probe: Probe = probe::parse(&run.stdout);
    if probe.version.is_none() {
        return Err(unusable(name, &run));
    }
    let pin = ray_pin();
    let ctx = Context {
        name,
        backend: container.labels.get(LABEL_BACKEND).map(String::as_str),
        memlock_asked: container.memlock,
        labels: &image.labels,
        ray_pin: pin.as_deref(),
        host: host.filter(|_| unix_path(&engine.info.address).is_some()),
    };
    // Labels and probe output come from the image: printable only.
    let checks = judge(&probe, &ctx)
        .into_iter()
        .map(|mut c| {
            c.summary = printable(&c.summary);
            c.fix = c
                .fix
                .map(|f| f.lines().map(printable).collect::<Vec<_>>().join("\n"));
            c
        })
        .collect::<Vec<_>>();
    Ok(Report {
        schema_version: 1,
        container: container.name.clone(),
        backend: ctx.backend.map(str::to_string),
        image: container.image.clone(),
        image_id: container.image_id.clone(),
        via: run.via,
        python: probe.python.as_ref().map(|(path, _)| path.clone()),
        summary: Summary::of(&checks),
        checks,
    })
}

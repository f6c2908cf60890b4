//! `halobox bench serving --ab-transport`: the plan
//! ([`crate::bench::serving::ab`]) from cluster.toml and the recorded
//! serve; the engine asked whether anybody uses it; then per leg `serve
//! stop`, `cluster down`, `cluster up` with the leg's transport (in
//! memory), the serve started again from its record, the benchmark. The
//! steps' own output goes to stderr; the report to stdout and the save
//! folder.

use std::path::Path;
use std::process::ExitCode;

use crate::bench::serving::ab;
use crate::bench::serving::key;
use crate::bench::serving::plan::{self as splan, Endpoint};
use crate::cli::BenchServingArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::fleet::serving_ab;
use crate::reporter::Terminal;
use crate::serve::{interrupt, state};

/// Runs `bench serving --ab-transport`.
pub fn run(args: &BenchServingArgs) -> anyhow::Result<ExitCode> {
    splan::parse_levels(&args.concurrency).map_err(UsageError)?;
    if args.url.is_some() {
        let f = ab::Facts {
            cluster: config::path(args.file.cluster.as_deref()).unwrap_or_default(),
            engine: Default::default(),
            transport: Default::default(),
            serve: None,
            url: true,
        };
        return Err(UsageError(ab::plan(&f).expect_err("--url is refused")).into());
    }
    let (path, cfg) = config::open(args.file.cluster.as_deref())?;
    let serve = state::load(&path);
    let facts = ab::Facts {
        cluster: path.clone(),
        engine: cfg.engine,
        transport: cfg.transport,
        serve: serve.clone(),
        url: args.url.is_some(),
    };
    let p = ab::plan(&facts).map_err(UsageError)?;
    let serve = serve.expect("planned");
    let endpoint = Endpoint::parse(&serve.endpoint).map_err(UsageError)?;
    let from = key::key_from(args.no_api_key, Some(&serve), Some(&path), key::is_set);
    let opts = args.options(endpoint, format!("the serve of {}", path.display()), &from)?;
    if args.mode.dry_run() {
        if args.mode.json() {
            let doc = serde_json::json!({ "ab_transport": p, "bench": opts });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            print!("{}", ab::render(&p, &splan::render(&opts)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let key = key::load_key(&from)?;
    serving_ab::refuse_if_used(&p, &opts.endpoint, key.as_ref())?;
    let dir = args.save_dir()?;
    interrupt::catch()?;
    let spec = serve.args.clone().expect("planned");
    let r = {
        let _quiet = StdoutToStderr::start()?;
        serving_ab::run(
            &p,
            &cfg,
            &path,
            &spec,
            &opts,
            key.as_ref(),
            &dir,
            &mut Terminal,
        )
    };
    ab::save(&dir, &r)?;
    if args.mode.json() {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", ab::render_results(&r));
        println!("saved in {}", dir.display());
    }
    Ok(if serving_ab::passed(&r) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `bench report DIR` of an `--ab-transport` run.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let r = ab::load(dir)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", ab::render_results(&r));
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends this process's stdout to stderr until dropped (the steps print
/// their progress on stdout; the report owns it).
struct StdoutToStderr(std::os::fd::OwnedFd);

impl StdoutToStderr {
    fn start() -> anyhow::Result<StdoutToStderr> {
        use std::io::Write as _;
        std::io::stdout().flush()?;
        let saved = nix::unistd::dup(std::io::stdout())?;
        nix::unistd::dup2_stdout(std::io::stderr())?;
        Ok(StdoutToStderr(saved))
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        let _ = nix::unistd::dup2_stdout(&self.0);
    }
}

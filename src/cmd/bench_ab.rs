//! `halobox bench serving --ab-transport`: the plan
//! ([`crate::bench::serving::ab`]) from cluster.toml and the recorded
//! serve; the engine asked whether anybody uses it; then per leg `serve
//! stop`, `cluster down`, `cluster up` with the leg's transport (in
//! memory), the serve started again from its record, the benchmark. The
//! steps' own output goes to stderr; the report to stdout and the save
//! folder.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser as _;

use super::bench_serving as bs;
use crate::bench::serving::ab::{self, AbPlan, AbResults, Leg, LegResult};
use crate::bench::serving::client::Key;
use crate::bench::serving::plan::{self as splan, Endpoint, ServingOptions};
use crate::cli::{BenchServingArgs, Cli, Command};
use crate::cluster::auth;
use crate::cluster::config::{self, ClusterConfig};
use crate::error::UsageError;
use crate::serve::{control, http, interrupt, state};

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
    let from = bs::key_from(args.no_api_key, Some(&serve), Some(&path), bs::is_set);
    let opts = bs::options(
        args,
        endpoint,
        format!("the serve of {}", path.display()),
        &from,
    )?;
    if args.mode.dry_run() {
        if args.mode.json() {
            let doc = serde_json::json!({ "ab_transport": p, "bench": opts });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            print!("{}", ab::render(&p, &splan::render(&opts)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let key = bs::load_key(&from)?;
    refuse_if_used(&p, &opts.endpoint, key.as_ref())?;
    let dir = bs::save_dir(args)?;
    interrupt::catch()?;
    let r = {
        let _quiet = StdoutToStderr::start()?;
        let run = Run {
            plan: &p,
            cfg: &cfg,
            path: &path,
            opts: &opts,
            key: key.as_ref(),
            dir: &dir,
        };
        run.all()
    };
    ab::save(&dir, &r)?;
    if args.mode.json() {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", ab::render_results(&r));
        println!("saved in {}", dir.display());
    }
    let ok = r.restored
        && r.interrupted.is_none()
        && r.legs.len() == 2
        && r.legs.iter().all(|l| {
            l.error.is_none()
                && l.results
                    .as_ref()
                    .is_some_and(|res| bs::status(res) == ExitCode::SUCCESS)
        });
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `bench report DIR` of an `--ab-transport` run.
pub fn report(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let path = dir.join(ab::AB_FILE);
    let bytes = crate::confine::read_regular(&path, true, 16 << 20)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let r: AbResults = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a halobox --ab-transport record", path.display()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", ab::render_results(&r));
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks the engine twice, a second apart, whether anybody uses it;
/// refuses when somebody does or when it cannot tell.
fn refuse_if_used(p: &AbPlan, e: &Endpoint, key: Option<&Key>) -> anyhow::Result<()> {
    let addr: SocketAddr = e
        .authority
        .parse()
        .map_err(|_| UsageError(format!("{}: not an IP:PORT endpoint", e.url())))?;
    let path = ab::usage_path(p.engine);
    let ask = || -> Result<String, String> {
        let r = http::get(
            addr,
            path,
            key.map(|k| k.0.as_str()),
            Duration::from_secs(5),
        )
        .map_err(|err| format!("{}{path} did not answer: {err}", e.url()))?;
        if r.status != 200 {
            return Err(format!(
                "{}{path} answered HTTP {}: {}",
                e.url(),
                r.status,
                crate::remote::printable(r.body.trim())
            ));
        }
        Ok(r.body)
    };
    let seen = ask().and_then(|a| {
        std::thread::sleep(Duration::from_secs(1));
        let b = ask()?;
        ab::in_use(p.engine, &a, &b)
    });
    match seen {
        Ok(None) => Ok(()),
        Ok(Some(what)) => Err(UsageError(format!(
            "the serve at {} is in use: {what}; --ab-transport would restart it under those requests\n  hint: run it again when they are done (`halobox serve status` shows the serve)",
            e.url()
        ))
        .into()),
        Err(why) => Err(UsageError(format!(
            "cannot tell whether anybody uses the serve at {}: {why}; --ab-transport restarts it only when it knows nobody does\n  hint: `halobox serve status` shows whether it answers; start it again with `halobox serve stop` and `halobox {}`",
            e.url(),
            crate::shell::line(&p.serve_argv)
        ))
        .into()),
    }
}

/// Everything one A/B run needs.
struct Run<'a> {
    plan: &'a AbPlan,
    cfg: &'a ClusterConfig,
    path: &'a Path,
    opts: &'a ServingOptions,
    key: Option<&'a Key>,
    dir: &'a Path,
}

/// The step a leg reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reached {
    Nothing,
    ServeStopped,
    Down,
    Up,
    Serving,
}

impl Run<'_> {
    /// Both legs (the second also when the first failed: it is the
    /// restore), or as far as a Ctrl-C let them go.
    fn all(&self) -> AbResults {
        let mut legs = Vec::new();
        let mut restored = false;
        let mut changed = false;
        let mut interrupted = None;
        for (i, leg) in self.plan.legs.iter().enumerate() {
            let (res, reached) = self.leg(leg);
            legs.push(res);
            changed |= reached > Reached::Nothing;
            if let Some(sig) = interrupt::arrived() {
                restored = !changed || (i == 1 && reached == Reached::Serving);
                interrupted = Some(format!(
                    "{} during leg {}: {}",
                    crate::refresh::signals::name(sig),
                    leg.name,
                    self.state_after(leg, reached)
                ));
                break;
            }
            restored = !changed || (i == 1 && reached == Reached::Serving);
        }
        let ratios = match (
            legs.first().and_then(|l| l.results.as_ref()),
            legs.get(1).and_then(|l| l.results.as_ref()),
        ) {
            (Some(a), Some(b)) => ab::ratios(a, b),
            _ => Vec::new(),
        };
        AbResults {
            kind: "bench serving --ab-transport".into(),
            plan: self.plan.clone(),
            legs,
            ratios,
            changed,
            restored,
            interrupted,
        }
    }

    /// What the cluster is left as after `reached` in `leg`.
    fn state_after(&self, leg: &Leg, reached: Reached) -> String {
        let t = leg.transport;
        match reached {
            Reached::Nothing => "nothing was changed in this leg".into(),
            Reached::ServeStopped => "the serve is stopped, the cluster still runs".into(),
            Reached::Down => "the cluster is down and no serve runs".into(),
            Reached::Up => format!("the cluster is up with transport = \"{t}\"; no serve runs"),
            Reached::Serving => format!(
                "the cluster runs with transport = \"{t}\" and its serve answers at {}",
                self.plan.endpoint
            ),
        }
    }

    /// One leg: stop, down, up with its transport, serve, bench; stops at
    /// the first failure or Ctrl-C.
    fn leg(&self, leg: &Leg) -> (LegResult, Reached) {
        let mut res = LegResult {
            name: leg.name.clone(),
            transport: leg.transport,
            nodes: Vec::new(),
            results: None,
            error: None,
            saved: None,
        };
        let mut reached = Reached::Nothing;
        let fail = |res: &mut LegResult, step: &str, e: String| {
            res.error = Some(format!("{step}: {e}"));
        };
        let cfg = ClusterConfig {
            transport: leg.transport,
            ..self.cfg.clone()
        };
        eprintln!(
            "==> leg {}: transport = \"{}\": serve stop, cluster down, cluster up, serve, bench",
            leg.name, leg.transport
        );
        if interrupt::arrived().is_some() {
            return (res, reached);
        }
        if let Err(e) = control::stop(&cfg, self.path) {
            fail(&mut res, "serve stop", format!("{e:#}"));
            return (res, reached);
        }
        reached = Reached::ServeStopped;
        if interrupt::arrived().is_some() {
            return (res, reached);
        }
        if !super::cluster::down_with(&cfg) {
            fail(
                &mut res,
                "cluster down",
                "a node did not stop (see above)".into(),
            );
            return (res, reached);
        }
        reached = Reached::Down;
        if interrupt::arrived().is_some() {
            return (res, reached);
        }
        match super::cluster::up_with(&cfg, self.path, false, cfg.timeout_s, auth::Mode::Token) {
            Ok(envs) => res.nodes = ab::transports(cfg.engine, &envs),
            Err(e) => {
                fail(&mut res, "cluster up", format!("{e:#}"));
                return (res, reached);
            }
        }
        reached = Reached::Up;
        if interrupt::arrived().is_some() {
            return (res, reached);
        }
        if let Err(e) = self.serve(&cfg) {
            fail(&mut res, "serve", format!("{e:#}"));
            return (res, reached);
        }
        reached = Reached::Serving;
        if interrupt::arrived().is_some() {
            return (res, reached);
        }
        let dir: PathBuf = self.dir.join(&leg.name);
        res.saved = Some(dir.display().to_string());
        match bs::bench(self.opts, self.key, &dir) {
            Ok(r) => res.results = Some(r),
            Err(e) => fail(&mut res, "bench", format!("{e:#}")),
        }
        (res, reached)
    }

    /// The recorded serve, started again (detached) with `cfg`.
    fn serve(&self, cfg: &ClusterConfig) -> anyhow::Result<()> {
        let argv =
            std::iter::once("halobox".to_string()).chain(self.plan.serve_argv.iter().cloned());
        let cli = Cli::try_parse_from(argv)
            .map_err(|e| anyhow::anyhow!("the recorded arguments do not parse: {e}"))?;
        let Some(Command::Serve(a)) = cli.command else {
            anyhow::bail!("the recorded arguments are not a serve");
        };
        let code = super::serve::start(&a, self.path, cfg)?;
        anyhow::ensure!(code == ExitCode::SUCCESS, "serve ended with {code:?}");
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::state::{ServeArgsRecord, ServeState};

    fn parse(argv: &[String]) -> crate::cli::ServeArgs {
        let cli =
            Cli::try_parse_from(std::iter::once("halobox".to_string()).chain(argv.iter().cloned()))
                .unwrap();
        let Some(Command::Serve(a)) = cli.command else {
            panic!("not a serve")
        };
        a
    }

    /// What `serve` records starts the same serve again, detached.
    #[test]
    fn the_recorded_arguments_start_the_same_serve() {
        let a = parse(
            &[
                "serve",
                "/models/m.gguf",
                "--tp",
                "2",
                "--max-model-len",
                "4096",
                "--gpu-memory-utilization",
                "0.8",
                "--no-eager",
                "--host",
                "10.0.0.1",
                "--port",
                "8011",
                "--no-api-key",
                "--nccl-debug",
                "--timeout",
                "60",
                "--clear-cache",
                "--preflight",
                "--",
                "--seed",
                "1",
                "--flag=a b",
            ]
            .map(String::from),
        );
        let rec = super::super::serve::record_args(&a);
        let again = parse(&rec.argv(Path::new("/c/cluster.toml")));
        assert!(again.detach);
        assert!(
            !again.clear_cache && !again.preflight,
            "one-off flags are not repeated"
        );
        assert_eq!(
            again.file.cluster.as_deref(),
            Some(Path::new("/c/cluster.toml"))
        );
        assert_eq!(super::super::serve::record_args(&again), rec);
        let plain = super::super::serve::record_args(&parse(&["serve", "m"].map(String::from)));
        assert_eq!(
            plain.argv(Path::new("/c.toml")),
            [
                "serve",
                "m",
                "--cluster=/c.toml",
                "--port=8000",
                "--timeout=1800",
                "--detach"
            ]
        );
    }

    /// A record of an older halobox (no arguments) still loads.
    #[test]
    fn an_old_record_loads_without_arguments() {
        let old = r#"{"cluster":"/c.toml","engine":"vllm","model":"m","endpoint":"http://10.0.0.1:8000","started":1,"pid":2,"container":"vllm","api_key":true,"detached":true}"#;
        let s: ServeState = serde_json::from_str(old).unwrap();
        assert_eq!(s.args, None::<ServeArgsRecord>);
    }
}

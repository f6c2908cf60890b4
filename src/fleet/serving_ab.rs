//! `bench serving --ab-transport` as a workflow: the engine asked whether
//! anybody uses it ([`refuse_if_used`]), then [`run`] (per leg `serve
//! stop`, `cluster down`, `cluster up` with the leg's transport, the serve
//! started again from its record, the benchmark). [`crate::bench::serving::ab`] plans and
//! judges it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bench::serving::ab::{self, AbPlan, AbResults, Leg, LegResult};
use crate::bench::serving::client::Key;
use crate::bench::serving::plan::{Endpoint, ServingOptions};
use crate::cluster::auth;
use crate::cluster::config::ClusterConfig;
use crate::error::UsageError;
use crate::reporter::Reporter;
use crate::serve::request::{Request, Spec};
use crate::serve::{api_key, control, interrupt};

/// Asks the engine twice, a second apart, whether anybody uses it;
/// refuses when somebody does or when it cannot tell (the key goes only to
/// a listener proven this user's: [`api_key::get`]).
pub fn refuse_if_used(p: &AbPlan, e: &Endpoint, key: Option<&Key>) -> anyhow::Result<()> {
    let addr: SocketAddr = e
        .authority
        .parse()
        .map_err(|_| UsageError(format!("{}: not an IP:PORT endpoint", e.url())))?;
    let path = ab::usage_path(p.engine);
    let ask = || -> Result<String, String> {
        let r = api_key::get(
            addr,
            path,
            key.map(|k| k.0.as_str()),
            Duration::from_secs(5),
        )
        .map_err(|err| format!("{}{path} did not answer: {}", e.url(), err.why))?;
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

/// Runs both legs of `plan` on the cluster `cfg` (read from `path`): per
/// leg `serve stop`, `cluster down`, `cluster up` with the leg's transport
/// (in memory), the recorded serve `spec` started again, the benchmark
/// `opts` saved under `dir`. The steps' words go to `r`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    plan: &AbPlan,
    cfg: &ClusterConfig,
    path: &Path,
    spec: &Spec,
    opts: &ServingOptions,
    key: Option<&Key>,
    dir: &Path,
    r: &mut dyn Reporter,
) -> AbResults {
    Run {
        plan,
        cfg,
        path,
        spec,
        opts,
        key,
        dir,
        r,
    }
    .all()
}

/// Whether both legs ran and passed and the cluster was left as found.
pub fn passed(r: &AbResults) -> bool {
    r.restored
        && r.interrupted.is_none()
        && r.legs.len() == 2
        && r.legs.iter().all(|l| {
            l.error.is_none()
                && l.results
                    .as_ref()
                    .is_some_and(crate::bench::serving::passed)
        })
}

/// Everything one A/B run needs.
struct Run<'a> {
    plan: &'a AbPlan,
    cfg: &'a ClusterConfig,
    path: &'a Path,
    spec: &'a Spec,
    opts: &'a ServingOptions,
    key: Option<&'a Key>,
    dir: &'a Path,
    r: &'a mut dyn Reporter,
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
    fn all(mut self) -> AbResults {
        let mut legs = Vec::new();
        let mut restored = false;
        let mut changed = false;
        let mut interrupted = None;
        let plan = self.plan;
        for (i, leg) in plan.legs.iter().enumerate() {
            let (res, reached) = self.leg(leg);
            legs.push(res);
            changed |= reached > Reached::Nothing;
            if let Some(sig) = interrupt::arrived() {
                restored = !changed || (i == 1 && reached == Reached::Serving);
                interrupted = Some(format!(
                    "{} during leg {}: {}",
                    crate::signals::name(sig),
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
    fn leg(&mut self, leg: &Leg) -> (LegResult, Reached) {
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
        self.r.note(&format!(
            "==> leg {}: transport = \"{}\": serve stop, cluster down, cluster up, serve, bench\n",
            leg.name, leg.transport
        ));
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
        if !crate::fleet::down(&cfg, self.path, self.r) {
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
        match crate::fleet::up(
            &cfg,
            self.path,
            false,
            cfg.timeout_s,
            auth::Mode::Token,
            true,
            self.r,
        ) {
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
        match crate::bench::serving::measure(self.opts, self.key, &dir, self.r) {
            Ok(r) => res.results = Some(r),
            Err(e) => fail(&mut res, "bench", format!("{e:#}")),
        }
        (res, reached)
    }

    /// The recorded serve, started again (detached) with `cfg`. A vLLM
    /// serve recorded without a split takes every node in every leg: the
    /// split `plan` would choose depends on the transport, and the legs
    /// must differ in the transport alone.
    fn serve(&mut self, cfg: &ClusterConfig) -> anyhow::Result<()> {
        let mut spec = self.spec.clone();
        let pp = crate::serve::plan::extra_value(&spec.extra, &["--pipeline-parallel-size", "-pp"]);
        if cfg.engine == crate::cluster::config::Engine::Vllm && spec.tp.is_none() && pp.is_none() {
            spec.tp = u32::try_from(cfg.nodes.len()).ok();
        }
        let req = Request::again(spec);
        crate::fleet::supervisor::serve(&req, self.path, cfg, self.r)
    }
}

//! `serve`'s start: a [`Request`] against the cluster, checked (secrets,
//! preflight, the model's fit, the optional collective), planned and
//! handed to [`launch`]; a dry run reports the plan instead. vLLM runs
//! over Ray as `cluster up` left it; llama.cpp's llama-server on the head
//! over the RPC servers `cluster up` started.

use std::path::Path;
use std::time::Duration;

use super::kv_check::PlanKv;
use super::launch::{self, Start};
use super::plan::{self, ServeRequest};
use super::request::Request;
use super::{api_key, decide, engine, fit, llama, preflight, prepare, program};
use crate::cluster::config::{ClusterConfig, Engine};
use crate::cluster::plan::with_env;
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::model::fit as fit_model;
use crate::model::memory_args::Flags;
use crate::model::placement::Prefer;
use crate::reporter::Reporter;

/// Starts the serve `req` asks for with the cluster `cfg` (read from
/// `path`, perhaps changed in memory: `bench serving --ab-transport`);
/// returns once it is ready (the caller watches it from then on). A dry run
/// reports the plan and starts nothing.
pub fn start(
    req: &Request,
    path: &Path,
    cfg: &ClusterConfig,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    check_engine(req, path, cfg)?;
    let root = match &req.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
    if cfg.engine == Engine::LlamaCpp {
        return run_llama(req, path, cfg, req.spec.model.clone(), r);
    }
    let facts = host::gather(root, GatherOptions::default());
    let mut secrets = vllm_secrets()?;
    let serve = VllmServe::plan(req, path, cfg, facts, &secrets, r)?;
    if req.dry_run {
        return serve.dry_run(r);
    }
    serve.check(r)?;
    secrets[1] = api_key::load(&serve.key_source, secrets[1].as_deref())?;
    launch::serve(&serve.start(&secrets), r)
}

/// Refuses an `--engine` other than the cluster's (`cluster up` started
/// what the cluster's engine needs).
fn check_engine(req: &Request, path: &Path, cfg: &ClusterConfig) -> Result<(), UsageError> {
    match req.engine {
        Some(e) if e != cfg.engine => Err(UsageError(format!(
            "--engine {e}, but {} names engine {} (`cluster up` started what that engine needs)\n  hint: set `engine = \"{e}\"` in {}, then `halobox cluster down` and `halobox cluster up`; or drop --engine",
            path.display(),
            cfg.engine,
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// vLLM's secrets from this environment, in [`plan::SECRETS`]' order; an
/// error for one holding a line break (each goes to vLLM as one line on
/// stdin).
fn vllm_secrets() -> Result<Vec<Option<String>>, UsageError> {
    let secrets: Vec<Option<String>> = plan::SECRETS.iter().map(|n| prepare::secret(n)).collect();
    if let Some(name) = plan::SECRETS.iter().zip(&secrets).find_map(|(n, v)| {
        v.as_ref()
            .is_some_and(|v| v.contains(['\n', '\r']))
            .then_some(n)
    }) {
        return Err(UsageError(format!(
            "{name} holds a line break: it goes to vLLM as one line on stdin\n  hint: export it again without the newline: `read -rs {name}; export {name}`"
        )));
    }
    Ok(secrets)
}

/// A vLLM serve as planned: what a dry run reports, and what a start
/// checks and launches.
struct VllmServe<'a> {
    /// What was asked.
    req: &'a Request,
    /// The cluster file.
    path: &'a Path,
    /// The cluster.
    cfg: &'a ClusterConfig,
    /// This machine's facts.
    facts: host::HostFacts,
    /// This machine is the head.
    is_head: bool,
    /// Where the API listens.
    host: std::net::IpAddr,
    /// Where the API key comes from.
    key_source: api_key::Source,
    /// The plan.
    p: plan::ServePlan,
    /// The engine's argv as the plan shows it.
    argv: Vec<String>,
    /// What the fit check judges.
    fit_req: fit_model::FitRequest,
    /// The model's size, or why it is not known here.
    size: Result<fit_model::ModelSize, String>,
}

impl<'a> VllmServe<'a> {
    /// Chooses the split (said to `r`), then plans the serve with the
    /// secrets that are set.
    fn plan(
        req: &'a Request,
        path: &'a Path,
        cfg: &'a ClusterConfig,
        facts: host::HostFacts,
        secrets: &[Option<String>],
        r: &mut dyn Reporter,
    ) -> anyhow::Result<VllmServe<'a>> {
        let a = &req.spec;
        let host = a.host.unwrap_or(std::net::IpAddr::V4(cfg.head().ip));
        let key_source = api_key::Source::choose(
            a.no_api_key,
            secrets[1].is_some().then_some(plan::SECRETS[1]),
            path,
        );
        let is_head = matches!(
            crate::dataplane::select(&facts, Some(cfg.head().ip)),
            crate::dataplane::Selection::Chosen(_)
        );
        let choice = serve_split(req, cfg, &facts, is_head)?;
        r.out(&format!(
            "{}{}\n",
            if req.dry_run { "# " } else { "" },
            choice.line
        ));
        let planned = ServeRequest {
            hf_token: secrets[0].is_some(),
            api_key: key_source != api_key::Source::Off,
            ..planned_request(req, host, &choice)
        };
        let (p, argv) = prepare::prepare(cfg, &facts, &planned, req.dry_run)?;
        let fit_req = fit::request(&p, &planned).map_err(UsageError)?;
        let size = fit::model_size(
            &a.model,
            &a.extra,
            crate::model::cache::hub_dir_from_env().as_deref(),
        );
        Ok(VllmServe {
            req,
            path,
            cfg,
            facts,
            is_head,
            host,
            key_source,
            p,
            argv,
            fit_req,
            size,
        })
    }

    /// `--dry-run`: the plan, the model's presence, how it would start
    /// and the fit check's verdict; starts nothing.
    fn dry_run(&self, r: &mut dyn Reporter) -> anyhow::Result<()> {
        let (req, a, cfg) = (self.req, &self.req.spec, self.cfg);
        // The nodes are asked only for a live plan (not from a snapshot).
        let model_check = match req.sysroot {
            None => preflight::model_complete(cfg, &a.model, &a.extra, true)?,
            Some(_) => None,
        };
        r.out(&plan::render_serve(&self.p, &self.argv));
        if let Some(summary) = model_check {
            r.out(&format!("# model: {summary}\n"));
        }
        r.out(&format!(
            "# as a Ray driver with {}=token {}=\"{}\" (the token `cluster up` left in the head's container; never printed)\n",
            crate::cluster::auth::MODE_VAR,
            crate::cluster::auth::TOKEN_PATH_VAR,
            crate::cluster::auth::NODE_TOKEN_SH
        ));
        r.out(&format!(
            "# started detached in the head's container by halobox (log: {}), watched until its API answers at {}{}\n",
            program::LOG,
            engine::api_addr(Some(self.host), a.port),
            if req.detach {
                ", then left running (--detach)"
            } else {
                ", then in the foreground until Ctrl-C"
            }
        ));
        r.out(&format!("# {}\n", self.key_source.describe()));
        restart_line(a, r);
        if req.preflight {
            r.out(&format!(
                "# before vLLM starts: `halobox bench collective --sizes {} --op all_reduce` across the {} node(s) (--preflight); a FAIL refuses the serve\n",
                crate::bench::collective::plan::PREFLIGHT_SIZES,
                cfg.nodes.len()
            ));
        }
        self.dry_fit(r)
    }

    /// The dry run's fit check, as comments; an error when the serve
    /// would refuse the plan (unless `--no-fit-check`).
    fn dry_fit(&self, r: &mut dyn Reporter) -> anyhow::Result<()> {
        let size = match &self.size {
            Ok(size) => size,
            Err(e) => {
                r.out(&format!("# fit check: not made: {e}\n"));
                return Ok(());
            }
        };
        let f = fit::check(
            self.cfg,
            self.is_head.then_some(&self.facts),
            size,
            &self.fit_req,
            self.req.sysroot.is_none(),
        );
        for l in fit_model::render(&f).lines() {
            r.out(&format!("# {l}\n"));
        }
        if let Some(w) = fit_model::warning(&f) {
            r.out(&format!("# warning: {w}\n"));
        }
        if let Some(e) = fit_model::refusal(&f, false) {
            if self.req.spec.no_fit_check {
                r.out(&format!(
                    "# {}\n",
                    fit_model::overridden(&e).replace('\n', "\n# ")
                ));
                return Ok(());
            }
            return Err(UsageError(format!("serve would refuse this plan: {e}")).into());
        }
        Ok(())
    }

    /// Before the start: the plan's warnings, the preflight and the fit
    /// check (beside each other), and the collective with `--preflight`.
    fn check(&self, r: &mut dyn Reporter) -> anyhow::Result<()> {
        let (a, cfg) = (&self.req.spec, self.cfg);
        for n in &self.p.notes {
            r.note(&format!("warning: {n}\n"));
        }
        if let Some(w) = api_key::no_key_warning(&self.key_source, self.host) {
            r.note(&format!("{w}\n"));
        }
        // The fit check asks every node's facts over ssh: it runs beside the
        // preflight's own questions to the nodes.
        let (checked, fitted) = std::thread::scope(|sc| {
            let fitted = sc.spawn(|| {
                self.size
                    .as_ref()
                    .map(|size| fit::check(cfg, Some(&self.facts), size, &self.fit_req, true))
            });
            let gpus = self.p.tp * self.p.pp;
            let checked = preflight::check(cfg, &a.model, &a.extra, gpus, Some(self.host), a.port);
            (checked, preflight::joined(fitted))
        });
        checked?;
        match fitted {
            Ok(f) => {
                if let Some(e) = fit_model::refusal(&f, true) {
                    if !a.no_fit_check {
                        return Err(UsageError(e).into());
                    }
                    r.note(&format!("{}\n", fit_model::overridden(&e)));
                }
                if let Some(w) = fit_model::warning(&f) {
                    r.note(&format!("warning: {w}\n"));
                }
            }
            Err(why) => r.note(&format!("warning: the fit check was not made: {why}\n")),
        }
        if self.req.preflight {
            collective_preflight(cfg, r)?;
        }
        Ok(())
    }

    /// What [`launch::serve`] starts, with the secrets (the API key's
    /// second) and the plan's count of the KV cache.
    fn start(&self, secrets: &[Option<String>]) -> Start<'a> {
        let (a, p, cfg) = (&self.req.spec, &self.p, self.cfg);
        let kv_plan = self
            .size
            .as_ref()
            .ok()
            .and_then(|s| s.kv.as_ref())
            .map(|kv| {
                PlanKv::of(
                    kv,
                    &self.fit_req.kv_options(),
                    u64::from(p.pp),
                    self.fit_req.max_model_len,
                )
            });
        Start {
            cfg,
            cluster_path: self.path,
            served_name: preflight::served_name(&a.model, &a.extra),
            model: a.model.clone(),
            command: with_env(&p.env, &p.command),
            secret_names: p.secrets.clone(),
            secrets: secrets.iter().flatten().cloned().collect(),
            clear_cache: p.clear_cache.then(|| plan::COMPILE_CACHE.to_string()),
            check: None,
            api: engine::api_addr(Some(self.host), a.port),
            api_key: secrets[1].clone(),
            api_key_source: self.key_source.clone(),
            workers: usize::try_from(p.tp * p.pp)
                .unwrap_or(usize::MAX)
                .min(cfg.nodes.len()),
            nccl_debug: a.nccl_debug,
            detach: self.req.detach,
            timeout: Duration::from_secs(a.timeout),
            engine: Engine::Vllm,
            args: Some(a.clone()),
            restart: self.req.restarted,
            kv_plan,
        }
    }
}

/// The split and context `serve` starts with: `plan`'s choice unless
/// `--tp` or `--pipeline-parallel-size` was given ([`decide::for_serve`]).
fn serve_split(
    req: &Request,
    cfg: &ClusterConfig,
    facts: &host::HostFacts,
    is_head: bool,
) -> Result<decide::ServeChoice, UsageError> {
    let a = &req.spec;
    let user_split = a.tp.is_some()
        || plan::extra_value(&a.extra, &["--pipeline-parallel-size", "-pp"]).is_some();
    let query = decide::Query {
        model: a.model.clone(),
        extra: a.extra.clone(),
        flags: Flags {
            max_model_len: a.max_model_len.map(u64::from),
            tp: a.tp,
            gpu_memory_utilization: a.gpu_memory_utilization,
        },
        link: None,
        bandwidth_gbs: None,
        concurrency: 1,
        prefer: Prefer::Fastest,
    };
    decide::for_serve(
        cfg,
        is_head.then_some(facts),
        req.sysroot.is_none(),
        &query,
        user_split,
        a.max_model_len_auto,
    )
}

/// `vllm serve`'s request from the spec and the split chosen (no secrets).
fn planned_request(
    req: &Request,
    host: std::net::IpAddr,
    choice: &decide::ServeChoice,
) -> ServeRequest {
    let a = &req.spec;
    let mut extra = a.extra.clone();
    if let Some(pp) = choice.pp {
        extra.extend(["--pipeline-parallel-size".to_string(), pp.to_string()]);
    }
    ServeRequest {
        model: a.model.clone(),
        tp: choice.tp,
        max_model_len: choice.max_model_len.or(a.max_model_len),
        gpu_memory_utilization: a.gpu_memory(),
        eager: !a.no_eager,
        host: Some(host),
        port: a.port,
        nccl_debug: a.nccl_debug,
        clear_cache: req.clear_cache,
        extra,
        hf_token: false,
        api_key: false,
    }
}

/// `--dry-run`'s line about `--restart`.
fn restart_line(a: &super::request::Spec, r: &mut dyn Reporter) {
    match a.restart {
        Some(p) => r.out(&format!(
            "# {} (a detached supervisor on the head with --detach, else this process; its events: `halobox serve status --json`)\n",
            p.describe(a.stall().as_secs())
        )),
        None => r.out("# no --restart: a failure stops the serve until someone starts it again\n"),
    }
}

/// `--preflight`: the all-reduce vLLM's workers will run, across every
/// node, before vLLM starts; its failures refuse the serve.
fn collective_preflight(cfg: &ClusterConfig, r: &mut dyn Reporter) -> anyhow::Result<()> {
    use crate::bench::collective::{self, plan::Options, report};
    r.note(&format!(
        "==> preflight: bench collective across the {} node(s)\n",
        cfg.nodes.len()
    ));
    let Some((res, dir)) = collective::run(cfg, &Options::preflight(), None, false, false, r)?
    else {
        return Ok(());
    };
    r.note(&report::human(&res));
    if res.status == "ok" {
        return Ok(());
    }
    Err(UsageError(format!(
        "the collective preflight failed (saved in {}): {}
  hint: fix that, check with `halobox bench collective`, then serve again",
        dir.display(),
        res.failures.join("; ")
    ))
    .into())
}

/// The llama.cpp secret: the API key, from this environment to
/// llama-server's on stdin.
const LLAMA_KEY: &str = "LLAMA_API_KEY";

/// `serve` with engine `llama.cpp`: llama-server on the head over the RPC
/// servers `cluster up` started. It reads only the head's addresses and
/// memory, and checks the model in the exec that starts llama-server: its
/// start is what a user waits for.
fn run_llama(
    req: &Request,
    path: &Path,
    cfg: &ClusterConfig,
    model: String,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let a = &req.spec;
    let vllm_only = [
        (a.tp.is_some(), "--tp"),
        (req.clear_cache, "--clear-cache"),
        (a.nccl_debug, "--nccl-debug"),
        (a.no_eager, "--no-eager"),
        (req.preflight, "--preflight"),
        (a.max_model_len_auto, "--max-model-len auto"),
        (
            a.gpu_memory_utilization.is_some(),
            "--gpu-memory-utilization",
        ),
    ];
    if let Some((_, flag)) = vllm_only.iter().find(|(set, _)| *set) {
        return Err(UsageError(format!(
            "{flag} is vLLM's: engine llama.cpp puts every layer on the nodes' RPC servers, split by their memory\n  hint: drop {flag}"
        ))
        .into());
    }
    let key = prepare::secret(LLAMA_KEY);
    if key.as_ref().is_some_and(|v| v.contains(['\n', '\r'])) {
        return Err(UsageError(format!(
            "{LLAMA_KEY} holds a line break: it goes to llama-server as one line on stdin\n  hint: export it again without the newline: `read -rs {LLAMA_KEY}; export {LLAMA_KEY}`"
        ))
        .into());
    }
    let host = a.host.unwrap_or(std::net::IpAddr::V4(cfg.head().ip));
    let key_source =
        api_key::Source::choose(a.no_api_key, key.is_some().then_some(LLAMA_KEY), path);
    let lreq = llama::LlamaRequest {
        model: model.clone(),
        host: Some(host),
        port: a.port,
        ctx: a.max_model_len,
        extra: a.extra.clone(),
    };
    let secret_names: Vec<String> = (key_source != api_key::Source::Off)
        .then(|| LLAMA_KEY.to_string())
        .into_iter()
        .collect();
    let head = engine::Head::of(cfg);
    let check = llama::start_check(&cfg.llama_server, &model);
    if req.dry_run {
        let argv = llama::command(cfg, &lreq, &[]).map_err(UsageError)?;
        let start = head.start_argv(&argv, &secret_names, None, Some(&check));
        r.out(&llama::render(cfg, &argv, &start));
        for n in &secret_names {
            r.out(&format!("{n}=******** (passed on stdin)\n"));
        }
        r.out(&format!("# {}\n", key_source.describe()));
        restart_line(a, r);
        return Ok(());
    }
    llama::command(cfg, &lreq, &[]).map_err(UsageError)?;
    let (network, kernel) = host::gather_addresses_and_memory(HostRoot::live());
    if network.interface_with_ip(head.ip).is_none() {
        return Err(UsageError(format!(
            "this machine does not hold the head's address {} ({}): `halobox serve` runs on the head, where llama-server runs\n  hint: ssh {} halobox serve {model} …",
            head.ip,
            head.label,
            cfg.head().ssh
        ))
        .into());
    }
    if let Some(w) = api_key::no_key_warning(&key_source, host) {
        r.note(&format!("{w}\n"));
    }
    preflight::port_free(Some(host), a.port, cfg.engine.title())?;
    let mem = llama::check_workers(cfg)?;
    let head_mem = kernel.mem_total_kib.map(|k| k * 1024);
    let argv = llama::command(cfg, &lreq, &llama::split(&mem, head_mem)).map_err(UsageError)?;
    let key = api_key::load(&key_source, key.as_deref())?;
    let kv_plan = llama_kv_plan(&model, a);
    let start = Start {
        cfg,
        cluster_path: path,
        served_name: model.clone(),
        model,
        command: argv,
        secret_names,
        secrets: key.iter().cloned().collect(),
        clear_cache: None,
        check: Some(check),
        api: engine::api_addr(Some(host), a.port),
        api_key: key,
        api_key_source: key_source,
        workers: 0,
        nccl_debug: false,
        detach: req.detach,
        timeout: Duration::from_secs(a.timeout),
        engine: Engine::LlamaCpp,
        args: Some(a.clone()),
        restart: req.restarted,
        kv_plan,
    };
    match launch::serve(&start, r) {
        Ok(()) => Ok(()),
        Err(e) => match e.downcast_ref::<engine::Refused>() {
            Some(r) => Err(UsageError(llama::refusal(cfg, &start.model, &r.0)).into()),
            None => Err(e),
        },
    }
}

/// Plan's count of a llama.cpp serve's KV cache: the GGUF's layers under
/// llama.cpp's rules, f16, for `-c` (else the model's own context).
fn llama_kv_plan(model: &str, a: &super::request::Spec) -> Option<PlanKv> {
    let size = fit::model_size(
        model,
        &[],
        crate::model::cache::hub_dir_from_env().as_deref(),
    );
    let kv = size.ok()?.kv?;
    Some(PlanKv::of(
        &kv,
        &crate::model::kv::KvOptions::default(),
        1,
        a.max_model_len.map(u64::from),
    ))
}

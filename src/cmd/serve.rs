//! `halobox serve MODEL …`: `vllm serve` in the head's container with
//! `--distributed-executor-backend ray` and the head's node env, watched
//! until its API answers (then in the foreground until Ctrl-C, or left
//! running with `--detach`); `serve status|logs|stop`. Runs on the head (its
//! env comes from its own facts; `--dry-run` prints the plan from
//! anywhere). The API binds the head's data-plane address unless `--host`
//! says otherwise, and needs a key unless `--no-api-key`
//! ([`crate::serve::api_key`]). `HF_TOKEN` and the key are handed over on
//! stdin, never in an argument.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{ServeAction, ServeArgs};
use crate::cluster::config::{self, ClusterConfig, Engine};
use crate::cluster::plan::{self, ServeRequest};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::model::fit as fit_model;
use crate::serve::supervise::{self, Ended, Start};
use crate::serve::{api_key, control, engine, fit, llama, preflight, prepare, program, state};

/// Runs `serve`.
pub fn run(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(action) = &a.action {
        return act(action);
    }
    if a.source.sysroot.is_some() && !a.plan.dry_run {
        return Err(UsageError(
            "--sysroot reads a snapshot: vLLM cannot be started from it; add --dry-run".into(),
        )
        .into());
    }
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    start(a, &path, &cfg)
}

/// What `serve` records to start the serve `a` asks for again.
pub fn record_args(a: &ServeArgs) -> state::ServeArgsRecord {
    state::ServeArgsRecord {
        model: a.model.clone().unwrap_or_default(),
        tp: a.tp,
        max_model_len: a.max_model_len,
        gpu_memory_utilization: (a.gpu_memory_utilization != plan::SAFE_GPU_MEMORY)
            .then_some(a.gpu_memory_utilization),
        no_eager: a.no_eager,
        host: a.host,
        port: a.port,
        no_api_key: a.no_api_key,
        nccl_debug: a.nccl_debug,
        timeout: a.timeout,
        extra: a.extra.clone(),
    }
}

/// Starts the serve `a` asks for with the cluster `cfg` (read from
/// `path`, perhaps changed in memory: `bench serving --ab-transport`).
pub fn start(a: &ServeArgs, path: &Path, cfg: &ClusterConfig) -> anyhow::Result<ExitCode> {
    let model = a
        .model
        .clone()
        .expect("clap requires MODEL without a subcommand");
    if let Some(e) = a.engine
        && e != cfg.engine
    {
        return Err(UsageError(format!(
            "--engine {e}, but {} names engine {} (`cluster up` started what that engine needs)\n  hint: set `engine = \"{e}\"` in {}, then `halobox cluster down` and `halobox cluster up`; or drop --engine",
            path.display(),
            cfg.engine,
            path.display()
        ))
        .into());
    }
    let root = match &a.source.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
    if cfg.engine == Engine::LlamaCpp {
        return run_llama(a, path, cfg, model);
    }
    let facts = host::gather(root, GatherOptions::default());
    let mut secrets: Vec<Option<String>> =
        plan::SECRETS.iter().map(|n| prepare::secret(n)).collect();
    if let Some(name) = plan::SECRETS.iter().zip(&secrets).find_map(|(n, v)| {
        v.as_ref()
            .is_some_and(|v| v.contains(['\n', '\r']))
            .then_some(n)
    }) {
        return Err(UsageError(format!(
            "{name} holds a line break: it goes to vLLM as one line on stdin\n  hint: export it again without the newline: `read -rs {name}; export {name}`"
        ))
        .into());
    }
    let host = a.host.unwrap_or(std::net::IpAddr::V4(cfg.head().ip));
    let key_source = api_key::Source::choose(
        a.no_api_key,
        secrets[1].is_some().then_some(plan::SECRETS[1]),
        path,
    );
    let req = ServeRequest {
        model: model.clone(),
        tp: a.tp,
        max_model_len: a.max_model_len,
        gpu_memory_utilization: a.gpu_memory_utilization,
        eager: !a.no_eager,
        host: Some(host),
        port: a.port,
        nccl_debug: a.nccl_debug,
        clear_cache: a.clear_cache,
        extra: a.extra.clone(),
        hf_token: secrets[0].is_some(),
        api_key: key_source != api_key::Source::Off,
    };
    let (p, argv) = prepare::prepare(cfg, &facts, &req, a.plan.dry_run)?;
    let is_head = matches!(
        crate::dataplane::select(&facts, Some(cfg.head().ip)),
        crate::dataplane::Selection::Chosen(_)
    );
    let fit_req = fit::request(&p, &req).map_err(UsageError)?;
    let size = fit::model_size(
        &model,
        &a.extra,
        crate::model::cache::hub_dir_from_env().as_deref(),
    );
    if a.plan.dry_run {
        // The nodes are asked only for a live plan (not from a snapshot).
        let model_check = match a.source.sysroot {
            None => preflight::model_complete(cfg, &model, &a.extra, true)?,
            Some(_) => None,
        };
        print!("{}", plan::render_serve(&p, &argv));
        if let Some(summary) = model_check {
            println!("# model: {summary}");
        }
        println!(
            "# as a Ray driver with {}=token {}=\"{}\" (the token `cluster up` left in the head's container; never printed)",
            crate::cluster::auth::MODE_VAR,
            crate::cluster::auth::TOKEN_PATH_VAR,
            crate::cluster::auth::NODE_TOKEN_SH
        );
        println!(
            "# started detached in the head's container by halobox (log: {}), watched until its API answers at {}{}",
            program::LOG,
            engine::api_addr(Some(host), a.port),
            if a.detach {
                ", then left running (--detach)"
            } else {
                ", then in the foreground until Ctrl-C"
            }
        );
        println!("# {}", key_source.describe());
        if a.preflight {
            println!(
                "# before vLLM starts: `halobox bench collective --sizes {} --op all_reduce` across the {} node(s) (--preflight); a FAIL refuses the serve",
                crate::bench::collective::plan::PREFLIGHT_SIZES,
                cfg.nodes.len()
            );
        }
        let Ok(size) = &size else {
            println!("# fit check: not made: {}", size.unwrap_err());
            return Ok(ExitCode::SUCCESS);
        };
        let f = fit::check(
            cfg,
            is_head.then_some(&facts),
            size,
            &fit_req,
            a.source.sysroot.is_none(),
        );
        for l in fit_model::render(&f).lines() {
            println!("# {l}");
        }
        if let Some(w) = fit_model::warning(&f) {
            println!("# warning: {w}");
        }
        if let Some(e) = fit_model::refusal(&f, false) {
            if a.no_fit_check {
                println!("# {}", fit_model::overridden(&e).replace('\n', "\n# "));
                return Ok(ExitCode::SUCCESS);
            }
            return Err(UsageError(format!("serve would refuse this plan: {e}")).into());
        }
        return Ok(ExitCode::SUCCESS);
    }
    for n in &p.notes {
        eprintln!("warning: {n}");
    }
    if let Some(w) = api_key::no_key_warning(&key_source, host) {
        eprintln!("{w}");
    }
    // The fit check asks every node's facts over ssh: it runs beside the
    // preflight's own questions to the nodes.
    let (checked, fitted) = std::thread::scope(|sc| {
        let fitted = sc.spawn(|| {
            size.as_ref()
                .map(|size| fit::check(cfg, Some(&facts), size, &fit_req, true))
        });
        let checked = preflight::check(cfg, &model, &a.extra, p.tp * p.pp, Some(host), a.port);
        (checked, preflight::joined(fitted))
    });
    checked?;
    match fitted {
        Ok(f) => {
            if let Some(e) = fit_model::refusal(&f, true) {
                if !a.no_fit_check {
                    return Err(UsageError(e).into());
                }
                eprintln!("{}", fit_model::overridden(&e));
            }
            if let Some(w) = fit_model::warning(&f) {
                eprintln!("warning: {w}");
            }
        }
        Err(why) => eprintln!("warning: the fit check was not made: {why}"),
    }
    if a.preflight {
        collective_preflight(cfg)?;
    }
    secrets[1] = api_key::load(&key_source, secrets[1].as_deref())?;
    let start = Start {
        cfg,
        cluster_path: path,
        served_name: preflight::served_name(&model, &a.extra),
        model,
        command: plan::with_env(&p.env, &p.command),
        secret_names: p.secrets.clone(),
        secrets: secrets.iter().flatten().cloned().collect(),
        clear_cache: p.clear_cache.then(|| plan::COMPILE_CACHE.to_string()),
        check: None,
        api: engine::api_addr(Some(host), a.port),
        api_key: secrets[1].clone(),
        api_key_source: key_source,
        workers: usize::try_from(p.tp * p.pp)
            .unwrap_or(usize::MAX)
            .min(cfg.nodes.len()),
        nccl_debug: a.nccl_debug,
        detach: a.detach,
        timeout: Duration::from_secs(a.timeout),
        engine: Engine::Vllm,
        args: Some(record_args(a)),
    };
    match supervise::serve(&start)? {
        Ended::Detached => Ok(ExitCode::SUCCESS),
        Ended::Stopped(_) => Ok(ExitCode::SUCCESS),
    }
}

/// `--preflight`: the all-reduce vLLM's workers will run, across every
/// node, before vLLM starts; its failures refuse the serve.
fn collective_preflight(cfg: &ClusterConfig) -> anyhow::Result<()> {
    use crate::bench::collective::{plan::Options, report};
    eprintln!(
        "==> preflight: bench collective across the {} node(s)",
        cfg.nodes.len()
    );
    let Some((res, dir)) =
        super::bench_collective::collective(cfg, &Options::preflight(), None, false, false)?
    else {
        return Ok(());
    };
    eprint!("{}", report::human(&res));
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
    a: &ServeArgs,
    path: &std::path::Path,
    cfg: &ClusterConfig,
    model: String,
) -> anyhow::Result<ExitCode> {
    let vllm_only = [
        (a.tp.is_some(), "--tp"),
        (a.clear_cache, "--clear-cache"),
        (a.nccl_debug, "--nccl-debug"),
        (a.no_eager, "--no-eager"),
        (a.preflight, "--preflight"),
        (
            a.gpu_memory_utilization != plan::SAFE_GPU_MEMORY,
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
    let req = llama::LlamaRequest {
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
    if a.plan.dry_run {
        let argv = llama::command(cfg, &req, &[]).map_err(UsageError)?;
        let start = head.start_argv(&argv, &secret_names, None, Some(&check));
        print!("{}", llama::render(cfg, &argv, &start));
        for n in &secret_names {
            println!("{n}=******** (passed on stdin)");
        }
        println!("# {}", key_source.describe());
        return Ok(ExitCode::SUCCESS);
    }
    llama::command(cfg, &req, &[]).map_err(UsageError)?;
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
        eprintln!("{w}");
    }
    preflight::port_free(Some(host), a.port)?;
    let mem = llama::check_workers(cfg)?;
    let head_mem = kernel.mem_total_kib.map(|k| k * 1024);
    let argv = llama::command(cfg, &req, &llama::split(&mem, head_mem)).map_err(UsageError)?;
    let key = api_key::load(&key_source, key.as_deref())?;
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
        detach: a.detach,
        timeout: Duration::from_secs(a.timeout),
        engine: Engine::LlamaCpp,
        args: Some(record_args(a)),
    };
    match supervise::serve(&start) {
        Ok(Ended::Detached | Ended::Stopped(_)) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.downcast_ref::<engine::Refused>() {
            Some(r) => Err(UsageError(llama::refusal(cfg, &start.model, &r.0)).into()),
            None => Err(e),
        },
    }
}

/// `serve status|logs|stop`.
fn act(action: &ServeAction) -> anyhow::Result<ExitCode> {
    match action {
        ServeAction::Status { file, output } => {
            let (path, cfg) = config::open(file.cluster.as_deref())?;
            let s = control::status(&cfg, &path)?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                print!("{}", control::render(&s));
            }
            Ok(if s.state == "serving" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
        ServeAction::Logs {
            follow,
            lines,
            file,
        } => {
            let (_, cfg) = config::open(file.cluster.as_deref())?;
            Ok(ExitCode::from(control::logs(&cfg, *lines, *follow)?))
        }
        ServeAction::Stop { file } => {
            let (path, cfg) = config::open(file.cluster.as_deref())?;
            let said = control::stop(&cfg, &path)?;
            println!("{}", stop_words(&said, cfg.engine));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The stop program's word as a sentence.
fn stop_words(said: &str, engine: Engine) -> String {
    if engine == Engine::LlamaCpp {
        return match said.split_once(' ') {
            Some(("stopped", pid)) => format!(
                "stopped llama.cpp's llama-server (pid {pid} in the head's container); the RPC servers on the other nodes keep running for the next serve (`halobox cluster down` stops them)"
            ),
            Some(("gone", pid)) => {
                format!("llama-server (pid {pid}) had already ended; its leftovers are removed")
            }
            _ => "no llama-server started by halobox serve runs in the head's container".into(),
        };
    }
    match said.split_once(' ') {
        Some(("stopped", pid)) => format!(
            "stopped vLLM (pid {pid} in the head's container); its Ray workers on the other nodes end with it"
        ),
        Some(("gone", pid)) => {
            format!("vLLM (pid {pid}) had already ended; its leftovers are removed")
        }
        _ => "no vLLM started by halobox serve runs in the head's container".into(),
    }
}

//! `halobox serve MODEL …`: `vllm serve` in the head's container with
//! `--distributed-executor-backend ray` and the head's node env, watched
//! until its API answers (then in the foreground until Ctrl-C, or left
//! running with `--detach`); `serve status|logs|stop`. Runs on the head (its
//! env comes from its own facts; `--dry-run` prints the plan from
//! anywhere). The API binds the head's data-plane address unless `--host`
//! says otherwise, and needs a key unless `--no-api-key`
//! ([`crate::serve::api_key`]). `HF_TOKEN` and the key are handed over on
//! stdin, never in an argument.

use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{ServeAction, ServeArgs};
use crate::cluster::config;
use crate::cluster::plan::{self, ServeRequest};
use crate::error::UsageError;
use crate::host::{self, GatherOptions, HostRoot};
use crate::model::fit as fit_model;
use crate::serve::supervise::{self, Ended, Start};
use crate::serve::{api_key, control, engine, fit, preflight, prepare, program};

/// Runs `serve`.
pub fn run(a: &ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(action) = &a.action {
        return act(action);
    }
    let model = a
        .model
        .clone()
        .expect("clap requires MODEL without a subcommand");
    if a.source.sysroot.is_some() && !a.plan.dry_run {
        return Err(UsageError(
            "--sysroot reads a snapshot: vLLM cannot be started from it; add --dry-run".into(),
        )
        .into());
    }
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    let root = match &a.source.sysroot {
        Some(dir) => HostRoot::sysroot(dir)?,
        None => HostRoot::live(),
    };
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
    let key_source = api_key::Source::choose(a.no_api_key, secrets[1].is_some(), &path);
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
    let (p, argv) = prepare::prepare(&cfg, &facts, &req, a.plan.dry_run)?;
    let is_head = matches!(
        crate::dataplane::select(&facts, Some(cfg.head().ip)),
        crate::dataplane::Selection::Chosen(_)
    );
    let fit_req = fit::request(&p, &req);
    let size = fit::model_size(
        &model,
        &a.extra,
        crate::model::cache::hub_dir_from_env().as_deref(),
    );
    if a.plan.dry_run {
        // The nodes are asked only for a live plan (not from a snapshot).
        let model_check = match a.source.sysroot {
            None => preflight::model_complete(&cfg, &model)?,
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
        let Ok(size) = &size else {
            println!("# fit check: not made: {}", size.unwrap_err());
            return Ok(ExitCode::SUCCESS);
        };
        let f = fit::check(
            &cfg,
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
            return Err(UsageError(format!("serve would refuse this plan: {e}")).into());
        }
        return Ok(ExitCode::SUCCESS);
    }
    for n in &p.notes {
        eprintln!("warning: {n}");
    }
    if key_source == api_key::Source::Off {
        if let Some(w) = api_key::no_key_warning(host) {
            eprintln!("{w}");
        }
    }
    preflight::check(&cfg, &model, p.tp * p.pp, Some(host), a.port)?;
    match &size {
        Ok(size) => {
            let f = fit::check(&cfg, Some(&facts), size, &fit_req, true);
            if let Some(e) = fit_model::refusal(&f, true) {
                return Err(UsageError(e).into());
            }
            if let Some(w) = fit_model::warning(&f) {
                eprintln!("warning: {w}");
            }
        }
        Err(why) => eprintln!("warning: the fit check was not made: {why}"),
    }
    secrets[1] = api_key::load(&key_source, secrets[1].as_deref())?;
    let start = Start {
        cfg: &cfg,
        cluster_path: &path,
        served_name: preflight::served_name(&model, &a.extra),
        model,
        command: plan::with_env(&p.env, &p.command),
        secret_names: p.secrets.clone(),
        secrets: secrets.iter().flatten().cloned().collect(),
        clear_cache: p.clear_cache.then(|| plan::COMPILE_CACHE.to_string()),
        api: engine::api_addr(Some(host), a.port),
        api_key: secrets[1].clone(),
        api_key_source: key_source,
        nccl_debug: a.nccl_debug,
        detach: a.detach,
        timeout: Duration::from_secs(a.timeout),
    };
    match supervise::serve(&start)? {
        Ended::Detached => Ok(ExitCode::SUCCESS),
        Ended::Stopped(_) => Ok(ExitCode::SUCCESS),
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
            println!("{}", stop_words(&said));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The stop program's word as a sentence.
fn stop_words(said: &str) -> String {
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

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

use crate::cli::{ServeAction, ServeArgs};
use crate::cluster::config::{self, Engine};
use crate::error::UsageError;
use crate::reporter::Terminal;
use crate::serve::{control, golden};

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
    let req = if a.recorded {
        let Some(spec) = crate::fleet::boot::run::kept_serve(&path) else {
            return Err(UsageError(format!(
                "no serve is kept for boot for {}\n  hint: start one with `halobox serve MODEL --restart on-failure --detach`, then run `halobox cluster enable`",
                path.display()
            ))
            .into());
        };
        crate::serve::request::Request {
            detach: false,
            dry_run: a.plan.dry_run,
            ..crate::serve::request::Request::again(spec)
        }
    } else {
        a.request()
    };
    crate::fleet::supervisor::serve(&req, &path, &cfg, &mut Terminal)?;
    Ok(ExitCode::SUCCESS)
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
        ServeAction::Supervise { file } => {
            let (path, cfg) = config::open(file.cluster.as_deref())?;
            crate::fleet::supervisor::supervise_detached(&path, &cfg, &mut Terminal)?;
            Ok(ExitCode::SUCCESS)
        }
        ServeAction::Golden {
            record,
            file,
            output,
        } => {
            let (path, _) = config::open(file.cluster.as_deref())?;
            let done = crate::serve::golden::run(&path, *record)?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&done)?);
            }
            Ok(match done {
                golden::Outcome::Recorded(s) => {
                    if !output.json {
                        print!(
                            "recorded the serve's completions as its golden set\n{}",
                            golden::summary(&s)
                        );
                    }
                    ExitCode::SUCCESS
                }
                golden::Outcome::Checked(c) => {
                    if !output.json {
                        print!("{}", golden::render(&c));
                    }
                    ExitCode::from(u8::from(!c.differences.is_empty()))
                }
            })
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

//! `halobox cluster init|up|join|status|down|enable|disable|refresh|install|doctor|bench|metrics|top|tui`.

pub mod bench;
pub mod boot;
pub mod doctor;
pub mod fleet;
pub mod init;
pub mod join;
pub mod lifecycle;
pub mod menu;
pub mod metrics;
pub mod status;
pub mod top;

use std::io::IsTerminal;
use std::process::ExitCode;

use crate::cli::{
    Channel, ClusterBenchArgs, ClusterCommand, ClusterDoctorArgs, ClusterDownArgs, ClusterFileArgs,
    ClusterInstallArgs, ClusterRefreshArgs, ClusterStatusArgs, ClusterUpArgs, DryRunArgs,
    OutputArgs, PlanOutputArgs, YesArgs,
};
use crate::cluster::config;
use crate::error::UsageError;

/// Runs a `cluster` subcommand.
pub fn run(cmd: ClusterCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ClusterCommand::Init(a) => init::init(&a),
        ClusterCommand::Up(a) => lifecycle::up(&a),
        ClusterCommand::Join(a) => join::join(&a),
        ClusterCommand::Status(a) => status::status(&a),
        ClusterCommand::Down(a) => lifecycle::down(&a),
        ClusterCommand::Refresh(a) => fleet::refresh(&a),
        ClusterCommand::Install(a) => fleet::install(&a),
        ClusterCommand::Doctor(a) => doctor::run(&a),
        ClusterCommand::Bench(a) => bench::run(&a),
        ClusterCommand::Enable(a) => boot::enable(&a),
        ClusterCommand::Disable(a) => boot::disable(&a),
        ClusterCommand::Tui(a) => tui(&a),
        ClusterCommand::Metrics(a) => metrics::run(&a),
        ClusterCommand::Top(a) => top::run(&a),
    }
}

fn tui(a: &ClusterFileArgs) -> anyhow::Result<ExitCode> {
    use dialoguer::Select;
    if !std::io::stdin().is_terminal() {
        return Err(UsageError(
            "the menu needs a terminal: use `halobox cluster up|status|down` and `halobox serve` instead".into(),
        )
        .into());
    }
    let file = || ClusterFileArgs {
        cluster: a.cluster.clone(),
    };
    let items = [
        "status",
        "up (dry run: preflight and plan)",
        "up",
        "serve a model (vLLM on the head)",
        "down",
        "show cluster.toml",
        "doctor every node (one table, cross-node checks)",
        "benchmark every pair of nodes",
        "refresh every node's container (dry run: the plan)",
        "refresh every node's container",
        "install this halobox on every node",
        "quit",
    ];
    loop {
        let pick = Select::new()
            .with_prompt("halobox cluster")
            .items(items)
            .default(0)
            .interact()?;
        let outcome = match pick {
            0 => status::status(&ClusterStatusArgs {
                file: file(),
                output: OutputArgs { json: false },
            }),
            1 | 2 => lifecycle::up(&ClusterUpArgs {
                file: file(),
                plan: DryRunArgs { dry_run: pick == 1 },
                timeout: None,
                insecure_ray: false,
                no_metrics: false,
            }),
            3 => menu::serve_menu(a),
            4 => lifecycle::down(&ClusterDownArgs {
                file: file(),
                plan: DryRunArgs { dry_run: false },
            }),
            5 => config::open(a.cluster.as_deref())
                .map(|(p, c)| {
                    println!("# {}\n{}", p.display(), c.to_toml());
                    ExitCode::SUCCESS
                })
                .map_err(anyhow::Error::from),
            6 => doctor::run(&ClusterDoctorArgs {
                file: file(),
                output: OutputArgs { json: false },
            }),
            7 => bench::run(&ClusterBenchArgs {
                file: file(),
                pairs: crate::fleet::bench::Pairs::All,
                save: None,
                duration: 10,
                rdma: false,
                no_rdma: false,
                collective: false,
                output: OutputArgs { json: false },
            }),
            8 | 9 => fleet::refresh(&ClusterRefreshArgs {
                channel: Channel::Latest,
                image: None,
                restart: false,
                memlock: None,
                pull: None,
                from_registry: false,
                verify: false,
                no_verify: false,
                accept_tokens: false,
                soak: 30,
                file: file(),
                mode: PlanOutputArgs {
                    plan: DryRunArgs { dry_run: pick == 8 },
                    output: OutputArgs { json: false },
                },
                confirm: YesArgs { yes: false },
            }),
            10 => fleet::install(&ClusterInstallArgs {
                halobox: None,
                timeout: crate::fleet::install::SEND_TIMEOUT_S,
                rollback: false,
                file: file(),
                plan: DryRunArgs { dry_run: false },
            }),
            _ => return Ok(ExitCode::SUCCESS),
        };
        if let Err(e) = outcome {
            eprintln!("error: {e:#}");
        }
    }
}

//! The cluster menu's serve item.

use std::process::ExitCode;

use crate::cli::ClusterFileArgs;
use crate::cluster::config;
use crate::reporter::Terminal;

/// The menu's serve item: what the guides' launcher asks (model, tensor
/// parallel size, context length, eager mode, erase the compile cache),
/// then the plan (`serve --dry-run`) and, confirmed, `serve`.
pub fn serve_menu(a: &ClusterFileArgs) -> anyhow::Result<ExitCode> {
    use crate::fleet::supervisor::serve;
    use crate::serve::request::{Request, Spec};
    use dialoguer::{Confirm, Input};
    let (path, cfg) = config::open(a.cluster.as_deref())?;
    let n = u32::try_from(cfg.nodes.len()).unwrap_or(u32::MAX);
    let model: String = Input::new().with_prompt("model").interact_text()?;
    let tp: u32 = Input::new()
        .with_prompt(format!("tensor parallel size (1..{n}, one GPU per node)"))
        .default(n)
        .validate_with(|v: &u32| {
            if (1..=n).contains(v) {
                Ok(())
            } else {
                Err(format!("use 1..{n}: the cluster has {n} node(s)"))
            }
        })
        .interact_text()?;
    let context: String = Input::new()
        .with_prompt("context length (--max-model-len; empty: the model's own)")
        .allow_empty(true)
        .validate_with(|v: &String| {
            let v = v.trim();
            if v.is_empty() || v.parse::<u32>().is_ok_and(|l| l > 0) {
                Ok(())
            } else {
                Err("a number of tokens (e.g. 131072), or empty")
            }
        })
        .interact_text()?;
    let eager = Confirm::new()
        .with_prompt("force eager mode (CUDA graphs can deadlock on distributed APUs)")
        .default(true)
        .interact()?;
    let clear_cache = Confirm::new()
        .with_prompt("erase vLLM's compile cache first (yes when restarting after a crash)")
        .default(false)
        .interact()?;
    let req = |dry_run| Request {
        spec: Spec {
            model: model.clone(),
            tp: Some(tp),
            max_model_len: context.trim().parse().ok(),
            max_model_len_auto: false,
            gpu_memory_utilization: None,
            no_eager: !eager,
            host: None,
            port: crate::serve::DEFAULT_PORT,
            no_api_key: false,
            nccl_debug: false,
            no_fit_check: false,
            timeout: crate::serve::DEFAULT_TIMEOUT_S,
            restart: None,
            stall_timeout: None,
            extra: vec![],
        },
        engine: None,
        clear_cache,
        preflight: false,
        detach: false,
        dry_run,
        sysroot: None,
        restarted: false,
    };
    serve(&req(true), &path, &cfg, &mut Terminal)?;
    if Confirm::new().with_prompt("start it?").interact()? {
        serve(&req(false), &path, &cfg, &mut Terminal)?;
    }
    Ok(ExitCode::SUCCESS)
}

//! `serve`'s fit check, the facts around [`crate::model::fit`]: the model's
//! size read from its headers on this machine (a folder, or the Hugging
//! Face cache), the head's GPU memory from its own facts and each other
//! node's from its `halobox detect --json` over ssh.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{SAFE_GPU_MEMORY, ServePlan, ServeRequest};
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run as cluster_run;
use crate::host::HostFacts;
use crate::host::gpu::AMD_VENDOR;
use crate::model::cache::Repo;
use crate::model::fit::{self, Fit, FitRequest, ModelSize, NodeMemory, Split};
use crate::model::memory_args::{self, Flags};
use crate::model::weights;

/// How long a node's `halobox detect --json` may take.
const DETECT_TIMEOUT: Duration = Duration::from_secs(60);

/// The check's split, context and cache options from the serve plan and
/// request: every memory argument, as a halobox flag or after `--`; an
/// error names one given twice with two values, or a bad one.
pub fn request(plan: &ServePlan, req: &ServeRequest) -> Result<FitRequest, String> {
    let args = memory_args::read(
        &Flags {
            max_model_len: req.max_model_len.map(u64::from),
            tp: None,
            gpu_memory_utilization: (req.gpu_memory_utilization != SAFE_GPU_MEMORY)
                .then_some(req.gpu_memory_utilization),
        },
        &req.extra,
    )?;
    Ok(FitRequest {
        split: Split::Tensor {
            tp: plan.tp,
            pp: plan.pp,
        },
        max_model_len: args.max_model_len,
        utilization: args
            .gpu_memory_utilization
            .unwrap_or(req.gpu_memory_utilization),
        kv: args.kv_options()?,
    })
}

/// The model's size from its files on this machine; an error says why it
/// could not be read (then the fit is not checked).
pub fn model_size(model: &str, extra: &[String], hub: Option<&Path>) -> Result<ModelSize, String> {
    weights::read(&model_dir(model, extra, hub)?)
}

/// Where the model's files are on this machine: the folder given, or the
/// revision's snapshot in the Hugging Face cache `hub`.
pub fn model_dir(model: &str, extra: &[String], hub: Option<&Path>) -> Result<PathBuf, String> {
    if super::preflight::is_path(model) {
        let p = PathBuf::from(model);
        return if p.exists() {
            Ok(p)
        } else {
            Err(format!(
                "{model} is not on this machine (the check reads the weights' headers here)"
            ))
        };
    }
    let hub = hub.ok_or("no Hugging Face cache here (no HOME, no HF_HOME)")?;
    let rev = super::plan::revision(extra).unwrap_or("main");
    let repo = Repo::new(hub, model);
    let commit = repo.resolve(rev).ok_or_else(|| {
        format!(
            "{model}@{rev} is not in this machine's Hugging Face cache {} (`halobox model pull {model}` puts it there)",
            hub.display()
        )
    })?;
    Ok(repo.snapshot(&commit))
}

/// GTT total and in use from a `halobox detect --json` document: the AMD
/// card with the largest GTT.
pub fn gtt_from_detect(doc: &serde_json::Value) -> Option<(u64, u64)> {
    doc.pointer("/gpu/cards")?
        .as_array()?
        .iter()
        .filter(|c| c.get("vendor_id").and_then(|v| v.as_str()) == Some(AMD_VENDOR))
        .filter_map(|c| {
            Some((
                c.get("gtt_total_bytes")?.as_u64()?,
                c.get("gtt_used_bytes")?.as_u64()?,
            ))
        })
        .max_by_key(|&(t, _)| t)
}

/// The head's memory from `facts` (`None`: this machine is not the head).
pub fn head_memory(cfg: &ClusterConfig, facts: Option<&HostFacts>) -> NodeMemory {
    let name = cfg.head().label().to_string();
    match facts {
        None => NodeMemory {
            name,
            gtt: None,
            unknown: Some("this machine is not the head: run it there".into()),
        },
        Some(f) => NodeMemory {
            name,
            gtt: f.gpu.gtt_bytes(),
            unknown: f.gpu.gtt_bytes().is_none().then(|| {
                "no mem_info_gtt_total/_used of an AMD card in /sys/class/drm: `halobox doctor` there".into()
            }),
        },
    }
}

/// A node not read: a snapshot (`--sysroot`) is one machine's.
pub fn unread(node: &NodeConfig) -> NodeMemory {
    NodeMemory {
        name: node.label().to_string(),
        gtt: None,
        unknown: Some("--sysroot holds one machine; without it each node is read over ssh".into()),
    }
}

/// A node's memory from its own `halobox detect --json`, over ssh.
pub fn node_memory(cfg: &ClusterConfig, node: &NodeConfig) -> NodeMemory {
    let argv = vec![cfg.halobox.clone(), "detect".into(), "--json".into()];
    let unknown = |why: String| NodeMemory {
        name: node.label().to_string(),
        gtt: None,
        unknown: Some(why),
    };
    let done = match cluster_run::remote_node(cfg, node).run(&argv, DETECT_TIMEOUT) {
        Ok(d) => d,
        Err(e) => return unknown(first_line(&e.to_string())),
    };
    if !done.status.is_some_and(|s| s.success()) {
        return unknown(format!(
            "`halobox detect --json` failed there: {}",
            crate::remote::tail(&done.output, 1)
        ));
    }
    match serde_json::from_str::<serde_json::Value>(&done.stdout) {
        Ok(doc) => match gtt_from_detect(&doc) {
            Some(g) => NodeMemory {
                name: node.label().to_string(),
                gtt: Some(g),
                unknown: None,
            },
            None => unknown(
                "its `halobox detect --json` names no AMD card with GTT figures (an older halobox, or no amdgpu)".into(),
            ),
        },
        Err(e) => unknown(format!("its `halobox detect --json` is not JSON: {e}")),
    }
}

/// Every node's GPU memory: the head from `head` (its facts, when this
/// machine is the head), the other nodes (and a head not read here) over
/// ssh when `read_nodes`, else left unread.
pub fn memory(cfg: &ClusterConfig, head: Option<&HostFacts>, read_nodes: bool) -> Vec<NodeMemory> {
    let read = |n: &NodeConfig| -> NodeMemory {
        if read_nodes {
            node_memory(cfg, n)
        } else {
            unread(n)
        }
    };
    let mut nodes = Vec::with_capacity(cfg.nodes.len());
    nodes.push(match head {
        Some(_) => head_memory(cfg, head),
        None if read_nodes => node_memory(cfg, cfg.head()),
        None => head_memory(cfg, None),
    });
    nodes.extend(cluster_run::each_node(&cfg.nodes[1..], read));
    nodes
}

/// The check over [`memory`]'s nodes.
pub fn check(
    cfg: &ClusterConfig,
    head: Option<&HostFacts>,
    size: &ModelSize,
    req: &FitRequest,
    read_nodes: bool,
) -> Fit {
    fit::judge(size, req, &memory(cfg, head, read_nodes))
}

/// Every node's GPU memory for `halobox plan`: the head's from this
/// machine's facts when it is the head, the others' (and a head elsewhere)
/// from their `halobox detect --json` over ssh, as `serve` reads them.
pub fn cluster_memory(cfg: &ClusterConfig) -> Vec<NodeMemory> {
    let facts = crate::host::gather(
        crate::host::HostRoot::live(),
        crate::host::GatherOptions::default(),
    );
    let is_head = matches!(
        crate::dataplane::select(&facts, Some(cfg.head().ip)),
        crate::dataplane::Selection::Chosen(_)
    );
    let mut nodes = Vec::with_capacity(cfg.nodes.len());
    nodes.push(if is_head {
        head_memory(cfg, Some(&facts))
    } else {
        node_memory(cfg, cfg.head())
    });
    nodes.extend(cluster_run::each_node(&cfg.nodes[1..], |n| {
        node_memory(cfg, n)
    }));
    nodes
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtt_of_the_amd_card() {
        let doc = serde_json::json!({"gpu": {"cards": [
            {"vendor_id": "0x8086", "gtt_total_bytes": 9, "gtt_used_bytes": 1},
            {"vendor_id": "0x1002", "gtt_total_bytes": 100, "gtt_used_bytes": 7},
            {"vendor_id": "0x1002"}
        ]}});
        assert_eq!(gtt_from_detect(&doc), Some((100, 7)));
        assert_eq!(
            gtt_from_detect(&serde_json::json!({"gpu": {"cards": []}})),
            None
        );
    }

    #[test]
    fn a_missing_folder_says_so() {
        let e = model_size("/nonexistent/m", &[], None).unwrap_err();
        assert!(e.contains("not on this machine"), "{e}");
    }
}

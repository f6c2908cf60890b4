//! The split `plan` shows and `serve` starts, decided by one function
//! ([`decide`]): the model's size and the weights one token reads from its
//! files, each node's GPU memory, the link and each node's memory
//! bandwidth from cluster.toml or the flags, then
//! [`crate::model::placement::place`]. [`plan`] is `halobox plan`'s door;
//! [`for_serve`] is what `serve` asks when no split was given.

use std::path::PathBuf;

use super::fit;
use crate::cluster::config::{self, ClusterConfig, Transport};
use crate::error::UsageError;
use crate::host::HostFacts;
use crate::model::active::{self, Active};
use crate::model::fit::{FitRequest, ModelSize, NodeMemory, Split};
use crate::model::kv::VLLM_BLOCK;
use crate::model::memory_args::{self, Flags};
use crate::model::placement::{self, Ask, Placement, Prefer};
use crate::model::speed::{Conditions, Link, MeasuredLink, STRIX_HALO_BANDWIDTH_GBS, SpeedModel};

/// What is asked besides the facts: the same for `plan` and `serve`.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The model as given.
    pub model: String,
    /// The engine's arguments after `--`.
    pub extra: Vec<String>,
    /// `--max-model-len`, `--tp`, `--gpu-memory-utilization`.
    pub flags: Flags,
    /// `--transport` (`None`: cluster.toml's, RoCE without one).
    pub link: Option<Link>,
    /// `--memory-bandwidth-gbs`: every node's (`None`: each node's own, else
    /// [`STRIX_HALO_BANDWIDTH_GBS`]).
    pub bandwidth_gbs: Option<f64>,
    /// Sequences decoding at once.
    pub concurrency: u32,
    /// The rule to choose by.
    pub prefer: Prefer,
}

/// `halobox plan MODEL`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// What is asked.
    pub query: Query,
    /// `--nodes N --gtt BYTES`: planned nodes instead of the cluster's.
    pub planned: Option<(u32, u64)>,
    /// `--cluster FILE`.
    pub cluster: Option<PathBuf>,
}

/// `halobox plan`: the model read on this machine, the nodes planned or
/// the cluster's (over ssh, as `serve` reads them), then [`decide`].
pub fn plan(req: &PlanRequest) -> anyhow::Result<Placement> {
    let size = model_size(&req.query)?;
    let (nodes, cfg) = match req.planned {
        Some((n, gtt)) => (placement::hypothetical(n, gtt), None),
        None => {
            let (_, cfg) = config::open(req.cluster.as_deref())?;
            (fit::cluster_memory(&cfg), Some(cfg))
        }
    };
    let measured = cfg.as_ref().and_then(saved_link);
    Ok(decide(
        &req.query,
        &size,
        &nodes,
        cfg.as_ref(),
        measured.as_ref(),
    )?)
}

/// The link of `cfg` as its newest saved `bench collective` and `bench run`
/// measured it (in halobox's bench folder; `None`: none saved).
pub fn saved_link(cfg: &ClusterConfig) -> Option<(Link, MeasuredLink)> {
    use crate::bench::link_cost;
    let link = link_of(cfg.transport);
    let (collective, run) = link_cost::newest(&link_cost::root()?, &cfg.transport.to_string());
    Some((
        link,
        link_cost::measured(link, collective.as_ref(), run.as_ref())?,
    ))
}

fn model_size(q: &Query) -> Result<ModelSize, UsageError> {
    fit::model_size(
        &q.model,
        &q.extra,
        crate::model::cache::hub_dir_from_env().as_deref(),
    )
    .map_err(|e| UsageError(format!("cannot read the model: {e}")))
}

/// The link cluster.toml's transport gives: RDMA for `roce`, `ib` and
/// `auto` (which picks RoCE where a port is ACTIVE), TCP for `ethernet`,
/// USB4 over TCP for `usb4` (cluster.toml alone does not say whether a
/// node's container has the USB4 net plugin `cluster join` would use:
/// `plan --transport usb4-rdma` estimates that case).
pub fn link_of(t: Transport) -> Link {
    match t {
        Transport::Auto | Transport::Roce | Transport::Ib => Link::Roce,
        Transport::Ethernet => Link::Tcp,
        Transport::Usb4 => Link::Usb4,
    }
}

/// What one token reads: counted from the `config.json` beside
/// safetensors, else every weight (a GGUF, or a config without the sizes).
fn speed_model(q: &Query, size: &ModelSize) -> SpeedModel {
    let layers = size.kv.as_ref().map_or(0, |k| k.layers.len() as u64);
    let counted = fit::model_dir(
        &q.model,
        &q.extra,
        crate::model::cache::hub_dir_from_env().as_deref(),
    )
    .ok()
    .and_then(|d| std::fs::read(d.join("config.json")).ok())
    .and_then(|b| serde_json::from_slice(&b).ok())
    .and_then(|c| active::from_config(&c).ok());
    match counted {
        Some(a) => SpeedModel::from_active(&a, size.weights_bytes),
        None => {
            let a = Active::dense(size.weights_bytes, layers, 0);
            SpeedModel {
                active_params: None,
                ..SpeedModel::from_active(&a, size.weights_bytes)
            }
        }
    }
}

/// The one decision: every split of the model over `nodes` (head first)
/// with its fit and speed, and the one to use. `cfg` gives the link and
/// each node's bandwidth when the flags do not; `measured`, that link's
/// costs from the cluster's saved runs ([`saved_link`]), used when the
/// link estimated is the one they measured.
pub fn decide(
    q: &Query,
    size: &ModelSize,
    nodes: &[NodeMemory],
    cfg: Option<&ClusterConfig>,
    measured: Option<&(Link, MeasuredLink)>,
) -> Result<Placement, UsageError> {
    let args = memory_args::read(&q.flags, &q.extra).map_err(UsageError)?;
    let utilization = args
        .gpu_memory_utilization
        .unwrap_or(super::plan::SAFE_GPU_MEMORY);
    if !(utilization > 0.0 && utilization <= 1.0) {
        return Err(UsageError(format!(
            "--gpu-memory-utilization {utilization} is not a fraction in (0, 1]"
        )));
    }
    if let Some(b) = q.bandwidth_gbs.filter(|b| !(b.is_finite() && *b > 0.0)) {
        return Err(UsageError(format!(
            "--memory-bandwidth-gbs {b}: not a bandwidth (GB/s above 0)"
        )));
    }
    let kv = args.kv_options().map_err(UsageError)?;
    let bandwidth_gbs = (0..nodes.len())
        .map(|i| {
            q.bandwidth_gbs
                .or_else(|| cfg.and_then(|c| c.nodes.get(i)?.memory_bandwidth_gbs))
                .unwrap_or(STRIX_HALO_BANDWIDTH_GBS)
        })
        .collect();
    let link = q
        .link
        .or_else(|| cfg.map(|c| link_of(c.transport)))
        .unwrap_or(Link::Roce);
    let conditions = Conditions {
        link,
        // The saved runs measured cluster.toml's link, not one `--transport` asks about.
        measured: measured.filter(|m| m.0 == link).map(|m| m.1.clone()),
        bandwidth_gbs,
        concurrency: q.concurrency.max(1),
    };
    let ask = Ask {
        tp: args.tp,
        pp: args.pp,
        request: FitRequest {
            split: Split::Tensor { tp: 1, pp: 1 },
            max_model_len: args.max_model_len,
            utilization,
            kv,
        },
        speed: Some((speed_model(q, size), conditions)),
        prefer: q.prefer,
    };
    Ok(placement::place(size, &ask, nodes))
}

/// What `serve` starts with: the split and the context, and the line that
/// says where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeChoice {
    /// Tensor-parallel size (`None`: as before, every node).
    pub tp: Option<u32>,
    /// Pipeline-parallel size to add after `--` (`None`: none to add).
    pub pp: Option<u32>,
    /// `--max-model-len auto` resolved (`None`: not asked).
    pub max_model_len: Option<u32>,
    /// The first line `serve` prints.
    pub line: String,
}

/// The longest context `c` fits, as `--max-model-len auto` passes it:
/// rounded down to whole KV blocks of `block` tokens (`--block-size`,
/// else [`VLLM_BLOCK`]).
fn auto_len(p: &Placement, i: usize, block: u64) -> Option<u32> {
    let n = p.splits[i].max_context_that_fits.filter(|n| *n > 0)?;
    u32::try_from(n / block * block).ok()
}

/// `serve`'s split: the one `plan` chooses over the cluster's nodes when
/// `user_split` is false (a split `plan` cannot choose keeps every node, as
/// before), and the context `--max-model-len auto` (`auto`) takes. The head
/// is read from `head` when it is this machine, the other nodes over ssh
/// when `read_nodes`.
pub fn for_serve(
    cfg: &ClusterConfig,
    head: Option<&HostFacts>,
    read_nodes: bool,
    q: &Query,
    user_split: bool,
    auto: bool,
) -> Result<ServeChoice, UsageError> {
    if user_split && !auto {
        return Ok(ServeChoice {
            tp: q.flags.tp,
            pp: None,
            max_model_len: None,
            line: "split: as given (--tp or --pipeline-parallel-size), not plan's".into(),
        });
    }
    let size = match model_size(q) {
        Ok(s) => s,
        Err(e) if !auto => {
            return Ok(ServeChoice {
                tp: q.flags.tp,
                pp: None,
                max_model_len: None,
                line: format!("split: every node, as before: plan could not choose ({e})"),
            });
        }
        Err(e) => return Err(UsageError(format!("--max-model-len auto: {e}"))),
    };
    let nodes = fit::memory(cfg, head, read_nodes);
    let block = memory_args::read(&q.flags, &q.extra)
        .ok()
        .and_then(|a| a.block_size)
        .unwrap_or(VLLM_BLOCK);
    // `auto`: the splits are judged for one block, then the chosen one
    // takes the longest context it fits.
    let q = Query {
        flags: Flags {
            max_model_len: if auto {
                Some(block)
            } else {
                q.flags.max_model_len
            },
            ..q.flags
        },
        ..q.clone()
    };
    let p = decide(&q, &size, &nodes, Some(cfg), saved_link(cfg).as_ref())?;
    let Some(i) = p.chosen else {
        if auto {
            return Err(UsageError(format!(
                "--max-model-len auto: no split fits to take the longest context of: {}",
                p.why
            )));
        }
        return Ok(ServeChoice {
            tp: q.flags.tp,
            pp: None,
            max_model_len: None,
            line: format!("split: every node, as before: plan chose none ({})", p.why),
        });
    };
    let c = &p.splits[i];
    let max_model_len = if auto {
        Some(auto_len(&p, i, block).ok_or_else(|| {
            UsageError(format!(
                "--max-model-len auto: {} fits no context at all",
                c.split
            ))
        })?)
    } else {
        None
    };
    let ctx = max_model_len
        .map(|n| {
            format!(
                "; --max-model-len auto: {n} (the longest that fits, in whole {block}-token blocks)"
            )
        })
        .unwrap_or_default();
    if user_split {
        return Ok(ServeChoice {
            tp: q.flags.tp,
            pp: None,
            max_model_len,
            line: format!("split: as given ({}){ctx}", c.split),
        });
    }
    Ok(ServeChoice {
        tp: Some(c.tp),
        pp: (c.pp > 1).then_some(c.pp),
        max_model_len,
        line: format!(
            "split: {} on {} of {} node(s), chosen by `halobox plan`: {}{ctx}",
            c.split,
            c.nodes,
            nodes.len(),
            p.why
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(bandwidth: Option<f64>, link: Option<Link>) -> Query {
        Query {
            model: "/nonexistent/m".into(),
            extra: vec![],
            flags: Flags::default(),
            link,
            bandwidth_gbs: bandwidth,
            concurrency: 1,
            prefer: Prefer::Fastest,
        }
    }

    #[test]
    fn each_nodes_bandwidth_and_the_transport_come_from_cluster_toml_unless_flagged() {
        let cfg = config::parse(
            "transport = \"ethernet\"\n[[node]]\nssh = \"n1\"\nip = \"10.0.0.1\"\nmemory_bandwidth_gbs = 120\n[[node]]\nssh = \"n2\"\nip = \"10.0.0.2\"\n",
        )
        .unwrap();
        assert_eq!(cfg.nodes[0].memory_bandwidth_gbs, Some(120.0));
        let size = ModelSize {
            weights_bytes: 10 << 30,
            source: "test".into(),
            kv: None,
            kv_unknown: None,
        };
        let nodes = placement::hypothetical(2, 64 << 30);
        let p = decide(&query(None, None), &size, &nodes, Some(&cfg), None).unwrap();
        let c = p.conditions.as_ref().unwrap();
        assert_eq!(c.link, Link::Tcp);
        assert_eq!(c.bandwidth_gbs, [120.0, STRIX_HALO_BANDWIDTH_GBS]);
        let p = decide(
            &query(Some(300.0), Some(Link::Usb4)),
            &size,
            &nodes,
            Some(&cfg),
            None,
        )
        .unwrap();
        let c = p.conditions.as_ref().unwrap();
        assert_eq!(
            (c.link, c.bandwidth_gbs.clone()),
            (Link::Usb4, vec![300.0, 300.0])
        );
        // Without a config.json every weight is read: 10 GiB at 300 GB/s.
        let one = p.splits.iter().find(|s| s.split == "tp 1 × pp 1").unwrap();
        let read = one.speed.as_ref().unwrap().read_s;
        assert!((read - (10u64 << 30) as f64 / 300e9).abs() < 1e-9, "{read}");
        let e = decide(&query(Some(0.0), None), &size, &nodes, None, None).unwrap_err();
        assert!(e.0.contains("--memory-bandwidth-gbs 0"), "{}", e.0);
    }

    #[test]
    fn saved_runs_cost_the_clusters_link_and_are_named() {
        let cfg = config::parse(
            "transport = \"ethernet\"\n[[node]]\nssh = \"n1\"\nip = \"10.0.0.1\"\n[[node]]\nssh = \"n2\"\nip = \"10.0.0.2\"\n",
        )
        .unwrap();
        let size = ModelSize {
            weights_bytes: 10 << 30,
            source: "test".into(),
            kv: Some(
                crate::model::kv::hf::from_config(&serde_json::json!({
                    "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": 8,
                    "max_position_embeddings": 8192
                }))
                .unwrap(),
            ),
            kv_unknown: None,
        };
        let nodes = placement::hypothetical(2, 64 << 30);
        let slow = MeasuredLink {
            cost: crate::model::speed::LinkCost {
                allreduce_s: 5e-3,
                ..Link::Tcp.cost()
            },
            source: "all-reduce 5000 µs (bench collective X)".into(),
        };
        let m = (Link::Tcp, slow);
        let p = decide(&query(None, None), &size, &nodes, Some(&cfg), Some(&m)).unwrap();
        assert_eq!(p.conditions.as_ref().unwrap().measured.as_ref(), Some(&m.1));
        let text = crate::model::placement::render(&p, false);
        assert!(
            text.contains(
                "speed estimate: link tcp as measured: all-reduce 5000 µs (bench collective X)"
            ),
            "{text}"
        );
        let tp2 = |p: &Placement| {
            p.splits
                .iter()
                .find(|s| s.split == "tp 2 × pp 1")
                .and_then(|s| s.speed.clone())
                .unwrap()
                .link_s
        };
        let defaults = decide(&query(None, None), &size, &nodes, Some(&cfg), None).unwrap();
        assert!(
            tp2(&p) > 10.0 * tp2(&defaults),
            "the measured all-reduce counts"
        );
        // `--transport roce` asks about another link: its defaults, not the saved runs.
        let other = decide(
            &query(None, Some(Link::Roce)),
            &size,
            &nodes,
            Some(&cfg),
            Some(&m),
        )
        .unwrap();
        assert!(other.conditions.unwrap().measured.is_none());
    }

    #[test]
    fn ethernet_is_tcp_and_rdma_transports_are_roce() {
        assert_eq!(link_of(Transport::Ethernet), Link::Tcp);
        assert_eq!(link_of(Transport::Usb4), Link::Usb4);
        assert_eq!(link_of(Transport::Roce), Link::Roce);
        assert_eq!(link_of(Transport::Auto), Link::Roce);
    }
}

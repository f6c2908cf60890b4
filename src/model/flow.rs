//! `halobox model pull|sync|ls|rm` from start to end, one library entry
//! point each ([`pull()`], [`sync()`], [`ls()`], [`rm()`]): the cluster
//! file, the plan, the work over ssh, and the words through a [`Reporter`].

use std::path::PathBuf;

use super::cache::{self, ModelRef};
use super::{plan, pull as hf, sync as sync_run};
use crate::cluster::config::{self, ClusterConfig, NodeConfig};
use crate::error::UsageError;
use crate::reporter::{Ask, Reporter};
use crate::units::format_bytes;

/// The node `flag` (`--from`, `--on`) names by its name or ssh target.
fn node(cfg: &ClusterConfig, flag: &str, name: &str) -> Result<usize, UsageError> {
    cfg.nodes
        .iter()
        .position(|n| n.label() == name || n.ssh == name)
        .ok_or_else(|| {
            let names: Vec<&str> = cfg.nodes.iter().map(|n| n.label()).collect();
            UsageError(format!(
                "{flag} {name}: no such node in the cluster file (its nodes: {})\n  hint: `halobox cluster status` lists them",
                names.join(", ")
            ))
        })
}

/// One `halobox model pull`.
#[derive(Debug, Clone, Default)]
pub struct PullOptions {
    /// The model, `ORG/NAME[@REV]`.
    pub model: String,
    /// `--on`: the node (`None`: the head).
    pub on: Option<String>,
    /// `--include` patterns.
    pub include: Vec<String>,
    /// `--exclude` patterns.
    pub exclude: Vec<String>,
    /// `--cluster`: the cluster file (`None`: the default one).
    pub cluster: Option<PathBuf>,
    /// Show what would run, run nothing.
    pub dry_run: bool,
    /// `HF_TOKEN`'s value, if set.
    pub token: Option<String>,
}

/// Runs `halobox model pull` as `o` asks.
pub fn pull(o: &PullOptions, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let model = ModelRef::parse(&o.model).map_err(UsageError)?;
    let (_, cfg) = config::open(o.cluster.as_deref())?;
    let node: &NodeConfig = match o.on.as_deref() {
        None => cfg.head(),
        Some(on) => &cfg.nodes[node(&cfg, "--on", on)?],
    };
    let token = o.token.as_deref();
    if token.is_some_and(|t| t.contains(['\n', '\r'])) {
        return Err(UsageError(
            "HF_TOKEN holds a line break: it goes to hf as one line on stdin\n  hint: export it again without the newline: `read -rs HF_TOKEN; export HF_TOKEN`".into(),
        )
        .into());
    }
    let req = hf::PullRequest {
        model: model.clone(),
        include: o.include.clone(),
        exclude: o.exclude.clone(),
        env: hf::PASSED_ON
            .iter()
            .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
            .collect(),
        token: token.is_some(),
        vllm: cfg.vllm.clone(),
    };
    if o.dry_run {
        r.out(&format!(
            "# on node {} ({}), in its container {}:\n",
            node.label(),
            node.ssh,
            node.container
        ));
        if token.is_some() {
            r.out("HF_TOKEN=******** (from this environment, passed on stdin)\n");
        }
        r.out(&format!("{}\n", hf::shown(&req)));
        let argv = hf::in_container(&cfg, node, &hf::command(&req));
        r.out(&format!(
            "# runs as: {}\n",
            crate::shell::line(&crate::cluster::run::node_argv(&cfg, node, &argv))
        ));
        return Ok(());
    }
    r.note(&format!(
        "pulling {}@{} on node {} (hf download; run it again to resume)\n",
        model.id,
        model.revision,
        node.label()
    ));
    let path = hf::run(&cfg, node, &req, token, r)?;
    r.out(&format!(
        "{}@{} is in node {}'s Hugging Face cache: {path}\n  next: `halobox model sync {}` puts it on every node\n",
        model.id,
        model.revision,
        node.label(),
        o.model
    ));
    Ok(())
}

/// One `halobox model sync`.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// The model, `ORG/NAME[@REV]`.
    pub model: String,
    /// `--from`: the source node (`None`: the head).
    pub from: Option<String>,
    /// `--verify`: hash every file.
    pub verify: bool,
    /// `--cluster`: the cluster file (`None`: the default one).
    pub cluster: Option<PathBuf>,
    /// Show the plan, move nothing.
    pub dry_run: bool,
}

/// Runs `halobox model sync` as `o` asks.
pub fn sync(o: &SyncOptions, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let model = ModelRef::parse(&o.model).map_err(UsageError)?;
    let (_, cfg) = config::open(o.cluster.as_deref())?;
    let src = match o.from.as_deref() {
        None => 0,
        Some(f) => node(&cfg, "--from", f)?,
    };
    let started = std::time::Instant::now();
    // One ssh connection per node for the facts, the receivers and the sender.
    let masters = crate::cluster::run::masters(&cfg);
    let nodes = sync_run::facts(&cfg, &masters, &model, src, o.verify)?;
    let labels: Vec<String> = cfg
        .nodes
        .iter()
        .map(|n| format!("node {}", n.label()))
        .collect();
    let p = plan::plan(&model, src, &labels, &nodes)?;
    r.out(&plan::render(&p));
    if o.dry_run || p.chain().is_empty() {
        if p.chain().is_empty() && !o.dry_run {
            r.out(&format!(
                "moved 0 B: every node already holds {}@{} complete and verified (checked in {:.1} s)\n",
                model.id,
                model.revision,
                started.elapsed().as_secs_f64()
            ));
        }
        return Ok(());
    }
    let outcomes = sync_run::run(&cfg, &masters, &p, src)?;
    r.out(&sync_run::render_outcomes(&outcomes));
    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            o.error.clone().or_else(|| {
                (!o.bad.is_empty()).then(|| format!("{}: {}", o.label, o.bad.join("; ")))
            })
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "the sync is not complete: {}\n  hint: run `halobox model sync {}` again: it sends only what is still missing",
        failed.join("\n"),
        o.model
    )
}

/// Runs `halobox model ls`; `Ok(true)` when every node answered.
pub fn ls(
    cluster: Option<&std::path::Path>,
    json: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<bool> {
    let (_, cfg) = config::open(cluster)?;
    let all = sync_run::holdings(&cfg);
    if json {
        let v: Vec<serde_json::Value> = cfg
            .nodes
            .iter()
            .zip(&all)
            .map(|(n, h)| match h {
                Ok(h) => serde_json::json!({"node": n.label(), "holdings": h}),
                Err(e) => serde_json::json!({"node": n.label(), "error": e}),
            })
            .collect();
        r.out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        r.out(&ls_text(&cfg, &all));
    }
    Ok(all.iter().all(Result::is_ok))
}

/// `model ls`'s table.
fn ls_text(cfg: &ClusterConfig, all: &[Result<super::facts::Holdings, String>]) -> String {
    let mut out = format!(
        "{:<12} {:<32} {:<20} {:>10} {:>6} {:<9} {:<8}\n",
        "NODE", "MODEL", "REVISION", "SIZE", "FILES", "COMPLETE", "VERIFIED"
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    for (n, h) in cfg.nodes.iter().zip(all) {
        match h {
            Ok(h) => {
                for m in &h.models {
                    let rev = if m.refs.is_empty() {
                        m.commit[..12].to_string()
                    } else {
                        format!("{} ({})", m.refs.join(","), &m.commit[..8])
                    };
                    out.push_str(&format!(
                        "{:<12} {:<32} {:<20} {:>10} {:>6} {:<9} {:<8}\n",
                        n.label(),
                        m.id,
                        rev,
                        format_bytes(m.size),
                        m.files,
                        yes(m.complete),
                        yes(m.verified)
                    ));
                }
                out.push_str(&format!(
                    "{:<12} free: {} in {}\n",
                    n.label(),
                    format_bytes(h.free),
                    h.hub
                ));
            }
            Err(e) => out.push_str(&format!("{:<12} error: {e}\n", n.label())),
        }
    }
    out
}

/// One `halobox model rm`.
#[derive(Debug, Clone, Default)]
pub struct RmOptions {
    /// `MODEL@REV` (that revision) or `MODEL` (every revision).
    pub model: String,
    /// `--cluster`: the cluster file (`None`: the default one).
    pub cluster: Option<PathBuf>,
    /// Show what would go, remove nothing.
    pub dry_run: bool,
    /// `--yes`: remove without asking.
    pub yes: bool,
}

/// Runs `halobox model rm`; without `--yes`, `ask` is asked before
/// anything is removed.
pub fn rm(o: &RmOptions, r: &mut dyn Reporter, ask: &mut dyn Ask) -> anyhow::Result<()> {
    let model = ModelRef::parse(&o.model).map_err(UsageError)?;
    // MODEL@REV removes that revision; MODEL alone every revision.
    let one = o.model.contains('@').then_some(model.revision.as_str());
    let what = match one {
        Some(rev) => format!("{}@{rev}", model.id),
        None => model.id.clone(),
    };
    let (_, cfg) = config::open(o.cluster.as_deref())?;
    let all = sync_run::holdings(&cfg);
    let mut plan_text = match one {
        Some(_) => format!(
            "remove {what} (its snapshot, the refs naming it, the files no other revision uses) from the Hugging Face cache of:\n"
        ),
        None => format!("remove {what} (every revision) from the Hugging Face cache of:\n"),
    };
    let mut any = false;
    for (n, h) in cfg.nodes.iter().zip(&all) {
        let h = h.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        let held: Vec<_> = h
            .models
            .iter()
            .filter(|m| {
                m.id == model.id
                    && one.is_none_or(|r| m.commit == r || m.refs.iter().any(|x| x == r))
            })
            .collect();
        let size = crate::units::total_bytes(held.iter().map(|m| m.size)).ok_or_else(|| {
            anyhow::anyhow!(
                "node {} reported sizes of {} that add up to more than {} bytes: no cache holds that\n  hint: run `halobox cluster install` to put this halobox there, and check that cache (`halobox model ls`)",
                n.label(),
                model.id,
                u64::MAX
            )
        })?;
        any |= !held.is_empty();
        let at = match (one, held.first()) {
            (Some(_), Some(m)) => format!(" at {}", m.commit),
            _ => String::new(),
        };
        plan_text.push_str(&format!(
            "  node {}: {}\n",
            n.label(),
            if held.is_empty() {
                "not there".into()
            } else {
                format!(
                    "{}/{}{at} ({}{})",
                    h.hub,
                    cache::folder_of(&model.id),
                    if one.is_some() { "up to " } else { "" },
                    format_bytes(size)
                )
            }
        ));
    }
    r.out(&plan_text);
    if !any {
        r.out(&format!("nothing to remove: no node holds {what}\n"));
        return Ok(());
    }
    if o.dry_run {
        return Ok(());
    }
    if !o.yes {
        let question = format!("Remove {what} from every node?");
        if !ask.can_ask() {
            return Err(UsageError(format!(
                "not removing without confirmation: pass --yes\n  hint: {question}"
            ))
            .into());
        }
        if !ask.ask(&[], &question)? {
            r.out("nothing removed\n");
            return Ok(());
        }
    }
    let freed = sync_run::remove(&cfg, &what)?;
    for (n, f) in cfg.nodes.iter().zip(freed) {
        r.out(&format!(
            "node {}: removed, {} freed\n",
            n.label(),
            format_bytes(f)
        ));
    }
    Ok(())
}

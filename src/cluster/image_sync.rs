//! `halobox image sync IMAGE`: the head gets the image once (a pull into
//! its blob store, or its own `localhost/` image), and every other node
//! receives the blobs it lacks over the data plane, along the chain of
//! `model sync` ([`crate::model::sync`]: each link carries each byte once,
//! every blob checked against its sha256 where it arrives), then imports
//! the image into its engine keeping the head's manifest digest.
//!
//! The steps: for a `localhost/` image, first every node's engine asked
//! which image it holds under the name (`image node-held`): when every
//! node holds the head's image id the plan ([`plan_held`]) moves nothing
//! and the head exports nothing (reading 20 GB out of its storage only to
//! find every node has it). Otherwise: the head's export
//! ([`super::image_store::export`], over ssh as
//! `halobox image node-export`), every node's store and engine read
//! ([`super::image_store::prepare`], `node-prepare`), the plan (pure: [`plan`]),
//! the chain (`image node-receive`/`node-send`) with, beside it, each
//! receiving node staging the image's first layers as they arrive
//! (`node-stage`), and the imports (`node-import`): while the chain
//! streams, on the nodes that receive nothing (the head), then on every
//! node whose stream completed and verified: a node whose stream failed
//! keeps its old image, and a rerun sends only what its store still lacks.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

use super::config::{self, ClusterConfig, NodeBackend, NodeConfig};
use super::image_store::{Exported, Held, HeldReply, ID, PrepareRequest, Prepared, Staged};
use super::run::{each_node, remote_node};
use crate::error::UsageError;
use crate::model::cache::ModelRef;
use crate::model::plan::{self as model_plan, Plan as BlobPlan};
use crate::model::sync as chain;
use crate::remote::{self, Masters, STOP_GRACE};
use crate::reporter::Reporter;
use crate::units::format_bytes;

/// How long the head's export may take (a pull of the whole image).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(4 * 3600);
/// How long reading a node's store may take (hashing blobs never hashed).
const PREPARE_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long asking a node's engine what it holds may take.
const HELD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an import may take.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// One `halobox image sync`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The image.
    pub image: String,
    /// `--cluster`: the cluster file (`None`: the default one).
    pub cluster: Option<PathBuf>,
    /// Show the plan, move nothing.
    pub dry_run: bool,
    /// The report as JSON.
    pub json: bool,
}

/// What one node does in the plan.
#[derive(Debug, Clone, Serialize)]
pub struct NodePlan {
    /// `node b`.
    pub label: String,
    /// Blobs it receives (their sha256) and their bytes.
    pub blobs: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
    /// Whether it imports the image into its engine.
    pub import: bool,
    /// What its engine holds under the name now.
    pub held: Option<Held>,
}

/// The whole image sync.
#[derive(Debug, Clone, Serialize)]
pub struct ImagePlan {
    /// The image.
    pub image: String,
    /// The digest every node ends with (none when the head exported
    /// nothing: a `localhost/` image every node already holds).
    pub digest: Option<String>,
    /// Its image id.
    pub id: String,
    /// Its compressed size (every file of its layout; none when the head
    /// exported nothing).
    pub size: Option<u64>,
    /// Whether the head ran its export this run (`node-export`: a copy
    /// into its store, or a registry image's complete snapshot found
    /// there); not when every node already held the head's image id of a
    /// `localhost/` image.
    pub exported: bool,
    /// Every node, the head first.
    pub nodes: Vec<NodePlan>,
    /// The blob stream (the model sync's plan over the blob store).
    #[serde(skip)]
    pub blobs: BlobPlan,
}

/// Why `nodes` cannot get the image over the data plane, if they cannot.
pub fn refusal(nodes: &[NodeConfig]) -> Option<String> {
    let docker: Vec<&str> = nodes
        .iter()
        .filter(|n| n.backend == NodeBackend::Docker)
        .map(|n| n.label())
        .collect();
    (!docker.is_empty()).then(|| {
        format!(
            "node(s) {} run docker: moving the image over the data plane works with podman engines (podman, toolbox, distrobox) only so far; nothing was changed\n  hint: let every node pull it: `halobox cluster refresh --from-registry`",
            docker.join(", ")
        )
    })
}

/// Whether a node holding `held` already has the image: the same
/// manifest digest, or, for a `localhost/` image (whose manifest the
/// export makes anew), the same image id.
fn has_it(image: &str, e: &Exported, held: Option<&Held>, docker: bool) -> bool {
    held.is_some_and(|h| {
        h.digests.contains(&e.digest)
            || ((docker || image.starts_with("localhost/")) && h.id == e.id)
    })
}

/// The plan from the head's export and every node's store and engine
/// (`prepared[i]` is node i, the head first). Nodes that already hold the
/// image receive nothing and import nothing; the others receive what
/// their store lacks, and need room for it there and about twice the
/// image where their engine keeps images.
pub fn plan(
    image: &str,
    exported: &Exported,
    labels: &[String],
    prepared: &[Prepared],
) -> Result<ImagePlan, UsageError> {
    let facts: Vec<_> = prepared.iter().map(|p| p.facts.clone()).collect();
    let model = ModelRef {
        id: ID.to_string(),
        revision: exported.commit.clone(),
    };
    let mut blobs = model_plan::plan(&model, 0, labels, &facts)?;
    let size: u64 = exported.files.iter().map(|f| f.size).sum();
    let mut nodes = vec![];
    let mut short = vec![];
    for (i, (p, label)) in prepared.iter().zip(labels).enumerate() {
        let done = has_it(image, exported, p.held.as_ref(), p.docker);
        let target = blobs.targets.iter_mut().find(|t| t.node == i);
        let (names, bytes) = match target {
            Some(t) if done => {
                t.needs.clear();
                t.why.clear();
                t.bytes = 0;
                (vec![], 0)
            }
            Some(t) => (
                t.needs
                    .iter()
                    .map(|&k| blobs.files[k].blob.clone())
                    .collect(),
                t.bytes,
            ),
            None => (vec![], 0),
        };
        if !done && p.graph_free < size.saturating_mul(2) {
            short.push(format!(
                "{label} has {} free where its engine keeps images, the import needs about {} (twice the {} image)",
                format_bytes(p.graph_free),
                format_bytes(size.saturating_mul(2)),
                format_bytes(size)
            ));
        }
        nodes.push(NodePlan {
            label: label.clone(),
            blobs: names,
            bytes,
            import: !done,
            held: p.held.clone(),
        });
    }
    if !short.is_empty() {
        return Err(UsageError(format!(
            "not enough disk, nothing was sent: {}\n  hint: free space there (`podman image prune`), then run it again",
            short.join("; ")
        )));
    }
    blobs.send = (0..blobs.files.len())
        .filter(|k| blobs.targets.iter().any(|t| t.needs.contains(k)))
        .collect();
    // The small files first, then the layers base first: a node imports
    // the first layers while the rest still stream.
    blobs.send.sort_by_key(|&k| {
        exported
            .layers
            .iter()
            .position(|l| *l == blobs.files[k].blob)
            .map_or(0, |i| i + 1)
    });
    Ok(ImagePlan {
        image: image.to_string(),
        digest: Some(exported.digest.clone()),
        id: exported.id.clone(),
        size: Some(size),
        exported: true,
        nodes,
        blobs,
    })
}

/// The plan before any export, from what every node's engine holds under
/// the name (`held[i]` is node i, the head first; none where a node holds
/// nothing or could not say): for a `localhost/` image whose image id the
/// head holds and every other node holds too, nothing moves and nothing is
/// exported; none otherwise (the head exports the image and [`plan`]
/// decides from every node's store, as for any image).
pub fn plan_held(
    image: &str,
    source: &str,
    labels: &[String],
    held: &[Option<Held>],
) -> Option<ImagePlan> {
    if !image.starts_with("localhost/") || held.len() != labels.len() {
        return None;
    }
    let id = held.first()?.as_ref()?.id.clone();
    if !held.iter().all(|h| h.as_ref().is_some_and(|h| h.id == id)) {
        return None;
    }
    let nodes = labels
        .iter()
        .zip(held)
        .map(|(label, h)| NodePlan {
            label: label.clone(),
            blobs: vec![],
            bytes: 0,
            import: false,
            held: h.clone(),
        })
        .collect();
    Some(ImagePlan {
        image: image.to_string(),
        digest: None,
        id,
        size: None,
        exported: false,
        nodes,
        blobs: BlobPlan {
            model: ModelRef {
                id: ID.to_string(),
                revision: String::new(),
            },
            commit: String::new(),
            source: source.to_string(),
            hub: String::new(),
            files: vec![],
            targets: vec![],
            send: vec![],
        },
    })
}

/// The plan in words (`--dry-run` prints it; a sync prints it first).
pub fn render(p: &ImagePlan) -> String {
    let head = p.nodes.first().map_or("the head", |n| n.label.as_str());
    let mut s = match (&p.digest, p.size) {
        (Some(d), Some(size)) => format!(
            "image sync {} (digest {d}, id {}), {} compressed, from {head} over the data plane\n",
            p.image,
            short(&p.id),
            format_bytes(size),
        ),
        _ => format!(
            "image sync {} (id {}): every node holds {head}'s image id already, so {head} exports nothing and nothing moves\n",
            p.image,
            short(&p.id),
        ),
    };
    for n in &p.nodes {
        let what = match (n.import, n.blobs.len()) {
            (false, _) => "holds it already, nothing moves".to_string(),
            (true, 0) => "its store holds every blob: imports it".to_string(),
            (true, k) => format!(
                "receives {k} blob(s), {}: {}; then imports it",
                format_bytes(n.bytes),
                n.blobs
                    .iter()
                    .map(|b| short(b))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        };
        s.push_str(&format!("  {}: {what}\n", n.label));
    }
    let chain = p.blobs.chain();
    if !chain.is_empty() {
        let names: Vec<&str> = std::iter::once(p.blobs.source.as_str())
            .chain(chain.iter().map(|t| t.label.as_str()))
            .collect();
        s.push_str(&format!(
            "chain: {} ({} on the stream; each node passes it on while it writes)\n",
            names.join(" -> "),
            format_bytes(p.blobs.stream_bytes())
        ));
    }
    s
}

/// The first 12 hex digits of a digest.
fn short(d: &str) -> &str {
    let hex = d.strip_prefix("sha256:").unwrap_or(d);
    &hex[..hex.len().min(12)]
}

/// One node's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct NodeOutcome {
    /// `node b`.
    pub label: String,
    /// Bytes its link carried in.
    pub carried: u64,
    /// Bytes it wrote into its store.
    pub moved: u64,
    /// Seconds its stream took.
    pub seconds: f64,
    /// Prefixes of the image it imported beside the stream, before the
    /// image itself (the first layers, unpacked while the rest arrived).
    pub staged: usize,
    /// The digests its engine holds now for the image's repository.
    pub digests: Vec<String>,
    /// The image id its engine holds now.
    pub id: Option<String>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// The whole outcome (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The plan.
    pub plan: ImagePlan,
    /// Bytes on the stream.
    pub stream: u64,
    /// Every node, the head first.
    pub nodes: Vec<NodeOutcome>,
}

/// `halobox image SUB ARGS…` on a node.
fn node_cmd(cfg: &ClusterConfig, args: &[&str]) -> Vec<String> {
    std::iter::once(cfg.halobox.clone())
        .chain(["image".to_string()])
        .chain(args.iter().map(|a| a.to_string()))
        .collect()
}

/// The head's export and every node's store and engine, read over ssh.
fn facts(
    cfg: &ClusterConfig,
    masters: &Masters,
    image: &str,
) -> anyhow::Result<(Exported, Vec<Prepared>)> {
    let head = cfg.head();
    let what = "`halobox image node-export`";
    let done = remote_node(cfg, head).through(masters).run_ok(
        what,
        &node_cmd(cfg, &["node-export", image]),
        EXPORT_TIMEOUT,
    )?;
    let exported: Exported = remote::last_json(
        &format!("node {}", head.label()),
        what,
        &done.stdout,
        &done.output,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let what = "`halobox image node-prepare`";
    let results = each_node(&cfg.nodes, |node| {
        let req = serde_json::to_string(&PrepareRequest {
            image: image.to_string(),
            commit: exported.commit.clone(),
            files: exported.files.clone(),
            docker: node.backend == NodeBackend::Docker,
        })
        .map_err(|e| e.to_string())?;
        let done = remote_node(cfg, node)
            .through(masters)
            .run_ok_with_line(
                what,
                &node_cmd(cfg, &["node-prepare"]),
                &req,
                PREPARE_TIMEOUT,
            )
            .map_err(|e| e.to_string())?;
        remote::last_json::<Prepared>(
            &format!("node {}", node.label()),
            what,
            &done.stdout,
            &done.output,
        )
    });
    let mut prepared = vec![];
    let mut errors = vec![];
    for r in results {
        match r {
            Ok(p) => prepared.push(p),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        bail!("{}", errors.join("\n"));
    }
    Ok((exported, prepared))
}

/// What every node's engine holds under `image` (`image node-held`, node
/// i at i, the head first): none where it holds nothing, and where it
/// cannot say (its engine down, an older halobox), so that node counts as
/// lacking it and the run goes on as for any image, the export and
/// `node-prepare` naming what is wrong.
fn held_everywhere(cfg: &ClusterConfig, masters: &Masters, image: &str) -> Vec<Option<Held>> {
    let what = "`halobox image node-held`";
    each_node(&cfg.nodes, |node| {
        let done = remote_node(cfg, node)
            .through(masters)
            .run_ok(what, &node_cmd(cfg, &["node-held", image]), HELD_TIMEOUT)
            .ok()?;
        remote::last_json::<HeldReply>(
            &format!("node {}", node.label()),
            what,
            &done.stdout,
            &done.output,
        )
        .ok()?
        .held
    })
}

/// The plan from the facts: for a `localhost/` image every node's engine
/// asked first, and when every node holds the head's image id, nothing
/// exported ([`plan_held`]); else the head's export and every node's store
/// ([`plan`]).
fn plan_from_facts(
    cfg: &ClusterConfig,
    masters: &Masters,
    image: &str,
    labels: &[String],
) -> anyhow::Result<ImagePlan> {
    if image.starts_with("localhost/") {
        let held = held_everywhere(cfg, masters, image);
        let head = labels.first().map_or("", String::as_str);
        if let Some(p) = plan_held(image, head, labels, &held) {
            return Ok(p);
        }
    }
    let (exported, prepared) = facts(cfg, masters, image)?;
    Ok(plan(image, &exported, labels, &prepared)?)
}

/// Imports the image on every node `import` names; each one's result.
fn import_all(
    cfg: &ClusterConfig,
    masters: &Masters,
    p: &ImagePlan,
    import: &[bool],
) -> Vec<Result<Option<Held>, String>> {
    let commit = p.blobs.commit.clone();
    let what = "`halobox image node-import`";
    crate::fan_out::each(&cfg.nodes, |i, node| {
        if !import[i] {
            return Ok(None);
        }
        let (flag, want) = match &p.digest {
            _ if node.backend == NodeBackend::Docker => ("--docker-id", &p.id),
            Some(d) => ("--digest", d),
            None => return Err(format!("{}: no digest to import", node.label())),
        };
        let cmd = node_cmd(
            cfg,
            &["node-import", &p.image, "--commit", &commit, flag, want],
        );
        let done = remote_node(cfg, node)
            .through(masters)
            .run_ok(what, &cmd, IMPORT_TIMEOUT)
            .map_err(|e| e.to_string())?;
        remote::last_json::<Held>(
            &format!("node {}", node.label()),
            what,
            &done.stdout,
            &done.output,
        )
        .map(Some)
    })
}

/// Starts `image node-stage` beside the stream on every node `stage`
/// names (podman nodes that receive blobs): none where it could not start
/// (staging only saves time).
fn start_staging(
    cfg: &ClusterConfig,
    masters: &Masters,
    p: &ImagePlan,
    stage: &[bool],
) -> Vec<Option<crate::proc::Proc>> {
    cfg.nodes
        .iter()
        .zip(stage)
        .map(|(node, &s)| {
            let digest = p.digest.as_deref().filter(|_| s)?;
            let cmd = node_cmd(cfg, &["node-stage", "--digest", digest]);
            remote_node(cfg, node).through(masters).spawn(&cmd).ok()
        })
        .collect()
}

/// How many prefixes each node staged: waited for where its stream
/// completed and verified (`ok[i]`: it ends once every layer is there),
/// stopped where it did not (its stdin closed: the remote guard's SIGTERM
/// ends it between two prefixes, and it is waited for so that no import
/// into the node's storage is still under way when the run reports).
fn finish_staging(started: Vec<Option<crate::proc::Proc>>, ok: &[bool]) -> Vec<usize> {
    let jobs: Vec<_> = started.into_iter().zip(ok).collect();
    crate::fan_out::each(jobs, |_, (proc, &ok)| match proc {
        Some(proc) if ok => {
            let done = proc.complete(IMPORT_TIMEOUT, STOP_GRACE);
            done.stdout
                .lines()
                .rev()
                .find_map(|l| serde_json::from_str::<Staged>(l).ok())
                .map_or(0, |s| s.staged)
        }
        Some(proc) => {
            proc.finish(STOP_GRACE);
            0
        }
        None => 0,
    })
}

/// Moves `image` to every node of `cfg` as the plan says; the report.
/// With `dry_run` the plan only (the head's store and every node's store
/// are read and linked, nothing is sent or imported).
pub fn move_image(
    cfg: &ClusterConfig,
    masters: &Masters,
    image: &str,
    dry_run: bool,
    r: &mut dyn Reporter,
) -> anyhow::Result<Report> {
    crate::image_ref::ImageRef::parse(image).map_err(UsageError)?;
    let labels: Vec<String> = cfg
        .nodes
        .iter()
        .map(|n| format!("node {}", n.label()))
        .collect();
    let p = plan_from_facts(cfg, masters, image, &labels)?;
    r.note(&render(&p));
    let stream = p.blobs.stream_bytes();
    let mut nodes: Vec<NodeOutcome> = p
        .nodes
        .iter()
        .map(|n| NodeOutcome {
            label: n.label.clone(),
            carried: 0,
            moved: 0,
            seconds: 0.0,
            staged: 0,
            digests: n
                .held
                .as_ref()
                .map(|h| h.digests.clone())
                .unwrap_or_default(),
            id: n.held.as_ref().map(|h| h.id.clone()),
            error: None,
        })
        .collect();
    if dry_run {
        return Ok(Report {
            plan: p,
            stream,
            nodes,
        });
    }
    // Nodes whose store holds every blob already (the head, which
    // exported it) import while the chain streams to the others, and each
    // receiving podman node stages the image's first layers as they
    // arrive verified; it imports the image once its stream completed.
    let early: Vec<bool> = p
        .nodes
        .iter()
        .map(|n| n.import && n.blobs.is_empty())
        .collect();
    let stage: Vec<bool> = p
        .nodes
        .iter()
        .zip(&cfg.nodes)
        .map(|(n, c)| n.import && !n.blobs.is_empty() && c.backend != NodeBackend::Docker)
        .collect();
    let staging = start_staging(cfg, masters, &p, &stage);
    let (streamed, early_got) = std::thread::scope(|s| {
        let imports = s.spawn(|| import_all(cfg, masters, &p, &early));
        let streamed = if p.blobs.chain().is_empty() {
            Ok(vec![])
        } else {
            chain::run_family(cfg, masters, &p.blobs, 0, "image")
        };
        (streamed, imports.join().expect("the early imports' thread"))
    });
    {
        let outcomes = streamed?;
        for o in outcomes {
            let Some(n) = nodes.iter_mut().find(|n| n.label == o.label) else {
                continue;
            };
            n.carried = o.carried;
            n.moved = o.moved;
            n.seconds = o.seconds;
            n.error = o.error.clone().or_else(|| {
                (!o.bad.is_empty()).then(|| {
                    format!(
                        "{}: layer(s) refused, their sha256 is wrong: {}",
                        o.label,
                        o.bad.join("; ")
                    )
                })
            });
        }
    }
    let ok: Vec<bool> = nodes.iter().map(|n| n.error.is_none()).collect();
    for (n, staged) in nodes.iter_mut().zip(finish_staging(staging, &ok)) {
        n.staged = staged;
    }
    let late: Vec<bool> = p
        .nodes
        .iter()
        .zip(&ok)
        .zip(&early)
        .map(|((pn, &ok), &e)| pn.import && !e && ok)
        .collect();
    let late_got = import_all(cfg, masters, &p, &late);
    let got_all = early_got
        .into_iter()
        .zip(late_got)
        .zip(&early)
        .map(|((e, l), &was_early)| if was_early { e } else { l });
    for (n, got) in nodes.iter_mut().zip(got_all) {
        match got {
            Ok(Some(h)) => {
                n.digests = h.digests;
                n.id = Some(h.id);
            }
            Ok(None) => {}
            Err(e) => n.error = Some(e),
        }
    }
    Ok(Report {
        plan: p,
        stream,
        nodes,
    })
}

/// The final table: node, bytes its link carried, digest, verdict.
pub fn render_report(rep: &Report) -> String {
    let mut s = format!(
        "{:<16} {:>12} {:>12}  {:<20} {}\n",
        "NODE", "CARRIED", "WRITTEN", "DIGEST", "RESULT"
    );
    for n in &rep.nodes {
        s.push_str(&format!(
            "{:<16} {:>12} {:>12}  {:<20} {}\n",
            n.label,
            format_bytes(n.carried),
            format_bytes(n.moved),
            match &rep.plan.digest {
                Some(d) if n.digests.contains(d) => short(d),
                _ => n.digests.first().map_or("-", |d| short(d)),
            },
            match &n.error {
                Some(_) => "failed: keeps its old image",
                None => "ok",
            }
        ));
    }
    s
}

/// Runs `halobox image sync` as `o` asks.
pub fn sync(o: &Options, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let (_, cfg) = config::open(o.cluster.as_deref())?;
    let masters = super::run::masters(&cfg);
    let rep = move_image(&cfg, &masters, &o.image, o.dry_run, r)?;
    if o.json {
        r.out(&format!("{}\n", serde_json::to_string(&rep)?));
    } else if !o.dry_run {
        r.out(&render_report(&rep));
    } else {
        r.out(&render(&rep.plan));
    }
    let failed: Vec<String> = rep.nodes.iter().filter_map(|n| n.error.clone()).collect();
    if failed.is_empty() {
        return Ok(());
    }
    bail!(
        "the image sync is not complete (those nodes keep their old image): {}\n  hint: run `halobox image sync {}` again: it sends only what is still missing",
        failed.join("\n"),
        o.image
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::image_store::ImageFile;
    use crate::model::facts::{FileFacts, ModelFacts, NodeFacts};

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn blob(c: char) -> String {
        c.to_string().repeat(64)
    }

    fn exported() -> Exported {
        Exported {
            digest: format!("sha256:{}", blob('d')),
            id: format!("sha256:{}", blob('c')),
            commit: COMMIT.into(),
            files: ['d', 'c', 'a', 'b']
                .iter()
                .map(|&x| ImageFile {
                    path: if x == 'd' {
                        "manifest.json".into()
                    } else {
                        blob(x)
                    },
                    blob: blob(x),
                    size: if x == 'a' { 1000 } else { 10 },
                })
                .collect(),
            held: None,
            layers: vec![blob('b'), blob('a')],
        }
    }

    /// A node whose store holds the blobs `has` (verified), with `held`.
    fn node(has: &[char], held: Option<Held>, graph_free: u64) -> Prepared {
        let files = exported()
            .files
            .iter()
            .filter(|f| has.iter().any(|&x| blob(x) == f.blob))
            .map(|f| FileFacts {
                path: f.path.clone(),
                blob: f.blob.clone(),
                size: Some(f.size),
                sha256: Some(f.blob.clone()),
            })
            .collect();
        Prepared {
            facts: NodeFacts {
                hub: "/root/.local/share/halobox/images".into(),
                free: 1 << 40,
                model: Some(ModelFacts {
                    commit: Some(COMMIT.into()),
                    refs: vec![],
                    commits: vec![COMMIT.into()],
                    files,
                }),
            },
            held,
            graph_free,
            docker: false,
        }
    }

    fn labels() -> Vec<String> {
        ["node a", "node b", "node c"].map(String::from).to_vec()
    }

    #[test]
    fn only_missing_blobs_move_and_nodes_holding_the_digest_import_nothing() {
        let e = exported();
        let holds = Held {
            digests: vec![e.digest.clone()],
            id: e.id.clone(),
        };
        let nodes = [
            node(&['d', 'c', 'a', 'b'], None, 1 << 40),
            node(&['a'], Some(holds), 1 << 40),
            node(&['a'], None, 1 << 40),
        ];
        let p = plan("reg:5000/x/y:v2", &e, &labels(), &nodes).unwrap();
        assert!(p.nodes[0].import && p.nodes[0].blobs.is_empty());
        assert!(!p.nodes[1].import && p.nodes[1].blobs.is_empty());
        assert!(p.nodes[2].import);
        assert_eq!(p.nodes[2].blobs, [blob('d'), blob('c'), blob('b')]);
        assert_eq!(p.nodes[2].bytes, 30);
        assert_eq!(p.blobs.stream_bytes(), 30);
        let text = render(&p);
        assert!(text.contains("node b: holds it already"), "{text}");
        assert!(text.contains("node c: receives 3 blob(s), 30 B"), "{text}");
        assert!(text.contains("chain: node a -> node c"), "{text}");
    }

    #[test]
    fn the_stream_carries_the_small_files_then_the_layers_base_first() {
        let e = exported();
        let nodes = [
            node(&['d', 'c', 'a', 'b'], None, 1 << 40),
            node(&[], None, 1 << 40),
            node(&[], None, 1 << 40),
        ];
        let p = plan("reg:5000/x/y:v2", &e, &labels(), &nodes).unwrap();
        let sent: Vec<&str> = p
            .blobs
            .send
            .iter()
            .map(|&k| p.blobs.files[k].blob.as_str())
            .collect();
        // The manifest's layers are b then a, whatever order the files are in.
        assert_eq!(sent[2..], [blob('b').as_str(), blob('a').as_str()]);
        assert!(sent[..2].contains(&blob('d').as_str()) && sent[..2].contains(&blob('c').as_str()));
    }

    #[test]
    fn a_localhost_image_or_a_docker_node_is_held_by_the_image_id() {
        let e = exported();
        let same_id = Held {
            digests: vec![],
            id: e.id.clone(),
        };
        let nodes = [
            node(&['d', 'c', 'a', 'b'], None, 1 << 40),
            node(&[], Some(same_id.clone()), 1 << 40),
            node(&[], Some(same_id), 1 << 40),
        ];
        let p = plan("localhost/x:1", &e, &labels(), &nodes).unwrap();
        assert!(p.nodes[1..].iter().all(|n| !n.import && n.blobs.is_empty()));
        let p = plan("reg:5000/x/y:1", &e, &labels(), &nodes).unwrap();
        assert!(p.nodes[1..].iter().all(|n| n.import));
        // Docker keeps no registry digest for a loaded image: its id counts.
        let mut nodes = nodes;
        nodes[1].docker = true;
        let p = plan("reg:5000/x/y:1", &e, &labels(), &nodes).unwrap();
        assert!(!p.nodes[1].import && p.nodes[2].import);
    }

    #[test]
    fn a_localhost_image_every_node_holds_with_the_heads_id_is_not_exported() {
        let id = format!("sha256:{}", blob('c'));
        let other = format!("sha256:{}", blob('e'));
        let h = |id: &str| {
            Some(Held {
                digests: vec![],
                id: id.into(),
            })
        };
        let all = [h(&id), h(&id), h(&id)];
        let p = plan_held("localhost/x:1", "node a", &labels(), &all).expect("nothing to export");
        assert!(!p.exported && p.digest.is_none() && p.size.is_none());
        assert_eq!(p.id, id);
        assert!(
            p.nodes
                .iter()
                .all(|n| !n.import && n.blobs.is_empty() && n.bytes == 0)
        );
        assert_eq!(p.blobs.stream_bytes(), 0);
        assert!(p.blobs.chain().is_empty());
        let text = render(&p);
        assert!(
            text.contains("so node a exports nothing and nothing moves"),
            "{text}"
        );
        assert!(text.contains("node c: holds it already"), "{text}");
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["exported"], false, "{json}");
        assert_eq!(json["nodes"][2]["bytes"], 0, "{json}");
        // One node with another id, or none, or a head without it: the
        // head exports, as for any image.
        for held in [
            [h(&id), h(&other), h(&id)],
            [h(&id), None, h(&id)],
            [None, h(&id), h(&id)],
        ] {
            assert!(plan_held("localhost/x:1", "node a", &labels(), &held).is_none());
        }
        // A registry image: its export is skipped by the store's digest.
        assert!(plan_held("reg:5000/x/y:1", "node a", &labels(), &all).is_none());
        // Exported, the plan says so.
        let nodes = [
            node(&['d', 'c', 'a', 'b'], None, 1 << 40),
            node(&[], h(&id), 1 << 40),
            node(&[], h(&id), 1 << 40),
        ];
        let p = plan("localhost/x:1", &exported(), &labels(), &nodes).unwrap();
        assert!(p.exported && p.size == Some(1030));
    }

    #[test]
    fn a_node_without_room_for_the_import_is_named_before_anything_moves() {
        let e = exported();
        let nodes = [
            node(&['d', 'c', 'a', 'b'], None, 1 << 40),
            node(&[], None, 100),
            node(&[], None, 1 << 40),
        ];
        let err = plan("reg:5000/x/y:1", &e, &labels(), &nodes).unwrap_err();
        assert!(
            err.0
                .contains("not enough disk, nothing was sent: node b has 100 B free"),
            "{}",
            err.0
        );
    }
}

//! `cluster refresh`: every node onto one image digest in two phases. Each
//! node stages its new container (`halobox refresh --stage`: pull, pin,
//! create, check, nothing swapped); only when every node is staged does
//! any node swap (`--commit-staged ID`). A node that fails to stage leaves
//! every node on its old container (the staged ones are discarded:
//! `--discard-staged`) and is named with its error. The digest is fixed
//! once: given in `--image`, else the head's pull resolves it and the other
//! nodes pull `REPO@DIGEST`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};
use crate::cluster::run::{each_node, ray_nodes, remote_node};
use crate::container::backend::Backend;
use crate::image_ref::ImageRef;
use crate::remote;

/// How long one node's stage (the pull of a large image included) may take.
const STAGE_TIMEOUT: Duration = Duration::from_secs(2 * 3600);
/// How long one node's swap or discard may take.
const SWAP_TIMEOUT: Duration = Duration::from_secs(600);
/// The line a node's refresh prints once its pull resolved the digest.
const DIGEST_LINE: &str = "==> image digest ";

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The image, with the channel's tag when it named none.
    pub image: ImageRef,
    /// The channel (`latest`, `dev`), for the containers' label.
    pub channel: String,
    /// `--memlock` for the nodes' refresh, when given.
    pub memlock: Option<String>,
    /// Stop Ray before the swap and start it again after.
    pub restart: bool,
}

/// What a node is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Pull, create and check the new container; swap nothing.
    Stage,
    /// Swap in the staged container with this id.
    Commit(String),
    /// Remove the staged container.
    Discard,
}

/// The refresh backend a node's Ray backend means (`host`: none, no container).
pub fn backend(b: NodeBackend) -> Option<Backend> {
    match b {
        NodeBackend::Host => None,
        NodeBackend::Toolbox => Some(Backend::Toolbox),
        NodeBackend::Distrobox => Some(Backend::Distrobox),
        NodeBackend::Podman => Some(Backend::Podman),
        NodeBackend::Docker => Some(Backend::Docker),
    }
}

/// The nodes refreshed (those with a container) and the ones skipped, with why.
pub fn split(cfg: &ClusterConfig) -> (Vec<NodeConfig>, Vec<String>) {
    let mut nodes = Vec::new();
    let mut skipped = Vec::new();
    for n in &cfg.nodes {
        match backend(n.backend) {
            Some(_) => nodes.push(n.clone()),
            None => skipped.push(format!(
                "node {}: its Ray runs on the host (backend host): no container to refresh",
                n.label()
            )),
        }
    }
    (nodes, skipped)
}

/// The command `node` runs for `phase`, from `reference`.
pub fn command(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
    phase: &Phase,
) -> Vec<String> {
    let backend = backend(node.backend).map_or("podman".to_string(), |b| b.to_string());
    let mut argv: Vec<String> = [
        cfg.halobox.as_str(),
        "refresh",
        req.channel.as_str(),
        "--image",
        reference,
        "--name",
        node.container.as_str(),
        "--backend",
        backend.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(m) = &req.memlock {
        argv.extend(["--memlock".to_string(), m.clone()]);
    }
    match phase {
        Phase::Stage => argv.extend(["--yes".into(), "--stage".into()]),
        Phase::Commit(id) => argv.extend(["--commit-staged".into(), id.clone(), "--json".into()]),
        Phase::Discard => argv.push("--discard-staged".into()),
    }
    argv
}

/// `REPO@DIGEST` of `image`.
pub fn pinned(image: &ImageRef, digest: &str) -> String {
    format!("{}@{digest}", image.repository)
}

/// The plan as `--dry-run` prints it.
pub fn render_plan(cfg: &ClusterConfig, req: &Request) -> String {
    let (nodes, skipped) = split(cfg);
    let mut out = String::from("halobox cluster refresh plan (dry run: nothing was changed)\n");
    let given = req.image.digest.clone();
    let (first, reference) = match &given {
        Some(d) => {
            out.push_str(&format!(
                "  image    {} (digest {d}, on every node)\n",
                req.image
            ));
            (None, req.image.to_string())
        }
        None => {
            let head = nodes.first().map_or("-", |n| n.label());
            out.push_str(&format!(
                "  image    {}: node {head}'s pull resolves it to one digest; the other nodes pull {}@<that digest>\n",
                req.image, req.image.repository
            ));
            (nodes.first(), pinned(&req.image, "<digest>"))
        }
    };
    for s in &skipped {
        out.push_str(&format!("  skipped  {s}\n"));
    }
    out.push_str(&format!(
        "  Ray      asked on the head ({}:{}); if it runs, {}\n",
        cfg.head().ip,
        cfg.ray_port,
        if req.restart {
            "`cluster down` before the swap and `cluster up` after it (--restart)"
        } else {
            "nothing is swapped: pass --restart to stop it for the swap and start it again"
        }
    ));
    out.push_str(&format!(
        "  each node's command runs there over ssh ({}), under halobox's guard\n",
        nodes
            .iter()
            .map(|n| format!("{} at {}", n.label(), n.ssh))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let line = |n: &NodeConfig, reference: &str, phase: &Phase| {
        crate::shell::line(&command(cfg, n, req, reference, phase))
    };
    out.push_str(
        "  1. stage, on every node at once (pull, pin, create, check; nothing is swapped):\n",
    );
    for n in &nodes {
        let r = if Some(n) == first {
            req.image.to_string()
        } else {
            reference.clone()
        };
        let when = if Some(n) == first {
            " (first: the others start once its digest is known)"
        } else {
            ""
        };
        out.push_str(&format!(
            "     {}{when}: {}\n",
            n.label(),
            line(n, &r, &Phase::Stage)
        ));
    }
    out.push_str("  2. only when every node is staged, swap on every node at once:\n");
    for n in &nodes {
        out.push_str(&format!(
            "     {}: {}\n",
            n.label(),
            line(n, &reference, &Phase::Commit("<ID>".into()))
        ));
    }
    out.push_str(
        "  if any node fails to stage: discard on every staged node (every node keeps its old container):\n",
    );
    for n in &nodes {
        out.push_str(&format!(
            "     {}: {}\n",
            n.label(),
            line(n, &reference, &Phase::Discard)
        ));
    }
    out
}

/// What a node's `refresh --stage` printed.
#[derive(Debug, Clone, Deserialize)]
struct StagedLine {
    staged: String,
    image: String,
    digest: Option<String>,
}

/// One node's result.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    /// Node name.
    pub node: String,
    /// `swapped`, `staged`, `discarded`, `failed`, `not started`, `skipped`.
    pub outcome: String,
    /// The container now in place (or staged), when known.
    pub container: Option<String>,
    /// The pinned image.
    pub image: Option<String>,
    /// Its digest.
    pub digest: Option<String>,
    /// What went wrong, or what was done.
    pub detail: String,
}

/// What `cluster refresh` did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The image asked for.
    pub image: String,
    /// The one digest every node runs (once known).
    pub digest: Option<String>,
    /// Every container was swapped.
    pub ok: bool,
    /// Ray was stopped for the swap and started again.
    pub restarted: bool,
    /// Per node.
    pub nodes: Vec<NodeResult>,
    /// Lines for the user.
    pub notes: Vec<String>,
    /// Seconds it took.
    pub seconds: f64,
}

/// A node's staged container, or why it has none.
type Stage = Result<StagedLine, String>;

/// Runs one node's stage, printing its progress; sends the digest on
/// `digest` as soon as the node's pull resolved it.
fn stage_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
    digest: Option<&mpsc::Sender<String>>,
) -> Stage {
    let rn = remote_node(cfg, node);
    let label = node.label().to_string();
    let mut proc = rn
        .spawn(&command(cfg, node, req, reference, &Phase::Stage))
        .map_err(|e| e.to_string())?;
    let _ = proc.wait_for_line(
        |l| {
            eprintln!("[{label}] {l}");
            if let (Some(tx), Some(d)) = (digest, l.strip_prefix(DIGEST_LINE)) {
                let _ = tx.send(d.trim().to_string());
            }
            false
        },
        STAGE_TIMEOUT,
    );
    let done = proc.complete(remote::STOP_GRACE, remote::STOP_GRACE);
    if !done.status.is_some_and(|s| s.success()) {
        return Err(rn.error("`halobox refresh --stage`", &done).to_string());
    }
    let line = done
        .stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    remote::parse_json(line).map_err(|e| {
        format!(
            "node {label}: its halobox printed no staged container ({e}): is it the same version as this one? `halobox cluster install` copies this one"
        )
    })
}

/// Runs `phase` (commit or discard) on `node`; the node's output on failure.
fn finish_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
    phase: &Phase,
) -> Result<String, String> {
    let what = match phase {
        Phase::Commit(_) => "`halobox refresh --commit-staged`",
        _ => "`halobox refresh --discard-staged`",
    };
    remote_node(cfg, node)
        .run_ok(
            what,
            &command(cfg, node, req, reference, phase),
            SWAP_TIMEOUT,
        )
        .map(|d| d.stdout)
        .map_err(|e| e.to_string())
}

/// Stages every node: the head first when the digest is not known, the
/// others once its pull resolved it. Returns the digest and each node's stage
/// (`None`: not started).
fn stage_all(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    req: &Request,
) -> (Option<String>, Vec<Option<Stage>>) {
    if let Some(d) = &req.image.digest {
        let reference = req.image.to_string();
        let stages = each_node(nodes, |n| Some(stage_node(cfg, n, req, &reference, None)));
        return (Some(d.clone()), stages);
    }
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        let first =
            s.spawn(move || stage_node(cfg, &nodes[0], req, &req.image.to_string(), Some(&tx)));
        let digest = rx.recv().ok();
        let rest = match &digest {
            Some(d) => {
                let reference = pinned(&req.image, d);
                each_node(&nodes[1..], |n| {
                    Some(stage_node(cfg, n, req, &reference, None))
                })
            }
            None => vec![None; nodes.len() - 1],
        };
        let mut stages = vec![Some(first.join().expect("stage thread"))];
        stages.extend(rest);
        (digest, stages)
    })
}

/// `cluster refresh`: stage everywhere, then swap everywhere (or nowhere).
pub fn run(cfg: &ClusterConfig, config_path: &std::path::Path, req: &Request) -> Report {
    let t0 = Instant::now();
    let (nodes, skipped) = split(cfg);
    let mut report = Report {
        image: req.image.to_string(),
        digest: req.image.digest.clone(),
        ok: false,
        restarted: false,
        nodes: Vec::new(),
        notes: skipped,
        seconds: 0.0,
    };
    if nodes.is_empty() {
        report
            .notes
            .push("no node runs Ray in a container: nothing to refresh".into());
        report.ok = true;
        return report;
    }
    // Whether Ray runs is asked while the nodes stage (it touches nothing).
    let (ray, (digest, stages)) = std::thread::scope(|s| {
        let ray = s.spawn(|| ray_nodes(cfg, 0, 5).map(|r| r.alive().count()));
        let staged = stage_all(cfg, &nodes, req);
        (ray.join().expect("ray thread"), staged)
    });
    report.digest = digest.clone();
    let reference = digest
        .as_deref()
        .map_or(req.image.to_string(), |d| pinned(&req.image, d));
    let mut failures: Vec<String> = Vec::new();
    for (n, st) in nodes.iter().zip(&stages) {
        match st {
            Some(Ok(s)) if s.digest.is_some() && s.digest == digest => {}
            Some(Ok(s)) => failures.push(format!(
                "node {}: staged digest {} is not {}",
                n.label(),
                s.digest.as_deref().unwrap_or("(none)"),
                digest.as_deref().unwrap_or("(unknown)")
            )),
            Some(Err(e)) => failures.push(e.clone()),
            None => {}
        }
    }
    let running = match &ray {
        Ok(alive) => *alive,
        Err(e) => {
            report.notes.push(format!(
                "could not ask Ray on the head whether it runs ({}); taken as not running",
                remote::tail(&format!("{e:#}"), 1)
            ));
            0
        }
    };
    if failures.is_empty() && running > 0 && !req.restart {
        failures.push(format!(
            "Ray is running in the cluster ({running} node(s) alive): swapping the containers would stop it\n  hint: pass --restart (cluster down, swap, cluster up), or `halobox cluster down` first"
        ));
    }
    if !failures.is_empty() || stages.iter().any(Option::is_none) {
        if failures.is_empty() {
            failures.push("the first node's pull did not resolve a digest".into());
        }
        report.nodes = discard_all(cfg, &nodes, req, &reference, &stages);
        report.notes.extend(failures);
        report.seconds = t0.elapsed().as_secs_f64();
        return report;
    }
    if running > 0 {
        let down = crate::cluster::run::down(cfg);
        for d in down.iter().filter(|d| d.outcome != "stopped") {
            report
                .notes
                .push(format!("{}: Ray not stopped: {}", d.name, d.detail));
        }
    }
    let staged: Vec<StagedLine> = stages
        .into_iter()
        .map(|s| s.expect("started").expect("staged"))
        .collect();
    let results = each_node(&nodes, |n| {
        let i = nodes.iter().position(|m| m == n).expect("node");
        finish_node(
            cfg,
            n,
            req,
            &reference,
            &Phase::Commit(staged[i].staged.clone()),
        )
    });
    for ((n, s), r) in nodes.iter().zip(&staged).zip(results) {
        report.nodes.push(match r {
            Ok(_) => NodeResult {
                node: n.label().into(),
                outcome: "swapped".into(),
                container: Some(s.staged.clone()),
                image: Some(s.image.clone()),
                digest: s.digest.clone(),
                detail: format!("{} now runs {}", n.container, s.image),
            },
            Err(e) => NodeResult {
                node: n.label().into(),
                outcome: "failed".into(),
                container: None,
                image: None,
                digest: None,
                detail: e,
            },
        });
    }
    report.ok = report.nodes.iter().all(|r| r.outcome == "swapped");
    if !report.ok {
        report.notes.push(
            "the swap failed on the node(s) marked failed after the others had swapped: those keep their old container; `halobox refresh --rollback` on a swapped node brings its old one back".into(),
        );
    }
    if running > 0 {
        match crate::cluster::run::up(cfg, config_path, false, cfg.timeout_s) {
            Ok(()) => report.restarted = true,
            Err(e) => {
                report.ok = false;
                report.notes.push(format!("Ray did not start again: {e:#}"));
            }
        }
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

/// Discards every staged container; results per node.
fn discard_all(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    req: &Request,
    reference: &str,
    stages: &[Option<Stage>],
) -> Vec<NodeResult> {
    let done = each_node(nodes, |n| {
        let i = nodes.iter().position(|m| m == n).expect("node");
        match &stages[i] {
            Some(Ok(_)) => Some(finish_node(cfg, n, req, reference, &Phase::Discard)),
            _ => None,
        }
    });
    nodes
        .iter()
        .zip(stages)
        .zip(done)
        .map(|((n, st), d)| {
            let (outcome, detail) = match (st, d) {
                (None, _) => ("not started", "kept its old container".to_string()),
                (Some(Err(e)), _) => ("failed", e.clone()),
                (Some(Ok(_)), Some(Ok(_))) => (
                    "discarded",
                    "the staged container was removed; it keeps its old container".to_string(),
                ),
                (Some(Ok(s)), Some(Err(e))) => (
                    "failed",
                    format!(
                        "the staged container {} could not be removed ({e}); its old container is untouched: run `halobox refresh --discard-staged --name {}` there",
                        s.staged, n.container
                    ),
                ),
                (Some(Ok(_)), None) => ("failed", String::new()),
            };
            NodeResult {
                node: n.label().into(),
                outcome: outcome.into(),
                container: None,
                image: None,
                digest: None,
                detail,
            }
        })
        .collect()
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    for n in &r.nodes {
        out.push_str(&format!("{:<16} {:<11} {}\n", n.node, n.outcome, n.detail));
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if r.ok {
        out.push_str(&format!(
            "every node runs {} ({:.1} s)\n",
            r.digest
                .as_deref()
                .map_or(r.image.clone(), |d| format!("digest {d}")),
            r.seconds
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClusterConfig {
        crate::cluster::config::parse(
            r#"
halobox = "/opt/hb/halobox"
[[node]]
name = "a"
ssh = "root@n1"
ip = "10.0.0.1"
backend = "podman"
[[node]]
name = "b"
ssh = "root@n2"
ip = "10.0.0.2"
backend = "toolbox"
container = "llm"
[[node]]
name = "c"
ssh = "root@n3"
ip = "10.0.0.3"
backend = "host"
"#,
        )
        .unwrap()
    }

    fn req(image: &str) -> Request {
        Request {
            image: ImageRef::parse(image).unwrap().for_channel("latest"),
            channel: "latest".into(),
            memlock: Some("8M".into()),
            restart: false,
        }
    }

    #[test]
    fn each_phase_is_the_nodes_own_refresh() {
        let c = cfg();
        let r = req("reg:5000/x/vllm");
        let b = &c.nodes[1];
        assert_eq!(
            command(&c, b, &r, "reg:5000/x/vllm@sha256:ab", &Phase::Stage).join(" "),
            "/opt/hb/halobox refresh latest --image reg:5000/x/vllm@sha256:ab --name llm --backend toolbox --memlock 8M --yes --stage"
        );
        let commit = command(&c, b, &r, "i", &Phase::Commit("id1".into()));
        assert!(commit.ends_with(&["--commit-staged".into(), "id1".into(), "--json".into()]));
        assert_eq!(
            command(&c, b, &r, "i", &Phase::Discard).last().unwrap(),
            "--discard-staged"
        );
        let (nodes, skipped) = split(&c);
        assert_eq!(nodes.len(), 2);
        assert!(skipped[0].contains("node c"), "{skipped:?}");
    }

    #[test]
    fn the_plan_names_every_node_the_digest_and_each_command() {
        let c = cfg();
        let text = render_plan(&c, &req("reg:5000/x/vllm@sha256:ab12"));
        assert!(text.contains("digest sha256:ab12, on every node"), "{text}");
        assert!(text.contains("a at root@n1"), "{text}");
        assert!(
            text.contains("     a: /opt/hb/halobox refresh latest"),
            "{text}"
        );
        assert!(text.contains("--commit-staged '<ID>'"), "{text}");
        assert!(text.contains("--discard-staged"), "{text}");
        assert!(text.contains("pass --restart"), "{text}");
        assert!(!text.contains("     c: "), "{text}");
        let text = render_plan(&c, &req("reg:5000/x/vllm"));
        assert!(
            text.contains("node a's pull resolves it to one digest"),
            "{text}"
        );
        assert!(
            text.contains("--image reg:5000/x/vllm:latest --name vllm"),
            "{text}"
        );
        assert!(text.contains("'reg:5000/x/vllm@<digest>'"), "{text}");
    }
}

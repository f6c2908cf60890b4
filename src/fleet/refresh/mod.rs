//! `cluster refresh`: every node onto one image digest in two phases. Each
//! node stages its new container (`halobox refresh --stage` over ssh: pull,
//! pin, create, check, nothing swapped), all at once, and then waits on its
//! ssh link for a word; only when every node is staged on the one digest
//! does each get `commit` (it swaps), else each gets `discard` (it removes
//! what it staged; a link that drops means the same), and the node that
//! failed is named with its error. The digest is the one in `--image`, else
//! the one the head's pull resolved; a node whose pull of the tag gave
//! another (the tag moved meanwhile) stages `REPO@DIGEST` again
//! (`stage.rs`: the first phase on every node).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cluster::config::{ClusterConfig, Engine, NodeBackend, NodeConfig};
use crate::cluster::plan::RayNodes;
use crate::fan_out::each;
use crate::fleet::ray_state::{self, RayState};
use crate::fleet::refresh_verify as verify;
use crate::image_ref::ImageRef;
use crate::refresh::pull::{self, PullPolicy};
use crate::refresh::word::Word;
use crate::reporter::Reporter;
use crate::serve::rpc_servers::{self, RpcStatus};
use crate::shell;

mod stage;

use stage::{Gate, Stage, Waiting, discard_all, finish_node, stage_all, staged_failure};

/// How long one node's swap or discard may take.
pub(super) const SWAP_TIMEOUT: Duration = Duration::from_secs(600);
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
    /// `--pull` for the nodes' refresh, when given.
    pub pull: Option<PullPolicy>,
    /// `--from-registry`: every node pulls on its own, instead of the image
    /// moved once over the data plane ([`crate::cluster::refresh_image`]).
    pub from_registry: bool,
    /// `--verify` (the default while a serve is recorded): the serve proves
    /// the new containers, else every node goes back.
    pub verify: Option<verify::Options>,
}

impl Request {
    /// True when the nodes are compared by image id, not digest: a
    /// `localhost/` image is built or loaded on each node, so it has no
    /// registry digest of its own (a save/load keeps its id).
    pub fn by_id(&self) -> bool {
        pull::is_local(&self.image)
    }
}

/// The `halobox refresh --stage` that `node` runs, from `reference`.
pub fn command(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
) -> Vec<String> {
    let backend = node
        .backend
        .refresh_backend()
        .map_or("podman".to_string(), |b| b.to_string());
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
    if let Some(p) = req.pull {
        argv.extend(["--pull".to_string(), p.to_string()]);
    }
    if req.verify.is_some() {
        argv.push("--check".into());
    }
    argv.extend(["--yes", "--json", "--stage"].map(String::from));
    argv
}

/// `REPO@DIGEST` of `image`.
pub fn pinned(image: &ImageRef, digest: &str) -> String {
    format!("{}@{digest}", image.repository)
}

/// The plan as `--dry-run` prints it.
pub fn render_plan(cfg: &ClusterConfig, req: &Request) -> String {
    let (nodes, skipped) = cfg.container_nodes();
    let mut out = String::from("halobox cluster refresh plan (dry run: nothing was changed)\n");
    if !req.from_registry {
        out.push_str(&format!(
            "  image    {}: moved once over the data plane first: node {} gets it (a pull, or its own localhost/ image), every other node receives only the layers it lacks, digest kept (`halobox image sync {} --dry-run` lists them per node); then each node stages it from its own engine, never pulling (a registry image as REPO@DIGEST); --from-registry: every node pulls on its own instead\n",
            req.image,
            nodes.first().map_or("-", |n| n.label()),
            req.image
        ));
        if let Some(why) = crate::cluster::image_sync::refusal(&nodes) {
            out.push_str(&format!("  refused  {why}\n"));
        }
    }
    match &req.image.digest {
        _ if !req.from_registry => {}
        _ if req.by_id() => out.push_str(&format!(
            "  image    {}: a localhost/ image, made on each node from its own engine's image (build it there, or copy it with save/load); every node's must have the head's image id\n",
            req.image
        )),
        Some(d) => out.push_str(&format!(
            "  image    {} (digest {d}, on every node)\n",
            req.image
        )),
        None => out.push_str(&format!(
            "  image    {}: node {}'s pull resolves it to one digest; a node whose pull gives another (the tag moved meanwhile) removes what it staged and stages {} instead\n",
            req.image,
            nodes.first().map_or("-", |n| n.label()),
            shell::quote(&pinned(&req.image, "<digest>"))
        )),
    }
    for s in &skipped {
        out.push_str(&format!("  skipped  {s}\n"));
    }
    out.push_str(&format!(
        "  Ray      asked on the head ({}:{}), else looked for in every node's processes (raylet, gcs_server); if it runs, or cannot be told, {}\n",
        cfg.head().ip,
        cfg.ray_port,
        if req.restart {
            "`cluster down` before the swap and `cluster up` after it (--restart)"
        } else {
            "nothing is swapped: pass --restart to stop it for the swap and start it again"
        }
    ));
    out.push_str(&format!(
        "  each node's command runs there over ssh ({})\n",
        nodes
            .iter()
            .map(|n| format!("{} at {}", n.label(), n.ssh))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(
        "  1. stage, on every node at once (pull, pin, create, check; nothing is swapped), each then waiting for a word on its ssh link:\n",
    );
    for n in &nodes {
        out.push_str(&format!(
            "     {}: {}\n",
            n.label(),
            shell::line(&command(cfg, n, req, &req.image.to_string()))
        ));
    }
    out.push_str(match req.verify {
        Some(_) => "  2. only when every node is staged on that digest and its staged container passes every `halobox check` its current one passes, the serve and Ray (or the RPC servers) stop and `commit` goes to every node at once: each swaps, keeping its old container as NAME-prev\n",
        None => "  2. only when every node is staged on that digest, `commit` to every node at once: each swaps\n",
    });
    out.push_str(
        "  if any node fails to stage: `discard` to every staged node, each removes its staged container and keeps its old one (a link that drops means `discard` too)\n",
    );
    if let Some(o) = &req.verify {
        out.push_str(&verify::render_plan(cfg, o));
    }
    out
}

/// One node's result.
#[derive(Debug, Clone, Serialize)]
pub struct NodeResult {
    /// Node name.
    pub node: String,
    /// `swapped`, `discarded`, `failed`.
    pub outcome: String,
    /// The container now in place, when swapped.
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
    /// The engine's cluster (Ray, or llama.cpp's RPC servers) was stopped
    /// for the swap and started again.
    pub restarted: bool,
    /// Per node.
    pub nodes: Vec<NodeResult>,
    /// Lines for the user.
    pub notes: Vec<String>,
    /// Seconds it took.
    pub seconds: f64,
    /// The proof by the recorded serve (`--verify`), once the swap was made.
    pub verify: Option<verify::Verified>,
}

/// `cluster refresh`: stage everywhere, then swap everywhere (or nowhere);
/// with `--verify`, the recorded serve proves the new containers after the
/// swap or every node goes back ([`super::refresh_verify`]).
pub fn run(
    cfg: &ClusterConfig,
    config_path: &std::path::Path,
    req: &Request,
    r: &mut dyn Reporter,
) -> Report {
    let t0 = Instant::now();
    let (nodes, skipped) = cfg.container_nodes();
    let mut report = Report {
        image: req.image.to_string(),
        digest: req.image.digest.clone(),
        ok: false,
        restarted: false,
        nodes: Vec::new(),
        notes: skipped,
        seconds: 0.0,
        verify: None,
    };
    if nodes.is_empty() {
        report
            .notes
            .push("no node runs Ray in a container: nothing to refresh".into());
        report.ok = true;
        return report;
    }
    let base = match req.verify.as_ref().map(|_| verify::baseline(config_path)) {
        None => None,
        Some(Ok(b)) => {
            report.notes.extend(b.notes.iter().cloned());
            Some(b)
        }
        Some(Err(why)) => return report.ended(why, t0),
    };
    let moved = match moved_first(cfg, &nodes, req, &mut report.notes) {
        Ok(m) => m,
        Err(why) => return report.ended(why, t0),
    };
    let req = moved.as_ref().unwrap_or(req);
    let (ray, head, digest, stages) = stage_everywhere(cfg, &nodes, req, &mut report.notes);
    report.digest = digest.clone();
    if let Some(pause) = crate::refresh::run::test_pause("commit") {
        std::thread::sleep(pause);
    }
    let mut stages = stages;
    let failures = before_swap(
        &nodes,
        &mut stages,
        req,
        &digest,
        (engine_words(cfg), &ray, &head),
        &mut report.notes,
    );
    if !failures.is_empty() {
        report.nodes = discard_all(cfg, &nodes, stages);
        report.notes.extend(failures);
        report.seconds = t0.elapsed().as_secs_f64();
        return report;
    }
    let restart = ray != RayState::Stopped;
    let down_from = Instant::now();
    if base.is_some() {
        report.notes.extend(verify::stop_serving(cfg, config_path));
    } else if restart {
        report
            .notes
            .extend(super::lifecycle::engine_down(cfg, None));
    }
    swap_all(cfg, &nodes, stages, &mut report);
    match (&base, &req.verify) {
        (Some(b), Some(o)) => {
            prove_or_go_back(cfg, config_path, (b, o), &nodes, down_from, &mut report, r)
        }
        _ if restart => engine_up(cfg, config_path, &mut report, r),
        _ => {}
    }
    report.seconds = t0.elapsed().as_secs_f64();
    report
}

impl Report {
    /// The report of a run that stopped before anything changed.
    fn ended(mut self, why: String, t0: Instant) -> Report {
        self.notes.push(why);
        self.seconds = t0.elapsed().as_secs_f64();
        self
    }
}

/// The request after the image was moved once over the data plane
/// (`None`: `--from-registry`, every node pulls as asked); `Err`: why the
/// move failed (nothing changed).
fn moved_first(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    req: &Request,
    notes: &mut Vec<String>,
) -> Result<Option<Request>, String> {
    if req.from_registry {
        return Ok(None);
    }
    let (image, pull, lines) = crate::cluster::refresh_image::move_first(cfg, nodes, &req.image)?;
    notes.extend(lines);
    Ok(Some(Request {
        image,
        pull: Some(pull),
        ..req.clone()
    }))
}

/// Ray's state as found while the nodes stage, with the head's answer.
type RayFound = (RayState, Result<RayNodes, String>);

/// What the engine's cluster is called in a message, with its verb and
/// pronoun: `Ray` (is, it), or with engine llama.cpp its RPC servers (are,
/// them: they run in the nodes' containers, so a swap stops them too).
type Words = (&'static str, &'static str, &'static str);

/// The [`Words`] for `cfg`'s engine.
fn engine_words(cfg: &ClusterConfig) -> Words {
    match cfg.engine {
        Engine::LlamaCpp => ("llama.cpp's RPC servers", "are", "them"),
        _ => ("Ray", "is", "it"),
    }
}

/// Whether the engine's cluster runs: Ray (asked on the head, else every
/// node's processes looked at), or with engine llama.cpp the RPC servers
/// (each worker's state asked in its container; no Ray to ask).
fn engine_state(cfg: &ClusterConfig, nodes: &[NodeConfig]) -> RayFound {
    match cfg.engine {
        Engine::LlamaCpp => (
            rpc_state(&rpc_servers::status(cfg, false)),
            Ok(RayNodes::default()),
        ),
        _ => ray_state::ask(cfg, nodes),
    }
}

/// The RPC servers' state from each worker's row: running when one runs
/// (or is frozen: a process the swap would stop), else stopped (a node
/// whose container cannot be asked runs none in it).
fn rpc_state(rows: &[RpcStatus]) -> RayState {
    let running: Vec<&str> = rows
        .iter()
        .filter(|r| r.state == "running" || r.state == "frozen")
        .map(|r| r.name.as_str())
        .collect();
    match running.is_empty() {
        true => RayState::Stopped,
        false => RayState::Running(format!(
            "the RPC server runs on node(s) {}",
            running.join(", ")
        )),
    }
}

/// Stages every node, and meanwhile finds out whether Ray runs (the head
/// asked, else every node's processes looked at), once the first node waits
/// out its settle window: not while they pull and create.
fn stage_everywhere(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    req: &Request,
    notes: &mut Vec<String>,
) -> (
    RayState,
    Result<RayNodes, String>,
    Option<String>,
    Vec<Stage>,
) {
    let settling = Gate::default();
    let ((ray, head), (digest, stages)) = std::thread::scope(|s| {
        let ray = s.spawn(|| -> RayFound {
            settling.wait();
            engine_state(cfg, nodes)
        });
        let staged = stage_all(cfg, nodes, req, notes, &settling);
        settling.open();
        (ray.join().expect("ray thread"), staged)
    });
    (ray, head, digest, stages)
}

/// What keeps the swap from happening, each with its fix (empty: every
/// node is staged on the one digest, its checks hold, and Ray may be
/// stopped).
fn before_swap(
    nodes: &[NodeConfig],
    stages: &mut [Stage],
    req: &Request,
    digest: &Option<String>,
    ((name, is, it), ray, head): (Words, &RayState, &Result<RayNodes, String>),
    notes: &mut Vec<String>,
) -> Vec<String> {
    let mut failures: Vec<String> = Vec::new();
    for (n, st) in nodes.iter().zip(stages.iter_mut()) {
        match st {
            Ok(w) => failures.extend(staged_failure(nodes, n, w, req, digest.as_deref())),
            Err(e) => failures.push(e.clone()),
        }
    }
    if let Some(note) = absent_note(nodes, stages, &req.image) {
        failures.push(note);
    }
    if failures.is_empty() && digest.is_none() {
        failures.push(format!(
            "node {}: its pull of {} resolved no digest, so the nodes cannot be put on one image\n  hint: name it by digest: --image {}@sha256:…",
            nodes[0].label(),
            req.image,
            req.image.repository
        ));
    }
    if let (RayState::Stopped, Err(e)) = (ray, head) {
        notes.push(format!(
            "could not ask Ray on the head whether it runs ({}); no node runs a Ray daemon (raylet, gcs_server): taken as not running",
            ray_state::first_line(e)
        ));
    }
    if failures.is_empty() && !req.restart && req.verify.is_none() {
        match ray {
            RayState::Stopped => {}
            RayState::Running(how) => failures.push(format!(
                "{name} {is} running in the cluster ({how}): swapping the containers would stop {it}\n  hint: pass --restart (cluster down, swap, cluster up), or `halobox cluster down` first"
            )),
            RayState::Unknown(why) => failures.push(format!(
                "cannot tell whether {name} {is} running in the cluster ({why}): swapping the containers would stop {it} if so\n  hint: fix that and run again, or pass --restart (cluster down, swap, cluster up)"
            )),
        }
    }
    if let RayState::Unknown(why) = ray
        && failures.is_empty()
    {
        notes.push(format!(
            "cannot tell whether {name} {is} running ({why}): taken as running, so `cluster down` before the swap and `cluster up` after it (--restart)"
        ));
    }
    failures
}

/// Swaps every staged node at once (each node's result in `report`).
fn swap_all(cfg: &ClusterConfig, nodes: &[NodeConfig], stages: Vec<Stage>, report: &mut Report) {
    // No failure: every node is staged.
    let staged: Vec<Waiting> = stages.into_iter().flatten().collect();
    let results = each(staged, |i, w| {
        let line = w.line.clone();
        (line, finish_node(cfg, &nodes[i], w, Word::Commit))
    });
    for (n, (s, r)) in nodes.iter().zip(results) {
        report.nodes.push(match r {
            Ok(()) => NodeResult {
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
}

/// The engine's cluster again after the swap (`--restart`): `cluster up`
/// (Ray, or with engine llama.cpp the RPC servers), its progress through
/// `r` (stderr; stdout is the report).
fn engine_up(
    cfg: &ClusterConfig,
    config_path: &std::path::Path,
    report: &mut Report,
    r: &mut dyn Reporter,
) {
    match crate::fleet::lifecycle::engine_up(
        cfg,
        config_path,
        false,
        cfg.timeout_s,
        crate::cluster::auth::Mode::Token,
        r,
    ) {
        Ok(_) => report.restarted = true,
        Err(e) => {
            report.ok = false;
            report.notes.push(format!(
                "{} did not start again: {e:#}",
                engine_words(cfg).0
            ));
        }
    }
}

/// After the swap under `--verify`: the proof, then the old containers
/// removed, or every swapped node back on its old one and the old serve
/// started again.
fn prove_or_go_back(
    cfg: &ClusterConfig,
    config_path: &std::path::Path,
    (base, o): (&verify::Baseline, &verify::Options),
    nodes: &[NodeConfig],
    down_from: Instant,
    report: &mut Report,
    r: &mut dyn Reporter,
) {
    let swapped: Vec<NodeConfig> = nodes
        .iter()
        .zip(&report.nodes)
        .filter(|(_, r)| r.outcome == "swapped")
        .map(|(n, _)| n.clone())
        .collect();
    let mut v = match report.ok {
        true => verify::prove(cfg, config_path, base, o, down_from, r),
        false => verify::Verified {
            failed: Some(verify::Failed {
                step: verify::Step::Swap,
                node: report
                    .nodes
                    .iter()
                    .find(|r| r.outcome != "swapped")
                    .map(|r| r.node.clone()),
                detail: "the swap failed there (see above)".into(),
            }),
            down_s: down_from.elapsed().as_secs_f64(),
            ..verify::Verified::new()
        },
    };
    if v.failed.is_none() {
        v.retired = verify::retire_old(cfg, &swapped);
        report.restarted = true;
    } else {
        verify::roll_back(cfg, config_path, base, &swapped, &mut v, r);
        report.ok = false;
        report.restarted = v.outcome == "rolled_back";
        for r in report.nodes.iter_mut().filter(|r| r.outcome == "swapped") {
            r.outcome = match v.outcome.as_str() {
                "rolled_back" => "rolled back".into(),
                _ => "swapped".into(),
            };
            r.detail = format!("{} is on its old container again", r.node);
        }
    }
    report.verify = Some(v);
}

/// `podman save IMAGE | ssh TO podman load` (docker for a docker node),
/// run on `from`.
fn copy_command(from: &NodeConfig, to: &NodeConfig, image: &ImageRef) -> String {
    let cli = |n: &NodeConfig| match n.backend {
        NodeBackend::Docker => "docker",
        _ => "podman",
    };
    let img = shell::quote(&image.to_string());
    format!(
        "on {}: `{} save {img} | ssh {} {} load`",
        from.label(),
        cli(from),
        shell::quote(&to.ssh),
        cli(to)
    )
}

/// When some nodes lack the image and will not pull it: which nodes have
/// it, and the two ways to give it to the others.
fn absent_note(nodes: &[NodeConfig], stages: &[Stage], image: &ImageRef) -> Option<String> {
    let lacking: Vec<&NodeConfig> = nodes
        .iter()
        .zip(stages)
        .filter(|(_, st)| matches!(st, Err(e) if e.contains(pull::ABSENT)))
        .map(|(n, _)| n)
        .collect();
    if lacking.is_empty() {
        return None;
    }
    let having: Vec<&NodeConfig> = nodes
        .iter()
        .zip(stages)
        .filter(|(_, st)| st.is_ok())
        .map(|(n, _)| n)
        .collect();
    let names = |v: &[&NodeConfig]| v.iter().map(|n| n.label()).collect::<Vec<_>>().join(", ");
    let mut out = format!(
        "{image} is not on node(s) {}, which will not pull it{}: every node makes its container from its own engine's images\n  hint: push it to a registry every node reaches and refresh from there (`halobox publish {image} --channel dev --to REGISTRY/REPO`, then `halobox cluster refresh dev --image REGISTRY/REPO`)",
        names(&lacking),
        match having.is_empty() {
            true => String::new(),
            false => format!(" (only {} has it)", names(&having)),
        }
    );
    if let Some(from) = having.first() {
        out.push_str(", or copy it to each node that lacks it:");
        for to in &lacking {
            out.push_str(&format!("\n    {}", copy_command(from, to, image)));
        }
    }
    Some(out)
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
    if let Some(v) = &r.verify {
        out.push_str(&verify::render(v));
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
    use super::stage::StagedLine;
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
            pull: None,
            from_registry: true,
            verify: None,
        }
    }

    /// A llama.cpp cluster's RPC servers run in the containers a swap
    /// replaces: one running (or frozen) is the engine's cluster running,
    /// and the swap without --restart is refused in their words.
    #[test]
    fn running_rpc_servers_hold_the_swap_like_ray() {
        let row = |name: &str, state: &str| RpcStatus {
            name: name.into(),
            ip: "10.0.0.2".parse().unwrap(),
            state: state.into(),
            detail: String::new(),
            hello: None,
        };
        assert_eq!(rpc_state(&[]), RayState::Stopped);
        assert_eq!(
            rpc_state(&[row("b", "exited"), row("c", "unreachable")]),
            RayState::Stopped
        );
        let running = rpc_state(&[row("b", "running"), row("c", "frozen"), row("d", "none")]);
        assert_eq!(
            running,
            RayState::Running("the RPC server runs on node(s) b, c".into())
        );
        let c = crate::cluster::config::parse(
            "engine = \"llama.cpp\"\n[[node]]\nname = \"a\"\nssh = \"root@n1\"\nip = \"10.0.0.1\"\nbackend = \"podman\"\n",
        )
        .unwrap();
        let mut notes = Vec::new();
        let refused = before_swap(
            &[],
            &mut [],
            &req("reg:5000/x/vllm"),
            &Some("sha256:1".into()),
            (engine_words(&c), &running, &Ok(RayNodes::default())),
            &mut notes,
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("llama.cpp's RPC servers are running in the cluster (the RPC server runs on node(s) b, c): swapping the containers would stop them\n  hint: pass --restart"),
            "{}",
            refused[0]
        );
        assert_eq!(engine_words(&cfg()).0, "Ray");
    }

    #[test]
    fn by_default_the_plan_moves_the_image_once_and_refuses_docker_nodes() {
        let mut c = cfg();
        let r = Request {
            from_registry: false,
            ..req("reg:5000/x/vllm")
        };
        let text = render_plan(&c, &r);
        assert!(
            text.contains("moved once over the data plane first: node a gets it"),
            "{text}"
        );
        assert!(!text.contains("refused"), "{text}");
        c.nodes[1].backend = NodeBackend::Docker;
        let text = render_plan(&c, &r);
        assert!(
            text.contains("refused  node(s) b run docker") && text.contains("--from-registry"),
            "{text}"
        );
    }

    #[test]
    fn a_verified_refresh_checks_each_staged_container_and_plans_the_proof() {
        let c = cfg();
        let r = Request {
            verify: Some(verify::Options {
                soak_s: 45,
                accept_tokens: false,
            }),
            ..req("reg:5000/x/vllm@sha256:ab")
        };
        assert!(
            command(&c, &c.nodes[0], &r, "reg:5000/x/vllm@sha256:ab")
                .join(" ")
                .ends_with("--memlock 8M --check --yes --json --stage")
        );
        let text = render_plan(&c, &r);
        assert!(
            text.contains("passes every `halobox check` its current one passes"),
            "{text}"
        );
        assert!(
            text.contains("Ray and the recorded serve start again"),
            "{text}"
        );
        assert!(text.contains("a 45 s soak must PASS"), "{text}");
        assert!(
            text.contains(
                "a: /opt/hb/halobox refresh --rollback --name vllm --backend podman --yes"
            ),
            "{text}"
        );
        assert!(!render_plan(&c, &req("reg:5000/x/vllm")).contains("verify"));
    }

    #[test]
    fn each_node_stages_with_its_own_refresh() {
        let c = cfg();
        let r = req("reg:5000/x/vllm");
        let b = &c.nodes[1];
        assert_eq!(
            command(&c, b, &r, "reg:5000/x/vllm@sha256:ab").join(" "),
            "/opt/hb/halobox refresh latest --image reg:5000/x/vllm@sha256:ab --name llm --backend toolbox --memlock 8M --yes --json --stage"
        );
        let (nodes, skipped) = c.container_nodes();
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
            text.contains(
                "     a: /opt/hb/halobox refresh latest --image reg:5000/x/vllm@sha256:ab12"
            ),
            "{text}"
        );
        assert!(text.contains("`commit` to every node"), "{text}");
        assert!(text.contains("`discard` to every staged node"), "{text}");
        assert!(text.contains("pass --restart"), "{text}");
        assert!(!text.contains("     c: "), "{text}");
        let text = render_plan(&c, &req("reg:5000/x/vllm"));
        assert!(
            text.contains("node a's pull resolves it to one digest"),
            "{text}"
        );
        for x in ["a", "b"] {
            assert!(
                text.contains(&format!(
                    "     {x}: /opt/hb/halobox refresh latest --image reg:5000/x/vllm:latest"
                )),
                "{text}"
            );
        }
        assert!(text.contains("'reg:5000/x/vllm@<digest>'"), "{text}");
    }

    #[test]
    fn pull_reaches_every_node_and_a_local_image_is_compared_by_id() {
        let c = cfg();
        let mut r = req("localhost/vllm:mine");
        r.pull = Some(PullPolicy::Never);
        assert!(r.by_id());
        assert!(
            command(&c, &c.nodes[0], &r, "localhost/vllm:mine")
                .join(" ")
                .ends_with("--memlock 8M --pull never --yes --json --stage")
        );
        let text = render_plan(&c, &r);
        assert!(text.contains("must have the head's image id"), "{text}");
        assert!(!req("localhost:5000/vllm").by_id());
        let line = StagedLine {
            staged: "x".into(),
            image: "localhost/vllm:20240101-000000".into(),
            digest: Some("sha256:other-repo".into()),
            image_id: Some("sha256:id".into()),
            check: None,
        };
        assert_eq!(line.key(&r).map(String::as_str), Some("sha256:id"));
        assert_eq!(
            line.key(&req("reg/x")).map(String::as_str),
            Some("sha256:other-repo")
        );
    }

    #[test]
    fn an_image_only_one_node_has_is_refused_with_both_fixes() {
        let c = cfg();
        let nodes = &c.nodes[..2];
        let image = ImageRef::parse("localhost/vllm:mine").unwrap();
        let absent = format!(
            "node b: localhost/vllm:mine {} ...",
            crate::refresh::pull::ABSENT
        );
        let stages: Vec<Stage> = vec![Err("node a: elsewhere".into()), Err(absent.clone())];
        let note = absent_note(nodes, &stages, &image).unwrap();
        assert!(note.contains("not on node(s) b,"), "{note}");
        assert!(!note.contains("copy it"), "{note}");
        assert!(
            note.contains("hint: push it to a registry every node reaches")
                && note.contains("halobox publish localhost/vllm:mine --channel dev"),
            "{note}"
        );
        let stages: Vec<Stage> = vec![Err("node a: no ssh".into()), Err("node b: other".into())];
        assert_eq!(absent_note(nodes, &stages, &image), None);
        assert_eq!(
            copy_command(&nodes[0], &nodes[1], &image),
            "on a: `podman save localhost/vllm:mine | ssh root@n2 podman load`"
        );
    }
}

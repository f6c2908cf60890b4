//! `cluster refresh`'s first phase on every node: each node's `halobox
//! refresh --stage` over ssh, staged and waiting for its word (`commit` or
//! `discard`) on the ssh link; a node whose pull of the tag gave another
//! digest stages the head's again; why a staged node may not be swapped in.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use serde::Deserialize;

use super::{NodeResult, Request, SWAP_TIMEOUT, command, copy_command, pinned};
use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::remote_node;
use crate::fan_out::each;
use crate::fleet::refresh_verify as verify;
use crate::proc::{Proc, WaitError};
use crate::refresh::word::Word;
use crate::remote;

/// How long one node's stage (the pull of a large image included) may take.
const STAGE_TIMEOUT: Duration = Duration::from_secs(2 * 3600);

/// How a node's refresh says its new container is being watched (the
/// settle window: the node is idle, waiting).
pub(super) const CHECK_LINE: &str = "==> starting ";

/// Opens once: the first node is in its settle window, or staging ended.
#[derive(Default)]
pub(super) struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    pub(super) fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }

    pub(super) fn wait(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
}

/// What a node's `refresh --stage` printed once staged.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct StagedLine {
    pub(super) staged: String,
    pub(super) image: String,
    pub(super) digest: Option<String>,
    #[serde(default)]
    pub(super) image_id: Option<String>,
    /// `--check`: the staged container against the current one.
    #[serde(default)]
    pub(super) check: Option<crate::refresh::flow::StagedCheck>,
}

impl StagedLine {
    /// What must be the same on every node: the image id for a local
    /// image, else the digest.
    pub(super) fn key(&self, req: &Request) -> Option<&String> {
        match req.by_id() {
            true => self.image_id.as_ref(),
            false => self.digest.as_ref(),
        }
    }
}

/// A node's `refresh --stage`, staged and waiting for the word on its
/// stdin (the ssh link: closing it makes the node remove what it staged).
pub(super) struct Waiting {
    pub(super) proc: Proc,
    pub(super) line: StagedLine,
}

/// A node's staged run, or why it has none.
pub(super) type Stage = Result<Waiting, String>;

/// `node`'s `halobox refresh --stage` of `reference`, started over ssh.
/// Not under the remote guard: the guard reads the same stdin the word
/// comes on, and the staged run watches its stdin itself
/// ([`crate::refresh::word`]).
pub(super) fn spawn_stage(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
) -> Result<Proc, String> {
    crate::cluster::run::remote_node(cfg, node)
        .spawn_unguarded(&command(cfg, node, req, reference))
        .map_err(|e| e.message)
}

/// Stages `node` from `reference`, printing its progress, until it is
/// staged (and waits for the word) or fails; opens `settling` when the
/// node's start check begins.
pub(super) fn stage_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    req: &Request,
    reference: &str,
    settling: &Gate,
) -> Result<Waiting, String> {
    let rn = remote_node(cfg, node);
    let label = node.label().to_string();
    let mut proc = spawn_stage(cfg, node, req, reference)?;
    let staged = std::cell::RefCell::new(None);
    let waited = proc.wait_for_line(
        |l| {
            if l.starts_with("{\"")
                && let Ok(s) = remote::parse_json::<StagedLine>(l)
            {
                *staged.borrow_mut() = Some(s);
                return true;
            }
            if l.starts_with(CHECK_LINE) {
                settling.open();
            }
            eprintln!("[{label}] {l}");
            false
        },
        STAGE_TIMEOUT,
    );
    match (waited, staged.into_inner()) {
        (Ok(()), Some(line)) => Ok(Waiting { proc, line }),
        (Err(WaitError::Timeout), _) => Err(format!(
            "{}: `halobox refresh --stage` was not staged within {} s: stopped (it removes what it made)",
            rn.label(),
            STAGE_TIMEOUT.as_secs()
        )),
        _ => {
            let done = proc.complete(remote::STOP_GRACE, remote::STOP_GRACE);
            Err(if done.status.is_some_and(|s| s.success()) {
                format!(
                    "node {label}: its halobox printed no staged container: is it the same version as this one? `halobox cluster install` copies this one"
                )
            } else {
                rn.error("`halobox refresh --stage`", &done).to_string()
            })
        }
    }
}

/// Sends `word` to a staged node and waits for it to swap or discard; the
/// node's error when it did not.
pub(super) fn finish_node(
    cfg: &ClusterConfig,
    node: &NodeConfig,
    w: Waiting,
    word: Word,
) -> Result<(), String> {
    let what = match word {
        Word::Commit => "`halobox refresh --stage` (the swap)",
        Word::Discard => "`halobox refresh --stage` (removing the staged container)",
    };
    let mut proc = w.proc;
    // A write that fails means the run ended already: its status says how.
    let _ = proc.send(word.line().as_bytes());
    let done = proc.complete(SWAP_TIMEOUT, remote::STOP_GRACE);
    if done.status.is_some_and(|s| s.success()) {
        Ok(())
    } else {
        Err(remote_node(cfg, node).error(what, &done).to_string())
    }
}

/// Stages every node at once from the image asked for. The digest is the
/// one asked for, else the one the head's pull resolved: a node whose pull
/// of the tag gave another (the tag moved meanwhile) removes what it staged
/// and stages `REPO@DIGEST` of the head's. Returns the digest (`None`: the
/// head has none) and each node's stage.
pub(super) fn stage_all(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    req: &Request,
    notes: &mut Vec<String>,
    settling: &Gate,
) -> (Option<String>, Vec<Stage>) {
    let reference = req.image.to_string();
    let mut stages: Vec<Stage> = each(nodes, |_, n| stage_node(cfg, n, req, &reference, settling));
    let head = match &stages[0] {
        Ok(w) => w.line.key(req).cloned(),
        _ => None,
    };
    if req.by_id() {
        return (head, stages);
    }
    let Some(d) = req.image.digest.clone().or(head) else {
        return (None, stages);
    };
    let odd: Vec<usize> = (1..nodes.len())
        .filter(|&i| matches!(&stages[i], Ok(w) if w.line.digest.as_ref() != Some(&d)))
        .collect();
    let all_staged = stages.iter().all(Result::is_ok);
    if odd.is_empty() || !all_staged || req.image.digest.is_some() {
        return (Some(d), stages);
    }
    let pinned_ref = pinned(&req.image, &d);
    let mut work = Vec::new();
    for i in odd {
        if let Ok(w) = std::mem::replace(&mut stages[i], Err(String::new())) {
            work.push((i, w));
        }
    }
    let again = each(work, |_, (i, w)| {
        let n = &nodes[i];
        let got = w.line.digest.clone().unwrap_or_else(|| "(none)".into());
        let redone = finish_node(cfg, n, w, Word::Discard)
            .and_then(|()| stage_node(cfg, n, req, &pinned_ref, settling));
        (i, got, redone)
    });
    for (i, got, redone) in again {
        notes.push(format!(
            "node {}: its pull of {} gave digest {got}, the head's gave {d} (the tag moved): it staged {pinned_ref} instead",
            nodes[i].label(),
            req.image
        ));
        stages[i] = redone;
    }
    (Some(d), stages)
}

/// Why node `n`'s staged container may not be swapped in (`None`: it may).
pub(super) fn staged_failure(
    nodes: &[NodeConfig],
    n: &NodeConfig,
    w: &mut Waiting,
    req: &Request,
    digest: Option<&str>,
) -> Option<String> {
    let d = digest?;
    if w.line.key(req).map(String::as_str) != Some(d) {
        return Some(match req.by_id() {
            true => format!(
                "node {}: its {} is image {}, the head's is {d}\n  hint: copy the head's to it: {}",
                n.label(),
                req.image,
                w.line.image_id.as_deref().unwrap_or("(none)"),
                copy_command(&nodes[0], n, &req.image)
            ),
            false => format!(
                "node {}: staged digest {} is not {d}",
                n.label(),
                w.line.digest.as_deref().unwrap_or("(none)"),
            ),
        });
    }
    if let Some(status) = w.proc.try_status() {
        return Some(format!(
            "node {}: its staged run ended ({status}) before the swap: {}\n  hint: is its halobox the same version as this one? `halobox cluster install` copies this one",
            n.label(),
            remote::tail(&w.proc.output(), 2)
        ));
    }
    let check = w.line.check.as_ref()?;
    (!check.new_failures.is_empty()).then(|| {
        format!(
            "node {}: verify: {} FAILs what the current container passes:\n    {}\n  hint: `halobox check {}` there shows the old one's; the new image is not used",
            n.label(),
            verify::Step::Check.words(),
            check.new_failures.join("\n    "),
            n.container
        )
    })
}

/// Tells every staged node to remove what it staged; results per node.
pub(super) fn discard_all(
    cfg: &ClusterConfig,
    nodes: &[NodeConfig],
    stages: Vec<Stage>,
) -> Vec<NodeResult> {
    each(stages, |i, st| {
        let n = &nodes[i];
        let (outcome, detail) = match st {
            Err(e) => ("failed", e),
            Ok(w) => {
                let id = w.line.staged.clone();
                match finish_node(cfg, n, w, Word::Discard) {
                    Ok(()) => (
                        "discarded",
                        "the staged container was removed; it keeps its old container".to_string(),
                    ),
                    Err(e) => (
                        "failed",
                        format!(
                            "the staged container {id} may be left ({e}); its old container is untouched: run `halobox refresh --discard-staged --name {}` there",
                            n.container
                        ),
                    ),
                }
            }
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
}

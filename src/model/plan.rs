//! What a sync will do, decided from every node's facts alone: which files
//! each node lacks (missing, another blob, another size, or content whose
//! hash is not the one expected), whether its disk can take them, and the
//! order of the chain. No effects here.

use serde::Serialize;

use super::cache::ModelRef;
use super::facts::{FileFacts, NodeFacts};
use super::transfer::WireFile;
use crate::error::UsageError;
use crate::units;

/// Bytes kept free on a node beyond what a sync writes.
pub const DISK_MARGIN: u64 = 256 << 20;

/// One receiving node in the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Index in the cluster file.
    pub node: usize,
    /// Its name in messages.
    pub label: String,
    /// Indices into [`Plan::files`] it lacks.
    pub needs: Vec<usize>,
    /// Their bytes.
    pub bytes: u64,
    /// Why each file is sent (same order as `needs`).
    pub why: Vec<String>,
}

/// The whole sync.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// The model.
    pub model: ModelRef,
    /// The commit the revision names on the source.
    pub commit: String,
    /// The source's name.
    pub source: String,
    /// The hub folder every node uses.
    pub hub: String,
    /// Every file of the snapshot.
    pub files: Vec<WireFile>,
    /// Every other node, in cluster order (the order of the chain).
    pub targets: Vec<Target>,
    /// What the stream carries: every file some node lacks, in order.
    pub send: Vec<usize>,
}

impl Plan {
    /// Bytes on the stream.
    pub fn stream_bytes(&self) -> u64 {
        units::total_bytes(self.send.iter().map(|&i| self.files[i].size)).unwrap_or(u64::MAX)
    }

    /// The nodes that receive something, in chain order.
    pub fn chain(&self) -> Vec<&Target> {
        self.targets
            .iter()
            .filter(|t| !t.needs.is_empty())
            .collect()
    }
}

fn lacks(f: &WireFile, there: Option<&FileFacts>) -> Option<String> {
    let Some(t) = there else {
        return Some("missing".into());
    };
    if t.blob != f.blob {
        return Some(format!("another blob ({})", t.blob));
    }
    match t.size {
        None => return Some("missing".into()),
        Some(s) if s != f.size => {
            return Some(format!("{} instead of {} bytes", s, f.size));
        }
        _ => {}
    }
    match (&t.sha256, &f.sha256) {
        (Some(have), Some(want)) if !have.eq_ignore_ascii_case(want) => {
            Some("content differs (sha256)".into())
        }
        (None, _) => Some("not verified".into()),
        _ => None,
    }
}

/// The refusal of facts that fail [`NodeFacts::check`]: `label` names
/// the node, `why` the field and its value.
pub fn untrusted(label: &str, why: &str) -> String {
    format!(
        "{label} {why}; nothing was sent\n  hint: its halobox or its Hugging Face cache is not as halobox makes them: run `halobox cluster install` to put this halobox there, and check that cache (`halobox model ls`)"
    )
}

/// The plan from the source's facts and every node's (`nodes[i]` is node
/// i of the cluster file, labels alike; `source` indexes both).
pub fn plan(
    model: &ModelRef,
    source: usize,
    labels: &[String],
    nodes: &[NodeFacts],
) -> Result<Plan, UsageError> {
    for (n, label) in nodes.iter().zip(labels) {
        n.check().map_err(|e| UsageError(untrusted(label, &e)))?;
    }
    let src = &nodes[source];
    let slabel = &labels[source];
    let Some(m) = &src.model else {
        return Err(UsageError(format!(
            "{slabel} has no {} in its Hugging Face cache ({})\n  hint: `halobox model pull {}` first (it downloads on the head), or name the node that has it with --from",
            model.id, src.hub, model.id
        )));
    };
    let Some(commit) = m.commit.clone() else {
        let known: Vec<String> = m
            .refs
            .iter()
            .map(|(r, c)| format!("{r} ({})", &c[..c.len().min(12)]))
            .chain(m.commits.iter().map(|c| c[..c.len().min(12)].to_string()))
            .collect();
        return Err(UsageError(format!(
            "{slabel} has no revision {:?} of {}: it holds {}\n  hint: `halobox model pull {}@{}`, or sync one it holds: `halobox model sync {}@REVISION`",
            model.revision,
            model.id,
            if known.is_empty() {
                "no snapshot".into()
            } else {
                known.join(", ")
            },
            model.id,
            model.revision,
            model.id
        )));
    };
    let files = wire_files(model, slabel, &m.files)?;
    let differ: Vec<String> = nodes
        .iter()
        .zip(labels)
        .filter(|(n, _)| n.hub != src.hub)
        .map(|(n, l)| format!("{l}: {}", n.hub))
        .collect();
    if !differ.is_empty() {
        return Err(UsageError(format!(
            "the Hugging Face cache is {} on {slabel} but elsewhere on {}: vLLM looks for the model at the same path on every node\n  hint: set the same HF_HOME (or HF_HUB_CACHE) for the ssh login on every node, e.g. in ~/.ssh/environment or /etc/environment, and `halobox refresh` the containers with it",
            src.hub,
            differ.join(", ")
        )));
    }
    let mut targets = vec![];
    let mut short = vec![];
    for (i, (n, label)) in nodes.iter().zip(labels).enumerate() {
        if i == source {
            continue;
        }
        let t = target(i, n, label, &files, &commit, slabel)?;
        if t.bytes.saturating_add(DISK_MARGIN) > n.free && t.bytes > 0 {
            short.push(format!(
                "{label} needs {} for {} but has {} free in {}",
                units::format_bytes(t.bytes),
                model.id,
                units::format_bytes(n.free),
                n.hub
            ));
        }
        targets.push(t);
    }
    if !short.is_empty() {
        return Err(UsageError(format!(
            "not enough disk: {}\n  hint: free space there (`halobox model ls` shows what each node holds; `halobox model rm MODEL` removes one)",
            short.join("; ")
        )));
    }
    let send: Vec<usize> = (0..files.len())
        .filter(|k| targets.iter().any(|t| t.needs.contains(k)))
        .collect();
    Ok(Plan {
        model: model.clone(),
        commit,
        source: slabel.clone(),
        hub: src.hub.clone(),
        files,
        targets,
        send,
    })
}

/// The snapshot's files as they go on the wire; `Err` for a file the
/// source lacks or holds damaged.
fn wire_files(
    model: &ModelRef,
    slabel: &str,
    held: &[FileFacts],
) -> Result<Vec<WireFile>, UsageError> {
    let mut files = vec![];
    for f in held {
        let Some(size) = f.size else {
            return Err(UsageError(format!(
                "{slabel}: {}@{} is incomplete there: {} is missing from its blobs\n  hint: `halobox model pull {}@{}` again to finish it",
                model.id, model.revision, f.path, model.id, model.revision
            )));
        };
        if let (Some(hub), Some(have)) = (f.hub_sha256(), &f.sha256)
            && !hub.eq_ignore_ascii_case(have)
        {
            return Err(UsageError(format!(
                "{slabel}: {} of {} is damaged there: its content hashes to {have}, the hub recorded {hub}\n  hint: remove it (`halobox model rm {}`) and pull it again",
                f.path, model.id, model.id
            )));
        }
        files.push(WireFile {
            path: f.path.clone(),
            blob: f.blob.clone(),
            size,
            sha256: f
                .hub_sha256()
                .map(str::to_string)
                .or_else(|| f.sha256.clone()),
        });
    }
    Ok(files)
}

/// What node `i` (`n`, `label`) lacks of `files` at `commit`, and why.
fn target(
    i: usize,
    n: &NodeFacts,
    label: &str,
    files: &[WireFile],
    commit: &str,
    slabel: &str,
) -> Result<Target, UsageError> {
    let there: Vec<FileFacts> = n
        .model
        .as_ref()
        .filter(|h| h.commit.as_deref() == Some(commit))
        .map(|h| h.files.clone())
        .unwrap_or_default();
    let mut t = Target {
        node: i,
        label: label.to_string(),
        needs: vec![],
        bytes: 0,
        why: vec![],
    };
    for (k, f) in files.iter().enumerate() {
        // A node at another commit lists other files: all are sent.
        if let Some(w) = lacks(f, there.iter().find(|x| x.path == f.path)) {
            t.needs.push(k);
            t.bytes = t.bytes.checked_add(f.size).ok_or_else(|| {
                UsageError(untrusted(
                    slabel,
                    &format!(
                        "reported file sizes that add up to more than {} bytes",
                        u64::MAX
                    ),
                ))
            })?;
            t.why.push(w);
        }
    }
    Ok(t)
}

/// The plan in words (`--dry-run` prints it; sync prints it first).
pub fn render(p: &Plan) -> String {
    let mut s = format!(
        "sync {}@{} (commit {}) from {} over the data plane, {} files, {} in the snapshot; cache {}\n",
        p.model.id,
        p.model.revision,
        p.commit,
        p.source,
        p.files.len(),
        units::format_bytes(units::total_bytes(p.files.iter().map(|f| f.size)).unwrap_or(u64::MAX)),
        p.hub
    );
    for t in &p.targets {
        if t.needs.is_empty() {
            s.push_str(&format!(
                "  {}: complete and verified, nothing to send\n",
                t.label
            ));
        } else {
            s.push_str(&format!(
                "  {}: {} file(s), {}\n",
                t.label,
                t.needs.len(),
                units::format_bytes(t.bytes)
            ));
            for (k, why) in t.needs.iter().zip(&t.why) {
                s.push_str(&format!("    {} ({why})\n", p.files[*k].path));
            }
        }
    }
    let chain = p.chain();
    if chain.is_empty() {
        s.push_str("nothing to send: every node holds it complete\n");
    } else {
        let names: Vec<&str> = std::iter::once(p.source.as_str())
            .chain(chain.iter().map(|t| t.label.as_str()))
            .collect();
        s.push_str(&format!(
            "chain: {} ({} on the stream; each node passes it on while it writes)\n",
            names.join(" -> "),
            units::format_bytes(p.stream_bytes())
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::ModelFacts;

    const C: &str = "0123456789abcdef0123456789abcdef01234567";
    const S: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn file(path: &str, blob: &str, size: Option<u64>, sha: Option<&str>) -> FileFacts {
        FileFacts {
            path: path.into(),
            blob: blob.into(),
            size,
            sha256: sha.map(str::to_string),
        }
    }

    fn node(files: Option<Vec<FileFacts>>, free: u64) -> NodeFacts {
        NodeFacts {
            hub: "/root/.cache/huggingface/hub".into(),
            free,
            model: files.map(|files| ModelFacts {
                commit: Some(C.into()),
                refs: vec![("main".into(), C.into())],
                commits: vec![C.into()],
                files,
            }),
        }
    }

    fn labels() -> Vec<String> {
        ["node a", "node b", "node c"].map(String::from).to_vec()
    }

    fn full() -> Vec<FileFacts> {
        vec![
            file("config.json", "c0ffee", Some(10), Some(&"c".repeat(64))),
            file("w.safetensors", S, Some(1000), Some(S)),
        ]
    }

    #[test]
    fn only_what_is_missing_or_wrong_moves() {
        let m = ModelRef::parse("a/b").unwrap();
        let big = 1 << 40;
        let mut corrupt = full();
        corrupt[1].sha256 = Some("b".repeat(64));
        let nodes = [
            node(Some(full()), big),
            node(Some(corrupt), big),
            node(None, big),
        ];
        let p = plan(&m, 0, &labels(), &nodes).unwrap();
        assert_eq!(p.targets[0].needs, [1]);
        assert_eq!(p.targets[0].why, ["content differs (sha256)"]);
        assert_eq!(p.targets[1].needs, [0, 1]);
        assert_eq!(p.send, [0, 1]);
        let text = render(&p);
        assert!(text.contains("chain: node a -> node b -> node c"), "{text}");
        let nodes = [
            node(Some(full()), big),
            node(Some(full()), big),
            node(Some(full()), big),
        ];
        let p = plan(&m, 0, &labels(), &nodes).unwrap();
        assert!(p.send.is_empty());
        assert!(render(&p).contains("nothing to send"));
    }

    #[test]
    fn bad_input_is_named() {
        let m = ModelRef::parse("a/b").unwrap();
        let big = 1 << 40;
        let e = plan(&m, 0, &labels(), &[node(None, big), node(None, big)])
            .unwrap_err()
            .0;
        assert!(
            e.contains("node a has no a/b") && e.contains("halobox model pull a/b"),
            "{e}"
        );
        let m2 = ModelRef::parse("a/b@v9").unwrap();
        let mut n = node(Some(full()), big);
        n.model.as_mut().unwrap().commit = None;
        let e = plan(&m2, 0, &labels(), &[n, node(None, big)])
            .unwrap_err()
            .0;
        assert!(
            e.contains("no revision \"v9\"") && e.contains("main (0123456789ab)"),
            "{e}"
        );
        let e = plan(
            &m,
            0,
            &labels(),
            &[node(Some(full()), big), node(None, 100)],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("not enough disk: node b needs"), "{e}");
        let mut other = node(None, big);
        other.hub = "/data/hub".into();
        let e = plan(&m, 0, &labels(), &[node(Some(full()), big), other])
            .unwrap_err()
            .0;
        assert!(
            e.contains("node b: /data/hub") && e.contains("HF_HOME"),
            "{e}"
        );
        let mut hostile = full();
        hostile[0].blob = "/root/.ssh/authorized_keys".into();
        let e = plan(
            &m,
            0,
            &labels(),
            &[node(Some(hostile), big), node(None, big)],
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains("node a reported blob for config.json \"/root/.ssh/authorized_keys\"")
                && e.contains("nothing was sent"),
            "{e}"
        );
        let mut other = node(Some(full()), big);
        other.model.as_mut().unwrap().commit = Some("../../x".into());
        let e = plan(&m, 0, &labels(), &[node(Some(full()), big), other])
            .unwrap_err()
            .0;
        assert!(e.contains("node b reported commit \"../../x\""), "{e}");
        let mut torn = full();
        torn[1].size = None;
        let e = plan(&m, 0, &labels(), &[node(Some(torn), big), node(None, big)])
            .unwrap_err()
            .0;
        assert!(e.contains("incomplete there: w.safetensors"), "{e}");
    }

    /// Sizes a node claims are added with checks: 2^64 - 616 bytes plus a
    /// file of 96 MiB + 616 bytes would wrap to 96 MiB and pass the disk
    /// check of a node with 1 GiB free.
    #[test]
    fn sizes_that_add_up_past_2_64_are_refused_naming_the_node() {
        let m = ModelRef::parse("a/b").unwrap();
        let mut huge = full();
        huge[0].size = Some(u64::MAX - 615);
        huge[1].size = Some((96 << 20) + 616);
        let e = plan(
            &m,
            0,
            &labels(),
            &[node(Some(huge), 1 << 40), node(None, 1 << 30)],
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains("node a reported file sizes that add up to more than")
                && e.contains("nothing was sent"),
            "{e}"
        );
        let mut claimed = full();
        claimed[1].size = Some(u64::MAX - 615);
        claimed[0].size = Some((96 << 20) + 616);
        let e = crate::model::complete::check(
            &m,
            &labels()[..2],
            &[node(Some(claimed.clone()), 0), node(Some(claimed), 0)],
        )
        .unwrap_err()
        .0;
        assert!(e.contains("node a (the head) reported sizes"), "{e}");
    }
}

//! Whether every node holds a model complete at the same revision, from
//! the nodes' file lists and sizes alone (no hashing: quick enough for
//! `serve`'s preflight). The head's copy is the reference.

use super::cache::ModelRef;
use super::facts::NodeFacts;
use crate::error::UsageError;
use crate::units::format_bytes;

/// `Ok(summary)` when every node (`nodes[0]` the head) holds `model`'s
/// revision complete and alike; else the refusal, naming each node and
/// what it lacks, with the fix.
pub fn check(
    model: &ModelRef,
    labels: &[String],
    nodes: &[NodeFacts],
) -> Result<String, UsageError> {
    let spec = format!("{}@{}", model.id, model.revision);
    let sync_hint = format!("`halobox model sync {}`", model.id);
    let head = &nodes[0];
    let head_model = head.model.as_ref();
    let commit = head_model.and_then(|m| m.commit.clone());
    let (Some(m), Some(commit)) = (head_model, commit) else {
        return Err(UsageError(format!(
            "{} (the head) has no {spec} in its Hugging Face cache ({}): every node must hold the weights before vLLM starts, or each would download them itself\n  hint: `halobox model pull {}`, then {sync_hint}",
            labels[0], head.hub, model.id
        )));
    };
    if let Some(f) = m.files.iter().find(|f| f.size.is_none()) {
        return Err(UsageError(format!(
            "{} (the head) holds {spec} incomplete: {} is missing\n  hint: `halobox model pull {}` to finish it, then {sync_hint}",
            labels[0], f.path, model.id
        )));
    }
    let mut wrong = vec![];
    for (n, label) in nodes.iter().zip(labels).skip(1) {
        let there = n.model.as_ref();
        let why = match there.and_then(|t| t.commit.as_deref()) {
            None if there.is_none() => Some("does not hold it".to_string()),
            None => Some(format!("has no revision {}", model.revision)),
            Some(c) if c != commit => Some(format!(
                "holds commit {} instead of {}",
                &c[..c.len().min(12)],
                &commit[..12]
            )),
            Some(_) => {
                let files = &there.map(|t| t.files.clone()).unwrap_or_default();
                let lacking: Vec<&str> = m
                    .files
                    .iter()
                    .filter(|f| {
                        !files
                            .iter()
                            .any(|x| x.path == f.path && x.blob == f.blob && x.size == f.size)
                    })
                    .map(|f| f.path.as_str())
                    .collect();
                (!lacking.is_empty()).then(|| format!("lacks {}", lacking.join(", ")))
            }
        };
        if let Some(w) = why {
            wrong.push(format!("{label} {w}"));
        }
    }
    if !wrong.is_empty() {
        return Err(UsageError(format!(
            "not every node holds {spec} complete (as the head has it, commit {}): {}\n  hint: {sync_hint}",
            &commit[..12],
            wrong.join("; ")
        )));
    }
    let size = crate::units::total_bytes(m.files.iter().filter_map(|f| f.size)).ok_or_else(|| {
        UsageError(format!(
            "{} (the head) reported sizes of {spec}'s files that add up to more than {} bytes: no cache holds that\n  hint: its halobox or its Hugging Face cache is not as halobox makes them: run `halobox cluster install` to put this halobox there, and check that cache (`halobox model ls`)",
            labels[0],
            u64::MAX
        ))
    })?;
    Ok(format!(
        "every node holds {spec} (commit {}) complete: {} files, {}",
        &commit[..12],
        m.files.len(),
        format_bytes(size)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::facts::{FileFacts, ModelFacts};

    const C: &str = "0123456789abcdef0123456789abcdef01234567";

    fn node(files: &[(&str, Option<u64>)]) -> NodeFacts {
        NodeFacts {
            hub: "/h".into(),
            free: 0,
            model: Some(ModelFacts {
                commit: Some(C.into()),
                refs: vec![],
                commits: vec![C.into()],
                files: files
                    .iter()
                    .map(|(p, s)| FileFacts {
                        path: p.to_string(),
                        blob: format!("b-{p}"),
                        size: *s,
                        sha256: None,
                    })
                    .collect(),
            }),
        }
    }

    #[test]
    fn a_node_lacking_a_shard_is_named() {
        let m = ModelRef::parse("a/b").unwrap();
        let labels = ["node a", "node b", "node c"].map(String::from).to_vec();
        let full = node(&[("config.json", Some(1)), ("w1", Some(9))]);
        let torn = node(&[("config.json", Some(1)), ("w1", None)]);
        let ok = check(&m, &labels, &[full.clone(), full.clone(), full.clone()]).unwrap();
        assert!(ok.contains("complete: 2 files"), "{ok}");
        let e = check(&m, &labels, &[full.clone(), full.clone(), torn])
            .unwrap_err()
            .0;
        assert!(
            e.contains("node c lacks w1") && e.contains("halobox model sync a/b"),
            "{e}"
        );
        let mut none = full.clone();
        none.model = None;
        let e = check(&m, &labels, &[none, full]).unwrap_err().0;
        assert!(e.contains("node a (the head) has no a/b@main"), "{e}");
    }
}

//! What `halobox publish` does to an image (pure): the tags (channel,
//! `YYYYMMDD-HHMMSS` from the created label, `sha-<7 hex>`), the OCI labels,
//! and whether the config must be rewritten to carry them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::image_ref::{ImageRef, date_tag};

/// OCI label names halobox sets.
pub const CREATED: &str = "org.opencontainers.image.created";
/// Source repository URL label.
pub const SOURCE: &str = "org.opencontainers.image.source";
/// Git commit label.
pub const REVISION: &str = "org.opencontainers.image.revision";
/// Version label.
pub const VERSION: &str = "org.opencontainers.image.version";
/// `false` on an image whose channel moved without the check on a Strix
/// Halo node (`publish --promote-digest … --unverified`); `halobox refresh`
/// warns about it.
pub const VERIFIED: &str = "io.halobox.verified";

/// What is known about the local image and the request.
#[derive(Debug, Clone, Default)]
pub struct PublishInput {
    /// The local reference given.
    pub source: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The engine's `Created` time (used when there is no created label).
    pub created: Option<String>,
    /// Repository to publish to (no tag).
    pub repository: String,
    /// `latest` or `dev`; `None` for a candidate (`--candidate`: the dated
    /// and `sha-` tags only, the channel moves later by digest).
    pub channel: Option<String>,
    /// Full git commit.
    pub revision: String,
    /// Source repository URL, when known.
    pub source_url: Option<String>,
    /// `--version`, when given.
    pub version: Option<String>,
}

/// The resolved publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishPlan {
    /// Local image published.
    pub source: String,
    /// Repository pushed to.
    pub repository: String,
    /// Tags pushed, in order (channel last, so it moves only when the rest
    /// are up; none for a candidate).
    pub tags: Vec<String>,
    /// The four OCI labels as they will be.
    pub labels: BTreeMap<String, String>,
    /// Labels that differ from the image's: a new config is written.
    pub relabel: BTreeMap<String, String>,
}

/// True for 7..=40 lowercase hex digits.
pub fn is_revision(s: &str) -> bool {
    (7..=40).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `https://host/org/repo` from a git remote URL (`git@host:org/repo.git`, `https://…`).
pub fn source_url(remote: &str) -> Option<String> {
    let r = remote.trim().trim_end_matches('/').trim_end_matches(".git");
    if let Some(rest) = r.strip_prefix("git@") {
        let (host, path) = rest.split_once(':')?;
        return Some(format!("https://{host}/{path}"));
    }
    if let Some(rest) = r.strip_prefix("ssh://git@") {
        return Some(format!("https://{rest}"));
    }
    if let Some(rest) = r.strip_prefix("https://") {
        // Drop credentials in the URL (`https://user:token@host/...`).
        let rest = rest.split_once('@').map_or(rest, |(_, after)| after);
        return Some(format!("https://{rest}"));
    }
    None
}

/// Resolves tags and labels.
pub fn plan(input: &PublishInput) -> Result<PublishPlan, String> {
    let repo = ImageRef::parse(&input.repository).map_err(|e| format!("--to: {e}"))?;
    if repo.tag.is_some() || repo.digest.is_some() {
        return Err(format!(
            "--to {}: give a repository without a tag; publish adds the tags",
            input.repository
        ));
    }
    if !is_revision(&input.revision) {
        return Err(format!(
            "revision {:?} is not a git commit (7-40 hex); hint: run in the git checkout or pass --revision",
            input.revision
        ));
    }
    let created = input
        .labels
        .get(CREATED)
        .cloned()
        .or(input.created.clone())
        .ok_or_else(|| {
            format!(
                "{} has no {CREATED} label and no creation time",
                input.source
            )
        })?;
    let date = date_tag(&created).map_err(|e| format!("{CREATED} of {}: {e}", input.source))?;
    let sha = format!("sha-{}", &input.revision[..7]);
    let mut labels = BTreeMap::new();
    labels.insert(CREATED.to_string(), created);
    labels.insert(REVISION.to_string(), input.revision.clone());
    labels.insert(
        VERSION.to_string(),
        input
            .version
            .clone()
            .or_else(|| input.labels.get(VERSION).cloned())
            .unwrap_or_else(|| date.clone()),
    );
    match input
        .source_url
        .clone()
        .or_else(|| input.labels.get(SOURCE).cloned())
    {
        Some(s) => {
            labels.insert(SOURCE.to_string(), s);
        }
        None => {
            return Err(
                "no source URL: pass --source https://… (or add an `origin` git remote)".into(),
            );
        }
    }
    let relabel = labels
        .iter()
        .filter(|(k, v)| input.labels.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let tags = [Some(date), Some(sha), input.channel.clone()]
        .into_iter()
        .flatten()
        .map(|t| repo.with_tag(&t).to_string())
        .collect();
    Ok(PublishPlan {
        source: input.source.clone(),
        repository: repo.repository,
        tags,
        labels,
        relabel,
    })
}

/// The plan as text for `--dry-run`.
pub fn render(plan: &PublishPlan, image_id: &str, credentials: &str) -> String {
    let mut s = format!(
        "publish {} ({image_id}) to {}\n",
        plan.source, plan.repository
    );
    if plan.relabel.is_empty() {
        s.push_str("  labels: already set\n");
    } else {
        s.push_str("  new config with labels:\n");
        for (k, v) in &plan.relabel {
            s.push_str(&format!("    {k}={v}\n"));
        }
    }
    s.push_str(&format!("  credentials: {credentials}\n  push:\n"));
    for t in &plan.tags {
        s.push_str(&format!("    {t}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> PublishInput {
        PublishInput {
            source: "localhost/x:1".into(),
            labels: BTreeMap::from([(CREATED.into(), "2024-06-01T00:00:00Z".into())]),
            created: None,
            repository: "127.0.0.1:5001/halobox/test".into(),
            channel: Some("dev".into()),
            revision: "4cdcc08347371de1d92fdb887822d840b5f8d833".into(),
            source_url: Some("https://github.com/o/halobox".into()),
            version: None,
        }
    }

    #[test]
    fn tags_and_labels() {
        let p = plan(&input()).unwrap();
        assert_eq!(
            p.tags,
            vec![
                "127.0.0.1:5001/halobox/test:20240601-000000",
                "127.0.0.1:5001/halobox/test:sha-4cdcc08",
                "127.0.0.1:5001/halobox/test:dev",
            ]
        );
        assert_eq!(p.labels[VERSION], "20240601-000000");
        assert!(!p.relabel.contains_key(CREATED));
        assert_eq!(p.relabel.len(), 3);
        let mut candidate = input();
        candidate.channel = None;
        assert_eq!(
            plan(&candidate).unwrap().tags,
            p.tags[..2],
            "a candidate moves no channel"
        );
        let mut bad = input();
        bad.revision = "HEAD".into();
        assert!(plan(&bad).is_err());
        let mut bad = input();
        bad.repository = "r/x:1".into();
        assert!(plan(&bad).is_err());
    }

    #[test]
    fn remote_urls() {
        assert_eq!(
            source_url("git@github.com:o/halobox.git").as_deref(),
            Some("https://github.com/o/halobox")
        );
        assert_eq!(
            source_url("https://x:tok@github.com/o/h").as_deref(),
            Some("https://github.com/o/h")
        );
        assert_eq!(source_url("/local/path"), None);
    }
}

//! `images/<name>.toml`: one image halobox builds and publishes. Every input
//! is pinned (exact versions, full commit SHAs, base images by digest,
//! downloads with sha256) and checked against the Containerfile's `ARG`s and
//! stages when the file is loaded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::archive::is_sha256_hex;
use crate::image_ref::ImageRef;

/// A loaded, validated image definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// The file it came from.
    pub path: PathBuf,
    /// Its contents.
    pub file: DefinitionFile,
    /// Build context folder (absolute or relative to the working folder).
    pub context: PathBuf,
    /// The Containerfile.
    pub containerfile: PathBuf,
    /// The Containerfile's stages, in order, and its `ARG`s.
    pub parsed: Containerfile,
}

/// The TOML as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefinitionFile {
    /// Image name; must match the file name.
    pub name: String,
    /// One line on what the image is.
    #[serde(default)]
    pub description: String,
    /// Containerfile path, relative to this file.
    pub containerfile: String,
    /// Build context folder, relative to this file.
    pub context: String,
    /// What is sent from the context (files or folders relative to it); default: everything.
    #[serde(default)]
    pub include: Vec<String>,
    /// Stage to build (default: the last).
    pub target: Option<String>,
    /// Base images by digest (`repo:tag@sha256:…`), passed as build args.
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    /// Exact package versions, passed as build args.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// Git sources at full commit SHAs: build args `<NAME>_REPO`, `<NAME>_COMMIT`.
    #[serde(default)]
    pub git: BTreeMap<String, GitPin>,
    /// Downloads with checksums: build args `<NAME>_URL`, `<NAME>_SHA256`.
    #[serde(default)]
    pub artifacts: BTreeMap<String, Artifact>,
    /// Labels set on the image.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where the image is published.
    pub publish: Option<Publish>,
}

/// A git repository at one commit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GitPin {
    /// Clone URL (https).
    pub repo: String,
    /// Full 40-hex commit SHA.
    pub commit: String,
    /// The release tag that commit carries (for people; the commit is what is used).
    pub tag: Option<String>,
}

/// A file downloaded during the build.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Artifact {
    /// https URL of one exact file.
    pub url: String,
    /// Its sha256 (64 hex digits).
    pub sha256: String,
}

/// Publishing target.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Publish {
    /// Repository without a tag (`docker.io/org/name`).
    pub repository: String,
    /// Channels this image is published on (`dev`, `latest`).
    pub channels: Vec<String>,
}

/// What halobox reads from a Containerfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Containerfile {
    /// The stages (`FROM … [AS name]`), in order.
    pub stages: Vec<Stage>,
    /// `ARG` names and whether they have a default.
    pub args: BTreeMap<String, bool>,
    /// `ARG` defaults (`ARG NAME=value`), the first one given.
    pub defaults: BTreeMap<String, String>,
}

/// One `FROM` of a Containerfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stage {
    /// `AS name`, if given.
    pub name: Option<String>,
    /// The `FROM` operand as written (`${FEDORA_IMAGE}`, `therock`, `scratch`).
    pub from: String,
    /// Stages (names or indexes) this one copies files from (`COPY --from=…`).
    pub copies_from: Vec<String>,
}

impl Containerfile {
    /// True when a stage is named `name`.
    pub fn has_stage(&self, name: &str) -> bool {
        self.stages.iter().any(|s| s.name.as_deref() == Some(name))
    }

    /// Index of the stage a `FROM`/`--from=` operand names (a name or a number).
    fn stage_index(&self, operand: &str, before: usize) -> Option<usize> {
        if let Ok(i) = operand.parse::<usize>() {
            return (i < before).then_some(i);
        }
        self.stages[..before]
            .iter()
            .rposition(|s| s.name.as_deref() == Some(operand))
    }

    /// Which stages building `target` (default: the last) runs, by index.
    pub fn needed_for(&self, target: Option<&str>) -> Vec<bool> {
        let mut needed = vec![false; self.stages.len()];
        let last = match target {
            Some(t) => self
                .stages
                .iter()
                .position(|s| s.name.as_deref() == Some(t)),
            None => self.stages.len().checked_sub(1),
        };
        let mut todo: Vec<usize> = last.into_iter().collect();
        while let Some(i) = todo.pop() {
            if std::mem::replace(&mut needed[i], true) {
                continue;
            }
            let st = &self.stages[i];
            for op in std::iter::once(&st.from).chain(&st.copies_from) {
                if let Some(j) = self.stage_index(op, i) {
                    todo.push(j);
                }
            }
        }
        needed
    }
}

/// Names that move: never a pin.
const MOVING: &[&str] = &[
    "latest", "head", "main", "master", "develop", "dev", "nightly", "stable", "rawhide", "edge",
    "trunk", "next",
];

/// Why a pin value is not exact, if it is not.
pub fn inexact(value: &str) -> Option<String> {
    let v = value.trim();
    if v.is_empty() {
        return Some("is empty".into());
    }
    if v != value || v.contains(char::is_whitespace) {
        return Some("contains spaces".into());
    }
    let lower = v.to_ascii_lowercase();
    if MOVING.contains(&lower.as_str()) {
        return Some(format!("{v:?} moves over time"));
    }
    if lower.starts_with("refs/") || lower.starts_with("origin/") {
        return Some(format!("{v:?} is a branch-like ref"));
    }
    if v.contains(['*', '^', '~', '<', '>', '|', ',']) || v.contains("!=") {
        return Some(format!("{v:?} is a range, not one version"));
    }
    if !v.bytes().any(|b| b.is_ascii_digit()) {
        return Some(format!("{v:?} has no version number"));
    }
    None
}

/// True for a full 40-hex commit SHA.
pub fn is_commit(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why a base image reference is not pinned, if it is not. Only a digest
/// pins an image (a tag, even `fedora:43`, moves with every rebuild of the
/// release); a tag beside the digest is kept for people and must be exact.
pub fn unpinned_image(reference: &str) -> Option<String> {
    let r = match ImageRef::parse(reference) {
        Ok(r) => r,
        Err(e) => return Some(e),
    };
    if let Some(t) = r.tag.as_deref()
        && let Some(why) = inexact(t)
    {
        return Some(format!("tag {why}"));
    }
    match &r.digest {
        Some(d) => match d.split_once(':') {
            Some(("sha256", hex)) if is_sha256_hex(hex) => None,
            _ => Some(format!("digest {d:?} is not sha256:<64 hex>")),
        },
        None => Some(format!(
            "has no digest: tags move, so give `{}@sha256:<64 hex>` (`skopeo inspect docker://{}` or `podman image inspect` print it)",
            r, r
        )),
    }
}

fn arg_name_ok(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

impl DefinitionFile {
    /// Build args from the pins, name → value.
    pub fn build_args(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (k, v) in self.images.iter().chain(&self.versions) {
            out.insert(k.clone(), v.clone());
        }
        for (k, g) in &self.git {
            out.insert(format!("{k}_REPO"), g.repo.clone());
            out.insert(format!("{k}_COMMIT"), g.commit.clone());
        }
        for (k, a) in &self.artifacts {
            out.insert(format!("{k}_URL"), a.url.clone());
            out.insert(format!("{k}_SHA256"), a.sha256.clone());
        }
        out
    }

    /// Every problem with the pins, labels and publish target.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        let mut names: Vec<&String> = Vec::new();
        for (k, v) in &self.images {
            names.push(k);
            if let Some(why) = unpinned_image(v) {
                p.push(format!("images.{k} = {v:?}: {why}"));
            }
        }
        for (k, v) in &self.versions {
            names.push(k);
            if let Some(why) = inexact(v) {
                p.push(format!("versions.{k}: {why}; give one exact version"));
            }
        }
        for (k, g) in &self.git {
            names.push(k);
            if !g.repo.starts_with("https://") {
                p.push(format!("git.{k}.repo {:?} must be an https URL", g.repo));
            }
            if !is_commit(&g.commit) {
                p.push(format!(
                    "git.{k}.commit {:?} is not a full 40-hex commit SHA (tags and branches move); \
                     hint: `git ls-remote {} <tag>` gives it",
                    g.commit, g.repo
                ));
            }
            if let Some(t) = &g.tag
                && let Some(why) = inexact(t)
            {
                p.push(format!("git.{k}.tag: {why}"));
            }
        }
        for (k, a) in &self.artifacts {
            names.push(k);
            if !a.url.starts_with("https://") {
                p.push(format!(
                    "artifacts.{k}.url {:?} must be an https URL",
                    a.url
                ));
            }
            if !is_sha256_hex(&a.sha256) {
                p.push(format!(
                    "artifacts.{k}.sha256 {:?} is not 64 lowercase hex digits; hint: `sha256sum FILE`",
                    a.sha256
                ));
            }
        }
        for n in names {
            if !arg_name_ok(n) {
                p.push(format!(
                    "pin name {n:?}: use UPPER_CASE letters, digits and '_' (it is a build arg)"
                ));
            }
        }
        for k in self.labels.keys() {
            if k.trim().is_empty() {
                p.push("a label has an empty key".into());
            }
        }
        if let Some(pubs) = &self.publish {
            match ImageRef::parse(&pubs.repository) {
                Ok(r) if r.tag.is_some() || r.digest.is_some() => p.push(format!(
                    "publish.repository {:?} must not have a tag: channels and date tags are added",
                    pubs.repository
                )),
                Ok(_) => {}
                Err(e) => p.push(format!("publish.repository: {e}")),
            }
            if pubs.channels.is_empty() {
                p.push("publish.channels is empty: list dev and/or latest".into());
            }
            for c in &pubs.channels {
                if c != "dev" && c != "latest" {
                    p.push(format!("publish.channels: {c:?} is not dev or latest"));
                }
            }
        }
        p
    }
}

/// Reads `FROM` stages and `ARG`s from Containerfile text.
pub fn parse_containerfile(text: &str) -> Containerfile {
    let mut out = Containerfile::default();
    let mut joined = String::new();
    let mut lines = Vec::new();
    for raw in text.lines() {
        let t = raw.trim();
        if joined.is_empty() && (t.starts_with('#') || t.is_empty()) {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
        } else if !t.starts_with('#') {
            joined.push_str(t);
            lines.push(std::mem::take(&mut joined));
        }
    }
    for line in lines {
        let mut words = line.split_whitespace();
        let Some(instr) = words.next() else { continue };
        let rest: Vec<&str> = words.collect();
        match instr.to_ascii_uppercase().as_str() {
            "FROM" => {
                let rest: Vec<&str> = rest.into_iter().filter(|w| !w.starts_with("--")).collect();
                let name = match rest.as_slice() {
                    [_, kw, name] if kw.eq_ignore_ascii_case("as") => Some(name.to_string()),
                    _ => None,
                };
                out.stages.push(Stage {
                    name,
                    from: rest.first().map(|s| s.to_string()).unwrap_or_default(),
                    copies_from: Vec::new(),
                });
            }
            "COPY" => {
                let from = rest.iter().find_map(|w| w.strip_prefix("--from="));
                if let (Some(from), Some(stage)) = (from, out.stages.last_mut()) {
                    stage.copies_from.push(from.to_string());
                }
            }
            "ARG" => {
                for w in rest {
                    let (name, default) = match w.split_once('=') {
                        Some((n, v)) => (n, Some(v.trim_matches('"'))),
                        None => (w, None),
                    };
                    let e = out.args.entry(name.to_string()).or_insert(false);
                    *e = *e || default.is_some();
                    if let Some(v) = default {
                        out.defaults
                            .entry(name.to_string())
                            .or_insert_with(|| v.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Where an image name points: a `.toml` path as given, else `images/<name>.toml`.
pub fn locate(name: &str) -> PathBuf {
    if name.ends_with(".toml") || name.contains('/') {
        PathBuf::from(name)
    } else {
        PathBuf::from("images").join(format!("{name}.toml"))
    }
}

/// Loads and validates a definition; every problem is listed in the error.
pub fn load(path: &Path) -> Result<Definition, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "{}: {e}; hint: image definitions live in images/<name>.toml: run `halobox build` from the repository root (`cd` into the git checkout)",
            path.display()
        )
    })?;
    let file: DefinitionFile =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let context = dir.join(&file.context);
    let containerfile = dir.join(&file.containerfile);
    let mut problems = file.problems();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if file.name != stem {
        problems.push(format!(
            "name {:?} does not match the file name {stem:?}",
            file.name
        ));
    }
    let parsed = match std::fs::read_to_string(&containerfile) {
        Ok(t) => parse_containerfile(&t),
        Err(e) => {
            problems.push(format!("containerfile {}: {e}", containerfile.display()));
            Containerfile::default()
        }
    };
    if !context.is_dir() {
        problems.push(format!("context {} is not a folder", context.display()));
    }
    for inc in &file.include {
        if inc.starts_with('/') || inc.split('/').any(|p| p == "..") {
            problems.push(format!("include {inc:?} must stay inside the context"));
        } else if !context.join(inc).exists() {
            problems.push(format!(
                "include {inc:?}: no such file in {}",
                context.display()
            ));
        }
    }
    if !parsed.stages.is_empty() {
        if let Some(t) = &file.target
            && !parsed.has_stage(t)
        {
            problems.push(format!(
                "target {t:?} is not a stage of {} (stages: {})",
                containerfile.display(),
                stage_list(&parsed)
            ));
        }
        let args = file.build_args();
        for (name, has_default) in &parsed.args {
            if !has_default && !args.contains_key(name) {
                problems.push(format!(
                    "missing pin: {} declares `ARG {name}` without a default and this file does not pin it",
                    containerfile.display()
                ));
            }
        }
        for name in args.keys() {
            if !parsed.args.contains_key(name) {
                problems.push(format!(
                    "pin {name} is not an ARG of {} (a typo?)",
                    containerfile.display()
                ));
            }
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "{} is not a valid image definition:\n  - {}",
            path.display(),
            problems.join("\n  - ")
        ));
    }
    Ok(Definition {
        path: path.to_path_buf(),
        file,
        context,
        containerfile,
        parsed,
    })
}

/// `a, b, (unnamed)` for messages.
pub fn stage_list(c: &Containerfile) -> String {
    c.stages
        .iter()
        .map(|s| s.name.as_deref().unwrap_or("(unnamed)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a `--build-arg` override against the kind of pin it replaces.
pub fn check_override(def: &DefinitionFile, key: &str, value: &str) -> Result<(), String> {
    let bad = |why: String| Err(format!("--build-arg {key}={value}: {why}"));
    if def.images.contains_key(key) {
        if let Some(why) = unpinned_image(value) {
            return bad(why);
        }
    } else if def.versions.contains_key(key) {
        if let Some(why) = inexact(value) {
            return bad(why);
        }
    } else if let Some(k) = key.strip_suffix("_COMMIT")
        && def.git.contains_key(k)
    {
        if !is_commit(value) {
            return bad("not a full 40-hex commit SHA".into());
        }
    } else if let Some(k) = key.strip_suffix("_SHA256")
        && def.artifacts.contains_key(k)
        && !is_sha256_hex(value)
    {
        return bad("not 64 lowercase hex digits".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_values() {
        assert!(inexact("2.9.1").is_none());
        assert!(inexact("7.10.0a20251021").is_none());
        for bad in [
            "",
            "latest",
            "HEAD",
            "main",
            ">=2.9",
            "2.*",
            "~2.9",
            "refs/heads/x",
            "abc",
        ] {
            assert!(inexact(bad).is_some(), "{bad}");
        }
        let digest = format!("sha256:{}", "a".repeat(64));
        assert!(unpinned_image(&format!("docker.io/library/fedora:43@{digest}")).is_none());
        assert!(unpinned_image(&format!("fedora@{digest}")).is_none());
        let tag_only = unpinned_image("registry.fedoraproject.org/fedora:43").unwrap();
        assert!(tag_only.contains("no digest"), "{tag_only}");
        assert!(unpinned_image("fedora").is_some());
        assert!(unpinned_image("fedora:latest").is_some());
        assert!(unpinned_image(&format!("fedora:latest@{digest}")).is_some());
        assert!(unpinned_image("fedora@sha256:abc").is_some());
        assert!(is_commit(&"0123456789abcdef".repeat(3)[..40]));
        assert!(!is_commit("v1.2.3"));
    }

    #[test]
    fn containerfile_stages_and_args() {
        let c = parse_containerfile(
            "# c\nARG BASE\nFROM ${BASE} AS build\nARG A=1 \\\n  B\nRUN x\nfrom --platform=linux/amd64 scratch as out\nCOPY --from=build /x /x\nFROM build\nCOPY --from=0 /y /y\n",
        );
        let names: Vec<Option<&str>> = c.stages.iter().map(|s| s.name.as_deref()).collect();
        assert_eq!(names, vec![Some("build"), Some("out"), None]);
        assert_eq!(c.stages[0].from, "${BASE}");
        assert_eq!(c.stages[1].from, "scratch");
        assert_eq!(c.stages[1].copies_from, vec!["build".to_string()]);
        assert_eq!(
            c.args,
            BTreeMap::from([
                ("A".into(), true),
                ("B".into(), false),
                ("BASE".into(), false)
            ])
        );
        assert_eq!(c.defaults, BTreeMap::from([("A".into(), "1".into())]));
        assert_eq!(c.needed_for(Some("out")), vec![true, true, false]);
        assert_eq!(c.needed_for(None), vec![true, false, true]);
        assert_eq!(c.needed_for(Some("build")), vec![true, false, false]);
    }
}

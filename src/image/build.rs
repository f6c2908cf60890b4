//! The resolved build of an image definition (pure), the context tar sent
//! to the engine (sorted, uid/gid 0, mtime 0, normalised modes), and the
//! review `--dry-run` prints: stages, pins, patches with their sha256.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::definition::{Artifact, Definition, GitPin, Publish, check_override};
use crate::image_ref::ImageRef;

/// Everything `halobox build` sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildPlan {
    /// Image name.
    pub name: String,
    /// The definition file.
    pub definition: PathBuf,
    /// Context folder.
    pub context: PathBuf,
    /// Paths sent from the context (empty: everything).
    pub include: Vec<String>,
    /// Containerfile, relative to the context.
    pub containerfile: String,
    /// Stage built.
    pub target: Option<String>,
    /// Build args (pins, then overrides).
    pub args: BTreeMap<String, String>,
    /// Build args given on the command line that replaced a pin or a default.
    pub overridden: Vec<String>,
    /// Labels set on the result.
    pub labels: BTreeMap<String, String>,
    /// Tags of the result; the first is sent with the build.
    pub tags: Vec<String>,
    /// The Containerfile's stages in order, with what each starts from.
    pub stages: Vec<PlannedStage>,
    /// Every pin of the definition, and the Containerfile's own `ARG` defaults.
    pub pins: Pins,
    /// Where `halobox publish` sends the result, when the definition says.
    pub publish: Option<Publish>,
    /// The RCCL the image carries (`ARG RCCL`: `stock` or `patched`), when
    /// the Containerfile has that choice.
    pub rccl: Option<String>,
}

/// The values `ARG RCCL` takes, with what each means.
pub const RCCL_CHOICES: &[(&str, &str)] = &[
    ("stock", "the ROCm SDK's own librccl, untouched"),
    (
        "patched",
        "RCCL built from RCCL_REPO at RCCL_TAG with patches/rccl, used only when the ABI gate passes",
    ),
];

/// One stage of the build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedStage {
    /// `AS name` (`None` for an unnamed stage).
    pub name: Option<String>,
    /// The `FROM` operand as written.
    pub from: String,
    /// `from` with the build args filled in: an image reference, `scratch`,
    /// or `stage <name>` for an earlier stage.
    pub base: String,
    /// Whether building the target runs this stage.
    pub built: bool,
}

/// The pinned inputs, as the definition gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pins {
    /// Base images by digest.
    pub images: BTreeMap<String, String>,
    /// Exact versions.
    pub versions: BTreeMap<String, String>,
    /// Git sources at full commits.
    pub git: BTreeMap<String, GitPin>,
    /// Downloads with their sha256.
    pub artifacts: BTreeMap<String, Artifact>,
    /// `ARG` defaults of the Containerfile that no pin or `--build-arg` replaces.
    pub defaults: BTreeMap<String, String>,
}

/// Command-line choices on top of the definition.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// `--target`.
    pub target: Option<String>,
    /// `--build-arg K=V`.
    pub build_args: Vec<String>,
    /// `--tag`.
    pub tags: Vec<String>,
    /// `org.opencontainers.image.created` (RFC 3339).
    pub created: String,
    /// `org.opencontainers.image.revision` (the git commit), when known.
    pub revision: Option<String>,
}

/// Resolves a build from a definition and options.
pub fn plan(def: &Definition, opts: &BuildOptions) -> Result<BuildPlan, String> {
    let (args, overridden) = build_args(def, opts)?;
    let target = target(def, opts)?;
    let containerfile = relative_to(&def.containerfile, &def.context).ok_or_else(|| {
        format!(
            "{} is not inside the context {}",
            def.containerfile.display(),
            def.context.display()
        )
    })?;
    let mut include = def.file.include.clone();
    if !include.is_empty() && !include.iter().any(|i| covers(i, &containerfile)) {
        include.push(containerfile.clone());
    }
    let labels = labels(def, opts);
    let tags = tags(def, opts)?;
    let stages = stages(def, target.as_deref(), &args);
    let rccl = rccl(def, &args)?;
    let pins = Pins {
        images: def.file.images.clone(),
        versions: def.file.versions.clone(),
        git: def.file.git.clone(),
        artifacts: def.file.artifacts.clone(),
        defaults: def
            .parsed
            .defaults
            .iter()
            .filter(|(k, _)| !args.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    };
    Ok(BuildPlan {
        name: def.file.name.clone(),
        definition: def.path.clone(),
        context: def.context.clone(),
        include,
        containerfile,
        target,
        args,
        overridden,
        labels,
        tags,
        stages,
        pins,
        publish: def.file.publish.clone(),
        rccl,
    })
}

/// The definition's pins with each `--build-arg KEY=VALUE` on top (a key
/// the Containerfile declares, a value the pin allows): the args and the
/// keys the command line replaced.
fn build_args(
    def: &Definition,
    opts: &BuildOptions,
) -> Result<(BTreeMap<String, String>, Vec<String>), String> {
    let mut args = def.file.build_args();
    let mut overridden = Vec::new();
    for kv in &opts.build_args {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--build-arg {kv:?}: use KEY=VALUE"))?;
        if !def.parsed.args.contains_key(k) {
            return Err(format!(
                "--build-arg {k}: {} declares no `ARG {k}` (args: {})",
                def.containerfile.display(),
                def.parsed
                    .args
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        check_override(&def.file, k, v)?;
        args.insert(k.to_string(), v.to_string());
        overridden.push(k.to_string());
    }
    Ok((args, overridden))
}

/// The stage built: `--target`, else the definition's, which must be a
/// stage of the Containerfile.
fn target(def: &Definition, opts: &BuildOptions) -> Result<Option<String>, String> {
    let target = opts.target.clone().or(def.file.target.clone());
    if let Some(t) = &target
        && !def.parsed.has_stage(t)
    {
        return Err(format!(
            "--target {t}: no such stage in {} (stages: {})",
            def.containerfile.display(),
            super::definition::stage_list(&def.parsed)
        ));
    }
    Ok(target)
}

/// The definition's labels with the OCI ones: created, title (unless the
/// definition sets it) and revision when known.
fn labels(def: &Definition, opts: &BuildOptions) -> BTreeMap<String, String> {
    let mut labels = def.file.labels.clone();
    labels.insert(
        "org.opencontainers.image.created".into(),
        opts.created.clone(),
    );
    labels
        .entry("org.opencontainers.image.title".into())
        .or_insert(def.file.name.clone());
    if let Some(r) = &opts.revision {
        labels.insert("org.opencontainers.image.revision".into(), r.clone());
    }
    labels
}

/// Each `--tag` in full (`latest` when it names none; no digest), or
/// `localhost/NAME:latest` when none is given.
fn tags(def: &Definition, opts: &BuildOptions) -> Result<Vec<String>, String> {
    if opts.tags.is_empty() {
        return Ok(vec![format!("localhost/{}:latest", def.file.name)]);
    }
    let mut t = Vec::new();
    for tag in &opts.tags {
        let r = ImageRef::parse(tag).map_err(|e| format!("--tag: {e}"))?;
        if r.digest.is_some() {
            return Err(format!("--tag {tag}: a tag cannot carry a digest"));
        }
        t.push(r.for_channel("latest").to_string());
    }
    Ok(t)
}

/// The Containerfile's stages, each with the base it starts from (an
/// earlier stage, or its `FROM` with the args filled in) and whether
/// building `target` runs it.
fn stages(
    def: &Definition,
    target: Option<&str>,
    args: &BTreeMap<String, String>,
) -> Vec<PlannedStage> {
    let needed = def.parsed.needed_for(target);
    def.parsed
        .stages
        .iter()
        .zip(needed)
        .enumerate()
        .map(|(i, (st, built))| {
            let earlier = def.parsed.stages[..i]
                .iter()
                .any(|s| s.name.as_deref() == Some(st.from.as_str()));
            PlannedStage {
                name: st.name.clone(),
                from: st.from.clone(),
                base: if earlier {
                    format!("stage {}", st.from)
                } else {
                    substitute(&st.from, args, &def.parsed.defaults)
                },
                built,
            }
        })
        .collect()
}

/// The RCCL choice (`ARG RCCL` from the args or its default) when the
/// Containerfile has one; an error for a value not in [`RCCL_CHOICES`].
fn rccl(def: &Definition, args: &BTreeMap<String, String>) -> Result<Option<String>, String> {
    let rccl = args
        .get("RCCL")
        .or_else(|| def.parsed.defaults.get("RCCL"))
        .filter(|_| def.parsed.args.contains_key("RCCL"))
        .cloned();
    if let Some(r) = &rccl
        && !RCCL_CHOICES.iter().any(|(c, _)| c == r)
    {
        return Err(format!(
            "--build-arg RCCL={r}: the RCCL choice is stock (the SDK's own) or patched; hint: `halobox build {} --build-arg RCCL=patched`",
            def.file.name
        ));
    }
    Ok(rccl)
}

/// `$NAME` and `${NAME}` filled in from the build args, else the `ARG` defaults.
fn substitute(
    text: &str,
    args: &BTreeMap<String, String>,
    defaults: &BTreeMap<String, String>,
) -> String {
    let value = |name: &str| {
        args.get(name)
            .or_else(|| defaults.get(name))
            .cloned()
            .unwrap_or_default()
    };
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, skip) = if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => (&inner[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
        } else {
            out.push_str(&value(name));
            rest = &after[skip..];
        }
    }
    out.push_str(rest);
    out
}

fn covers(include: &str, path: &str) -> bool {
    let inc = include.trim_end_matches('/');
    path == inc || path.starts_with(&format!("{inc}/"))
}

/// `path` relative to `base`, both made absolute first (no `..` allowed).
fn relative_to(path: &Path, base: &Path) -> Option<String> {
    let p = std::path::absolute(path).ok()?;
    let b = std::path::absolute(base).ok()?;
    let norm = |x: PathBuf| -> PathBuf { x.components().collect() };
    let rel = norm(p).strip_prefix(norm(b)).ok()?.to_path_buf();
    rel.to_str().map(str::to_string)
}

/// Every path the context sends (relative path → file), sorted.
fn context_files(plan: &BuildPlan) -> io::Result<BTreeMap<String, PathBuf>> {
    let roots: Vec<String> = if plan.include.is_empty() {
        vec![String::new()]
    } else {
        plan.include.clone()
    };
    let mut files = BTreeMap::new();
    for r in roots {
        walk(&plan.context, r.trim_end_matches('/'), &mut files)?;
    }
    Ok(files)
}

/// The context as a tar: the included paths (or everything), sorted, with
/// uid/gid 0, mtime 0 and modes 0755/0644, so the build cache sees content only.
pub fn context_tar(plan: &BuildPlan) -> io::Result<Vec<u8>> {
    let files = context_files(plan)?;
    let mut tar = tar::Builder::new(Vec::new());
    for (rel, full) in files {
        let meta = std::fs::symlink_metadata(&full)?;
        let mut h = tar::Header::new_gnu();
        h.set_mtime(0);
        h.set_uid(0);
        h.set_gid(0);
        let ft = meta.file_type();
        if ft.is_symlink() {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_mode(0o777);
            h.set_size(0);
            tar.append_link(&mut h, &rel, std::fs::read_link(&full)?)?;
        } else if ft.is_dir() {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
            tar.append_data(&mut h, format!("{rel}/"), io::empty())?;
        } else {
            use std::os::unix::fs::PermissionsExt;
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(if meta.permissions().mode() & 0o111 != 0 {
                0o755
            } else {
                0o644
            });
            h.set_size(meta.len());
            tar.append_data(&mut h, &rel, std::fs::File::open(&full)?)?;
        }
    }
    tar.into_inner()
}

fn walk(context: &Path, rel: &str, out: &mut BTreeMap<String, PathBuf>) -> io::Result<()> {
    let full = if rel.is_empty() {
        context.to_path_buf()
    } else {
        context.join(rel)
    };
    let meta = std::fs::symlink_metadata(&full)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", full.display())))?;
    if !rel.is_empty() {
        out.insert(rel.to_string(), full.clone());
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(&full)? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_str().ok_or_else(|| {
                io::Error::other(format!("{}: name is not UTF-8", entry.path().display()))
            })?;
            let child = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            walk(context, &child, out)?;
        }
    }
    Ok(())
}

/// What `--dry-run` shows: the plan and what the context holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DryRun {
    /// The resolved build.
    #[serde(flatten)]
    pub plan: BuildPlan,
    /// The files sent to the engine.
    pub sent: ContextSummary,
}

/// The context the engine receives, identified by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSummary {
    /// Regular files sent.
    pub files: usize,
    /// Their total size in bytes.
    pub bytes: u64,
    /// sha256 of the context tar (reproducible: same files, same digest).
    pub sha256: String,
    /// sha256 of the Containerfile.
    pub containerfile_sha256: String,
    /// Every file under `patches/<tree>/` that is sent (sorted by path).
    pub patches: Vec<PatchFile>,
}

/// One file of `patches/` in the context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatchFile {
    /// Path in the context (`patches/rccl/0001-….patch`).
    pub path: String,
    /// The tree it changes (the folder under `patches/`: `rccl`, `vllm`).
    pub applies_to: String,
    /// `git am` for `*.patch`, `script` for anything else the build runs.
    pub kind: String,
    /// Size in bytes.
    pub bytes: u64,
    /// sha256 of the file.
    pub sha256: String,
}

/// Reads the context for `--dry-run`: file count, size, digests, patches.
pub fn dry_run(plan: &BuildPlan) -> io::Result<DryRun> {
    let files = context_files(plan)?;
    let mut count = 0;
    let mut bytes = 0;
    let mut patches = Vec::new();
    let mut containerfile_sha256 = String::new();
    for (rel, full) in &files {
        if !std::fs::symlink_metadata(full)?.is_file() {
            continue;
        }
        let data = std::fs::read(full)?;
        count += 1;
        bytes += data.len() as u64;
        let sum = hex::encode(Sha256::digest(&data));
        if *rel == plan.containerfile {
            containerfile_sha256 = sum.clone();
        }
        if let Some(under) = rel.strip_prefix("patches/") {
            let applies_to = under.split_once('/').map_or("", |(d, _)| d);
            if applies_to.is_empty() || rel.ends_with("README.md") {
                continue;
            }
            patches.push(PatchFile {
                path: rel.clone(),
                applies_to: applies_to.to_string(),
                kind: if rel.ends_with(".patch") {
                    "git am".into()
                } else {
                    "script".into()
                },
                bytes: data.len() as u64,
                sha256: sum,
            });
        }
    }
    let tar = context_tar(plan)?;
    Ok(DryRun {
        plan: plan.clone(),
        sent: ContextSummary {
            files: count,
            bytes,
            sha256: hex::encode(Sha256::digest(&tar)),
            containerfile_sha256,
            patches,
        },
    })
}

/// The dry run as text: everything CI would build, in reading order.
pub fn render(dry: &DryRun) -> String {
    use std::fmt::Write as _;
    let plan = &dry.plan;
    let sent = &dry.sent;
    let mut s = String::new();
    let _ = writeln!(s, "build {} ({})", plan.name, plan.definition.display());
    let _ = writeln!(
        s,
        "  containerfile: {} (sha256 {})",
        plan.containerfile, sent.containerfile_sha256
    );
    let _ = writeln!(
        s,
        "  context: {} ({} files, {} bytes, sha256 {}){}",
        plan.context.display(),
        sent.files,
        sent.bytes,
        sent.sha256,
        if plan.include.is_empty() {
            String::new()
        } else {
            format!("; sends {}", plan.include.join(", "))
        }
    );
    let _ = writeln!(
        s,
        "  target: {}",
        plan.target.as_deref().unwrap_or("(last stage)")
    );
    if let Some(r) = &plan.rccl {
        let what = RCCL_CHOICES
            .iter()
            .find(|(c, _)| c == r)
            .map(|(_, w)| *w)
            .unwrap_or("");
        let _ = writeln!(s, "  rccl: {r} ({what}; --build-arg RCCL=stock|patched)");
    }
    s.push_str("  stages:\n");
    let width = plan
        .stages
        .iter()
        .map(|st| st.name.as_deref().unwrap_or("(unnamed)").len())
        .max()
        .unwrap_or(0);
    for st in &plan.stages {
        let _ = writeln!(
            s,
            "    {:width$}  FROM {}{}",
            st.name.as_deref().unwrap_or("(unnamed)"),
            st.base,
            if st.built {
                ""
            } else {
                "  (not built for this target)"
            },
        );
    }
    s.push_str("  pins:\n");
    for (k, v) in &plan.pins.images {
        let _ = writeln!(s, "    image     {k} = {v}");
    }
    for (k, v) in &plan.pins.versions {
        let _ = writeln!(s, "    version   {k} = {v}");
    }
    for (k, g) in &plan.pins.git {
        let tag = g
            .tag
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        let _ = writeln!(s, "    git       {k} = {} @ {}{tag}", g.repo, g.commit);
    }
    for (k, a) in &plan.pins.artifacts {
        let _ = writeln!(s, "    download  {k} = {} sha256 {}", a.url, a.sha256);
    }
    for (k, v) in &plan.pins.defaults {
        let _ = writeln!(s, "    default   {k} = {v:?} (Containerfile ARG)");
    }
    if sent.patches.is_empty() {
        s.push_str("  patches: none\n");
    } else {
        s.push_str("  patches (each tree: *.patch in order with git am, then its scripts):\n");
        for p in &sent.patches {
            let _ = writeln!(
                s,
                "    {}  {} ({}, {})",
                p.sha256, p.path, p.applies_to, p.kind
            );
        }
    }
    s.push_str("  build args:\n");
    for (k, v) in &plan.args {
        let mark = if plan.overridden.contains(k) {
            "  (--build-arg)"
        } else {
            ""
        };
        let _ = writeln!(s, "    {k}={v}{mark}");
    }
    s.push_str("  labels:\n");
    for (k, v) in &plan.labels {
        let _ = writeln!(s, "    {k}={v}");
    }
    let _ = writeln!(s, "  tags: {}", plan.tags.join(", "));
    if let Some(p) = &plan.publish {
        let _ = writeln!(
            s,
            "  publish: {} (channels {})",
            p.repository,
            p.channels.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_build_args() {
        let args = BTreeMap::from([("BASE".to_string(), "img@sha256:1".to_string())]);
        let defaults = BTreeMap::from([("D".to_string(), "d".to_string())]);
        assert_eq!(substitute("${BASE}", &args, &defaults), "img@sha256:1");
        assert_eq!(substitute("$BASE-x", &args, &defaults), "img@sha256:1-x");
        assert_eq!(substitute("${D}/${NONE}", &args, &defaults), "d/");
        assert_eq!(substitute("scratch", &args, &defaults), "scratch");
        assert_eq!(substitute("a$", &args, &defaults), "a$");
    }
}

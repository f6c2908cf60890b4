//! The resolved build of an image definition (pure), and the context tar
//! sent to the engine (sorted, uid/gid 0, mtime 0, normalised modes).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::definition::{Definition, check_override};
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
    let target = opts.target.clone().or(def.file.target.clone());
    if let Some(t) = &target
        && !def.parsed.stages.iter().any(|s| s.as_deref() == Some(t))
    {
        return Err(format!(
            "--target {t}: no such stage in {} (stages: {})",
            def.containerfile.display(),
            super::definition::stage_list(&def.parsed)
        ));
    }
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
    let tags = if opts.tags.is_empty() {
        vec![format!("localhost/{}:latest", def.file.name)]
    } else {
        let mut t = Vec::new();
        for tag in &opts.tags {
            let r = ImageRef::parse(tag).map_err(|e| format!("--tag: {e}"))?;
            if r.digest.is_some() {
                return Err(format!("--tag {tag}: a tag cannot carry a digest"));
            }
            t.push(r.for_channel("latest").to_string());
        }
        t
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
    })
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

/// The context as a tar: the included paths (or everything), sorted, with
/// uid/gid 0, mtime 0 and modes 0755/0644, so the build cache sees content only.
pub fn context_tar(plan: &BuildPlan) -> io::Result<Vec<u8>> {
    let roots: Vec<String> = if plan.include.is_empty() {
        vec![String::new()]
    } else {
        plan.include.clone()
    };
    let mut files = BTreeMap::new();
    for r in roots {
        walk(&plan.context, r.trim_end_matches('/'), &mut files)?;
    }
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

/// The plan as text for `--dry-run`.
pub fn render(plan: &BuildPlan) -> String {
    let mut s = format!(
        "build {} ({})\n  containerfile: {} (context {})\n",
        plan.name,
        plan.definition.display(),
        plan.containerfile,
        plan.context.display()
    );
    if !plan.include.is_empty() {
        s.push_str(&format!("  context sends: {}\n", plan.include.join(", ")));
    }
    s.push_str(&format!(
        "  target: {}\n",
        plan.target.as_deref().unwrap_or("(last stage)")
    ));
    s.push_str("  build args:\n");
    for (k, v) in &plan.args {
        let mark = if plan.overridden.contains(k) {
            "  (--build-arg)"
        } else {
            ""
        };
        s.push_str(&format!("    {k}={v}{mark}\n"));
    }
    s.push_str("  labels:\n");
    for (k, v) in &plan.labels {
        s.push_str(&format!("    {k}={v}\n"));
    }
    s.push_str(&format!("  tags: {}\n", plan.tags.join(", ")));
    s
}

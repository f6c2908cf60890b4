//! `halobox image add-layer` from start to end, as one library entry point
//! ([`run()`]): one reproducible layer of local files on top of an image
//! from the engine or an archive, written as an archive both podman and
//! docker load, or loaded straight into the engine. Its words go to a
//! [`Reporter`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::archive::TempDir;
use super::layer::{self, AddSpec, EntryKind};
use super::rewrite::{self, BaseSource};
use crate::engine::{block_on, connect};
use crate::error::UsageError;
use crate::image_ref::ImageRef;
use crate::reporter::Reporter;

/// One `halobox image add-layer`: the flags as given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The base image: a reference in the engine or an archive.
    pub base: String,
    /// `--add`: what goes into the layer.
    pub add: Vec<AddSpec>,
    /// `--no-dereference`: symlinks as symlinks.
    pub no_dereference: bool,
    /// `--tag`.
    pub tag: Option<String>,
    /// `--label KEY=VALUE`.
    pub label: Vec<String>,
    /// `--output`: the archive to write.
    pub output: Option<PathBuf>,
    /// `--load`: into the engine.
    pub load: bool,
    /// The engine's address (`None`: discovered).
    pub engine: Option<String>,
    /// Report the plan, change nothing.
    pub dry_run: bool,
    /// JSON instead of text.
    pub json: bool,
}

/// `KEY=VALUE` pairs.
fn parse_labels(pairs: &[String]) -> Result<BTreeMap<String, String>, UsageError> {
    pairs
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(UsageError(format!("--label {kv:?}: use KEY=VALUE"))),
        })
        .collect()
}

/// Runs `halobox image add-layer` as `o` asks.
pub fn run(o: &Options, r: &mut dyn Reporter) -> anyhow::Result<()> {
    let entries = layer::entries(&o.add, !o.no_dereference).map_err(UsageError)?;
    let labels = parse_labels(&o.label)?;
    if o.output.is_none() && !o.load && !o.dry_run {
        return Err(
            UsageError("say where the image goes: --output FILE, --load, or both".into()).into(),
        );
    }
    let tag = match &o.tag {
        Some(t) => {
            let r = ImageRef::parse(t).map_err(UsageError)?;
            if r.digest.is_some() {
                return Err(UsageError(format!("--tag {t}: a tag cannot carry a digest")).into());
            }
            Some(r.for_channel("latest").to_string())
        }
        None if o.load => {
            return Err(
                UsageError("--load needs --tag REF: the loaded image needs a name".into()).into(),
            );
        }
        None => None,
    };
    let base = BaseSource::parse(&o.base);
    let created_by = format!(
        "halobox image add-layer {}",
        o.add
            .iter()
            .map(|a| match a.mode {
                Some(m) => format!("{}:{m:04o}", a.dest),
                None => a.dest.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    if o.dry_run {
        return print_plan(o, &entries, &labels, tag.as_deref(), &base, &created_by, r);
    }
    let tags: Vec<String> = tag.into_iter().collect();
    block_on(async {
        let needs_engine = o.load || matches!(base, BaseSource::Engine(_));
        let engine = if needs_engine {
            Some(connect(o.engine.as_deref()).await?)
        } else {
            None
        };
        let work = TempDir::new("halobox-add-layer")?;
        let start = std::time::Instant::now();
        let base_image = rewrite::read_base(&base, engine.as_ref(), work.path()).await?;
        let read = start.elapsed().as_secs_f64();
        let outcome = rewrite::rewrite(
            &base_image,
            &entries,
            &created_by,
            &labels,
            &tags,
            o.output.as_deref(),
            if o.load { engine.as_ref() } else { None },
            &work,
        )
        .await?;
        let total = start.elapsed().as_secs_f64();
        if o.json {
            let mut v = serde_json::to_value(&outcome)?;
            v["seconds"] = serde_json::json!({"base": read, "total": total});
            v["tags"] = serde_json::json!(tags);
            r.out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
        } else {
            if let Some(l) = &outcome.layer {
                r.out(&format!(
                    "layer   {} ({} bytes tar, diff_id {})\n",
                    l.digest, l.tar_size, l.diff_id
                ));
            }
            r.out(&format!(
                "image   {} (config {})\n",
                outcome.image.manifest_digest, outcome.image.config_digest
            ));
            if let Some(p) = &outcome.archive {
                r.out(&format!(
                    "archive {} ({} bytes)\n",
                    p.display(),
                    outcome.image.size
                ));
            }
            for l in &outcome.loaded {
                r.out(&format!("loaded  {l}\n"));
            }
            r.out(&format!(
                "done in {total:.2} s (base read in {read:.2} s)\n"
            ));
        }
        Ok(())
    })?
}

/// `--dry-run`: the layer's entries, labels, tag and where the image goes.
fn print_plan(
    o: &Options,
    entries: &[layer::Entry],
    labels: &std::collections::BTreeMap<String, String>,
    tag: Option<&str>,
    base: &BaseSource,
    created_by: &str,
    r: &mut dyn Reporter,
) -> anyhow::Result<()> {
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let (kind, size) = match &e.kind {
                EntryKind::File { size, .. } => ("file", *size),
                EntryKind::Dir => ("dir", 0),
                EntryKind::Symlink { .. } => ("symlink", 0),
            };
            serde_json::json!({"path": format!("/{}", e.path), "kind": kind,
                "mode": format!("{:04o}", e.mode), "size": size})
        })
        .collect();
    let plan = serde_json::json!({
        "base": base, "entries": list, "labels": labels, "tag": tag,
        "output": o.output, "load": o.load, "history": created_by,
        "mtime": layer::LayerOptions::from_env().map_err(UsageError)?.mtime,
    });
    if o.json {
        r.out(&format!("{}\n", serde_json::to_string_pretty(&plan)?));
    } else {
        r.out(&format!("add a layer to {}:\n", o.base));
        for e in &list {
            r.out(&format!(
                "  {} {} {} ({} bytes)\n",
                e["mode"].as_str().unwrap_or(""),
                e["kind"].as_str().unwrap_or(""),
                e["path"].as_str().unwrap_or(""),
                e["size"]
            ));
        }
        for (k, v) in labels {
            r.out(&format!("  label {k}={v}\n"));
        }
        r.out(&format!("  tag: {}\n", tag.unwrap_or("(none)")));
        if let Some(out) = &o.output {
            r.out(&format!("  write {}\n", out.display()));
        }
        if o.load {
            r.out("  load into the engine\n");
        }
    }
    Ok(())
}

//! `halobox image add-layer`: one reproducible layer of local files on top
//! of an image from the engine or an archive, written as an archive both
//! podman and docker load, or loaded straight into the engine.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::cli::{AddLayerArgs, ImageCommand};
use crate::engine::{block_on, connect};
use crate::error::UsageError;
use crate::image::archive::TempDir;
use crate::image::layer::{self, EntryKind};
use crate::image::rewrite::{self, BaseSource};
use crate::image_ref::ImageRef;

/// Runs `halobox image …`.
pub fn run(cmd: ImageCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ImageCommand::AddLayer(args) => add_layer(&args),
    }
}

/// `KEY=VALUE` pairs.
pub fn parse_labels(pairs: &[String]) -> Result<BTreeMap<String, String>, UsageError> {
    pairs
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(UsageError(format!("--label {kv:?}: use KEY=VALUE"))),
        })
        .collect()
}

fn add_layer(args: &AddLayerArgs) -> anyhow::Result<ExitCode> {
    let entries = layer::entries(&args.add, !args.no_dereference).map_err(UsageError)?;
    let labels = parse_labels(&args.label)?;
    if args.output.is_none() && !args.load && !args.mode.dry_run() {
        return Err(
            UsageError("say where the image goes: --output FILE, --load, or both".into()).into(),
        );
    }
    let tag = match &args.tag {
        Some(t) => {
            let r = ImageRef::parse(t).map_err(UsageError)?;
            if r.digest.is_some() {
                return Err(UsageError(format!("--tag {t}: a tag cannot carry a digest")).into());
            }
            Some(r.for_channel("latest").to_string())
        }
        None if args.load => {
            return Err(
                UsageError("--load needs --tag REF: the loaded image needs a name".into()).into(),
            );
        }
        None => None,
    };
    let base = BaseSource::parse(&args.base);
    let created_by = format!(
        "halobox image add-layer {}",
        args.add
            .iter()
            .map(|a| match a.mode {
                Some(m) => format!("{}:{m:04o}", a.dest),
                None => a.dest.clone(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    if args.mode.dry_run() {
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
            "output": args.output, "load": args.load, "history": created_by,
            "mtime": layer::LayerOptions::from_env().map_err(UsageError)?.mtime,
        });
        if args.mode.json() {
            println!("{}", serde_json::to_string_pretty(&plan)?);
        } else {
            println!("add a layer to {}:", args.base);
            for e in &list {
                println!(
                    "  {} {} {} ({} bytes)",
                    e["mode"].as_str().unwrap_or(""),
                    e["kind"].as_str().unwrap_or(""),
                    e["path"].as_str().unwrap_or(""),
                    e["size"]
                );
            }
            for (k, v) in &labels {
                println!("  label {k}={v}");
            }
            println!("  tag: {}", tag.as_deref().unwrap_or("(none)"));
            if let Some(o) = &args.output {
                println!("  write {}", o.display());
            }
            if args.load {
                println!("  load into the engine");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let tags: Vec<String> = tag.into_iter().collect();
    block_on(async {
        let needs_engine = args.load || matches!(base, BaseSource::Engine(_));
        let engine = if needs_engine {
            Some(connect(args.engine.engine.as_deref()).await?)
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
            args.output.as_deref(),
            if args.load { engine.as_ref() } else { None },
            &work,
        )
        .await?;
        let total = start.elapsed().as_secs_f64();
        if args.mode.json() {
            let mut v = serde_json::to_value(&outcome)?;
            v["seconds"] = serde_json::json!({"base": read, "total": total});
            v["tags"] = serde_json::json!(tags);
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            if let Some(l) = &outcome.layer {
                println!(
                    "layer   {} ({} bytes tar, diff_id {})",
                    l.digest, l.tar_size, l.diff_id
                );
            }
            println!(
                "image   {} (config {})",
                outcome.image.manifest_digest, outcome.image.config_digest
            );
            if let Some(p) = &outcome.archive {
                println!("archive {} ({} bytes)", p.display(), outcome.image.size);
            }
            for l in &outcome.loaded {
                println!("loaded  {l}");
            }
            println!("done in {total:.2} s (base read in {read:.2} s)");
        }
        Ok(ExitCode::SUCCESS)
    })?
}

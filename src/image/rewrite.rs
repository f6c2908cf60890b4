//! A new image from a base: layers appended and labels set, written as an
//! archive and, when asked, loaded into the engine. Shared by
//! `halobox image add-layer` and `halobox publish` (labels need a new config).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::archive::{self, BaseImage, Blob, TempDir, Written};
use super::cleanup::OutputFile;
use super::compose::{self, Appended};
use super::layer::{self, Entry, Layer, LayerOptions};
use crate::engine::Engine;

/// Where the base image comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum BaseSource {
    /// An image archive file (OCI or docker).
    Archive(PathBuf),
    /// An image in the engine's store.
    Engine(String),
}

impl BaseSource {
    /// A path to an existing file is an archive, anything else a reference.
    pub fn parse(s: &str) -> BaseSource {
        let p = Path::new(s);
        if p.is_file() {
            BaseSource::Archive(p.to_path_buf())
        } else {
            BaseSource::Engine(s.to_string())
        }
    }
}

/// What was made.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The new layer, when one was added.
    pub layer: Option<LayerSummary>,
    /// Digests of the written image.
    pub image: Written,
    /// The archive, when kept.
    pub archive: Option<PathBuf>,
    /// The engine's `Loaded image…` lines, when loaded.
    pub loaded: Vec<String>,
}

/// The added layer's identity.
#[derive(Debug, Clone, Serialize)]
pub struct LayerSummary {
    /// sha256 of the tar.
    pub diff_id: String,
    /// sha256 of the gzip blob.
    pub digest: String,
    /// gzip size.
    pub size: u64,
    /// tar size.
    pub tar_size: u64,
}

/// Reads the base into `work` (exporting it from the engine if needed).
pub async fn read_base(
    base: &BaseSource,
    engine: Option<&Engine>,
    work: &Path,
) -> anyhow::Result<BaseImage> {
    let archive = match base {
        BaseSource::Archive(p) => p.clone(),
        BaseSource::Engine(r) => {
            let engine = engine.ok_or_else(|| anyhow::anyhow!("no engine to export {r} from"))?;
            let out = work.join("base.tar");
            engine.export_image(r, &out).await?;
            out
        }
    };
    let dir = work.join("base");
    std::fs::create_dir(&dir)?;
    Ok(archive::read_base(&archive, &dir)?)
}

/// Appends a layer of `entries` (when any) and `labels` to `base`, writes
/// the archive (to `output`, else inside `work`) and loads it when `load`.
#[allow(clippy::too_many_arguments)]
pub async fn rewrite(
    base: &BaseImage,
    entries: &[Entry],
    created_by: &str,
    labels: &BTreeMap<String, String>,
    tags: &[String],
    output: Option<&Path>,
    load: Option<&Engine>,
    work: &TempDir,
) -> anyhow::Result<Outcome> {
    let opts = LayerOptions::from_env().map_err(anyhow::Error::msg)?;
    let mut layers = base.layers.clone();
    let mut appended = Vec::new();
    let mut new_layer: Option<Layer> = None;
    if !entries.is_empty() {
        let path = work.path().join("layer.tar.gz");
        let entries = entries.to_vec();
        let l = tokio::task::spawn_blocking(move || layer::write_layer(&entries, opts, &path))
            .await??;
        appended.push(Appended {
            diff_id: l.diff_id.clone(),
            created_by: created_by.to_string(),
        });
        layers.push(Blob {
            path: l.path.clone(),
            digest: l.digest.clone(),
            size: l.size,
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
        });
        new_layer = Some(l);
    }
    let created = layer::source_date_epoch()
        .map_err(anyhow::Error::msg)?
        .map(compose::rfc3339);
    let config = compose::compose(&base.config, &appended, labels, created.as_deref());
    // `--output` is written beside its final name and renamed on success.
    let staged = output.map(OutputFile::new).transpose()?;
    let out = match &staged {
        Some(f) => f.path().to_path_buf(),
        None => work.path().join("image.tar"),
    };
    let tags_owned = tags.to_vec();
    let out_clone = out.clone();
    let written = tokio::task::spawn_blocking(move || {
        archive::write_archive(&config, &layers, &tags_owned, &out_clone)
    })
    .await??;
    let out = match staged {
        Some(f) => f.commit()?,
        None => out,
    };
    let loaded = match load {
        Some(engine) => engine.load_archive(&out).await?,
        None => Vec::new(),
    };
    Ok(Outcome {
        layer: new_layer.map(|l| LayerSummary {
            diff_id: l.diff_id,
            digest: l.digest,
            size: l.size,
            tar_size: l.tar_size,
        }),
        image: written,
        archive: output.map(Path::to_path_buf),
        loaded,
    })
}

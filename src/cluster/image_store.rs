//! One node's side of `halobox image sync`: its image blob store and the
//! engine's images, through skopeo (the ecosystem's tool for the formats;
//! halobox writes no tar or manifest itself).
//!
//! The store (`DATA/halobox/images`, `DATA` the XDG data folder) keeps
//! blobs by their sha256 in the layout [`crate::model::cache`] reads and
//! writes, as one repo ([`ID`]), so an image's blobs ride the model sync's
//! verified stream ([`crate::model::transfer`]) unchanged. An image is a
//! snapshot there: `snapshots/COMMIT/` (COMMIT the first 40 hex of the
//! manifest digest) links `manifest.json`, `version` and every blob under
//! its hex name, which is exactly skopeo's `dir:` layout. Blobs stay
//! between runs, so a later image sends only the layers a node never had.
//!
//! On the head, [`export`] copies the image into the store with
//! `skopeo copy --preserve-digests` (a registry image keeps the registry's
//! compressed blobs and manifest bytes; a `localhost/` image comes out of
//! containers-storage, whose manifest is new, so only its image id, the
//! config digest, is the head's). On a node, [`prepare`] links what its
//! store already holds and reports it with the engine's digest of the
//! image, and [`import`] copies the complete snapshot into the engine with
//! `--preserve-digests` and checks the digest it ends with.
//! [`stage_following`] runs beside the stream: each time more of the
//! image's first layers are there verified, it imports that prefix under a
//! staging name (`localhost/halobox-staging:DIGEST12-K`), so a node unpacks
//! layers while the rest arrive; the image's own import, once the stream
//! completed, reuses them and removes the staging names. The prefix's manifest and config are
//! the only documents halobox writes (no tool imports part of an image).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::cache::{self, ModelRef, Repo};
use crate::model::facts::{self, HashMode, NodeFacts};
use crate::model::record::{self, Record};

/// The repo of the store that holds every image's blobs.
pub const ID: &str = "halobox/image-blobs";
/// skopeo's `dir:` version file, as skopeo 1.x writes it.
const DIR_VERSION: &str = "Directory Transport Version: 1.1\n";
/// How long one skopeo copy may take (a 20 GB image on a slow disk).
const COPY_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// The store of this node's environment: `DATA/halobox/images`.
pub fn store_dir() -> Result<PathBuf, String> {
    dirs::data_dir()
        .map(|d| d.join("halobox/images"))
        .ok_or_else(|| {
            "no XDG data folder here (HOME unset?): cannot find the image blob store\n  hint: run halobox with HOME set".to_string()
        })
}

/// The image a node holds under `image`, as the engine stores it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Its manifest digests for the image's repository (`sha256:…`).
    pub digests: Vec<String>,
    /// Its image id (the config digest, `sha256:…`).
    pub id: String,
}

/// A node's answer to `halobox image node-stage`: how many prefixes of the
/// image it imported beside the stream ([`stage_following`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staged {
    /// Prefixes staged (0: the import unpacks the whole image).
    pub staged: usize,
    /// Why staging stopped early or ran at the stream's priority, if it
    /// did (the import does the rest).
    pub warning: Option<String>,
}

/// A node's answer to `halobox image node-held IMAGE`: what its engine
/// holds under the name, if anything (the check [`prepare`] makes too,
/// asked alone before the head exports anything).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldReply {
    /// The image, or none.
    pub held: Option<Held>,
}

/// One file of an image's `dir:` layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFile {
    /// Its name in the layout.
    pub path: String,
    /// Its sha256 (hex), the blob's name in the store.
    pub blob: String,
    /// Its size in bytes.
    pub size: u64,
}

/// What the head exported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exported {
    /// The manifest digest the nodes will hold (`sha256:…`).
    pub digest: String,
    /// The image id (`sha256:…`).
    pub id: String,
    /// The snapshot's name in the store.
    pub commit: String,
    /// Every file of the layout.
    pub files: Vec<ImageFile>,
    /// What the head's engine holds under the name.
    pub held: Option<Held>,
    /// The layers' blobs (sha256 hex) in the manifest's order, base first:
    /// the order the stream carries them in, so a node can import the
    /// first layers while the rest arrive.
    #[serde(default)]
    pub layers: Vec<String>,
}

/// What one node is asked to prepare (the head's export).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrepareRequest {
    /// The image's name in the engine.
    pub image: String,
    /// The snapshot.
    pub commit: String,
    /// Its files.
    pub files: Vec<ImageFile>,
    /// The node's engine is docker.
    #[serde(default)]
    pub docker: bool,
}

/// What a node holds of an image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepared {
    /// The store's facts of the snapshot (what the plan compares).
    pub facts: NodeFacts,
    /// What its engine holds under the name.
    pub held: Option<Held>,
    /// Free bytes where the engine keeps its images.
    pub graph_free: u64,
    /// Its engine is docker (it keeps no registry digest for a loaded
    /// image: it is held by the image id).
    #[serde(default)]
    pub docker: bool,
}

/// `skopeo ARGS` run to the end; its stdout, or an error naming what failed.
fn skopeo(args: &[&str], timeout: Duration) -> Result<String, String> {
    skopeo_with(crate::proc::run, args, timeout)
}

/// [`skopeo`] for a copy into podman's storage: in a process group of its
/// own ([`crate::proc::run_apart`]), so a signal that stops halobox (the
/// run killed, a failed stream's stager stopped) lets it finish. Cut off
/// between creating the image and writing its manifest, it would leave an
/// image that breaks `podman images` for every other image in the store.
fn skopeo_into_storage(args: &[&str], timeout: Duration) -> Result<String, String> {
    skopeo_with(crate::proc::run_apart, args, timeout)
}

fn skopeo_with(
    run: fn(&[String], Duration) -> std::io::Result<crate::proc::Finished>,
    args: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let argv: Vec<String> = std::iter::once("skopeo")
        .chain(args.iter().copied())
        .map(str::to_string)
        .collect();
    let done = run(&argv, timeout).map_err(|e| {
        format!("cannot run skopeo: {e}\n  hint: install it (`apt-get install skopeo` or `dnf install skopeo`)")
    })?;
    if done.status.is_some_and(|s| s.success()) {
        Ok(done.stdout)
    } else {
        Err(format!(
            "`{}` failed: {}",
            crate::shell::line(&argv),
            done.output.trim()
        ))
    }
}

/// sha256 of `bytes`, hex.
fn sha_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The config digest a manifest names.
fn config_of(manifest: &[u8]) -> Result<String, String> {
    let v: serde_json::Value = serde_json::from_slice(manifest)
        .map_err(|e| format!("the image's manifest is not JSON: {e}"))?;
    v.pointer("/config/digest")
        .and_then(|d| d.as_str())
        .map(str::to_string)
        .ok_or_else(|| "the image's manifest names no config (a manifest list?)".to_string())
}

/// The layers (sha256 hex) a manifest lists, in order; none when one is
/// not a sha256 digest.
fn layers_of(manifest: &serde_json::Value) -> Option<Vec<String>> {
    manifest
        .get("layers")?
        .as_array()?
        .iter()
        .map(|l| {
            let d = l.get("digest")?.as_str()?.strip_prefix("sha256:")?;
            cache::is_sha256(d).then(|| d.to_string())
        })
        .collect()
}

/// [`layers_of`] the manifest's bytes (none when they are not JSON).
fn layers_in(manifest: &[u8]) -> Vec<String> {
    serde_json::from_slice(manifest)
        .ok()
        .and_then(|m| layers_of(&m))
        .unwrap_or_default()
}

/// What the engine holds under `image`, if anything (asked through its
/// API, as `refresh` and the preflight read digests).
pub fn held(image: &str) -> Result<Option<Held>, String> {
    let r = crate::image_ref::ImageRef::parse(image)?;
    let found = crate::engine::block_on(async {
        let engine = crate::engine::connect(None).await?;
        anyhow::Ok(engine.image(image).await?)
    })
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("the engine here cannot be asked about {image}: {e:#}\n  hint: is it running? (`halobox doctor`)"))?;
    Ok(found.map(|i| Held {
        digests: i
            .repo_digests
            .iter()
            .filter(|d| d.starts_with(&format!("{}@", r.repository)))
            .filter_map(|d| Some(d.split_once('@')?.1.to_string()))
            .collect(),
        id: if i.id.starts_with("sha256:") {
            i.id.clone()
        } else {
            format!("sha256:{}", i.id)
        },
    }))
}

/// How skopeo copies `image` out to a `dir:`: a `localhost/` image from
/// the engine's storage, compressed (storage keeps layers uncompressed, so
/// its digests cannot be kept), any other from its registry with every
/// digest kept.
fn export_args(image: &str) -> Vec<String> {
    if image.starts_with("localhost/") {
        vec![
            "--dest-compress".into(),
            format!("containers-storage:{image}"),
        ]
    } else {
        vec!["--preserve-digests".into(), format!("docker://{image}")]
    }
}

/// Copies `image` into the store at `store` (the head's side): skopeo
/// writes a `dir:` copy in a folder of the store, then every file moves
/// under its sha256 into the blobs and is linked into the snapshot. A
/// registry image the store already holds complete is not copied again.
pub fn export(store: &Path, image: &str) -> Result<Exported, String> {
    let repo = Repo::new(store, ID);
    std::fs::create_dir_all(repo.blobs())
        .map_err(|e| format!("{}: {e}", repo.blobs().display()))?;
    if let Some(kept) = already_here(store, image)? {
        return Ok(kept);
    }
    let work = tempfile::Builder::new()
        .prefix("export-")
        .tempdir_in(store)
        .map_err(|e| format!("{}: {e}", store.display()))?;
    let dir = work.path().join("image");
    let dest = format!("dir:{}", dir.display());
    let mut args = vec!["copy".to_string(), "-q".into()];
    args.extend(export_args(image));
    args.push(dest);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    skopeo(&args, COPY_TIMEOUT).map_err(|e| format!("the head cannot copy {image}: {e}"))?;
    let manifest = std::fs::read(dir.join("manifest.json"))
        .map_err(|e| format!("{}: {e}", dir.join("manifest.json").display()))?;
    let digest = sha_hex(&manifest);
    let commit = digest[..40].to_string();
    let id = config_of(&manifest)?;
    let rec_path = record::path(store, &cache::folder_of(ID));
    let mut rec = Record::load(&rec_path);
    let mut files = vec![];
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in names {
        let from = dir.join(&name);
        let sha = record::hash_file(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        let size = from.metadata().map_err(|e| e.to_string())?.len();
        let to = repo.blob(&sha);
        // A blob the store holds stays only while its record says it was
        // hashed to its name and has not changed since; else the new copy,
        // just hashed, takes its place.
        if rec.fresh(&sha, &to).as_deref() != Some(sha.as_str()) {
            std::fs::rename(&from, &to).map_err(|e| format!("{}: {e}", to.display()))?;
            rec.note(&sha, &to, &sha)
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
        repo.link(&commit, &name, &sha)
            .map_err(|e| format!("linking {name}: {e}"))?;
        files.push(ImageFile {
            path: name,
            blob: sha,
            size,
        });
    }
    rec.save(&rec_path)
        .map_err(|e| format!("{}: {e}", rec_path.display()))?;
    if !files.iter().any(|f| f.path == "version") {
        return Err("skopeo wrote no `version` file: not a dir: layout this halobox knows".into());
    }
    Ok(Exported {
        digest: format!("sha256:{digest}"),
        id,
        commit,
        files,
        held: held(image)?,
        layers: layers_in(&manifest),
    })
}

/// The export a registry image already has in the store: the registry's
/// digest of its manifest (skopeo computes it from the manifest's bytes)
/// names a snapshot whose every file is there, recorded as hashed to its
/// name and unchanged since; none otherwise (a `localhost/` image, a
/// blob missing or changed).
///
/// The digest is skopeo's, not a hash of the manifest as this process
/// captured it: captured output is kept line by line (a newline added
/// after the last), so its hash never matched and every no-op copied the
/// whole image again.
fn already_here(store: &Path, image: &str) -> Result<Option<Exported>, String> {
    if image.starts_with("localhost/") {
        return Ok(None);
    }
    let said = skopeo(
        &[
            "inspect",
            "--format",
            "{{.Digest}}",
            &format!("docker://{image}"),
        ],
        Duration::from_secs(120),
    )
    .map_err(|e| format!("the head cannot read {image}'s manifest digest: {e}"))?;
    let Some(kept) = kept(store, said.trim()) else {
        return Ok(None);
    };
    Ok(Some(Exported {
        held: held(image)?,
        ..kept
    }))
}

/// The export of the snapshot of manifest `digest` (`sha256:…`) when the
/// store holds it complete: every file recorded as hashed to its name and
/// unchanged since, its `manifest.json` the blob `digest` names (its bytes
/// hashed again here, a few KB) and a `version`; none otherwise. `held`
/// is left empty for the caller.
fn kept(store: &Path, digest: &str) -> Option<Exported> {
    let hex = digest.strip_prefix("sha256:")?;
    if !cache::is_sha256(hex) {
        return None;
    }
    let commit = &hex[..40];
    let repo = Repo::new(store, ID);
    let files = repo.files(commit).ok()?;
    let rec = Record::load(&record::path(store, &cache::folder_of(ID)));
    let mut out = vec![];
    for f in files {
        let size = match f.size {
            Some(s) if rec.fresh(&f.blob, &repo.blob(&f.blob)).as_deref() == Some(&f.blob) => s,
            _ => return None,
        };
        out.push(ImageFile {
            path: f.path,
            blob: f.blob,
            size,
        });
    }
    if !out
        .iter()
        .any(|f| f.path == "manifest.json" && f.blob == hex)
        || !out.iter().any(|f| f.path == "version")
    {
        return None;
    }
    let manifest = std::fs::read(repo.blob(hex)).ok()?;
    if sha_hex(&manifest) != hex {
        return None;
    }
    Some(Exported {
        digest: digest.to_string(),
        id: config_of(&manifest).ok()?,
        commit: commit.to_string(),
        files: out,
        held: None,
        layers: layers_in(&manifest),
    })
}

/// Every name in `req` is one this node may use as a file name.
fn check_request(req: &PrepareRequest) -> Result<(), String> {
    if !cache::is_commit(&req.commit) {
        return Err(format!(
            "the snapshot {} is not 40 hex digits",
            cache::shown(&req.commit)
        ));
    }
    for f in &req.files {
        if !cache::is_sha256(&f.blob) || !cache::is_snapshot_path(&f.path) || f.path.contains('/') {
            return Err(format!(
                "the image file {} (blob {}) is not a name of a dir: layout",
                cache::shown(&f.path),
                cache::shown(&f.blob)
            ));
        }
    }
    crate::image_ref::ImageRef::parse(&req.image)?;
    Ok(())
}

/// A node's side before the stream: links every file of the snapshot whose
/// blob the store already has (kept from an earlier image), then reports
/// the snapshot (hashing what was never hashed), the engine's image and
/// the room where the engine keeps its images.
pub fn prepare(store: &Path, req: &PrepareRequest) -> Result<Prepared, String> {
    check_request(req)?;
    let repo = Repo::new(store, ID);
    if repo.blobs().is_dir() {
        for f in &req.files {
            if repo.blob(&f.blob).is_file() {
                repo.link(&req.commit, &f.path, &f.blob)
                    .map_err(|e| format!("linking {}: {e}", f.path))?;
            }
        }
    }
    let model = ModelRef {
        id: ID.to_string(),
        revision: req.commit.clone(),
    };
    let facts = facts::read(store, &model, HashMode::New)?;
    Ok(Prepared {
        facts,
        held: held(&req.image)?,
        graph_free: facts::free_bytes(&graph_root(req.docker)),
        docker: req.docker,
    })
}

/// Where the engine keeps images for this user (docker: its default
/// data root).
fn graph_root(docker: bool) -> PathBuf {
    if docker {
        PathBuf::from("/var/lib/docker")
    } else if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/containers/storage")
    } else {
        dirs::data_dir()
            .map(|d| d.join("containers/storage"))
            .unwrap_or_else(|| PathBuf::from("/var/tmp"))
    }
}

/// What an import must end with: the manifest digest (containers-storage
/// keeps it), or only the image id (docker: `docker-daemon:` loads the
/// layers, docker keeps no registry digest for a loaded image).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Podman's storage, this manifest digest.
    Digest(String),
    /// Docker's engine, this image id.
    DockerId(String),
}

/// Imports the complete snapshot `commit` into the engine as `image`
/// ([`Want`] says which engine and what it must end with). Nothing is
/// imported unless every file's blob is there and hashed to its name.
pub fn import(store: &Path, image: &str, commit: &str, want: &Want) -> Result<Held, String> {
    let repo = Repo::new(store, ID);
    let files = repo.files(commit)?;
    let rec = Record::load(&record::path(store, &cache::folder_of(ID)));
    for f in &files {
        let fresh = rec.fresh(&f.blob, &repo.blob(&f.blob));
        if f.size.is_none() || fresh.as_deref() != Some(f.blob.as_str()) {
            return Err(format!(
                "layer {} of {image} is not complete and verified in {}: nothing was imported\n  hint: run `halobox image sync` again: it sends only what is missing",
                f.blob,
                repo.blobs().display()
            ));
        }
    }
    let snap = repo.snapshot(commit);
    let version = std::fs::read_to_string(snap.join("version")).unwrap_or_default();
    if version != DIR_VERSION {
        return Err(format!(
            "{}: not skopeo's dir: version ({version:?}): nothing was imported",
            snap.join("version").display()
        ));
    }
    let src = format!("dir:{}", snap.display());
    match want {
        Want::Digest(_) => skopeo_into_storage(
            &[
                "copy",
                "-q",
                "--preserve-digests",
                &src,
                &format!("containers-storage:{image}"),
            ],
            COPY_TIMEOUT,
        )?,
        Want::DockerId(_) => skopeo(
            &["copy", "-q", &src, &format!("docker-daemon:{image}")],
            COPY_TIMEOUT,
        )?,
    };
    let now =
        held(image)?.ok_or_else(|| format!("{image} is not in the engine after the import"))?;
    match want {
        Want::Digest(d) if !now.digests.contains(d) => Err(format!(
            "{image} was imported with digest(s) {}, not {d}",
            now.digests.join(", ")
        )),
        Want::DockerId(id) if &now.id != id => Err(format!(
            "{image} was loaded into docker as image {}, not {id}",
            now.id
        )),
        Want::Digest(d) => {
            // Its prefixes staged beside the stream go: the image stacks on
            // their layers.
            unstage(&left_staged(d));
            Ok(now)
        }
        Want::DockerId(_) => Ok(now),
    }
}

/// The niceness [`stage_following`] runs at.
const STAGE_NICENESS: i32 = 10;
/// How often [`stage_following`] looks at the store.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The image's manifest as the store holds it verified: its layers (hex,
/// in order) and its config's hex.
#[derive(Debug, Clone)]
struct Layout {
    manifest: serde_json::Value,
    config: String,
    layers: Vec<String>,
}

/// The manifest named `digest` (`sha256:…`) once it is in the store,
/// hashed to its name; none before.
fn layout(repo: &Repo, rec: &Record, digest: &str) -> Result<Option<Layout>, String> {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    if !cache::is_sha256(hex) {
        return Err(format!("{} is not a sha256 digest", cache::shown(digest)));
    }
    if !verified(repo, rec, hex) {
        return Ok(None);
    }
    let bytes =
        std::fs::read(repo.blob(hex)).map_err(|e| format!("{}: {e}", repo.blob(hex).display()))?;
    let manifest: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("the image's manifest is not JSON: {e}"))?;
    let config = config_of(&bytes)?;
    let layers = layers_of(&manifest)
        .ok_or_else(|| "the image's manifest lists no sha256 layers".to_string())?;
    let config = config
        .strip_prefix("sha256:")
        .filter(|c| cache::is_sha256(c))
        .ok_or_else(|| {
            format!(
                "the image's config {} is not a sha256 digest",
                cache::shown(&config)
            )
        })?
        .to_string();
    Ok(Some(Layout {
        manifest,
        config,
        layers,
    }))
}

/// The blob `hex` is in the store, recorded as hashed to its name and
/// unchanged since.
fn verified(repo: &Repo, rec: &Record, hex: &str) -> bool {
    rec.fresh(hex, &repo.blob(hex)).as_deref() == Some(hex)
}

/// How many of the image's first layers (and its config) are in the store
/// verified.
fn verified_prefix(repo: &Repo, rec: &Record, l: &Layout) -> usize {
    if !verified(repo, rec, &l.config) {
        return 0;
    }
    l.layers
        .iter()
        .take_while(|h| verified(repo, rec, h))
        .count()
}

/// The manifest and config of the image made of the first `k` layers of
/// `l`: the same JSON, the layer list, `rootfs.diff_ids` and `history`
/// cut after the `k`-th layer. No tool imports part of an image, so these
/// two documents are made here; every layer stays the registry's blob.
fn prefix_documents(l: &Layout, config: &[u8], k: usize) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut c: serde_json::Value = serde_json::from_slice(config)
        .map_err(|e| format!("the image's config is not JSON: {e}"))?;
    if let Some(ids) = c
        .pointer_mut("/rootfs/diff_ids")
        .and_then(|v| v.as_array_mut())
    {
        ids.truncate(k);
    }
    if let Some(history) = c.get_mut("history").and_then(|v| v.as_array_mut()) {
        let mut layers = 0;
        let keep = history
            .iter()
            .take_while(|h| {
                let before = layers;
                if h.get("empty_layer").and_then(|e| e.as_bool()) != Some(true) {
                    layers += 1;
                }
                before < k
            })
            .count();
        history.truncate(keep);
    }
    let config = serde_json::to_vec(&c).map_err(|e| e.to_string())?;
    let mut m = l.manifest.clone();
    if let Some(layers) = m.get_mut("layers").and_then(|v| v.as_array_mut()) {
        layers.truncate(k);
    }
    m["config"]["digest"] = format!("sha256:{}", sha_hex(&config)).into();
    m["config"]["size"] = config.len().into();
    let manifest = serde_json::to_vec(&m).map_err(|e| e.to_string())?;
    Ok((manifest, config))
}

/// The name a prefix of `k` layers of the image `digest` is staged under.
fn staging_name(digest: &str, k: usize) -> String {
    format!("{STAGING}:{}-{k}", staging_tag(digest))
}

/// The repository prefixes are staged in.
const STAGING: &str = "localhost/halobox-staging";

/// The tag of the staged prefixes of the image `digest`, up to `-K`.
fn staging_tag(digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    hex[..hex.len().min(12)].to_string()
}

/// The staged prefixes of the image `digest` in the engine here: this
/// run's, and those a stopped run of it left (its stream failed, or it was
/// killed). Another image's are left alone: a run of it may be using them.
fn left_staged(digest: &str) -> Vec<String> {
    let tags = crate::engine::block_on(async {
        let engine = crate::engine::connect(None).await?;
        anyhow::Ok(engine.repository_tags(STAGING).await?)
    });
    let mine = format!("{}-", staging_tag(digest));
    match tags {
        Ok(Ok(tags)) => tags
            .into_iter()
            .filter(|(t, _)| t.starts_with(&mine))
            .map(|(t, _)| format!("{STAGING}:{t}"))
            .collect(),
        _ => vec![],
    }
}

/// Imports the image's first `k` layers into podman's storage as `name`
/// (a `dir:` layout in a work folder of the store: the prefix's manifest
/// and config, links to the layers' blobs).
fn stage(store: &Path, l: &Layout, k: usize, name: &str) -> Result<(), String> {
    let repo = Repo::new(store, ID);
    let config = std::fs::read(repo.blob(&l.config))
        .map_err(|e| format!("{}: {e}", repo.blob(&l.config).display()))?;
    let (manifest, config) = prefix_documents(l, &config, k)?;
    let work = tempfile::Builder::new()
        .prefix("stage-")
        .tempdir_in(store)
        .map_err(|e| format!("{}: {e}", store.display()))?;
    let dir = work.path();
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes)
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    write("manifest.json", &manifest)?;
    write(&sha_hex(&config), &config)?;
    write("version", DIR_VERSION.as_bytes())?;
    for hex in &l.layers[..k] {
        let link = dir.join(hex);
        // A layer the manifest lists twice is one file.
        if link.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(repo.blob(hex), &link)
                .map_err(|e| format!("{}: {e}", link.display()))?;
        }
    }
    skopeo_into_storage(
        &[
            "copy",
            "-q",
            &format!("dir:{}", dir.display()),
            &format!("containers-storage:{name}"),
        ],
        COPY_TIMEOUT,
    )
    .map(drop)
}

/// Removes the staging names `names`, each a name only: a prefix can be an
/// image the engine holds already under another name (an older version of
/// the image), which stays, and the image stacks on its layers.
fn unstage(names: &[String]) {
    if names.is_empty() {
        return;
    }
    let _ = crate::engine::block_on(async {
        let engine = crate::engine::connect(None).await?;
        for name in names {
            let _ = engine.untag(name).await;
        }
        anyhow::Ok(())
    });
}

/// Stages the image's first layers as the stream brings them (run beside
/// it, `image node-stage`): each time more of them are in the store
/// verified, that prefix is imported into podman's storage under a staging
/// name, so the unpacking goes on while the rest still streams. Ends once
/// every layer is there (the last one is left to [`import`], which reuses
/// the staged ones and removes the staging names) or at the first thing
/// that goes wrong (said in [`Staged::warning`]: staging only saves time,
/// [`import`] does the whole work without it); the caller sets `stop`
/// when the stream fails, and it then ends before its next prefix (the
/// import under way finishes: skopeo runs in a process group of its own)
/// and removes its staging names.
pub fn stage_following(store: &Path, digest: &str, stop: &std::sync::atomic::AtomicBool) -> Staged {
    let mut out = Staged::default();
    // Below the stream this node relays on to the next: the unpacking takes
    // what CPU the relay leaves (skopeo inherits the niceness).
    // SAFETY: setpriority changes this process's niceness, nothing else.
    if unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, 0, STAGE_NICENESS) } != 0 {
        out.warning = Some(format!(
            "staging runs at the stream's priority: {}",
            std::io::Error::last_os_error()
        ));
    }
    let repo = Repo::new(store, ID);
    let mut staged_k = 0;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            // No import follows on this node: what it staged goes.
            unstage(&left_staged(digest));
            out.warning = Some("staging stopped: the stream did not complete".into());
            break;
        }
        let rec = Record::load(&record::path(store, &cache::folder_of(ID)));
        let l = match layout(&repo, &rec, digest) {
            Ok(Some(l)) => l,
            Ok(None) => {
                std::thread::sleep(FOLLOW_POLL);
                continue;
            }
            Err(e) => {
                out.warning = Some(format!(
                    "staging stopped, the import does the whole image: {e}"
                ));
                break;
            }
        };
        let k = verified_prefix(&repo, &rec, &l);
        if verified(&repo, &rec, &l.config) && k == l.layers.len() {
            break;
        }
        if k > staged_k {
            staged_k = k;
            if let Err(e) = stage(store, &l, k, &staging_name(digest, k)) {
                out.warning = Some(format!(
                    "staging the first {k} layer(s) failed, the import does the rest: {e}"
                ));
                break;
            }
            out.staged += 1;
            continue;
        }
        std::thread::sleep(FOLLOW_POLL);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_names_only_files_of_a_dir_layout() {
        let ok = PrepareRequest {
            image: "reg:5000/halobox/fleet:v1".into(),
            commit: "a".repeat(40),
            files: vec![ImageFile {
                path: "manifest.json".into(),
                blob: "b".repeat(64),
                size: 3,
            }],
            docker: false,
        };
        check_request(&ok).unwrap();
        let mut bad = ok.clone();
        bad.files[0].path = "../x".into();
        assert!(check_request(&bad).unwrap_err().contains("\"../x\""));
        let mut bad = ok.clone();
        bad.files[0].blob = "../../x".into();
        assert!(check_request(&bad).is_err());
        let mut bad = ok;
        bad.commit = "zz".into();
        assert!(check_request(&bad).unwrap_err().contains("40 hex"));
    }

    /// A store holding one image's snapshot, every blob recorded as
    /// hashed; its manifest digest.
    fn stored(store: &Path) -> String {
        let repo = Repo::new(store, ID);
        std::fs::create_dir_all(repo.blobs()).unwrap();
        let manifest = br#"{"schemaVersion":2,"config":{"digest":"sha256:c0","size":2}}"#;
        let digest = sha_hex(manifest);
        let rec_path = record::path(store, &cache::folder_of(ID));
        let mut rec = Record::load(&rec_path);
        for (name, bytes) in [
            ("manifest.json", &manifest[..]),
            ("version", DIR_VERSION.as_bytes()),
            ("layer", b"a layer"),
        ] {
            let sha = sha_hex(bytes);
            let path = if name == "layer" {
                sha.clone()
            } else {
                name.into()
            };
            std::fs::write(repo.blob(&sha), bytes).unwrap();
            rec.note(&sha, &repo.blob(&sha), &sha).unwrap();
            repo.link(&digest[..40], &path, &sha).unwrap();
        }
        rec.save(&rec_path).unwrap();
        format!("sha256:{digest}")
    }

    #[test]
    fn a_registry_image_held_complete_in_the_store_is_not_copied_again() {
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join("images");
        let digest = stored(&store);
        let e = kept(&store, &digest).expect("the snapshot is complete and verified");
        assert_eq!(e.digest, digest);
        assert_eq!(e.id, "sha256:c0");
        assert_eq!(e.commit, digest[7..47]);
        assert_eq!(e.files.len(), 3);
        // Another digest (as a newline added to the manifest would give),
        // or none at all, is not this snapshot.
        let other = format!("sha256:{}", sha_hex(b"{}\n"));
        assert!(kept(&store, &other).is_none());
        assert!(kept(&store, "").is_none());
        // A blob changed since it was hashed: copied again.
        let repo = Repo::new(&store, ID);
        std::fs::write(repo.blob(&sha_hex(b"a layer")), b"another").unwrap();
        assert!(kept(&store, &digest).is_none());
    }

    #[test]
    fn a_prefix_keeps_its_layers_diff_ids_and_history_only() {
        let l = Layout {
            manifest: serde_json::json!({
                "schemaVersion": 2,
                "config": {"digest": "sha256:old", "size": 1},
                "layers": [{"digest": "sha256:x"}, {"digest": "sha256:y"}, {"digest": "sha256:z"}],
            }),
            config: "c".repeat(64),
            layers: vec![],
        };
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64",
            "rootfs": {"type": "layers", "diff_ids": ["sha256:1", "sha256:2", "sha256:3"]},
            "history": [
                {"created_by": "a"},
                {"created_by": "env", "empty_layer": true},
                {"created_by": "b"},
                {"created_by": "env2", "empty_layer": true},
                {"created_by": "c"},
            ],
        }))
        .unwrap();
        let (m, c) = prefix_documents(&l, &config, 2).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        let cv: serde_json::Value = serde_json::from_slice(&c).unwrap();
        assert_eq!(
            cv["rootfs"]["diff_ids"],
            serde_json::json!(["sha256:1", "sha256:2"])
        );
        let by: Vec<&str> = cv["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["created_by"].as_str().unwrap())
            .collect();
        assert_eq!(by, ["a", "env", "b"]);
        assert_eq!(cv["architecture"], "amd64");
        assert_eq!(m["layers"].as_array().unwrap().len(), 2);
        assert_eq!(m["config"]["digest"], format!("sha256:{}", sha_hex(&c)));
        assert_eq!(m["config"]["size"], c.len());
    }

    #[test]
    fn the_verified_prefix_stops_at_the_first_layer_not_there() {
        let d = tempfile::tempdir().unwrap();
        let repo = Repo::new(d.path(), ID);
        std::fs::create_dir_all(repo.blobs()).unwrap();
        let rec_path = record::path(d.path(), &cache::folder_of(ID));
        let mut rec = Record::load(&rec_path);
        let mut put = |bytes: &[u8]| {
            let sha = sha_hex(bytes);
            std::fs::write(repo.blob(&sha), bytes).unwrap();
            rec.note(&sha, &repo.blob(&sha), &sha).unwrap();
            sha
        };
        let (config, l1, l3) = (put(b"{}"), put(b"one"), put(b"three"));
        let l = Layout {
            manifest: serde_json::json!({}),
            config,
            layers: vec![l1, sha_hex(b"two"), l3],
        };
        assert_eq!(verified_prefix(&repo, &rec, &l), 1);
        // Without its config no layer counts.
        std::fs::remove_file(repo.blob(&l.config)).unwrap();
        assert_eq!(verified_prefix(&repo, &rec, &l), 0);
    }

    #[test]
    fn the_config_digest_is_read_from_the_manifest() {
        let m = br#"{"schemaVersion":2,"config":{"digest":"sha256:abc","size":1}}"#;
        assert_eq!(config_of(m).unwrap(), "sha256:abc");
        assert!(config_of(b"{}").unwrap_err().contains("no config"));
    }
}

//! Image archives: read a base image from a docker archive (what
//! `GET /images/{name}/get` returns on podman and docker) or an OCI archive,
//! and write one tar that holds both an OCI layout (`oci-layout`,
//! `index.json`, `blobs/sha256/…`) and docker's `manifest.json`, which podman
//! and docker (20.10 needs `manifest.json`) both load.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use oci_spec::image::{
    Descriptor, ImageConfiguration, ImageIndexBuilder, ImageManifestBuilder, MediaType,
    SCHEMA_VERSION,
};
use serde_json::{Value, json};

use super::cleanup;
use super::layer::HashingWriter;

/// Media type of an uncompressed layer.
const TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// A layer blob of the image being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Where the bytes are.
    pub path: PathBuf,
    /// `sha256:…` of the bytes (checked while they are copied).
    pub digest: String,
    /// Size in bytes.
    pub size: u64,
    /// OCI media type.
    pub media_type: String,
}

/// An image read from an archive: its config (as JSON, so fields that OCI
/// does not define, such as docker's `Healthcheck`, survive) and its layers.
#[derive(Debug, Clone)]
pub struct BaseImage {
    /// The image config.
    pub config: Value,
    /// Layer blobs, bottom first.
    pub layers: Vec<Blob>,
}

/// A private (0700) work folder, removed when dropped and, should halobox be
/// interrupted (SIGINT, SIGTERM), before it exits.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new folder under `$TMPDIR` (or /var/tmp: images are large).
    pub fn new(prefix: &str) -> io::Result<TempDir> {
        let base = std::env::var_os("TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        for n in 0..1000u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let p = base.join(format!("{prefix}-{}-{nanos}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => {
                    cleanup::register(&p);
                    return Ok(TempDir(p));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("creating a work folder in {}: {e}", base.display()),
                    ));
                }
            }
        }
        Err(io::Error::other("no free work folder name"))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        cleanup::unregister(&self.0);
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Unpacks `archive` into `dir` and reads the image it holds (docker
/// archive or OCI layout; for a multi-platform OCI index, linux/amd64).
pub fn read_base(archive: &Path, dir: &Path) -> io::Result<BaseImage> {
    let f = File::open(archive)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", archive.display())))?;
    unpack(f, dir)?;
    read_unpacked(dir).map_err(|e| bad(format!("{}: {e}", archive.display())))
}

/// Unpacks a tar stream into `dir`. Only files, folders and symlinks that
/// stay inside the archive (docker links identical layers) are unpacked; a
/// path or link that leaves it, a hard link, device, FIFO or sparse entry is
/// refused with the entry's name.
pub fn unpack(r: impl Read, dir: &Path) -> io::Result<()> {
    let mut a = tar::Archive::new(BufReader::with_capacity(1 << 20, r));
    a.set_preserve_permissions(false);
    a.set_preserve_mtime(false);
    a.set_unpack_xattrs(false);
    for entry in a.entries()? {
        let mut e = entry?;
        let name = e.path()?.display().to_string();
        let kind = e.header().entry_type();
        match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {}
            tar::EntryType::Symlink => {
                let target = e.link_name()?.map(|t| t.into_owned()).unwrap_or_default();
                link_stays_inside(&name, &target)?;
            }
            other => {
                return Err(bad(format!(
                    "archive entry {name:?} is {}: image archives hold only files and folders; refused",
                    entry_kind(other)
                )));
            }
        }
        if !e.unpack_in(dir)? {
            return Err(bad(format!(
                "archive entry {name:?} leaves the archive; refused"
            )));
        }
    }
    Ok(())
}

fn entry_kind(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Link => "a hard link",
        tar::EntryType::Char => "a character device",
        tar::EntryType::Block => "a block device",
        tar::EntryType::Fifo => "a FIFO",
        tar::EntryType::GNUSparse => "a sparse file",
        _ => "not a file or folder",
    }
}

/// A symlink entry's target must be relative and stay inside the archive.
fn link_stays_inside(name: &str, target: &Path) -> io::Result<()> {
    use std::path::Component;
    let refuse = |why: &str| {
        bad(format!(
            "archive entry {name:?} is a symlink to {}, {why}; refused",
            target.display()
        ))
    };
    let mut depth = Path::new(name)
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
        .saturating_sub(1);
    for c in target.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("outside the archive (an absolute path)"));
            }
            Component::ParentDir if depth == 0 => return Err(refuse("outside the archive")),
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
        }
    }
    Ok(())
}

fn read_unpacked(dir: &Path) -> io::Result<BaseImage> {
    if dir.join("index.json").is_file() && dir.join("oci-layout").is_file() {
        read_oci(dir)
    } else if dir.join("manifest.json").is_file() {
        read_docker(dir)
    } else {
        Err(bad(
            "neither an OCI archive (oci-layout, index.json) nor a docker archive (manifest.json)",
        ))
    }
}

/// Largest JSON document read from an archive (index, manifest, config).
pub const MAX_JSON_BYTES: u64 = 16 << 20;

/// The JSON document at `rel` in the unpacked archive: a regular file of
/// at most [`MAX_JSON_BYTES`] (and of `size` bytes when a descriptor says).
fn read_json(dir: &Path, rel: &str, size: Option<u64>) -> io::Result<Value> {
    let path = regular_file(dir, rel)?;
    let bytes = crate::confine::read_regular(&path, true, MAX_JSON_BYTES)
        .map_err(|e| bad(format!("archive entry {rel}: {e}")))?;
    if let Some(want) = size.filter(|w| *w != bytes.len() as u64) {
        return Err(bad(format!(
            "archive entry {rel} is {} bytes, its descriptor says {want}; refused",
            bytes.len()
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("archive entry {rel}: {e}")))
}

/// The real path of the regular file at `rel` in the unpacked archive:
/// symlinks resolved inside it, anything but a regular file refused.
fn regular_file(dir: &Path, rel: &str) -> io::Result<PathBuf> {
    if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
        return Err(bad(format!("archive path {rel:?} leaves the archive")));
    }
    let path = crate::confine::resolve(dir, rel, true)
        .map_err(|e| bad(format!("archive entry {rel}: {e}")))?;
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("archive entry {rel}: {e}")))?;
    if !meta.is_file() {
        return Err(bad(format!(
            "archive entry {rel} is not a regular file; refused"
        )));
    }
    Ok(path)
}

/// `blobs/sha256/<hex>` of a digest.
fn blob_name(digest: &str) -> io::Result<String> {
    let (alg, hex) = digest
        .split_once(':')
        .ok_or_else(|| bad(format!("{digest:?} is not a digest")))?;
    if alg != "sha256" || !is_sha256_hex(hex) {
        return Err(bad(format!("unsupported digest {digest:?} (only sha256)")));
    }
    Ok(format!("blobs/{alg}/{hex}"))
}

/// A descriptor's `size`, when it has one.
fn desc_size(desc: &Value) -> Option<u64> {
    desc.get("size").and_then(Value::as_u64)
}

/// True for 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn str_field<'a>(v: &'a Value, key: &str) -> io::Result<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("missing {key:?}")))
}

fn read_oci(dir: &Path) -> io::Result<BaseImage> {
    let index = read_json(dir, "index.json", None)?;
    let mut desc = index
        .get("manifests")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .cloned()
        .ok_or_else(|| bad("index.json lists no manifest"))?;
    let mut manifest = read_json(
        dir,
        &blob_name(str_field(&desc, "digest")?)?,
        desc_size(&desc),
    )?;
    if manifest.get("manifests").is_some() {
        desc = manifest["manifests"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| {
                m.pointer("/platform/os") == Some(&json!("linux"))
                    && m.pointer("/platform/architecture") == Some(&json!("amd64"))
            })
            .cloned()
            .ok_or_else(|| bad("the image index has no linux/amd64 manifest"))?;
        manifest = read_json(
            dir,
            &blob_name(str_field(&desc, "digest")?)?,
            desc_size(&desc),
        )?;
    }
    let config_desc = manifest.get("config").unwrap_or(&Value::Null);
    let config = read_json(
        dir,
        &blob_name(str_field(config_desc, "digest")?)?,
        desc_size(config_desc),
    )?;
    let mut layers = Vec::new();
    for l in manifest
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the manifest has no layers"))?
    {
        let digest = str_field(l, "digest")?.to_string();
        let name = blob_name(&digest)?;
        let path = regular_file(dir, &name)?;
        let size = std::fs::metadata(&path)?.len();
        let want = desc_size(l).ok_or_else(|| bad(format!("layer {digest} has no size")))?;
        if size != want {
            return Err(bad(format!(
                "archive entry {name} is {size} bytes, its descriptor says {want}; refused"
            )));
        }
        let media_type = match str_field(l, "mediaType")? {
            "application/vnd.docker.image.rootfs.diff.tar.gzip" => {
                "application/vnd.oci.image.layer.v1.tar+gzip"
            }
            "application/vnd.docker.image.rootfs.diff.tar" => TAR,
            m => m,
        }
        .to_string();
        layers.push(Blob {
            path,
            digest,
            size,
            media_type,
        });
    }
    checked(config, layers)
}

fn read_docker(dir: &Path) -> io::Result<BaseImage> {
    let manifest = read_json(dir, "manifest.json", None)?;
    let entry = manifest
        .as_array()
        .and_then(|a| a.first())
        .ok_or_else(|| bad("manifest.json lists no image"))?;
    let config = read_json(dir, str_field(entry, "Config")?, None)?;
    let diff_ids = diff_ids(&config)?;
    let paths = entry
        .get("Layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("manifest.json has no Layers"))?;
    if paths.len() != diff_ids.len() {
        return Err(bad(format!(
            "manifest.json lists {} layers, the config {}",
            paths.len(),
            diff_ids.len()
        )));
    }
    let mut layers = Vec::new();
    for (p, diff_id) in paths.iter().zip(diff_ids) {
        let rel = p
            .as_str()
            .ok_or_else(|| bad("a layer path is not a string"))?;
        let path = regular_file(dir, rel)?;
        let size = std::fs::metadata(&path)
            .map_err(|e| bad(format!("layer {rel}: {e}")))?
            .len();
        let mut magic = [0u8; 2];
        let n = File::open(&path)?.read(&mut magic)?;
        let gzip = n == 2 && magic == [0x1f, 0x8b];
        if gzip {
            // The blob digest is not the diff_id: hash the blob.
            let digest = hash_file(&path)?;
            layers.push(Blob {
                path,
                digest,
                size,
                media_type: "application/vnd.oci.image.layer.v1.tar+gzip".into(),
            });
        } else {
            layers.push(Blob {
                path,
                digest: diff_id,
                size,
                media_type: TAR.into(),
            });
        }
    }
    checked(config, layers)
}

fn checked(config: Value, layers: Vec<Blob>) -> io::Result<BaseImage> {
    serde_json::from_value::<ImageConfiguration>(config.clone())
        .map_err(|e| bad(format!("the image config is not a valid OCI config: {e}")))?;
    let n = diff_ids(&config)?.len();
    if n != layers.len() {
        return Err(bad(format!(
            "the config lists {n} layers, the manifest {}",
            layers.len()
        )));
    }
    Ok(BaseImage { config, layers })
}

/// `rootfs.diff_ids` of a config.
pub fn diff_ids(config: &Value) -> io::Result<Vec<String>> {
    config
        .pointer("/rootfs/diff_ids")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the config has no rootfs.diff_ids"))?
        .iter()
        .map(|d| {
            d.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad("a diff_id is not a string"))
        })
        .collect()
}

/// `sha256:<hex>` of a file.
pub fn hash_file(path: &Path) -> io::Result<String> {
    let mut w = HashingWriter::new(io::sink());
    io::copy(
        &mut BufReader::with_capacity(1 << 20, File::open(path)?),
        &mut w,
    )?;
    Ok(w.finish().1)
}

/// Canonical JSON: sorted keys, no whitespace.
pub fn canonical(v: &impl serde::Serialize) -> Vec<u8> {
    let value = serde_json::to_value(v).expect("serialisable");
    serde_json::to_vec(&value).expect("serialisable")
}

/// `sha256:<hex>` of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// What was written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Written {
    /// `sha256:` of the manifest (the image's digest in an OCI layout).
    pub manifest_digest: String,
    /// `sha256:` of the config (the image id docker and podman show).
    pub config_digest: String,
    /// Total bytes of the archive.
    pub size: u64,
}

fn descriptor(media: MediaType, size: u64, digest: &str) -> io::Result<Descriptor> {
    let d: oci_spec::image::Digest = digest
        .parse()
        .map_err(|e| bad(format!("{digest:?}: {e}")))?;
    Ok(Descriptor::new(media, size, d))
}

/// Writes the image (`config` plus `layers`) as one tar at `out`, named
/// `tags` (full references). Every blob's digest is checked as it is copied.
pub fn write_archive(
    config: &Value,
    layers: &[Blob],
    tags: &[String],
    out: &Path,
) -> io::Result<Written> {
    let config_bytes = canonical(config);
    let config_digest = sha256(&config_bytes);
    let mut layer_descs = Vec::new();
    for l in layers {
        layer_descs.push(descriptor(
            MediaType::from(l.media_type.as_str()),
            l.size,
            &l.digest,
        )?);
    }
    let manifest = ImageManifestBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(
            MediaType::ImageConfig,
            config_bytes.len() as u64,
            &config_digest,
        )?)
        .layers(layer_descs)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let manifest_bytes = canonical(&manifest);
    let manifest_digest = sha256(&manifest_bytes);
    let mut mdesc = descriptor(
        MediaType::ImageManifest,
        manifest_bytes.len() as u64,
        &manifest_digest,
    )?;
    if let Some(t) = tags.first() {
        mdesc.set_annotations(Some(
            [
                ("org.opencontainers.image.ref.name".to_string(), t.clone()),
                ("io.containerd.image.name".to_string(), t.clone()),
            ]
            .into(),
        ));
    }
    let index = ImageIndexBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![mdesc])
        .build()
        .map_err(|e| bad(e.to_string()))?;
    let blob_name = |d: &str| format!("blobs/sha256/{}", d.trim_start_matches("sha256:"));
    let docker_manifest = json!([{
        "Config": blob_name(&config_digest),
        "RepoTags": tags,
        "Layers": layers.iter().map(|l| blob_name(&l.digest)).collect::<Vec<_>>(),
    }]);

    let file = File::create(out)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.display())))?;
    let mut tar = tar::Builder::new(HashingWriter::new(BufWriter::with_capacity(1 << 20, file)));
    add_bytes(&mut tar, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add_dir(&mut tar, "blobs/")?;
    add_dir(&mut tar, "blobs/sha256/")?;
    let mut seen = std::collections::BTreeSet::new();
    for l in layers {
        if seen.insert(l.digest.clone()) {
            add_blob(&mut tar, &blob_name(&l.digest), l)?;
        }
    }
    add_bytes(&mut tar, &blob_name(&config_digest), &config_bytes)?;
    add_bytes(&mut tar, &blob_name(&manifest_digest), &manifest_bytes)?;
    add_bytes(&mut tar, "index.json", &canonical(&index))?;
    add_bytes(&mut tar, "manifest.json", &canonical(&docker_manifest))?;
    let (mut buf, _, size) = tar.into_inner()?.finish();
    buf.flush()?;
    Ok(Written {
        manifest_digest,
        config_digest,
        size,
    })
}

fn header(size: u64, kind: tar::EntryType, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

fn add_dir<W: Write>(tar: &mut tar::Builder<W>, path: &str) -> io::Result<()> {
    tar.append_data(
        &mut header(0, tar::EntryType::Directory, 0o755),
        path,
        io::empty(),
    )
}

fn add_bytes<W: Write>(tar: &mut tar::Builder<W>, path: &str, bytes: &[u8]) -> io::Result<()> {
    tar.append_data(
        &mut header(bytes.len() as u64, tar::EntryType::Regular, 0o644),
        path,
        bytes,
    )
}

fn add_blob<W: Write>(tar: &mut tar::Builder<W>, path: &str, blob: &Blob) -> io::Result<()> {
    let f = File::open(&blob.path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", blob.path.display())))?;
    let mut reader = HashingReader::new(BufReader::with_capacity(1 << 20, f).take(blob.size));
    tar.append_data(
        &mut header(blob.size, tar::EntryType::Regular, 0o644),
        path,
        &mut reader,
    )?;
    let (digest, n) = reader.finish();
    if n != blob.size || digest != blob.digest {
        return Err(bad(format!(
            "layer {} does not match its digest {} (read {n} bytes with {digest})",
            blob.path.display(),
            blob.digest
        )));
    }
    Ok(())
}

/// A reader that hashes and counts what passes through.
struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
    bytes: u64,
}

impl<R: Read> HashingReader<R> {
    fn new(inner: R) -> Self {
        use sha2::Digest as _;
        Self {
            inner,
            hasher: sha2::Sha256::new(),
            bytes: 0,
        }
    }

    fn finish(self) -> (String, u64) {
        use sha2::Digest as _;
        (
            format!("sha256:{}", hex::encode(self.hasher.finalize())),
            self.bytes,
        )
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use sha2::Digest as _;
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys() {
        let v = json!({"b": 1, "a": {"d": [1, 2], "c": "x"}});
        assert_eq!(canonical(&v), br#"{"a":{"c":"x","d":[1,2]},"b":1}"#);
    }

    #[test]
    fn archive_paths_stay_inside() {
        let d = Path::new("/x");
        assert!(regular_file(d, "../etc/passwd").is_err());
        assert!(regular_file(d, "/etc/passwd").is_err());
        assert!(blob_name("sha512:abc").is_err());
        assert!(link_stays_inside("a/layer.tar", Path::new("../b/layer.tar")).is_ok());
        assert!(link_stays_inside("a/layer.tar", Path::new("../../etc/shadow")).is_err());
        assert!(link_stays_inside("manifest.json", Path::new("/etc/shadow")).is_err());
        assert!(link_stays_inside("manifest.json", Path::new("..")).is_err());
    }
}

//! Image archives: read a base image from a docker archive (what
//! `GET /images/{name}/get` returns on podman and docker) or an OCI archive,
//! and write one tar that holds both an OCI layout (`oci-layout`,
//! `index.json`, `blobs/sha256/…`) and docker's `manifest.json`, which podman
//! and docker (20.10 needs `manifest.json`) both load.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use oci_spec::image::{
    Descriptor, ImageConfiguration, ImageIndexBuilder, ImageManifestBuilder, MediaType,
    SCHEMA_VERSION,
};
use serde_json::{Value, json};

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

/// A folder removed when dropped.
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
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
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

/// Unpacks a tar stream into `dir` (paths that leave `dir` are refused).
pub fn unpack(r: impl Read, dir: &Path) -> io::Result<()> {
    let mut a = tar::Archive::new(BufReader::with_capacity(1 << 20, r));
    a.set_preserve_permissions(false);
    a.set_preserve_mtime(false);
    a.set_unpack_xattrs(false);
    a.unpack(dir)
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

fn read_json(path: &Path) -> io::Result<Value> {
    let bytes = std::fs::read(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("{}: {e}", path.display())))
}

fn inside(dir: &Path, rel: &str) -> io::Result<PathBuf> {
    if rel.starts_with('/') || rel.split('/').any(|p| p == "..") {
        return Err(bad(format!("archive path {rel:?} leaves the archive")));
    }
    Ok(dir.join(rel))
}

fn blob_path(dir: &Path, digest: &str) -> io::Result<PathBuf> {
    let (alg, hex) = digest
        .split_once(':')
        .ok_or_else(|| bad(format!("{digest:?} is not a digest")))?;
    if alg != "sha256" || !is_sha256_hex(hex) {
        return Err(bad(format!("unsupported digest {digest:?} (only sha256)")));
    }
    Ok(dir.join("blobs").join(alg).join(hex))
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
    let index = read_json(&dir.join("index.json"))?;
    let mut desc = index
        .get("manifests")
        .and_then(Value::as_array)
        .and_then(|m| m.first())
        .cloned()
        .ok_or_else(|| bad("index.json lists no manifest"))?;
    let mut manifest = read_json(&blob_path(dir, str_field(&desc, "digest")?)?)?;
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
        manifest = read_json(&blob_path(dir, str_field(&desc, "digest")?)?)?;
    }
    let config = read_json(&blob_path(
        dir,
        str_field(manifest.get("config").unwrap_or(&Value::Null), "digest")?,
    )?)?;
    let mut layers = Vec::new();
    for l in manifest
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("the manifest has no layers"))?
    {
        let digest = str_field(l, "digest")?.to_string();
        let path = blob_path(dir, &digest)?;
        let size = std::fs::metadata(&path)?.len();
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
    let manifest = read_json(&dir.join("manifest.json"))?;
    let entry = manifest
        .as_array()
        .and_then(|a| a.first())
        .ok_or_else(|| bad("manifest.json lists no image"))?;
    let config = read_json(&inside(dir, str_field(entry, "Config")?)?)?;
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
        let path = inside(dir, rel)?;
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
        assert!(inside(d, "../etc/passwd").is_err());
        assert!(inside(d, "/etc/passwd").is_err());
        assert_eq!(inside(d, "a/b.tar").unwrap(), Path::new("/x/a/b.tar"));
        assert!(blob_path(d, "sha512:abc").is_err());
    }
}

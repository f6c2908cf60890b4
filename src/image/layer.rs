//! One reproducible image layer from local files: sorted entries, uid/gid 0,
//! a fixed mtime, normalised modes, a fixed gzip header. The tar is hashed
//! (diff_id) and compressed on another thread while it is written, and the
//! gzip blob is hashed (layer digest) as it reaches the disk.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::mpsc;

use flate2::{Compression, GzBuilder};
use sha2::{Digest as _, Sha256};

/// One `--add SRC:DEST[:MODE]`: a local file or folder and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddSpec {
    /// The local file or folder.
    pub src: PathBuf,
    /// Absolute, normalised path in the image (`/opt/rocm/lib/librccl.so.1`).
    pub dest: String,
    /// Octal mode for files (default: 0755 when any execute bit is set, else 0644).
    pub mode: Option<u32>,
}

impl FromStr for AddSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let hint = "use SRC:DEST[:MODE], e.g. ./librccl.so.1:/opt/rocm/lib/librccl.so.1:0644";
        let parts: Vec<&str> = s.split(':').collect();
        let (src, dest, mode) = match parts.as_slice() {
            [src, dest] => (*src, *dest, None),
            [src, dest, mode] => (*src, *dest, Some(*mode)),
            _ => return Err(format!("--add {s:?}: {hint}")),
        };
        if src.is_empty() {
            return Err(format!("--add {s:?}: SRC is empty; {hint}"));
        }
        let dest = normalise_dest(dest).map_err(|why| format!("--add {s:?}: {why}; {hint}"))?;
        let mode = match mode {
            None => None,
            Some(m) => Some(
                u32::from_str_radix(m, 8)
                    .ok()
                    .filter(|v| *v <= 0o7777 && !m.is_empty())
                    .ok_or_else(|| {
                        format!("--add {s:?}: MODE {m:?} is not an octal mode such as 0644 or 755")
                    })?,
            ),
        };
        Ok(AddSpec {
            src: PathBuf::from(src),
            dest,
            mode,
        })
    }
}

impl fmt::Display for AddSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.src.display(), self.dest)?;
        if let Some(m) = self.mode {
            write!(f, ":{m:04o}")?;
        }
        Ok(())
    }
}

/// `/a//b/./c` → `/a/b/c`; relative paths, `..` and `/` itself are refused.
fn normalise_dest(dest: &str) -> Result<String, String> {
    if !dest.starts_with('/') {
        return Err(format!(
            "DEST {dest:?} must be an absolute path in the image"
        ));
    }
    let mut parts = Vec::new();
    for p in dest.split('/') {
        match p {
            "" | "." => {}
            ".." => return Err(format!("DEST {dest:?} must not contain '..'")),
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err("DEST must name a file or folder below /".into());
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Settings that make the layer reproducible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerOptions {
    /// mtime of every entry (seconds since the epoch).
    pub mtime: u64,
    /// gzip level.
    pub level: u32,
}

impl LayerOptions {
    /// mtime from `SOURCE_DATE_EPOCH` (0 when unset), gzip level 2.
    ///
    /// Not level 1: zlib-rs's level 1 codes every block with fixed Huffman
    /// codes, so bytes that do not compress (weights, archives) grow by
    /// 5.5% and take every node 2.3x longer to unpack, and binaries come
    /// out 16% bigger than at level 2, which stores what does not
    /// compress. Level 2 compresses about 1.5x slower (64 MB of random
    /// bytes and of libLLVM, zlib-rs against GNU gzip's unpacking).
    pub fn from_env() -> Result<Self, String> {
        Ok(Self {
            mtime: source_date_epoch()?.unwrap_or(0),
            level: 2,
        })
    }
}

/// `SOURCE_DATE_EPOCH` when set.
pub fn source_date_epoch() -> Result<Option<u64>, String> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => {
            v.trim().parse().map(Some).map_err(|_| {
                format!("SOURCE_DATE_EPOCH={v:?} is not a number of seconds since 1970")
            })
        }
        _ => Ok(None),
    }
}

/// One entry of the layer, in tar order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path in the tar (no leading `/`).
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Mode bits (0..=0o7777).
    pub mode: u32,
}

/// The kinds of entry a layer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file, read from `src` (`size` bytes).
    File {
        /// Local source.
        src: PathBuf,
        /// Size in bytes.
        size: u64,
    },
    /// A folder.
    Dir,
    /// A symbolic link to `target`.
    Symlink {
        /// The link's target, as it is.
        target: PathBuf,
    },
}

/// Files, folders and symlinks of the `--add` specs, sorted by path. A SRC
/// that is itself a symlink adds what it points to (as `COPY` and `cp -L`
/// do: `librccl.so.1` is a symlink in ROCm build trees), or with
/// `dereference` false is refused; symlinks inside an added folder stay
/// symlinks. Fails on a missing source, another file type (device, socket)
/// or the same DEST twice.
pub fn entries(specs: &[AddSpec], dereference: bool) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for spec in specs {
        let meta = source_metadata(spec, dereference)?;
        collect(
            &spec.src,
            &meta,
            spec.dest.trim_start_matches('/'),
            spec.mode,
            &mut out,
        )
        .map_err(|e| format!("--add {spec}: {e}"))?;
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(w) = out.windows(2).find(|w| w[0].path == w[1].path) {
        return Err(format!(
            "/{} is added twice: give each DEST once",
            w[0].path
        ));
    }
    Ok(out)
}

/// The metadata of an `--add` SRC, through a symlink when `dereference`.
fn source_metadata(spec: &AddSpec, dereference: bool) -> Result<std::fs::Metadata, String> {
    let src = &spec.src;
    let meta = std::fs::symlink_metadata(src)
        .map_err(|e| format!("--add {spec}: cannot read {}: {e}", src.display()))?;
    if !meta.file_type().is_symlink() {
        return Ok(meta);
    }
    let target = std::fs::read_link(src)
        .map(|t| t.display().to_string())
        .unwrap_or_else(|e| format!("? ({e})"));
    if !dereference {
        return Err(format!(
            "--add {spec}: {} is a symlink (-> {target}) and --no-dereference refuses symlinks\n  \
             hint: drop --no-dereference to add the file it points to (as COPY and cp -L do), or name the target itself",
            src.display()
        ));
    }
    std::fs::metadata(src).map_err(|e| {
        format!(
            "--add {spec}: {} is a symlink to {target}, which cannot be read: {e}\n  \
             hint: point SRC of `--add SRC:DEST` at an existing file or folder",
            src.display()
        )
    })
}

fn collect(
    src: &Path,
    meta: &std::fs::Metadata,
    path: &str,
    mode: Option<u32>,
    out: &mut Vec<Entry>,
) -> Result<(), String> {
    let ft = meta.file_type();
    if ft.is_file() {
        let m = mode.unwrap_or(if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        });
        out.push(Entry {
            path: path.to_string(),
            kind: EntryKind::File {
                src: src.to_path_buf(),
                size: meta.len(),
            },
            mode: m,
        });
    } else if ft.is_symlink() {
        let target = std::fs::read_link(src).map_err(|e| format!("{}: {e}", src.display()))?;
        out.push(Entry {
            path: path.to_string(),
            kind: EntryKind::Symlink { target },
            mode: 0o777,
        });
    } else if ft.is_dir() {
        out.push(Entry {
            path: path.to_string(),
            kind: EntryKind::Dir,
            mode: 0o755,
        });
        let rd = std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))?;
        for item in rd {
            let item = item.map_err(|e| format!("{}: {e}", src.display()))?;
            let name = item.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| format!("{}: file name is not UTF-8", item.path().display()))?;
            let child_meta = std::fs::symlink_metadata(item.path())
                .map_err(|e| format!("{}: {e}", item.path().display()))?;
            collect(
                &item.path(),
                &child_meta,
                &format!("{path}/{name}"),
                mode,
                out,
            )?;
        }
    } else {
        return Err(format!(
            "{} is not a file, folder or symlink (mode {:o})",
            src.display(),
            meta.mode()
        ));
    }
    Ok(())
}

/// The written layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// The gzip blob on disk.
    pub path: PathBuf,
    /// `sha256:` of the uncompressed tar.
    pub diff_id: String,
    /// `sha256:` of the gzip blob.
    pub digest: String,
    /// Size of the gzip blob.
    pub size: u64,
    /// Size of the tar.
    pub tar_size: u64,
}

/// A writer that hashes and counts what passes through.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: Write> HashingWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            bytes: 0,
        }
    }

    /// The inner writer, `sha256:<hex>` and the byte count.
    pub fn finish(self) -> (W, String, u64) {
        let digest = format!("sha256:{}", hex::encode(self.hasher.finalize()));
        (self.inner, digest, self.bytes)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Sends written bytes to another thread in chunks.
struct ChannelWriter {
    tx: mpsc::SyncSender<Vec<u8>>,
}

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx
            .send(buf.to_vec())
            .map_err(|_| io::Error::other("the compressor stopped"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

const CHUNK: usize = 1 << 20;

/// Writes the layer of `entries` as a gzip blob at `out`.
pub fn write_layer(entries: &[Entry], opts: LayerOptions, out: &Path) -> io::Result<Layer> {
    let file = File::create(out)?;
    let level = opts.level;
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(8);
    let compressor = std::thread::spawn(move || -> io::Result<(String, u64)> {
        let sink = HashingWriter::new(BufWriter::with_capacity(CHUNK, file));
        let mut gz = GzBuilder::new()
            .mtime(0)
            .operating_system(255)
            .write(sink, Compression::new(level));
        for chunk in rx {
            gz.write_all(&chunk)?;
        }
        let (mut buf, digest, size) = gz.finish()?.finish();
        buf.flush()?;
        Ok((digest, size))
    });
    let produced = (|| -> io::Result<(String, u64)> {
        let sink = HashingWriter::new(BufWriter::with_capacity(CHUNK, ChannelWriter { tx }));
        let mut tar = tar::Builder::new(sink);
        tar.mode(tar::HeaderMode::Deterministic);
        for e in entries {
            append(&mut tar, e, opts.mtime)?;
        }
        let sink = tar.into_inner()?;
        let (mut buf, diff_id, tar_size) = sink.finish();
        buf.flush()?;
        drop(buf);
        Ok((diff_id, tar_size))
    })();
    let compressed = compressor
        .join()
        .map_err(|_| io::Error::other("the compressor thread panicked"))?;
    let (diff_id, tar_size) = produced?;
    let (digest, size) = compressed?;
    Ok(Layer {
        path: out.to_path_buf(),
        diff_id,
        digest,
        size,
        tar_size,
    })
}

fn append<W: Write>(tar: &mut tar::Builder<W>, e: &Entry, mtime: u64) -> io::Result<()> {
    let mut h = tar::Header::new_gnu();
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mode(e.mode);
    h.set_username("")?;
    h.set_groupname("")?;
    match &e.kind {
        EntryKind::File { src, size } => {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(*size);
            let f = File::open(src)
                .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", src.display())))?;
            // A file that changes size while it is read would corrupt the tar.
            let mut limited = f.take(*size);
            tar.append_data(
                &mut h,
                &e.path,
                &mut SizeCheck::new(&mut limited, *size, src),
            )
        }
        EntryKind::Dir => {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, format!("{}/", e.path), io::empty())
        }
        EntryKind::Symlink { target } => {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            tar.append_link(&mut h, &e.path, target)
        }
    }
}

/// Fails the read when the file ends before its recorded size.
struct SizeCheck<'a, R> {
    inner: R,
    left: u64,
    src: &'a Path,
}

impl<'a, R: Read> SizeCheck<'a, R> {
    fn new(inner: R, size: u64, src: &'a Path) -> Self {
        Self {
            inner,
            left: size,
            src,
        }
    }
}

impl<R: Read> Read for SizeCheck<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 && !buf.is_empty() {
            return Err(io::Error::other(format!(
                "{} shrank while it was read",
                self.src.display()
            )));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_specs() {
        let a: AddSpec = "lib/x.so:/opt//rocm/./lib/x.so:644".parse().unwrap();
        assert_eq!(a.dest, "/opt/rocm/lib/x.so");
        assert_eq!(a.mode, Some(0o644));
        assert_eq!(a.to_string(), "lib/x.so:/opt/rocm/lib/x.so:0644");
        let b: AddSpec = "x:/y".parse().unwrap();
        assert_eq!(b.mode, None);
        for bad in [
            "x",
            "x:y",
            ":/y",
            "x:/",
            "x:/a/../b",
            "x:/y:999",
            "x:/y:rw",
            "a:b:c:d",
        ] {
            let err = bad.parse::<AddSpec>().unwrap_err();
            assert!(err.starts_with("--add "), "{bad}: {err}");
        }
        assert!(
            "x:rel/path"
                .parse::<AddSpec>()
                .unwrap_err()
                .contains("absolute")
        );
    }
}

//! What halobox has verified on a node: per model, each blob's sha256 as
//! hashed from its content, kept with the size and mtime it had then. A
//! blob whose size or mtime changed since is hashed again; a blob listed
//! here with both unchanged is trusted without reading it (so a sync of a
//! complete model only reads file metadata). The file is
//! `HUB/../halobox-verified/models--ORG--NAME.json`, outside the hub folder
//! (`huggingface_hub`'s cache scan reports unknown folders there).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One blob as hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hashed {
    /// Its size then.
    pub size: u64,
    /// Its mtime then (ns since the epoch).
    pub mtime_ns: i128,
    /// sha256 of the content, hex.
    pub sha256: String,
}

/// The record of one model on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Blob name -> how it was hashed.
    pub blobs: BTreeMap<String, Hashed>,
}

/// Where the record of model folder `folder` lives for hub cache `hub`.
pub fn path(hub: &Path, folder: &str) -> PathBuf {
    hub.parent()
        .unwrap_or(hub)
        .join("halobox-verified")
        .join(format!("{folder}.json"))
}

/// Size and mtime (ns) of `file`.
pub fn stamp(file: &Path) -> std::io::Result<(u64, i128)> {
    let m = std::fs::metadata(file)?;
    Ok((
        m.len(),
        i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    ))
}

/// sha256 of `file`, hex.
pub fn hash_file(file: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(file)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

impl Record {
    /// The record at `file`; empty when there is none or it cannot be read
    /// (everything is then hashed again).
    pub fn load(file: &Path) -> Record {
        std::fs::read(file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes it to `file` ([`crate::confine::write_atomic`]).
    pub fn save(&self, file: &Path) -> std::io::Result<()> {
        if let Some(d) = file.parent() {
            std::fs::create_dir_all(d)?;
        }
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        crate::confine::write_atomic(file, &text, 0o666)
    }

    /// The sha256 recorded for `blob`, if its file still has the recorded
    /// size and mtime.
    pub fn fresh(&self, blob: &str, file: &Path) -> Option<String> {
        let h = self.blobs.get(blob)?;
        let (size, mtime_ns) = stamp(file).ok()?;
        (h.size == size && h.mtime_ns == mtime_ns).then(|| h.sha256.clone())
    }

    /// Notes that `blob` (at `file`) hashed to `sha256`, with its size and
    /// mtime now.
    pub fn note(&mut self, blob: &str, file: &Path, sha256: &str) -> std::io::Result<()> {
        let (size, mtime_ns) = stamp(file)?;
        self.blobs.insert(
            blob.to_string(),
            Hashed {
                size,
                mtime_ns,
                sha256: sha256.to_string(),
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_is_not_fresh() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("b");
        std::fs::write(&f, b"abc").unwrap();
        let sha = hash_file(&f).unwrap();
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut r = Record::default();
        r.note("b", &f, &sha).unwrap();
        let rec = d.path().join("x/rec.json");
        r.save(&rec).unwrap();
        let r = Record::load(&rec);
        assert_eq!(r.fresh("b", &f), Some(sha));
        std::fs::write(&f, b"abd").unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_eq!(r.fresh("b", &f), None);
        assert_eq!(
            path(Path::new("/h/hub"), "models--a--b"),
            Path::new("/h/halobox-verified/models--a--b.json")
        );
    }
}

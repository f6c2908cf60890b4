//! `halobox image add-layer` on crafted base archives: a hostile archive can
//! neither make halobox read this machine's files nor hang it or fill the
//! disk, and an interrupted run leaves no work folder and no `--output`.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::Digest as _;

/// One entry of a crafted tar.
enum Item {
    File(String, Vec<u8>),
    Symlink(String, String),
    Special(String, tar::EntryType),
}

fn tar_of(items: &[Item]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for item in items {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        match item {
            Item::File(name, bytes) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(bytes.len() as u64);
                b.append_data(&mut h, name, bytes.as_slice()).unwrap();
            }
            Item::Symlink(name, target) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, name, target).unwrap();
            }
            Item::Special(name, kind) => {
                h.set_entry_type(*kind);
                h.set_size(0);
                if *kind == tar::EntryType::GNUSparse {
                    // One hole of 1 TiB: a tiny entry that unpacks to a huge file.
                    let gnu = h.as_gnu_mut().unwrap();
                    gnu.set_real_size(1 << 40);
                    gnu.sparse[0].set_offset(1 << 40);
                    gnu.sparse[0].set_length(0);
                }
                if *kind == tar::EntryType::Link {
                    b.append_link(&mut h, name, "index.json").unwrap();
                } else {
                    b.append_data(&mut h, name, std::io::empty()).unwrap();
                }
            }
        }
    }
    b.into_inner().unwrap()
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn blob(bytes: &[u8]) -> String {
    format!("blobs/sha256/{}", sha(bytes))
}

/// The parts of a small valid image: (layer, config, manifest, index).
fn image_parts() -> (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>) {
    let layer = tar_of(&[Item::File("hello.txt".into(), b"hello\n".to_vec())]);
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{}", sha(&layer))]},
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": format!("sha256:{}", sha(&config)), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": format!("sha256:{}", sha(&layer)), "size": layer.len()}],
    }))
    .unwrap();
    let index = index_for(&manifest, "");
    (layer, config, manifest, index)
}

fn index_for(manifest: &[u8], pad: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": format!("sha256:{}", sha(manifest)), "size": manifest.len()}],
        "pad": pad,
    }))
    .unwrap()
}

/// A valid OCI archive with `index` as its index.json and `layer_blob` as
/// the stored layer bytes.
fn oci_items(index: Vec<u8>, layer_blob: Vec<u8>) -> Vec<Item> {
    let (layer, config, manifest, _) = image_parts();
    vec![
        Item::File(
            "oci-layout".into(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        Item::File(blob(&layer), layer_blob),
        Item::File(blob(&config), config.clone()),
        Item::File(blob(&manifest), manifest.clone()),
        Item::File("index.json".into(), index),
    ]
}

/// A docker archive (`manifest.json`, config, one layer stored twice: the
/// second copy a relative symlink, as `docker save` writes identical layers).
fn docker_items(manifest_json: Option<Vec<u8>>) -> Vec<Item> {
    let (layer, _, _, _) = image_parts();
    let diff = format!("sha256:{}", sha(&layer));
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [diff, diff]},
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&json!([{
        "Config": "config.json", "RepoTags": ["x:1"],
        "Layers": ["a/layer.tar", "b/layer.tar"],
    }]))
    .unwrap();
    let mut items = vec![
        Item::File("config.json".into(), config),
        Item::File("a/layer.tar".into(), layer),
        Item::Symlink("b/layer.tar".into(), "../a/layer.tar".into()),
    ];
    if let Some(m) = manifest_json.or(Some(manifest)) {
        items.push(Item::File("manifest.json".into(), m));
    }
    items
}

fn write(dir: &Path, name: &str, items: &[Item]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, tar_of(items)).unwrap();
    p
}

/// Runs `halobox image add-layer BASE --add Cargo.toml:/x --output OUT`,
/// failing the test if it takes longer than 60 s (a FIFO would hang it).
fn add_layer(base: &Path, out: &Path, tmpdir: &Path) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["image", "add-layer"])
        .arg(base)
        .args(["--add", "Cargo.toml:/x", "--output"])
        .arg(out)
        .env("TMPDIR", tmpdir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bounded(child, Duration::from_secs(60))
}

fn wait_bounded(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("halobox hung for {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names in `dir` (work folders, temp files) after a run.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

struct Case {
    tmp: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("work")).unwrap();
        std::fs::create_dir(tmp.path().join("out")).unwrap();
        Case { tmp }
    }

    fn run(&self, items: &[Item]) -> Output {
        let base = write(self.tmp.path(), "base.tar", items);
        let o = add_layer(
            &base,
            &self.tmp.path().join("out/image.tar"),
            &self.tmp.path().join("work"),
        );
        assert!(
            leftovers(&self.tmp.path().join("work")).is_empty(),
            "work folder left behind"
        );
        o
    }

    fn refused(&self, items: &[Item], needles: &[&str]) {
        let o = self.run(items);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        for n in needles {
            assert!(err.contains(n), "expected {n:?} in: {err}");
        }
        assert!(
            leftovers(&self.tmp.path().join("out")).is_empty(),
            "an --output was written"
        );
    }
}

#[test]
fn crafted_valid_archives_load() {
    let c = Case::new();
    let (layer, _, _, index) = image_parts();
    let o = c.run(&oci_items(index, layer));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(c.tmp.path().join("out/image.tar").is_file());
    // docker's relative symlink between identical layers stays usable.
    let c = Case::new();
    let o = c.run(&docker_items(None));
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_symlinked_manifest_cannot_read_a_host_file() {
    let c = Case::new();
    // A file of this machine that happens to be a valid docker manifest.
    let host = c.tmp.path().join("shadow");
    std::fs::write(
        &host,
        serde_json::to_vec(&json!([{
            "Config": "config.json", "Layers": ["a/layer.tar", "b/layer.tar"]
        }]))
        .unwrap(),
    )
    .unwrap();
    let mut items = docker_items(None);
    items.pop();
    items.push(Item::Symlink(
        "manifest.json".into(),
        host.display().to_string(),
    ));
    c.refused(
        &items,
        &["\"manifest.json\" is a symlink to", "outside the archive"],
    );
    // The same through a relative link that climbs out.
    let mut items = docker_items(None);
    items.pop();
    items.push(Item::Symlink("manifest.json".into(), "../shadow".into()));
    c.refused(&items, &["\"manifest.json\" is a symlink to ../shadow"]);
}

#[test]
fn oversize_json_and_oversize_blobs_are_refused() {
    let c = Case::new();
    let (layer, _, manifest, _) = image_parts();
    let big = index_for(&manifest, &"x".repeat(17 << 20));
    c.refused(
        &oci_items(big, layer.clone()),
        &["index.json", "larger than 16 MiB"],
    );
    let mut longer = layer.clone();
    longer.extend_from_slice(&[0u8; 4096]);
    c.refused(
        &oci_items(image_parts().3, longer),
        &[
            &blob(&layer),
            &format!(
                "is {} bytes, its descriptor says {}",
                layer.len() + 4096,
                layer.len()
            ),
        ],
    );
}

#[test]
fn fifos_devices_hard_links_and_sparse_entries_are_refused() {
    let c = Case::new();
    let (layer, _, _, index) = image_parts();
    for (kind, what) in [
        (tar::EntryType::Fifo, "a FIFO"),
        (tar::EntryType::Char, "a character device"),
        (tar::EntryType::Block, "a block device"),
        (tar::EntryType::GNUSparse, "a sparse file"),
        (tar::EntryType::Link, "a hard link"),
    ] {
        let mut items = oci_items(index.clone(), layer.clone());
        items[1] = Item::Special(blob(&layer), kind);
        c.refused(
            &items,
            &[&format!("archive entry \"{}\" is {what}", blob(&layer))],
        );
    }
}

#[test]
fn sigint_leaves_no_work_folder_and_no_output() {
    let c = Case::new();
    // A base whose one layer is big enough that copying and hashing it into
    // the output takes a while (its bytes are never unpacked, only hashed).
    let mut layer = Vec::new();
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .take(96 << 20)
        .read_to_end(&mut layer)
        .unwrap();
    let layer_file = c.tmp.path().join("layer.bin");
    std::fs::write(&layer_file, &layer).unwrap();
    let sum = Command::new("sha256sum").arg(&layer_file).output().unwrap();
    let digest = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{digest}")]},
    }))
    .unwrap();
    let manifest = serde_json::to_vec(&json!([{
        "Config": "config.json", "Layers": ["layer.tar"],
    }]))
    .unwrap();
    let base = write(
        c.tmp.path(),
        "base.tar",
        &[
            Item::File("config.json".into(), config),
            Item::File("layer.tar".into(), layer),
            Item::File("manifest.json".into(), manifest),
        ],
    );
    let work = c.tmp.path().join("work");
    let out_dir = c.tmp.path().join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["image", "add-layer"])
        .arg(&base)
        .args(["--add", "Cargo.toml:/x"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--output")
        .arg(out_dir.join("image.tar"))
        .env("TMPDIR", &work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Wait until the archive is being written: the work folder and the
    // staged output both exist.
    let start = Instant::now();
    let mut mode = None;
    loop {
        let staged = !leftovers(&out_dir).is_empty();
        if let Some(name) = leftovers(&work).first() {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(m) = std::fs::metadata(work.join(name)) {
                mode = Some(m.permissions().mode() & 0o777);
            }
        }
        if staged && mode.is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the archive was never staged"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(mode, Some(0o700), "the work folder is private");
    let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let o = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(
        leftovers(&work).is_empty(),
        "work folder left: {:?}",
        leftovers(&work)
    );
    assert!(
        leftovers(&out_dir).is_empty(),
        "output left: {:?}",
        leftovers(&out_dir)
    );
}

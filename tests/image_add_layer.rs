//! `halobox image add-layer` on real images: the file lands with its sha256
//! and mode, the same archive loads into podman and docker, the same inputs
//! give the same digests, and a bad `--add` is refused with a clear error.

mod common;

use std::path::Path;

use common::engines::{DOCKER, PODMAN, REPO, cli, require};
use common::halobox;
use serde_json::Value;

fn sha256_of(path: &Path) -> String {
    let out = cli("sha256sum", &[path.to_str().unwrap()]);
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn add_layer(args: &[&str]) -> Value {
    let out = halobox()
        .args(["image", "add-layer"])
        .args(args)
        .arg("--json")
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn payload(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("librccl.so.1");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&p, bytes).unwrap();
    p
}

/// sha256, octal mode and owner of a file inside a fresh container.
fn inside(program: &str, image: &str, path: &str) -> String {
    let out = cli(
        program,
        &[
            "run",
            "--rm",
            image,
            "sh",
            "-c",
            &format!("sha256sum {path} && stat -c '%a %u %g' {path}"),
        ],
    );
    assert!(
        out.status.success(),
        "{program} run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn loads_and_runs_in_podman_and_docker() {
    require(PODMAN);
    require(DOCKER);
    let tmp = tempfile::tempdir().unwrap();
    let lib = payload(tmp.path());
    let want = sha256_of(&lib);
    let archive = tmp.path().join("image.tar");
    let tag = format!("localhost/halobox-imgtest-layer:{}", std::process::id());
    let add = format!("{}:/opt/rocm/lib/librccl.so.1:0640", lib.display());
    let v = add_layer(&[
        "localhost/halobox-test:1",
        "--engine",
        PODMAN,
        "--add",
        &add,
        "--tag",
        &tag,
        "--output",
        archive.to_str().unwrap(),
        "--label",
        "halobox.test=add-layer",
    ]);
    assert!(
        v["layer"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_ne!(v["layer"]["digest"], v["layer"]["diff_id"]);
    // The blob named by the layer digest really hashes to it.
    let hex = v["layer"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    let list = cli("tar", &["tf", archive.to_str().unwrap()]);
    let names = String::from_utf8_lossy(&list.stdout);
    for name in [
        "oci-layout",
        "index.json",
        "manifest.json",
        &format!("blobs/sha256/{hex}"),
    ] {
        assert!(
            names.lines().any(|l| l == name),
            "{name} missing in:\n{names}"
        );
    }

    for program in ["podman", "docker"] {
        let _ = cli(program, &["rmi", "-f", &tag]);
        let out = cli(program, &["load", "-i", archive.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{program} load: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = inside(program, &tag, "/opt/rocm/lib/librccl.so.1");
        assert!(got.contains(&want), "{program}: {got}");
        assert!(got.contains("640 0 0"), "{program}: {got}");
        let id = cli(program, &["image", "inspect", &tag, "--format", "{{.Id}}"]);
        let id = String::from_utf8_lossy(&id.stdout);
        assert!(
            id.trim().trim_start_matches("sha256:")
                == v["image"]["config_digest"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("sha256:"),
            "{program}: image id {id} is the config digest"
        );
        let labels = cli(
            program,
            &[
                "image",
                "inspect",
                &tag,
                "--format",
                "{{json .Config.Labels}}",
            ],
        );
        let labels: Value = serde_json::from_slice(&labels.stdout).unwrap();
        assert_eq!(labels["halobox.test"], "add-layer", "{program}");
        let _ = cli(program, &["rmi", "-f", &tag]);
    }
}

#[test]
fn loads_straight_into_docker_from_its_own_export() {
    require(DOCKER);
    let tmp = tempfile::tempdir().unwrap();
    let lib = payload(tmp.path());
    let want = sha256_of(&lib);
    let tag = format!(
        "localhost/halobox-imgtest-layer:docker-{}",
        std::process::id()
    );
    let add = format!("{}:/usr/local/lib/librccl.so.1", lib.display());
    let v = add_layer(&[
        &format!("{REPO}:1"),
        "--engine",
        DOCKER,
        "--add",
        &add,
        "--tag",
        &tag,
        "--load",
    ]);
    assert!(
        v["loaded"][0]
            .as_str()
            .unwrap_or("")
            .contains("Loaded image"),
        "{v}"
    );
    let got = inside("docker", &tag, "/usr/local/lib/librccl.so.1");
    assert!(got.contains(&want) && got.contains("644 0 0"), "{got}");
    let _ = cli("docker", &["rmi", "-f", &tag]);
}

#[test]
fn same_inputs_same_digests() {
    require(PODMAN);
    let tmp = tempfile::tempdir().unwrap();
    let lib = payload(tmp.path());
    let dir = tmp.path().join("tree");
    std::fs::create_dir_all(dir.join("b/c")).unwrap();
    std::fs::write(dir.join("b/c/z.txt"), "z").unwrap();
    std::fs::write(dir.join("a.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("a.sh"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let base = tmp.path().join("base.tar");
    let save = cli(
        "podman",
        &[
            "save",
            "--format",
            "oci-archive",
            "-o",
            base.to_str().unwrap(),
            "localhost/halobox-test:1",
        ],
    );
    assert!(
        save.status.success(),
        "{}",
        String::from_utf8_lossy(&save.stderr)
    );
    let mut runs = Vec::new();
    for i in 0..2 {
        let out = tmp.path().join(format!("out{i}.tar"));
        // Touch the sources between runs: mtimes must not leak into the layer.
        let f = std::fs::File::options().append(true).open(&lib).unwrap();
        f.set_modified(std::time::SystemTime::now()).unwrap();
        let v = add_layer(&[
            base.to_str().unwrap(),
            "--add",
            &format!("{}:/opt/x/librccl.so.1", lib.display()),
            "--add",
            &format!("{}:/opt/tree", dir.display()),
            "--output",
            out.to_str().unwrap(),
            "--tag",
            "localhost/halobox-imgtest-repro:1",
        ]);
        runs.push((v, sha256_of(&out)));
    }
    assert_eq!(runs[0].0["image"], runs[1].0["image"]);
    assert_eq!(runs[0].0["layer"], runs[1].0["layer"]);
    assert_eq!(runs[0].1, runs[1].1, "the archives are byte-identical");
    // The base came from an OCI archive file: no engine was needed.
    assert!(runs[0].0["loaded"].as_array().unwrap().is_empty());
}

#[test]
fn bad_add_is_a_clear_usage_error() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--add", "/no/such/file:/opt/x"],
            "cannot read /no/such/file",
        ),
        (&["--add", "Cargo.toml:opt/x"], "must be an absolute path"),
        (&["--add", "Cargo.toml:/opt/x:999"], "not an octal mode"),
        (
            &["--add", "Cargo.toml:/opt/x", "--add", "Cargo.lock:/opt/x"],
            "added twice",
        ),
    ];
    for (args, needle) in cases {
        let out = halobox()
            .args([
                "image",
                "add-layer",
                "localhost/halobox-test:1",
                "--output",
                "/tmp/never.tar",
            ])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
        assert!(!Path::new("/tmp/never.tar").exists());
    }
    let out = halobox()
        .args([
            "image",
            "add-layer",
            "localhost/halobox-test:1",
            "--add",
            "Cargo.toml:/x",
            "--load",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--load needs --tag"));
}

#[test]
fn a_symlinked_source_adds_the_file_it_points_to() {
    require(PODMAN);
    let tmp = tempfile::tempdir().unwrap();
    // As in a ROCm build tree: librccl.so.1 -> librccl.so.1.0.
    let real = payload(tmp.path());
    let versioned = tmp.path().join("librccl.so.1.0");
    std::fs::rename(&real, &versioned).unwrap();
    std::os::unix::fs::symlink("librccl.so.1.0", &real).unwrap();
    let want = sha256_of(&versioned);
    let tag = format!("localhost/halobox-imgtest-deref:{}", std::process::id());
    let dest = "/opt/rocm/lib/librccl.so.1";
    let add = format!("{}:{dest}", real.display());
    add_layer(&[
        "localhost/halobox-test:1",
        "--engine",
        PODMAN,
        "--add",
        &add,
        "--tag",
        &tag,
        "--load",
    ]);
    let got = inside("podman", &tag, dest);
    assert!(got.contains(&want) && got.contains("644 0 0"), "{got}");
    let kind = cli("podman", &["run", "--rm", &tag, "stat", "-c", "%F", dest]);
    assert_eq!(
        String::from_utf8_lossy(&kind.stdout).trim(),
        "regular file",
        "{}",
        String::from_utf8_lossy(&kind.stderr)
    );
    let _ = cli("podman", &["rmi", "-f", &tag]);

    let refused = halobox()
        .args([
            "image",
            "add-layer",
            "localhost/halobox-test:1",
            "--add",
            &add,
        ])
        .args(["--no-dereference", "--output", "/tmp/never-deref.tar"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is a symlink (-> librccl.so.1.0)")
            && err.contains("hint: drop --no-dereference"),
        "{err}"
    );
    std::fs::remove_file(&versioned).unwrap();
    let dangling = halobox()
        .args([
            "image",
            "add-layer",
            "localhost/halobox-test:1",
            "--add",
            &add,
        ])
        .args(["--output", "/tmp/never-deref.tar"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&dangling.stderr);
    assert_eq!(dangling.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is a symlink to librccl.so.1.0, which cannot be read"),
        "{err}"
    );
    assert!(!Path::new("/tmp/never-deref.tar").exists());
}

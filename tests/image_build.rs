//! `halobox build` through the real engines' build API: a small multi-stage
//! Containerfile FROM the local busybox test image (by digest), on podman and
//! docker; a failing step gives an error that names the step. And, with no
//! engine, `--dry-run` of the shipped definitions: every stage, pin and patch
//! (with its sha256) that CI builds.

mod common;

use std::collections::BTreeMap;

use common::engines::{DOCKER, PODMAN, REPO, cli, require};
use common::{halobox, run, run_json};
use serde_json::Value;
use sha2::{Digest, Sha256};

const DEF: &str = "tests/fixtures/images/multistage.toml";

fn build(engine: &str, base: &str, tag: &str, extra: &[&str]) -> std::process::Output {
    let base_arg = format!("BASE={base}");
    let mut args = vec![
        "build",
        DEF,
        "--engine",
        engine,
        "--tag",
        tag,
        "--build-arg",
        &base_arg,
    ];
    args.extend_from_slice(extra);
    halobox().args(&args).output().unwrap()
}

fn check(program: &str, engine: &str, base: &str) {
    require(engine);
    let tag = format!(
        "localhost/halobox-imgtest-build:{program}-{}",
        std::process::id()
    );
    let out = build(engine, base, &tag, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{program}: {stderr}");
    assert!(
        stderr.to_ascii_lowercase().contains("step"),
        "the build log is streamed: {stderr}"
    );
    let run = cli(
        program,
        &["run", "--rm", &tag, "cat", "/opt/halobox/version.txt"],
    );
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(text.contains("version 1.2.3"), "{program}: {text}");
    assert!(
        text.contains("payload from the build context"),
        "{program}: {text}"
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
    let labels: serde_json::Value = serde_json::from_slice(&labels.stdout).unwrap();
    assert_eq!(
        labels["org.opencontainers.image.title"],
        "halobox multistage test"
    );
    assert!(labels["org.opencontainers.image.created"].is_string());

    let bad_tag = format!("{tag}-fail");
    let out = build(engine, base, &bad_tag, &["--build-arg", "FAIL=1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{program}: {stderr}");
    let last = stderr
        .lines()
        .rfind(|l| l.starts_with("error:"))
        .unwrap_or("");
    assert!(
        last.contains("failed at") && last.contains("RUN if"),
        "{program}: {stderr}"
    );
    assert!(last.contains('7'), "the exit code is shown: {last}");
    let _ = cli(program, &["rmi", "-f", &tag]);
}

/// The test image by digest, as the engine knows it (definitions pin bases by digest).
fn by_digest(program: &str, reference: &str, repository: &str) -> String {
    let out = cli(
        program,
        &[
            "image",
            "inspect",
            reference,
            "--format",
            "{{json .RepoDigests}}",
        ],
    );
    assert!(
        out.status.success(),
        "{program} image inspect {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digests: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    let hit = digests
        .into_iter()
        .find(|d| d.starts_with(&format!("{repository}@sha256:")))
        .unwrap_or_else(|| panic!("{program}: no digest of {reference} under {repository}"));
    let (_, digest) = hit.split_once('@').unwrap();
    format!("{reference}@{digest}")
}

#[test]
fn builds_on_podman() {
    require(PODMAN);
    let base = by_digest(
        "podman",
        "localhost/halobox-test:1",
        "localhost/halobox-test",
    );
    check("podman", PODMAN, &base);
}

#[test]
fn builds_on_docker() {
    require(DOCKER);
    let base = by_digest("docker", &format!("{REPO}:1"), REPO);
    check("docker", DOCKER, &base);
}

#[test]
fn a_base_image_without_digest_is_refused_before_the_engine() {
    let out = run(&[
        "build",
        DEF,
        "--dry-run",
        "--build-arg",
        "BASE=localhost/halobox-test:1",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--build-arg BASE") && err.contains("no digest"),
        "{err}"
    );
}

fn dry_run(image: &str) -> Value {
    let (v, code) = run_json(&["build", image, "--dry-run", "--json"]);
    assert_eq!(code, 0, "{v}");
    v
}

fn stages(v: &Value) -> BTreeMap<String, bool> {
    v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["built"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn sha256_of(path: &str) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn dry_run_shows_every_stage_pin_and_patch_ci_builds() {
    let v = dry_run("vllm-therock-gfx1151");
    assert_eq!(v["target"], "runtime");
    assert_eq!(
        stages(&v),
        BTreeMap::from([
            ("therock".to_string(), true),
            ("rccl-builder".to_string(), true),
            ("rccl".to_string(), false),
            ("vllm-builder".to_string(), true),
            ("rdma-core".to_string(), true),
            ("runtime".to_string(), true),
        ]),
        "runtime copies from rccl-builder and vllm-builder, not from the rccl stage"
    );
    let fedora = v["pins"]["images"]["FEDORA_IMAGE"].as_str().unwrap();
    assert!(fedora.contains("@sha256:"), "{fedora}");
    assert_eq!(
        v["stages"][0]["base"], fedora,
        "FROM ${{FEDORA_IMAGE}} resolved"
    );
    assert_eq!(v["stages"][1]["base"], "stage therock");
    assert_eq!(v["stages"][2]["base"], "scratch");
    for (k, g) in v["pins"]["git"].as_object().unwrap() {
        assert_eq!(g["commit"].as_str().unwrap().len(), 40, "{k}");
        assert_eq!(v["args"][format!("{k}_COMMIT")], g["commit"]);
    }
    assert!(
        v["pins"]["git"].get("RCCL").is_none(),
        "no RCCL branch pinned: stock RCCL by default, patched from RCCL_TAG"
    );
    assert_eq!(v["pins"]["versions"]["RCCL_TAG"], "therock-7.14");
    assert_eq!(v["rccl"], "stock", "the default RCCL choice");
    assert_eq!(
        v["pins"]["defaults"]["RCCL_REPO"],
        "https://github.com/ROCm/rocm-systems"
    );
    assert_eq!(v["pins"]["versions"]["ROCM_VERSION"], "7.14.0");
    assert_eq!(
        v["pins"]["artifacts"]["THEROCK"]["sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );
    assert_eq!(
        v["pins"]["defaults"]["RCCL_SUBDIR"], "projects/rccl",
        "ARG defaults nobody pins are shown too"
    );
    assert!(v["pins"]["defaults"].get("ROCM_VERSION").is_none());
    assert_eq!(
        v["publish"]["repository"],
        "ghcr.io/halobox/vllm-therock-gfx1151"
    );

    // Every file of patches/rccl and patches/vllm, with its real sha256.
    let mut on_disk: Vec<String> = Vec::new();
    for tree in ["patches/rccl", "patches/vllm"] {
        let Ok(dir) = std::fs::read_dir(tree) else {
            continue;
        };
        for e in dir {
            let p = e.unwrap().path();
            if p.is_file() {
                on_disk.push(p.display().to_string());
            }
        }
    }
    on_disk.sort();
    let listed: Vec<&Value> = v["sent"]["patches"].as_array().unwrap().iter().collect();
    assert_eq!(
        listed
            .iter()
            .map(|p| p["path"].as_str().unwrap())
            .collect::<Vec<_>>(),
        on_disk,
        "the patch list is every file under patches/<tree>/"
    );
    for p in &listed {
        let path = p["path"].as_str().unwrap();
        assert_eq!(p["sha256"], sha256_of(path), "{path}");
        let kind = if path.ends_with(".patch") {
            "git am"
        } else {
            "script"
        };
        assert_eq!(p["kind"], kind, "{path}");
    }
    assert_eq!(
        v["sent"]["containerfile_sha256"],
        sha256_of("containerfiles/vllm-therock-gfx1151.Containerfile")
    );
    let ctx = v["sent"]["sha256"].as_str().unwrap();
    assert_eq!(ctx.len(), 64);
    assert_eq!(
        dry_run("vllm-therock-gfx1151")["sent"]["sha256"],
        ctx,
        "the context digest is reproducible"
    );

    // The text form says the same.
    let out = run(&["build", "vllm-therock-gfx1151", "--dry-run"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        fedora,
        "rccl: stock (the ROCm SDK's own librccl, untouched; --build-arg RCCL=stock|patched)",
        ctx,
        "(not built for this target)",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
    for p in &listed {
        let line = format!(
            "{}  {}",
            p["sha256"].as_str().unwrap(),
            p["path"].as_str().unwrap()
        );
        assert!(text.contains(&line), "{line} missing from:\n{text}");
    }
}

#[test]
fn dry_run_shows_the_rccl_choice_and_refuses_any_other() {
    let (v, code) = run_json(&[
        "build",
        "vllm-therock-gfx1151",
        "--dry-run",
        "--json",
        "--build-arg",
        "RCCL=patched",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["rccl"], "patched");
    let out = run(&[
        "build",
        "rccl-gfx1151",
        "--dry-run",
        "--build-arg",
        "RCCL=patched",
    ]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("rccl: patched (RCCL built from RCCL_REPO at RCCL_TAG"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&[
        "build",
        "vllm-therock-gfx1151",
        "--dry-run",
        "--build-arg",
        "RCCL=kyuz0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--build-arg RCCL=kyuz0: the RCCL choice is stock") && err.contains("hint:"),
        "{err}"
    );
    // A Containerfile without the choice has no rccl line.
    let (v, code) = run_json(&["build", DEF, "--dry-run", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["rccl"].is_null(), "{v}");
}

#[test]
fn dry_run_of_the_rccl_image_marks_only_its_stages() {
    let v = dry_run("rccl-gfx1151");
    assert_eq!(
        stages(&v),
        BTreeMap::from([
            ("therock".to_string(), true),
            ("rccl-builder".to_string(), true),
            ("rccl".to_string(), true),
            ("vllm-builder".to_string(), false),
            ("rdma-core".to_string(), false),
            ("runtime".to_string(), false),
        ])
    );
    let runtime = dry_run("vllm-therock-gfx1151");
    assert_eq!(
        v["pins"], runtime["pins"],
        "both definitions build the one Containerfile with the same pins, so CI's rccl stage is the image's"
    );
    assert_eq!(v["sent"]["sha256"], runtime["sent"]["sha256"]);
}

#[test]
fn dry_run_with_a_target_override_marks_the_stages_it_skips() {
    let (v, code) = run_json(&["build", DEF, "--dry-run", "--json", "--target", "builder"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        stages(&v),
        BTreeMap::from([("builder".to_string(), true), ("final".to_string(), false)])
    );
    assert_eq!(v["sent"]["patches"], serde_json::json!([]));
}

#[test]
fn dry_run_of_the_llama_cpp_image_shows_its_stages_and_pins() {
    let v = dry_run("llama-cpp-gfx1151");
    assert_eq!(v["target"], "runtime");
    assert_eq!(
        stages(&v),
        BTreeMap::from([
            ("therock".to_string(), true),
            ("llama-builder".to_string(), true),
            ("rdma-core".to_string(), true),
            ("runtime".to_string(), true),
        ])
    );
    let fedora = v["pins"]["images"]["FEDORA_IMAGE"].as_str().unwrap();
    assert_eq!(v["stages"][0]["base"], fedora);
    assert_eq!(v["stages"][1]["base"], "stage therock");
    assert_eq!(
        v["args"]["LLAMA_CPP_COMMIT"],
        "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
    );
    assert_eq!(
        v["args"]["LLAMA_CPP_REPO"],
        "https://github.com/ggml-org/llama.cpp"
    );
    assert!(v["rccl"].is_null(), "no RCCL choice in this image: {v}");
    assert_eq!(
        v["sent"]["containerfile_sha256"],
        sha256_of("containerfiles/llama-cpp-gfx1151.Containerfile")
    );
    assert_eq!(
        v["publish"]["repository"],
        "ghcr.io/halobox/llama-cpp-gfx1151"
    );
    // A moving llama.cpp ref is refused before any engine is asked.
    let out = run(&[
        "build",
        "llama-cpp-gfx1151",
        "--dry-run",
        "--build-arg",
        "LLAMA_CPP_COMMIT=master",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a full 40-hex commit SHA"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

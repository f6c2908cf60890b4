//! `halobox build` through the real engines' build API: a small multi-stage
//! Containerfile FROM the local busybox test image, on podman and docker; a
//! failing step gives an error that names the step.

mod common;

use common::engines::{DOCKER, PODMAN, REPO, cli, require};
use common::halobox;

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

#[test]
fn builds_on_podman() {
    check("podman", PODMAN, "localhost/halobox-test:1");
}

#[test]
fn builds_on_docker() {
    check("docker", DOCKER, &format!("{REPO}:1"));
}

//! `halobox publish` to the loopback registry with htpasswd auth: every tag
//! lands with the same digest and the OCI labels; a wrong password is a clear
//! failure; the password never reaches the output; `--promote` moves a channel;
//! a candidate moves no channel, and `--promote-digest` moves one to the
//! candidate's digest only (unverified: labelled, and refresh warns).

mod common;

use std::process::Output;

use common::engines::{AUTH_REPO, PODMAN, cli, image_names, require};
use common::halobox;
use serde_json::Value;

const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

fn password() -> String {
    std::fs::read_to_string("/tmp/halobox-engines/registry-auth/password")
        .expect("the auth registry's password (scripts/engines/start.sh writes it)")
        .trim()
        .to_string()
}

fn repo() -> String {
    // One repository per run: other runs may use the same registry.
    AUTH_REPO.replace("/test", &format!("/imgtest-{}", std::process::id()))
}

fn publish(args: &[&str], pw: &str) -> Output {
    publish_env(args, pw, &[])
}

fn publish_env(args: &[&str], pw: &str, env: &[(&str, &str)]) -> Output {
    publish_at(REVISION, args, pw, env)
}

fn publish_at(revision: &str, args: &[&str], pw: &str, env: &[(&str, &str)]) -> Output {
    halobox()
        .envs(env.iter().copied())
        .args([
            "publish",
            "--engine",
            PODMAN,
            "--revision",
            revision,
            "--source",
            "https://example.org/halobox",
        ])
        .args(args)
        .env("HALOBOX_REGISTRY_USER", "halobox")
        .env("HALOBOX_REGISTRY_PASSWORD", pw)
        .env("REGISTRY_AUTH_FILE", "/nonexistent")
        .output()
        .unwrap()
}

fn no_secret(out: &Output, pw: &str) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(pw), "the password was printed:\n{all}");
}

/// Digest and labels of a tag in the registry, read with skopeo.
fn remote(reference: &str, pw: &str) -> Value {
    let out = cli(
        "skopeo",
        &[
            "inspect",
            "--tls-verify=false",
            "--creds",
            &format!("halobox:{pw}"),
            &format!("docker://{reference}"),
        ],
    );
    assert!(
        out.status.success(),
        "skopeo {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn publishes_every_tag_with_labels_and_promotes() {
    let _names = image_names();
    require(PODMAN);
    let pw = password();
    let repo = repo();
    let local = format!("localhost/halobox-imgtest-pub:{}", std::process::id());
    assert!(
        cli("podman", &["tag", "localhost/halobox-test:2", &local])
            .status
            .success()
    );

    let dry = publish(
        &[
            &local,
            "--channel",
            "dev",
            "--to",
            &repo,
            "--dry-run",
            "--json",
        ],
        &pw,
    );
    no_secret(&dry, &pw);
    assert!(
        dry.status.success(),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    let plan: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let tags: Vec<String> = plan["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        tags,
        vec![
            format!("{repo}:20240601-000000"),
            format!("{repo}:sha-0123456"),
            format!("{repo}:dev")
        ]
    );
    assert!(
        plan["credentials"]
            .as_str()
            .unwrap()
            .contains("user halobox")
    );

    let out = publish(&[&local, "--channel", "dev", "--to", &repo, "--json"], &pw);
    no_secret(&out, &pw);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["same_digest"], true);
    let mut digests = Vec::new();
    for t in &tags {
        let r = remote(t, &pw);
        let labels = &r["Labels"];
        assert_eq!(
            labels["org.opencontainers.image.created"], "2024-06-01T00:00:00Z",
            "{t}"
        );
        assert_eq!(labels["org.opencontainers.image.revision"], REVISION, "{t}");
        assert_eq!(
            labels["org.opencontainers.image.source"], "https://example.org/halobox",
            "{t}"
        );
        assert_eq!(
            labels["org.opencontainers.image.version"], "20240601-000000",
            "{t}"
        );
        assert_eq!(
            report["pushed"][t], r["Digest"],
            "{t}: reported digest is the registry's"
        );
        digests.push(r["Digest"].as_str().unwrap().to_string());
    }
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");

    let promoted = publish(&["--promote", "dev", "latest", "--to", &repo], &pw);
    no_secret(&promoted, &pw);
    assert!(
        promoted.status.success(),
        "{}",
        String::from_utf8_lossy(&promoted.stderr)
    );
    assert_eq!(remote(&format!("{repo}:latest"), &pw)["Digest"], digests[0]);
    let _ = cli("podman", &["rmi", "-f", &local]);
}

#[test]
fn wrong_password_fails_clearly_and_pushes_nothing() {
    let _names = image_names();
    require(PODMAN);
    let pw = password();
    let wrong = format!("{pw}-wrong-{}", std::process::id());
    let repo = format!("{}-wrong", repo());
    let local = format!("localhost/halobox-imgtest-pub:wrong-{}", std::process::id());
    assert!(
        cli("podman", &["tag", "localhost/halobox-test:1", &local])
            .status
            .success()
    );
    let out = publish(&[&local, "--channel", "latest", "--to", &repo], &wrong);
    no_secret(&out, &wrong);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("authentication required") || err.contains("unauthorized"),
        "{err}"
    );
    assert!(err.contains("refused user \"halobox\""), "{err}");
    assert!(err.contains("pushed 0 of 3"), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "nothing reported as pushed"
    );
    let check = cli(
        "skopeo",
        &[
            "inspect",
            "--tls-verify=false",
            "--creds",
            &format!("halobox:{pw}"),
            &format!("docker://{repo}:latest"),
        ],
    );
    assert!(!check.status.success(), "no tag reached the registry");
    let _ = cli("podman", &["rmi", "-f", &local]);
}

#[test]
fn credentials_bound_to_another_registry_are_not_sent() {
    let _names = image_names();
    require(PODMAN);
    let pw = password();
    let repo = format!("{}-bound", repo());
    let local = format!("localhost/halobox-imgtest-pub:bound-{}", std::process::id());
    assert!(
        cli("podman", &["tag", "localhost/halobox-test:1", &local])
            .status
            .success()
    );
    let out = publish_env(
        &[&local, "--channel", "latest", "--to", &repo],
        &pw,
        &[("HALOBOX_REGISTRY", "ghcr.io")],
    );
    no_secret(&out, &pw);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("belong to ghcr.io (HALOBOX_REGISTRY)"),
        "{err}"
    );
    assert!(
        err.contains("authentication required") || err.contains("unauthorized"),
        "the registry saw no credentials: {err}"
    );
    assert!(
        err.contains("no credentials were sent to 127.0.0.1:5001"),
        "{err}"
    );
    // Bound to it, the same push goes through.
    let out = publish_env(
        &[&local, "--channel", "latest", "--to", &repo],
        &pw,
        &[("HALOBOX_REGISTRY", "127.0.0.1:5001")],
    );
    no_secret(&out, &pw);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = cli("podman", &["rmi", "-f", &local]);
}

fn succeeded(out: &Output, pw: &str) -> String {
    no_secret(out, pw);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn absent(reference: &str, pw: &str) -> bool {
    !cli(
        "skopeo",
        &[
            "inspect",
            "--tls-verify=false",
            "--creds",
            &format!("halobox:{pw}"),
            &format!("docker://{reference}"),
        ],
    )
    .status
    .success()
}

#[test]
fn a_channel_moves_only_to_the_candidates_digest() {
    let _names = image_names();
    require(PODMAN);
    let pw = password();
    let repo = format!("{}-candidate", repo());
    let id = std::process::id();
    let (good, other) = (
        format!("localhost/halobox-imgtest-cand:{id}"),
        format!("localhost/halobox-imgtest-other:{id}"),
    );
    for (from, to) in [
        ("localhost/halobox-test:2", &good),
        ("localhost/halobox-test:1", &other),
    ] {
        assert!(cli("podman", &["tag", from, to]).status.success());
    }
    let out = succeeded(&publish(&[&good, "--candidate", "--to", &repo], &pw), &pw);
    assert_eq!(
        out.lines().count(),
        2,
        "the dated and sha- tags only:\n{out}"
    );
    assert!(
        absent(&format!("{repo}:latest"), &pw),
        "a candidate moves no channel"
    );
    let candidate = remote(&format!("{repo}:sha-0123456"), &pw)["Digest"]
        .as_str()
        .unwrap()
        .to_string();
    let other_rev = "89abcdef0123456789abcdef0123456789abcdef";
    succeeded(
        &publish_at(other_rev, &[&other, "--candidate", "--to", &repo], &pw, &[]),
        &pw,
    );
    let wrong = remote(&format!("{repo}:sha-89abcde"), &pw)["Digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(wrong, candidate);

    let refused = publish(
        &[
            "--promote-digest",
            &wrong,
            "--channel",
            "latest",
            "--to",
            &repo,
        ],
        &pw,
    );
    no_secret(&refused, &pw);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{wrong} is not the candidate's digest"))
            && err.contains("nothing moved"),
        "{err}"
    );
    assert!(
        absent(&format!("{repo}:latest"), &pw),
        "a refused digest moves nothing"
    );

    let dry = succeeded(
        &publish(
            &[
                "--promote-digest",
                &candidate,
                "--channel",
                "latest",
                "--to",
                &repo,
                "--dry-run",
            ],
            &pw,
        ),
        &pw,
    );
    assert!(
        dry.contains(&format!("check: {repo}:sha-0123456 is at {candidate}")),
        "{dry}"
    );
    assert!(
        absent(&format!("{repo}:latest"), &pw),
        "--dry-run moves nothing"
    );
    succeeded(
        &publish(
            &[
                "--promote-digest",
                &candidate,
                "--channel",
                "latest",
                "--to",
                &repo,
            ],
            &pw,
        ),
        &pw,
    );
    let latest = remote(&format!("{repo}:latest"), &pw);
    assert_eq!(
        latest["Digest"],
        candidate.as_str(),
        "moved by digest, not rebuilt"
    );
    assert!(latest["Labels"].get("io.halobox.verified").is_none());

    succeeded(
        &publish(
            &[
                "--promote-digest",
                &candidate,
                "--channel",
                "dev",
                "--to",
                &repo,
                "--unverified",
            ],
            &pw,
        ),
        &pw,
    );
    let dev = remote(&format!("{repo}:dev"), &pw);
    assert_eq!(dev["Labels"]["io.halobox.verified"], "false");
    assert_eq!(
        dev["Layers"], latest["Layers"],
        "the same layers, a new config"
    );

    let name = format!("halobox-imgtest-unverified-{id}");
    let refresh = halobox()
        .args([
            "refresh",
            "--engine",
            PODMAN,
            "--backend",
            "podman",
            "--name",
            &name,
            "--image",
            &format!("{repo}:dev"),
            "--pull",
            "never",
            "--memlock",
            "8M",
            "--yes",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refresh.stderr).into_owned();
    let _ = halobox()
        .args(["rm", &name, "--engine", PODMAN, "--yes"])
        .output();
    assert!(refresh.status.success(), "{said}");
    assert!(
        said.contains("is unverified (io.halobox.verified=false)"),
        "refresh warns about an unverified image:\n{said}"
    );
    for t in [&good, &other] {
        let _ = cli("podman", &["rmi", "-f", t]);
    }
}

//! `refresh --pull always|missing|never` on real podman and docker: an
//! image built or loaded on this machine (`localhost/…`, what `halobox
//! build` tags) is used as it is, with no registry to reach; `--pull never`
//! refuses an absent image and changes nothing.

mod common;

use common::engines::{DOCKER, PODMAN, REPO, cleanup, cli, inspect, require};
use common::{run, text};

/// The local image each test tags from the registry's test image.
const LOCAL: &str = "localhost/halobox-pulltest";

fn refresh(
    engine: &str,
    backend: &str,
    name: &str,
    image: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec![
        "refresh",
        "--engine",
        engine,
        "--backend",
        backend,
        "--name",
        name,
        "--image",
        image,
        "--memlock",
        "8M",
        "--yes",
    ];
    args.extend_from_slice(extra);
    run(&args)
}

fn id_of(program: &str, name: &str) -> Option<String> {
    inspect(program, name).map(|c| c["Id"].as_str().unwrap().to_string())
}

/// Every tag of `LOCAL` removed (the test's tag and what refresh pinned).
fn untag_all(program: &str) {
    let out = cli(program, &["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    for t in String::from_utf8_lossy(&out.stdout).lines() {
        if t.starts_with(&format!("{LOCAL}:")) {
            let _ = cli(program, &["rmi", t]);
        }
    }
}

/// The whole story on one engine: a localhost image refreshes with no
/// registry, `--pull always` on it fails as every refresh did before
/// `--pull` existed, and `--pull never` refuses what the engine lacks.
fn local_image_refresh(program: &str, engine: &str, backend: &str) {
    require(engine);
    let name = format!("hbx-pull-{program}");
    let names = [
        name.clone(),
        format!("{name}-halobox-new"),
        format!("{name}-prev"),
    ];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    cleanup(program, &names);
    untag_all(program);
    let pulled = cli(program, &["pull", &format!("{REPO}:1")]);
    assert!(pulled.status.success(), "{program} pull: {pulled:?}");
    let image = format!("{LOCAL}:1");
    let tagged = cli(program, &["tag", &format!("{REPO}:1"), &image]);
    assert!(tagged.status.success(), "{program} tag: {tagged:?}");

    // The default for a localhost/ image the engine has: used as it is.
    let out = refresh(engine, backend, &name, &image, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("not pulling {image}: the engine has {image} (--pull missing, the default for a localhost/ image)")),
        "{err}"
    );
    assert!(!err.contains("==> pulling"), "{err}");
    let first = id_of(program, &name).expect("the container exists");
    let c = inspect(program, &name).unwrap();
    assert!(
        c["Config"]["Image"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{LOCAL}:20")),
        "pinned under the local repository: {}",
        c["Config"]["Image"]
    );

    // What every refresh did before --pull: pull, from a registry named
    // localhost that is not there. Nothing changes.
    let out = refresh(engine, backend, &name, &image, &["--pull", "always"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refresh failed while pulling")
            && (err.contains("pinging container registry localhost")
                || err.contains("connection refused")),
        "{err}"
    );
    assert!(err.contains("was left as it was"), "{err}");
    assert_eq!(id_of(program, &name).as_deref(), Some(first.as_str()));

    // --pull never with an image the engine lacks: refused before anything
    // is made; the container stays, running.
    for absent in [
        format!("{LOCAL}:absent"),
        "127.0.0.1:5000/halobox/nope:1".to_string(),
    ] {
        let out = refresh(engine, backend, &name, &absent, &["--pull", "never"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "{absent} is not in this engine's image store and --pull never forbids pulling it"
            )) && err.contains(&format!(
                "\n  hint: {}build it with `halobox build --tag {absent}`",
                if absent.starts_with("localhost/") {
                    String::new()
                } else {
                    format!("pull it with `halobox refresh --image {absent} --pull missing`, ")
                }
            )),
            "{err}"
        );
        assert!(!err.contains("==> pulling"), "{err}");
        let c = inspect(program, &name).unwrap();
        assert_eq!(c["Id"].as_str(), Some(first.as_str()));
        assert_eq!(c["State"]["Running"], true);
        assert!(inspect(program, &format!("{name}-halobox-new")).is_none());
    }
    // A localhost/ image the engine lacks, by default: no registry to try.
    let out = refresh(engine, backend, &name, &format!("{LOCAL}:absent"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a registry to pull from")
            && err.contains(
                "hint: build it with `halobox build --tag localhost/halobox-pulltest:absent`"
            ),
        "{err}"
    );
    assert_eq!(id_of(program, &name).as_deref(), Some(first.as_str()));

    // --pull never with an image it has: replaced, no pull.
    let out = refresh(engine, backend, &name, &image, &["--pull", "never"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(--pull never)"),
        "{}",
        text(&out)
    );
    assert_ne!(id_of(program, &name).as_deref(), Some(first.as_str()));
    assert_eq!(
        id_of(program, &format!("{name}-prev")).as_deref(),
        Some(first.as_str())
    );

    // The dry run says what it will do.
    let out = refresh(engine, backend, &name, &image, &["--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains(&format!("use {image} as it is: the engine has {image}")),
        "{plan}"
    );
    cleanup(program, &names);
    untag_all(program);
}

#[test]
fn podman_refreshes_a_local_image_without_a_registry() {
    local_image_refresh("podman", PODMAN, "podman");
}

#[test]
fn docker_refreshes_a_local_image_without_a_registry() {
    local_image_refresh("docker", DOCKER, "docker");
}

//! Registry credentials go only to the registry they belong to: what a
//! stand-in engine socket received with each pull and push, decoded from
//! `X-Registry-Auth`.

mod common;

use std::path::Path;
use std::process::Output;

use common::halobox;
use common::standin::StandIn;

const USER: &str = "halobox-user";
const SECRET: &str = "pw-7f3a9c-never-print";

/// halobox with a clean credential environment: no auth files of this
/// machine, no config, `env` on top.
fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = halobox();
    cmd.args(args)
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("REGISTRY_AUTH_FILE", home.join("auth.json"))
        .env_remove("HALOBOX_REGISTRY")
        .env_remove("HALOBOX_REGISTRY_USER")
        .env_remove("HALOBOX_REGISTRY_PASSWORD")
        .env_remove("HALOBOX_IMAGE")
        .env_remove("CONTAINER_HOST")
        .env_remove("DOCKER_HOST");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(SECRET), "the password was printed:\n{all}");
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `publish --promote dev latest --to REPO`: a pull and a push from REPO.
fn promote(to: &str, env: &[(&str, &str)]) -> (Output, Vec<common::standin::Recorded>) {
    let dir = tempfile::tempdir().unwrap();
    let engine = StandIn::start(dir.path());
    let out = run(
        dir.path(),
        &[
            "publish",
            "--promote",
            "dev",
            "latest",
            "--to",
            to,
            "--engine",
            &engine.address(),
        ],
        env,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let reqs = engine.registry_requests();
    assert_eq!(reqs.len(), 2, "one pull and one push: {reqs:?}");
    assert!(reqs[0].path.contains("/images/create"), "{reqs:?}");
    assert!(reqs[1].path.contains("/push"), "{reqs:?}");
    (out, reqs)
}

const CREDS: [(&str, &str); 2] = [
    ("HALOBOX_REGISTRY_USER", USER),
    ("HALOBOX_REGISTRY_PASSWORD", SECRET),
];

#[test]
fn env_credentials_reach_only_their_registry() {
    let to = "127.0.0.1:5999/team/img";
    // Bound to this registry: every pull and push carries them.
    let bound = [CREDS[0], CREDS[1], ("HALOBOX_REGISTRY", "127.0.0.1:5999")];
    let (_, reqs) = promote(to, &bound);
    for r in &reqs {
        assert_eq!(r.username().as_deref(), Some(USER), "{r:?}");
        assert_eq!(r.password().as_deref(), Some(SECRET), "{r:?}");
    }
    // publish --to names the registry when HALOBOX_REGISTRY is unset.
    let (_, reqs) = promote(to, &CREDS);
    assert!(reqs.iter().all(|r| r.password().as_deref() == Some(SECRET)));
    // Bound to another registry: nothing is sent, and the user is told.
    let other = [CREDS[0], CREDS[1], ("HALOBOX_REGISTRY", "https://ghcr.io/")];
    let (out, reqs) = promote(to, &other);
    for r in &reqs {
        assert_eq!((r.username(), r.password()), (None, None), "{r:?}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("belong to ghcr.io") && err.contains("HALOBOX_REGISTRY=127.0.0.1:5999"),
        "{err}"
    );
}

#[test]
fn the_default_image_pull_carries_no_credentials_bound_elsewhere() {
    for extra in [None, Some(("HALOBOX_REGISTRY", "docker.io"))] {
        let dir = tempfile::tempdir().unwrap();
        let engine = StandIn::start(dir.path());
        let mut env = CREDS.to_vec();
        env.extend(extra);
        let out = run(
            dir.path(),
            &[
                "refresh",
                "--engine",
                &engine.address(),
                "--backend",
                "docker",
                "--memlock",
                "8M",
                "--yes",
            ],
            &env,
        );
        let err = stderr(&out);
        let pulls: Vec<_> = engine
            .registry_requests()
            .into_iter()
            .filter(|r| r.path.contains("/images/create"))
            .collect();
        assert_eq!(pulls.len(), 1, "{err}\n{:?}", engine.requests());
        assert!(
            pulls[0]
                .path
                .contains("ghcr.io%2Fhalobox%2Fvllm-therock-gfx1151")
                || pulls[0]
                    .path
                    .contains("ghcr.io/halobox/vllm-therock-gfx1151"),
            "{pulls:?}"
        );
        assert_eq!(
            (pulls[0].username(), pulls[0].password()),
            (None, None),
            "{extra:?}: {pulls:?}"
        );
        assert!(err.contains("not sent to ghcr.io"), "{err}");
        assert!(err.contains("HALOBOX_REGISTRY="), "{err}");
    }
}

fn auth_file(home: &Path, entries: &[(&str, &str)]) {
    use base64::Engine as _;
    let auths: serde_json::Map<String, serde_json::Value> = entries
        .iter()
        .map(|(k, up)| {
            let auth = base64::engine::general_purpose::STANDARD.encode(up);
            (k.to_string(), serde_json::json!({ "auth": auth }))
        })
        .collect();
    std::fs::write(
        home.join("auth.json"),
        serde_json::json!({ "auths": auths }).to_string(),
    )
    .unwrap();
}

/// Auth-file keys and `user:password` values.
type Entries<'a> = &'a [(&'a str, &'a str)];

#[test]
fn auth_file_entries_match_by_exact_host() {
    let cases: [(Entries, &str, Option<&str>); 4] = [
        // A key that is a substring of Docker Hub's name is another host.
        (&[("io", "io-user:pw1")], "docker.io/halobox/img", None),
        (
            &[
                ("io", "io-user:pw1"),
                ("https://index.docker.io/v1/", "hub-user:pw2"),
            ],
            "docker.io/halobox/img",
            Some("hub-user"),
        ),
        (
            &[("127.0.0.1:5999", "local:pw3")],
            "127.0.0.1:5998/halobox/img",
            None,
        ),
        (
            &[("http://127.0.0.1:5999/v2/", "local:pw3")],
            "127.0.0.1:5999/halobox/img",
            Some("local"),
        ),
    ];
    for (entries, to, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        auth_file(dir.path(), entries);
        let engine = StandIn::start(dir.path());
        let out = run(
            dir.path(),
            &[
                "publish",
                "--promote",
                "dev",
                "latest",
                "--to",
                to,
                "--engine",
                &engine.address(),
            ],
            &[],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let reqs = engine.registry_requests();
        assert_eq!(reqs.len(), 2, "{reqs:?}");
        for r in &reqs {
            assert_eq!(r.username().as_deref(), want, "{entries:?} {to}: {r:?}");
        }
    }
}

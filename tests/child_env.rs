//! Secrets in halobox's environment (`HF_TOKEN`, `HALOBOX_REGISTRY_*`, …)
//! never reach the processes it starts: every child is made by
//! `proc::command`, and real runs of `ssh` and the engine CLI (spies on
//! PATH) show what they were given. `serve` hands `HF_TOKEN` over on stdin.
//! (toolbox and distrobox children: tests/containers.rs.)

mod common;

use common::halobox;
use common::spy::{SECRETS, Spies, assert_no_secret};

/// Every `Command::new` in src/ is the one in src/proc.rs that drops secrets.
#[test]
fn every_child_process_starts_from_proc_command() {
    fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, found);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("src/proc.rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                for (i, line) in text.lines().enumerate() {
                    if line.contains("Command::new(") || line.contains("process::Command::new") {
                        found.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    assert!(
        found.is_empty(),
        "start children with crate::proc::command (it drops secrets):\n{}",
        found.join("\n")
    );
}

fn with_secrets(cmd: &mut assert_cmd::Command) -> &mut assert_cmd::Command {
    for (k, v) in SECRETS {
        cmd.env(k, v);
    }
    cmd.env("HALOBOX_TEST_MARK", "passed-through")
}

/// ssh to cluster nodes gets the environment minus the secrets.
#[test]
fn ssh_to_nodes_gets_no_secret() {
    let spies = Spies::new();
    spies.add("ssh", false, "exit 255");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        "[[node]]\nssh = \"root@n1\"\nip = \"192.168.100.1\"\n[[node]]\nssh = \"root@n2\"\nip = \"192.168.100.2\"\n",
    )
    .unwrap();
    let out = with_secrets(&mut halobox())
        .env("PATH", spies.path())
        .args(["cluster", "status", "--cluster", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let record = spies.record("ssh");
    assert_no_secret(&record);
    assert!(
        record.contains("HALOBOX_TEST_MARK=passed-through"),
        "{record}"
    );
}

/// `serve` on a podman head starts vLLM through `halobox enter` (halobox's
/// own engine connection, never the `podman` CLI): the token and the API
/// key arrive on its stdin (one a line, in that order), and neither they
/// nor any other secret are in its environment, in that of ssh (the Ray
/// query) or in any other look into the container. The spies
/// answer as a cluster whose API never comes up, so serve ends at its
/// `--timeout`, stopping what it started.
#[test]
fn serve_hands_the_token_on_stdin_only() {
    let spies = Spies::new();
    let ip = common::local_ipv4();
    spies.add(
        "ssh",
        false,
        &format!(
            "echo '{{\"nodes\": [{{\"ip\": \"{ip}\", \"id\": \"n\", \"alive\": true, \"head\": true, \"resources\": {{\"GPU\": 1.0}}}}], \"error\": null}}'"
        ),
    );
    spies.add(
        "halobox",
        true,
        "case \"$*\" in *'IFS= read'*) echo halobox-serve-pid 4242 ;; *) echo gone 4242 ;; esac",
    );
    spies.add("podman", false, "exit 1");
    let port = std::net::TcpListener::bind("0.0.0.0:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "transport = \"ethernet\"\n[[node]]\nssh = \"root@head\"\nip = \"{}\"\nbackend = \"podman\"\n",
            common::local_ipv4()
        ),
    )
    .unwrap();
    let out = with_secrets(&mut halobox())
        .env("PATH", spies.path())
        .args(["serve", "m", "--timeout", "2", "--port", &port])
        .args(["--cluster", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("did not answer within 2 s"), "{stderr}");
    for (_, v) in SECRETS {
        assert!(!stderr.contains(v) && !String::from_utf8_lossy(&out.stdout).contains(v));
    }
    assert_no_secret(&spies.record("ssh"));
    assert_eq!(spies.record("podman"), "", "the podman CLI was used");
    let record = spies.record("halobox");
    let mut started = None;
    for call in record.split("== halobox ").filter(|c| !c.is_empty()) {
        let (env, stdin) = call.split_once("-- stdin:\n").expect("stdin recorded");
        assert_no_secret(env);
        if env.contains("IFS= read") {
            assert!(env.contains("HALOBOX_TEST_MARK=passed-through"), "{env}");
            started = Some(stdin.to_string());
        } else {
            for (_, v) in SECRETS {
                assert!(!stdin.contains(v), "a secret on another call's stdin");
            }
        }
    }
    assert_eq!(
        started.expect("the start went through halobox enter"),
        format!("{}\n{}\n", SECRETS[0].1, SECRETS[2].1)
    );
}

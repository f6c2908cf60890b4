//! `halobox model pull` end to end on two test nodes (scripts/netns/nodes.sh,
//! `host` backend, each with its own /root and so its own Hugging Face
//! cache): the real `hf download` of huggingface_hub (the vLLM venv at
//! /opt/halobox-vllm), run on node b over ssh with `HF_HUB_OFFLINE=1`
//! against a cache pre-filled as the hub lays it out (blobs, snapshots/REV,
//! refs/main). A spy `hf` beside cluster.toml's `vllm` records how it was
//! started: `HF_TOKEN` must reach it in its environment, never in an
//! argument, the output or `--dry-run`. Needs root, iproute2 and
//! openssh-server; a missing piece fails.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use sha2::{Digest, Sha256};

mod common;
use common::netns;
use common::text;

const MODEL: &str = "halobox-test/pulled";
const COMMIT: &str = "5555555555666666666677777777778888888888";
const TOKEN: &str = "hf_w24p_marker_9f8e7d6c";
const REAL_HF: &str = "/opt/halobox-vllm/bin/hf";

/// Lays out `files` as the hub cache does under `hub`.
fn hub_model(hub: &Path, files: &[(&str, &[u8])]) {
    let repo = hub.join("models--halobox-test--pulled");
    let snap = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    for (name, body) in files {
        let blob: String = Sha256::digest(body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        std::fs::write(repo.join("blobs").join(&blob), body).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snap.join(name)).unwrap();
    }
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
}

struct Setup {
    nodes: netns::Nodes,
    file: String,
}

fn setup() -> Setup {
    assert!(
        Path::new(REAL_HF).exists(),
        "{REAL_HF} is missing: scripts/vllm-venv.sh makes it"
    );
    let nodes = netns::Nodes::up(&["9000", "9000"]);
    // The spy: `hf` beside the `vllm` of cluster.toml.
    let bin = nodes.path("venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = nodes.path("hf.log");
    std::fs::write(&log, "").unwrap();
    let spy = format!(
        "#!/bin/sh\n{{ echo \"== hf $*\"; env; }} >> {}\nexec {REAL_HF} \"$@\"\n",
        log.display()
    );
    for (name, body) in [("hf", spy.as_str()), ("vllm", "#!/bin/sh\nexit 1\n")] {
        std::fs::write(bin.join(name), body).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut t = format!(
        "halobox = \"{}\"\nvllm = \"{}/vllm\"\nssh_options = {}\n",
        env!("CARGO_BIN_EXE_halobox"),
        bin.display(),
        serde_json::to_string(&nodes.ssh_options()).unwrap()
    );
    for (i, x) in ['a', 'b'].into_iter().enumerate() {
        t.push_str(&format!(
            "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\n",
            ip = nodes.ip(i as u32 + 1)
        ));
    }
    let file = nodes.path("cluster.toml");
    std::fs::write(&file, t).unwrap();
    hub_model(
        &nodes.path("node_b/root/.cache/huggingface/hub"),
        &[
            ("config.json", br#"{"num_hidden_layers": 2}"#),
            ("model.safetensors", &[7u8; 4096]),
        ],
    );
    Setup {
        file: file.display().to_string(),
        nodes,
    }
}

impl Setup {
    fn pull(&self, args: &[&str]) -> Output {
        let mut all = vec!["model", "pull"];
        all.extend(args);
        all.extend(["--cluster", &self.file]);
        self.nodes
            .spawn_halobox('a', &all)
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_TOKEN", TOKEN)
            .env_remove("HF_HOME")
            .env_remove("HF_HUB_CACHE")
            .output()
            .expect("run halobox")
    }

    fn spy(&self) -> String {
        std::fs::read_to_string(self.nodes.path("hf.log")).unwrap()
    }
}

#[test]
fn pull_runs_hf_on_the_node_with_the_token_on_stdin_only() {
    let s = setup();
    let o = s.pull(&[
        MODEL,
        "--on",
        "b",
        "--include",
        "*.json",
        "--include",
        "*.safetensors",
    ]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(!all.contains(TOKEN), "the token was printed:\n{all}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!(
            "{MODEL}@main is in node b's Hugging Face cache: /root/.cache/huggingface/hub/models--halobox-test--pulled/snapshots/{COMMIT}"
        )),
        "{all}"
    );
    let spy = s.spy();
    let call = spy
        .lines()
        .find(|l| l.starts_with("== hf "))
        .expect("hf ran");
    assert_eq!(
        call,
        format!("== hf download {MODEL} --revision main --include *.json --include *.safetensors")
    );
    assert!(!call.contains(TOKEN));
    // It reached hf, in its environment, with the offline setting passed on.
    assert!(
        spy.lines().any(|l| l == format!("HF_TOKEN={TOKEN}")),
        "{spy}"
    );
    assert!(spy.lines().any(|l| l == "HF_HUB_OFFLINE=1"), "{spy}");
    // Nothing was downloaded to node a.
    assert!(
        !s.nodes
            .path("node_a/root/.cache/huggingface/hub/models--halobox-test--pulled")
            .exists()
    );

    // --dry-run shows the line and hides the token.
    let o = s.pull(&[MODEL, "--dry-run"]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(!all.contains(TOKEN), "{all}");
    assert!(all.contains("# on node a (root@"), "{all}");
    assert!(
        all.contains("HF_TOKEN=******** (from this environment, passed on stdin)"),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "HF_HUB_OFFLINE=1 hf download {MODEL} --revision main\n"
        )),
        "{all}"
    );
}

#[test]
fn unknown_models_revisions_and_nodes_name_the_fix() {
    let s = setup();
    let o = s.pull(&["halobox-test/absent", "--on", "b"]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        all.contains("node b: halobox-test/absent@main is not in its cache and the hub cannot be asked (offline)")
            && all.contains("hint: unset HF_HUB_OFFLINE"),
        "{all}"
    );
    let o = s.pull(&[&format!("{MODEL}@nope"), "--on", "b"]);
    assert!(
        text(&o).contains(&format!("{MODEL}@nope is not in its cache")),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains(TOKEN));
    let o = s.pull(&[MODEL, "--on", "zz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--on zz: no such node in the cluster file (its nodes: a, b)"),
        "{}",
        text(&o)
    );
    let o = s.pull(&["not a model"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

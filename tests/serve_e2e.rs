//! Real vLLM, served by `halobox serve`: scripts/serve-e2e.sh on namespace
//! nodes that each run their own engine (podman, docker), with vLLM's CPU
//! build bound into halobox's containers (`refresh --volume`) and a
//! random-weight Llama made on the spot. It runs refresh, `cluster up`,
//! `serve --tp N --detach` (its API key on stdin), status, logs, a greedy
//! completion, `serve stop`, `cluster down`; the tokens must equal those of
//! plain `vllm serve` on one node in the same container. With `--faults` it
//! also stops a foreground serve by SIGINT and kills a worker node
//! mid-request. Needs root, the engines of scripts/engines/start.sh and
//! scripts/vllm-venv.sh's venv (scripts/test.sh installs both); a missing
//! piece fails. The runs take minutes each and several GB of memory: one at
//! a time.

use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs scripts/serve-e2e.sh with `args`; its output, asserted to end in
/// `identical: yes`.
fn e2e(args: &[&str]) -> String {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/serve-e2e.sh"))
        .args(args)
        .env("HALOBOX_BIN", env!("CARGO_BIN_EXE_halobox"))
        .output()
        .expect("run scripts/serve-e2e.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.status.success(),
        "serve-e2e.sh {args:?} failed:\n{text}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().last(),
        Some("identical: yes"),
        "{text}"
    );
    text
}

/// Two podman nodes, TP 2, the default shape; and the faults: SIGINT stops
/// it cleanly, a killed worker node is named and nothing is left behind.
#[test]
fn podman_nodes_serve_identical_tokens_and_name_a_lost_worker() {
    let text = e2e(&["--backend", "podman", "--nodes", "2", "--faults"]);
    assert!(
        text.contains("faults: SIGINT stopped cleanly; killed worker named"),
        "{text}"
    );
}

/// Two docker nodes, TP 2, another shape (3 layers, 6 heads, 2 KV heads).
#[test]
fn docker_nodes_serve_identical_tokens_for_another_shape() {
    e2e(&[
        "--backend",
        "docker",
        "--nodes",
        "2",
        "--shape",
        "3,192,6,2",
    ]);
}

/// llama.cpp over RPC: two podman nodes, a random-weight GGUF made now; the
/// RPC server listens on the data plane only, a second head is refused, a
/// killed worker and a frozen one are named, nothing is left after `cluster
/// down`; tokens equal llama-server alone on one node.
#[test]
fn llama_cpp_podman_nodes_random_gguf_identical_and_faults_named() {
    let text = e2e(&[
        "--engine",
        "llama.cpp",
        "--backend",
        "podman",
        "--nodes",
        "2",
        "--faults",
    ]);
    for said in [
        "rpc-server bound to the data plane only: yes",
        "bad input: 6 cases refused",
        "ab-transport: both legs on sockets",
        "ab-transport: SIGINT named the state, its restore brought the serve back",
        "faults: killed worker named",
        "cluster down: nothing left",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
}

/// llama.cpp over RPC: three docker nodes, the real SmolLM2-135M (Q4_1)
/// from scripts/llama-cpp.sh.
#[test]
fn llama_cpp_three_docker_nodes_smollm2_identical() {
    let text = e2e(&[
        "--engine",
        "llama.cpp",
        "--backend",
        "docker",
        "--nodes",
        "3",
        "--model",
        "/opt/halobox-llama-cpp/models/SmolLM2-135M-Instruct.Q4_1.gguf",
    ]);
    assert!(
        text.contains("rpc-server bound to the data plane only: yes"),
        "{text}"
    );
}

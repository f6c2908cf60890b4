//! `halobox check` knows the llama.cpp image's contract, in a real podman
//! container: an image holding the real CPU builds of `llama-server` and
//! `ggml-rpc-server` (scripts/llama-cpp.sh, llama.cpp as llama-cpp-python
//! 0.3.36 vendors it) passes the binaries check and reports the device
//! list without gfx1151 (no GPU here); the same image without its RPC
//! server fails, naming it.

mod common;

use std::path::Path;
use std::process::Command;

use common::engines::{PODMAN, cleanup, cli, require};
use common::run;
use serde_json::Value;

const DISTRO: &str = "localhost/halobox-distro:1";
/// A local image: `refresh` uses it from the engine, no registry involved.
const REPO: &str = "localhost/halobox-llama-cpp-cpu";
const BUILT: &str = "/opt/halobox-llama-cpp";

/// Builds `REPO:tag` with llama.cpp's binaries in
/// /opt/llama.cpp/bin (the RPC server only `with_rpc`) and the libraries
/// they need beyond the image's own.
fn llama_image(tag: &str, with_rpc: bool) -> String {
    assert!(
        Path::new(BUILT).join(".halobox-versions").exists(),
        "{BUILT} holds no finished build: run `sudo scripts/llama-cpp.sh` (scripts/test.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let ctx = tmp.path();
    let bin = ctx.join("opt/llama.cpp/bin");
    let lib = ctx.join("opt/llama.cpp/lib");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    let mut names = vec!["llama-server"];
    if with_rpc {
        let rpc = ["ggml-rpc-server", "rpc-server"]
            .into_iter()
            .find(|n| Path::new(BUILT).join("bin").join(n).exists())
            .expect("an RPC server in /opt/halobox-llama-cpp/bin");
        names.push(rpc);
    }
    for n in names {
        let from = Path::new(BUILT).join("bin").join(n);
        std::fs::copy(&from, bin.join(n)).unwrap();
        // Its libraries beyond libc (libgomp: the Debian image has none).
        let ldd = Command::new("ldd").arg(&from).output().unwrap();
        for line in String::from_utf8_lossy(&ldd.stdout).lines() {
            if let Some((name, rest)) = line.trim().split_once(" => ")
                && !name.starts_with("libc.so")
                && let Some(path) = rest.split_whitespace().next()
                && !lib.join(name).exists()
            {
                std::fs::copy(path, lib.join(name)).unwrap();
            }
        }
    }
    std::fs::write(
        ctx.join("Containerfile"),
        format!(
            "FROM {DISTRO}\nCOPY opt/ /opt/\nENV PATH=/opt/llama.cpp/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\\n    LD_LIBRARY_PATH=/opt/llama.cpp/lib\nLABEL io.halobox.engine=\"llama.cpp\"\n"
        ),
    )
    .unwrap();
    let image = format!("{REPO}:{tag}");
    let ctx_arg = ctx.display().to_string();
    let o = cli("podman", &["build", "-q", "-t", &image, &ctx_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    image
}

fn check(name: &str) -> Value {
    let (v, code) = common::run_json(&["check", name, "--engine", PODMAN, "--json"]);
    assert_eq!(code, 1, "no GPU here: check FAILs: {v:#}");
    v
}

#[test]
fn check_knows_the_llama_cpp_contract() {
    require(PODMAN);
    let name = "hbx-check-llama";
    cleanup(
        "podman",
        &[name, "hbx-check-llama-halobox-new", "hbx-check-llama-prev"],
    );
    let refresh = |image: &str| {
        let out = run(&[
            "refresh",
            "--engine",
            PODMAN,
            "--name",
            name,
            "--backend",
            "podman",
            "--image",
            image,
            "--memlock",
            "8M",
            "--yes",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    refresh(&llama_image("full", true));
    let v = check(name);
    let b = common::check(&v, "llama.binaries");
    assert_eq!(b["status"], "PASS", "{b:#}");
    let summary = b["summary"].as_str().unwrap();
    assert!(
        summary.contains("llama-server at /opt/llama.cpp/bin/llama-server (version: ")
            && summary.contains("-rpc-server at /opt/llama.cpp/bin/"),
        "{summary}"
    );
    let d = common::check(&v, "llama.devices");
    assert_eq!(d["status"], "SKIP", "{d:#}");
    assert!(
        d["summary"]
            .as_str()
            .unwrap()
            .contains("llama-server lists no gfx1151 device (devices: none): no gfx1151 GPU is visible in the container"),
        "{d:#}"
    );
    let ids: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for vllm_only in ["torch", "vllm", "ray", "rccl", "rccl.abi"] {
        assert!(
            !ids.contains(&vllm_only),
            "{vllm_only} checked in a llama.cpp image: {ids:?}"
        );
    }

    refresh(&llama_image("no-rpc", false));
    let v = check(name);
    let b = common::check(&v, "llama.binaries");
    assert_eq!(b["status"], "FAIL", "{b:#}");
    assert!(
        b["summary"]
            .as_str()
            .unwrap()
            .contains("missing: ggml-rpc-server (or the older rpc-server)"),
        "{b:#}"
    );
    assert!(
        b["fix"]
            .as_str()
            .unwrap()
            .contains("ghcr.io/halobox/llama-cpp-gfx1151"),
        "{b:#}"
    );

    let out = run(&["rm", name, "--yes", "--engine", PODMAN]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cleanup("podman", &["hbx-check-llama-prev"]);
}

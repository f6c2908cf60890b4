//! `halobox check` runs the image build's RCCL ABI gate inside a real podman
//! container: a Debian image holding a stand-in library set (a
//! `libtorch_hip.so` that needs ncclCommInitRank and ncclCommResume, the
//! librccl its RUNPATH leads to, the gate script and binutils' nm), once
//! with a librccl that lacks ncclCommResume and once with one that has it.

mod common;

use std::path::Path;
use std::process::Command;

use common::engines::{PODMAN, cleanup, cli, require};
use common::run;
use serde_json::Value;

const DISTRO: &str = "localhost/halobox-distro:1";
const REPO: &str = "127.0.0.1:5000/halobox/rccl-standin";

fn cc(dir: &Path, out: &Path, source: &str, extra: &[&str]) {
    let src = dir.join("src.c");
    std::fs::write(&src, source).unwrap();
    let o = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(out)
        .arg(&src)
        .args(extra)
        .output()
        .expect("cc (the system C compiler) must be installed");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Builds and pushes `REPO:tag` with a librccl that has (`full`) or lacks
/// ncclCommResume.
fn standin_image(tag: &str, full: bool) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let ctx = tmp.path();
    let site = ctx.join("opt/venv/lib/python3.12/site-packages");
    let torch = site.join("torch/lib");
    let sdk = site.join("_rocm_sdk_libraries/lib");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::create_dir_all(&sdk).unwrap();
    let rccl = if full {
        "int ncclCommInitRank(void) { return 0; }\nint ncclCommResume(void) { return 0; }\n"
    } else {
        "int ncclCommInitRank(void) { return 0; }\n"
    };
    cc(
        ctx,
        &sdk.join("librccl.so.1"),
        rccl,
        &["-Wl,-soname,librccl.so.1"],
    );
    cc(
        ctx,
        &torch.join("libtorch_hip.so"),
        "int ncclCommInitRank(void);\nint ncclCommResume(void);\nint torch_init(void) { return ncclCommInitRank() + ncclCommResume(); }\n",
        &[
            &format!("-L{}", sdk.display()),
            "-l:librccl.so.1",
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../_rocm_sdk_libraries/lib",
        ],
    );
    let bin = ctx.join("opt/halobox/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(
        "containerfiles/rccl-abi-check.sh",
        bin.join("rccl-abi-check.sh"),
    )
    .unwrap();
    // binutils' nm and the libraries it needs beyond libc (the host and the
    // image are both Debian 12).
    let tools = ctx.join("opt/standin");
    std::fs::create_dir_all(tools.join("lib")).unwrap();
    std::fs::create_dir_all(tools.join("bin")).unwrap();
    let nm = std::fs::canonicalize("/usr/bin/nm").expect("nm (binutils) must be installed");
    std::fs::copy(&nm, tools.join("bin/nm")).unwrap();
    let ldd = Command::new("ldd").arg(&nm).output().unwrap();
    for line in String::from_utf8_lossy(&ldd.stdout).lines() {
        if let Some((name, rest)) = line.trim().split_once(" => ")
            && !name.starts_with("libc.so")
            && let Some(path) = rest.split_whitespace().next()
        {
            std::fs::copy(path, tools.join("lib").join(name)).unwrap();
        }
    }
    std::fs::write(
        ctx.join("Containerfile"),
        format!(
            "FROM {DISTRO}\nCOPY opt/ /opt/\nENV PATH=/opt/standin/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\\n    LD_LIBRARY_PATH=/opt/standin/lib\n"
        ),
    )
    .unwrap();
    let image = format!("{REPO}:{tag}");
    let ctx_arg = ctx.display().to_string();
    let o = cli("podman", &["build", "-q", "-t", &image, &ctx_arg]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = cli("podman", &["push", "-q", "--tls-verify=false", &image]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    image
}

fn rccl_abi(name: &str) -> Value {
    let (v, code) = common::run_json(&["check", name, "--engine", PODMAN, "--json"]);
    assert_eq!(code, 1, "no GPU here: check FAILs: {v:#}");
    common::check(&v, "rccl.abi").clone()
}

#[test]
fn check_runs_the_rccl_gate_on_what_torch_loads() {
    require(PODMAN);
    let name = "hbx-check-rccl";
    cleanup(
        "podman",
        &[name, "hbx-check-rccl-halobox-new", "hbx-check-rccl-prev"],
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

    refresh(&standin_image("old", false));
    let c = rccl_abi(name);
    assert_eq!(c["status"], "FAIL", "{c:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("_rocm_sdk_libraries/lib/librccl.so.1, which ")
            && summary.contains("torch/lib/libtorch_hip.so loads, lacks ncclCommResume"),
        "{summary}"
    );

    refresh(&standin_image("full", true));
    let c = rccl_abi(name);
    assert_eq!(c["status"], "PASS", "{c:#}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("defines every nccl*/rccl* symbol torch needs"),
        "{c:#}"
    );
    let out = run(&["rm", name, "--yes", "--engine", PODMAN]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cleanup("podman", &["hbx-check-rccl-prev"]);
}

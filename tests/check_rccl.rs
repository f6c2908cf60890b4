//! `halobox check` runs the image build's RCCL ABI gate inside a real podman
//! container: a Debian image holding a stand-in library set (a
//! `libtorch_hip.so` that needs ncclCommInitRank and ncclCommResume, the
//! librccl its RUNPATH leads to, the gate script and binutils' nm), once
//! with a librccl that lacks ncclCommResume and once with one that has it.
//! The same stand-ins, compiled here, carry the strings RCCL compiles in
//! with fault injection (`RCCL_INJECT_FAULTS`) and the net-ib gate of
//! ROCm/rocm-systems PR 8512 (`RCCL_IB_FAULT_INJECTION`): check's rccl.build
//! names the multi-node fix as missing, as carried, and PASSes a build
//! without fault injection. And the USB4 net plugin's probe on real ELF
//! objects (no container: the probe script run here with the plugin's
//! folder on `LD_LIBRARY_PATH`): a plugin that loads and exports
//! `ncclNetPlugin_v7`, and one whose library is gone, as the loader says it.

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
/// ncclCommResume and holds the RCCL knob names `knobs` as RCCL keeps them
/// (string constants a function returns).
fn standin_image(tag: &str, full: bool, knobs: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let ctx = tmp.path();
    let site = ctx.join("opt/venv/lib/python3.12/site-packages");
    let torch = site.join("torch/lib");
    let sdk = site.join("_rocm_sdk_libraries/lib");
    std::fs::create_dir_all(&torch).unwrap();
    std::fs::create_dir_all(&sdk).unwrap();
    let mut rccl = if full {
        "int ncclCommInitRank(void) { return 0; }\nint ncclCommResume(void) { return 0; }\n"
    } else {
        "int ncclCommInitRank(void) { return 0; }\n"
    }
    .to_string();
    let list: Vec<String> = knobs.iter().map(|k| format!("\"{k}\"")).collect();
    rccl.push_str(&format!(
        "static const char *const knobs[] = {{ {} \"\" }};\nconst char *rcclKnob(int i) {{ return knobs[i]; }}\n",
        list.iter().map(|k| format!("{k},")).collect::<String>()
    ));
    cc(
        ctx,
        &sdk.join("librccl.so.1"),
        &rccl,
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

/// check's rccl.abi and rccl.build on the container `name`.
fn rccl_checks(name: &str) -> (Value, Value) {
    let (v, code) = common::run_json(&["check", name, "--engine", PODMAN, "--json"]);
    assert_eq!(code, 1, "no GPU here: check FAILs: {v:#}");
    (
        common::check(&v, "rccl.abi").clone(),
        common::check(&v, "rccl.build").clone(),
    )
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

    // The 7.14 packages' kind: fault injection, no net-ib gate.
    refresh(&standin_image("old", false, &["RCCL_INJECT_FAULTS"]));
    let (c, build) = rccl_checks(name);
    assert_eq!(build["status"], "WARN", "{build:#}");
    let s = build["summary"].as_str().unwrap();
    assert!(
        s.contains("_rocm_sdk_libraries/lib/librccl.so.1 has fault injection compiled in")
            && s.contains("lacks the multi-node fix"),
        "{s}"
    );
    assert_eq!(c["status"], "FAIL", "{c:#}");
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("_rocm_sdk_libraries/lib/librccl.so.1, which ")
            && summary.contains("torch/lib/libtorch_hip.so loads, lacks ncclCommResume"),
        "{summary}"
    );

    // Built after rocm-systems PRs 8484/8512, still with fault injection.
    refresh(&standin_image(
        "full",
        true,
        &["RCCL_INJECT_FAULTS", "RCCL_IB_FAULT_INJECTION"],
    ));
    let (c, build) = rccl_checks(name);
    assert_eq!(build["status"], "WARN", "{build:#}");
    let s = build["summary"].as_str().unwrap();
    assert!(
        s.contains("carries the multi-node fix") && s.contains("fault injection compiled in"),
        "{s}"
    );
    assert_eq!(c["status"], "PASS", "{c:#}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("defines every nccl*/rccl* symbol torch needs"),
        "{c:#}"
    );

    // A release build: no fault injection at all.
    refresh(&standin_image("release", true, &["NCCL_IB_HCA"]));
    let (c, build) = rccl_checks(name);
    assert_eq!(c["status"], "PASS", "{c:#}");
    assert_eq!(build["status"], "PASS", "{build:#}");
    assert!(
        build["summary"]
            .as_str()
            .unwrap()
            .contains("built without fault injection"),
        "{build:#}"
    );
    let out = run(&["rm", name, "--yes", "--engine", PODMAN]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cleanup("podman", &["hbx-check-rccl-prev"]);
}

/// The probe's plugin lines on real shared objects, loaded by python's
/// ctypes (dlopen with every symbol bound), as `halobox check` runs it.
#[test]
fn the_usb4_plugin_is_loaded_by_the_probe() {
    use halobox::check::probe;
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good");
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::create_dir_all(&broken).unwrap();
    let plugin =
        "struct net { const char *name; };\nstruct net ncclNetPlugin_v7 = { \"ODL_TB5\" };\n";
    cc(
        tmp.path(),
        &good.join("librccl-net-ODL_TB5.so"),
        plugin,
        &[],
    );
    // Needs libodl_tb5.so, which is then removed: the loader refuses it.
    cc(
        tmp.path(),
        &broken.join("libodl_tb5.so"),
        "int odl_tb5_open(void) { return 0; }\n",
        &[],
    );
    let needs = format!(
        "{plugin}int use(void) {{ extern int odl_tb5_open(void); return odl_tb5_open(); }}\n"
    );
    cc(
        tmp.path(),
        &broken.join("librccl-net-ODL_TB5.so"),
        &needs,
        &[&format!("-L{}", broken.display()), "-lodl_tb5"],
    );
    std::fs::remove_file(broken.join("libodl_tb5.so")).unwrap();
    let run = |dir: &Path| {
        let o = Command::new("sh")
            .arg("-c")
            .arg(probe::script())
            .env("LD_LIBRARY_PATH", dir)
            .env_remove("VIRTUAL_ENV")
            .output()
            .expect("sh");
        let p = probe::parse(&String::from_utf8_lossy(&o.stdout));
        assert!(
            p.complete && p.python.is_some(),
            "python3 is needed here: {p:?}"
        );
        p.net_plugins
            .into_iter()
            .find(|l| l.path.starts_with(dir.to_str().unwrap()))
            .unwrap_or_else(|| panic!("no plugin line for {}", dir.display()))
    };
    let seen = run(&good);
    assert_eq!(seen.load, Some(Ok(vec!["v7".to_string()])), "{seen:?}");
    let seen = run(&broken);
    match &seen.load {
        Some(Err(e)) => assert!(e.contains("libodl_tb5.so"), "{e}"),
        other => panic!("{other:?}"),
    }
}

//! The real-binaries tier: the RCCL checks and the GPU decoding run on AMD's
//! own files, fetched by `scripts/amd-binaries.sh` (scripts/test.sh runs it;
//! by hand: `sudo bash scripts/amd-binaries.sh`) and only read, never
//! loaded. `xla_rocm_plugin.so` of jax-rocm7-pjrt 0.12.0 (built for ROCm
//! 7.14.0) links librccl and holds 45 compressed offload bundles with
//! gfx1151; Debian's librccl1 5.4.3-3+b1 is RCCL 2.13.4 (uncompressed
//! bundles, an older ABI), 7.2.4-1~exp3 is RCCL 2.27.7 (a compressed bundle,
//! fault injection without the net-ib gate), neither with gfx1151;
//! rocm-bootstrap 0.3.0 is AMD's decoder of KFD's `gfx_target_version`.
//! The tests assert what a person reading these binaries sees.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use halobox::check::{Context, judge, probe};
use halobox::doctor::{Check, Status};
use serde_json::Value;

const CONSUMERS: &str = "containerfiles/rccl-consumers.sh";
const GATE: &str = "containerfiles/rccl-abi-check.sh";
const MARKERS: &str = "containerfiles/rccl-markers.sh";

/// The symbols the XLA plugin needs that RCCL 2.13.4 lacks (nm -D of both).
const MISSING_IN_2_13_4: [&str; 7] = [
    "ncclCommDeregister",
    "ncclCommInitRankConfig",
    "ncclCommInitRankScalable",
    "ncclCommRegister",
    "ncclCommSplit",
    "ncclMemAlloc",
    "ncclMemFree",
];

/// Where scripts/amd-binaries.sh put the files (its manifest.env).
struct Binaries {
    plugin: PathBuf,
    bootstrap: PathBuf,
    rccl_old: PathBuf,
    rccl_new: PathBuf,
    rccl_new_version: String,
    rccl_new_pinned: bool,
}

fn binaries() -> Binaries {
    let dir = std::env::var_os("HALOBOX_AMD_BINARIES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/halobox-amd-binaries"));
    let manifest = dir.join("manifest.env");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the real AMD binaries are not on this machine; run `sudo bash scripts/amd-binaries.sh {}` first (scripts/test.sh does)",
            manifest.display(),
            dir.display()
        )
    });
    let env: HashMap<&str, &str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect();
    let get = |k: &str| {
        env.get(k).map(|v| v.to_string()).unwrap_or_else(|| {
            panic!(
                "{} has no {k}: rerun scripts/amd-binaries.sh",
                manifest.display()
            )
        })
    };
    assert_eq!(
        (
            get("JAX_PJRT_VERSION").as_str(),
            get("RCCL_OLD_VERSION").as_str(),
            get("ROCM_BOOTSTRAP_VERSION").as_str()
        ),
        ("0.12.0", "5.4.3-3+b1", "0.3.0"),
        "{} was written for other pins: rerun scripts/amd-binaries.sh",
        manifest.display()
    );
    let b = Binaries {
        plugin: get("XLA_PLUGIN").into(),
        bootstrap: get("ROCM_BOOTSTRAP").into(),
        rccl_old: get("RCCL_OLD").into(),
        rccl_new: get("RCCL_NEW").into(),
        rccl_new_version: get("RCCL_NEW_VERSION"),
        rccl_new_pinned: get("RCCL_NEW_PINNED") == "1",
    };
    for p in [&b.plugin, &b.rccl_old, &b.rccl_new] {
        assert!(
            p.is_file(),
            "{} is missing: rerun scripts/amd-binaries.sh",
            p.display()
        );
    }
    b
}

fn script(path: &str, args: &[&Path]) -> Output {
    Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("bash {path}: {e}"))
}

fn out(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The RCCL release a librccl prints in its banner (`RCCL version 2.27.7`).
fn rccl_release(lib: &Path) -> (u32, u32, u32) {
    let bytes = std::fs::read(lib).unwrap();
    let tag = b"RCCL version ";
    let found = bytes
        .windows(tag.len() + 1)
        .enumerate()
        .filter(|(_, w)| w.starts_with(tag) && w[tag.len()].is_ascii_digit())
        .map(|(i, _)| {
            let rest = &bytes[i + tag.len()..];
            let end = rest
                .iter()
                .position(|c| !(c.is_ascii_digit() || *c == b'.'))
                .unwrap_or(rest.len());
            String::from_utf8_lossy(&rest[..end]).into_owned()
        })
        .next()
        .unwrap_or_else(|| panic!("{} has no `RCCL version N.N.N` banner", lib.display()));
    let n: Vec<u32> = found.split('.').filter_map(|p| p.parse().ok()).collect();
    assert_eq!(n.len(), 3, "{found}");
    (n[0], n[1], n[2])
}

/// What the tests expect of the experimental RCCL: 2.27.7 for the pinned
/// package; for a newer one (the pin gone from Debian experimental) a
/// release at least that new, which must still define every symbol.
fn check_new_release(b: &Binaries) {
    let release = rccl_release(&b.rccl_new);
    if b.rccl_new_pinned {
        assert_eq!(
            (b.rccl_new_version.as_str(), release),
            ("7.2.4-1~exp3", (2, 27, 7))
        );
    } else {
        assert!(
            release >= (2, 27, 7),
            "librccl1 {} (taken for the gone 7.2.4-1~exp3) is RCCL {release:?}, older than 2.27.7",
            b.rccl_new_version
        );
    }
}

#[test]
fn the_consumer_finder_finds_the_xla_plugin_and_nothing_in_the_rccl_packages() {
    let b = binaries();
    let dir = b.plugin.parent().unwrap();
    let o = script(CONSUMERS, &[dir]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("{}\n", b.plugin.display())
    );
    // librccl itself is never its own consumer.
    let root = b.rccl_new.parent().unwrap();
    let o = script(CONSUMERS, &[root]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("links librccl"), "{}", out(&o));
}

#[test]
fn the_gate_fails_against_rccl_2_13_4_naming_the_missing_symbols() {
    let b = binaries();
    assert_eq!(rccl_release(&b.rccl_old), (2, 13, 4));
    let o = script(GATE, &[&b.plugin, Path::new("--"), &b.rccl_old]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.contains("lacks 7 of the 23 nccl*/rccl* symbol(s)"),
        "{text}"
    );
    let named: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("  ")).collect();
    assert_eq!(named, MISSING_IN_2_13_4, "{text}");
}

#[test]
fn the_gate_passes_against_rccl_2_27_7() {
    let b = binaries();
    check_new_release(&b);
    let o = script(GATE, &[&b.plugin, Path::new("--"), &b.rccl_new]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains("defines all 23 nccl*/rccl* symbol(s)"),
        "{}",
        out(&o)
    );
    // No ncclCommResume in either (the symbol torch's libtorch_hip.so needs,
    // the reason the gate exists): what nm shows, and what the gate says
    // when a consumer needs it is the stand-ins' test (tests/rccl_scripts.rs).
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&b.rccl_new)
        .output()
        .expect("nm (binutils)");
    assert!(nm.status.success());
    let defined = String::from_utf8_lossy(&nm.stdout);
    assert!(
        defined.contains(" ncclCommInitRank\n"),
        "nm -D lists no ncclCommInitRank"
    );
    if b.rccl_new_pinned {
        assert!(
            !defined.contains(" ncclCommResume"),
            "2.27.7 has no ncclCommResume"
        );
    }
}

#[test]
fn the_marker_check_counts_the_plugins_45_gfx1151_code_objects_and_none_in_debians_rccl() {
    let b = binaries();
    // 45 bundles of 27 GPU targets each; `CCOB` once more as an x86
    // immediate (not a bundle). Every target id is in the plugin twice
    // (entry id and amdhsa.target), so string hits would say 90.
    let o = script(MARKERS, &[&b.plugin]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "no NET/IB in an XLA plugin: {}",
        out(&o)
    );
    assert!(
        out(&o).contains(": 45 gfx1151 code object(s) in 45 of 45 offload bundle(s) (45 compressed, 0 uncompressed; 1215 code object(s) for any GPU target), 0 unreadable, 1 bundle magic(s) not a bundle, 0 NET/IB marker(s)"),
        "{}",
        out(&o)
    );
    let o = script(MARKERS, &[&b.plugin, Path::new("gfx1100")]);
    assert!(
        out(&o).contains(": 45 gfx1100 code object(s)"),
        "{}",
        out(&o)
    );

    // RCCL 2.13.4: one uncompressed bundle, no gfx1151, NET/IB.
    let o = script(MARKERS, &[&b.rccl_old]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.contains(
            ": 0 gfx1151 code object(s) in 0 of 1 offload bundle(s) (0 compressed, 1 uncompressed;"
        ),
        "{text}"
    );
    assert!(text.contains("has no gfx1151 code objects"), "{text}");
    assert!(!text.contains("has no NET/IB"), "{text}");
    assert!(text.contains("no fault injection compiled in"), "{text}");
    // It does hold code objects, for other targets.
    let o = script(MARKERS, &[&b.rccl_old, Path::new("gfx90a")]);
    assert!(
        out(&o).contains(": 1 gfx90a code object(s) in 1 of 1 offload bundle(s) (0 compressed, 1 uncompressed; 10 code object(s) for any GPU target)"),
        "{}",
        out(&o)
    );

    // RCCL 2.27.7: compressed, no gfx1151, NET/IB, fault injection without
    // the net-ib gate.
    let o = script(MARKERS, &[&b.rccl_new]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let text = out(&o);
    assert!(
        text.contains(
            ": 0 gfx1151 code object(s) in 0 of 1 offload bundle(s) (1 compressed, 0 uncompressed;"
        ),
        "{text}"
    );
    assert!(
        text.contains("0 unreadable, 0 bundle magic(s) not a bundle"),
        "{text}"
    );
    assert!(!text.contains("has no NET/IB"), "{text}");
    if b.rccl_new_pinned {
        assert!(
            text.contains("fault injection compiled in without the net-ib gate"),
            "{text}"
        );
    }
}

#[test]
fn the_committed_bundle_fixture_is_cut_from_the_plugin() {
    let b = binaries();
    let fixture = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/amd/xla-plugin-ccob.bin"),
    )
    .unwrap();
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&b.plugin).unwrap();
    f.seek(SeekFrom::Start(120_709_120)).unwrap();
    let mut cut = vec![0u8; fixture.len()];
    f.read_exact(&mut cut).unwrap();
    assert_eq!(cut.len(), 3278);
    assert!(
        cut == fixture,
        "tests/fixtures/amd/xla-plugin-ccob.bin is not bytes 120709120.. of the plugin"
    );
}

/// `halobox check`'s probe and judgement on one real librccl: the probe
/// script runs as it does in a container, in a mount namespace whose /opt
/// holds the image's marker script and `lib` as /opt/rccl/librccl.so.1
/// (bind-mounted; root only, as scripts/test.sh runs).
fn check_rccl(lib: &Path) -> (Check, Check) {
    let opt = tempfile::tempdir().unwrap();
    let bin = opt.path().join("halobox/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(MARKERS),
        bin.join("rccl-markers.sh"),
    )
    .unwrap();
    std::fs::create_dir_all(opt.path().join("rccl")).unwrap();
    std::fs::write(opt.path().join("rccl/librccl.so.1"), b"").unwrap();
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$2" "$1/rccl/librccl.so.1" && mount --rbind "$1" /opt && exec sh -c "$3""#)
        .args(["sh"])
        .arg(opt.path())
        .arg(lib)
        .arg(probe::script())
        .env_remove("VIRTUAL_ENV")
        .output()
        .expect("unshare (util-linux)");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("@@hbx rccl.build /opt/rccl/librccl.so.1 "),
        "the probe saw no /opt/rccl/librccl.so.1 (unshare and mount need root): {}",
        out(&o)
    );
    let p = probe::parse(&stdout);
    let labels = HashMap::new();
    let ctx = Context {
        name: "real-rccl",
        backend: Some("podman"),
        memlock_asked: None,
        labels: &labels,
        ray_pin: None,
        host: None,
    };
    let checks = judge(&p, &ctx);
    let find = |id: &str| {
        checks
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no {id} in {checks:?}"))
            .clone()
    };
    (find("rccl.build"), find("rccl.code_objects"))
}

#[test]
fn halobox_check_warns_on_2_27_7s_fault_injection_and_counts_no_gfx1151_code_objects() {
    let b = binaries();
    check_new_release(&b);
    let (build, objects) = check_rccl(&b.rccl_new);
    assert_eq!(build.status, Status::Warn, "{build:?}");
    assert!(
        build.summary.contains(
            "/opt/rccl/librccl.so.1 has fault injection compiled in without the net-ib gate"
        ),
        "{build:?}"
    );
    assert_eq!(objects.status, Status::Fail, "{objects:?}");
    assert!(
        objects.summary.starts_with(
            "/opt/rccl/librccl.so.1 has no gfx1151 code objects (1 offload bundle(s) read)"
        ),
        "{objects:?}"
    );

    // RCCL 2.13.4: built without fault injection; no gfx1151 either.
    let (build, objects) = check_rccl(&b.rccl_old);
    assert_eq!(build.status, Status::Pass, "{build:?}");
    assert_eq!(objects.status, Status::Fail, "{objects:?}");
}

const AMD_DECODER: &str = r#"
import json, sys, types
from pathlib import Path
# rocm_bootstrap's own test fixtures import pytest only for its decorators.
sys.modules.setdefault("pytest", types.SimpleNamespace(fixture=lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)))
from rocm_bootstrap import _platform, detect
from rocm_bootstrap.targets import ALL_TARGETS, packaging_chain, parse_gfx_target_version
from rocm_bootstrap.tests.conftest import kfd_gpu_properties, _KFD_CPU_PROPERTIES

def amd(target):
    t, sub, fam = packaging_chain(target)
    return {"target": target.name, "sub_family": sub.key, "family": fam.key}

mode, args = sys.argv[1], sys.argv[2:]
out = {}
if mode == "sysroots":
    for root in args:
        _platform.KFD_TOPOLOGY = Path(root) / "sys/class/kfd/kfd/topology/nodes"
        out[root] = {str(g.node_id): amd(g.target) for g in detect.detect_gpus()}
elif mode == "versions":
    for v in args:
        out[v] = amd(parse_gfx_target_version(int(v)))
elif mode == "fixtures":
    for t in ALL_TARGETS:
        root = Path(args[0]) / t.name
        nodes = root / "sys/class/kfd/kfd/topology/nodes"
        (nodes / "0").mkdir(parents=True)
        (nodes / "0" / "properties").write_text(_KFD_CPU_PROPERTIES)
        (nodes / "1").mkdir()
        (nodes / "1" / "properties").write_text(kfd_gpu_properties(t))
        out[str(root)] = {"1": amd(parse_gfx_target_version(t.gfx_target_version))}
print(json.dumps(out))
"#;

/// AMD's decoding (rocm-bootstrap) of `mode` over `args`.
fn amd_decoder(b: &Binaries, mode: &str, args: &[String]) -> Value {
    let o = Command::new("python3")
        .args(["-c", AMD_DECODER, mode])
        .args(args)
        .env("PYTHONPATH", &b.bootstrap)
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
        .output()
        .expect("python3");
    assert!(o.status.success(), "rocm-bootstrap: {}", out(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// halobox's gfx target of each GPU node of a sysroot (`detect --json`).
fn halobox_targets(root: &str) -> HashMap<String, String> {
    let (v, code) = common::run_json(&["detect", "--sysroot", root, "--json"]);
    assert_eq!(code, 0, "{v:#}");
    v["gpu"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["gfx_target_version"].as_u64().unwrap_or(0) != 0)
        .map(|n| {
            (
                n["id"].to_string(),
                n["gfx_target"].as_str().unwrap_or("none").to_string(),
            )
        })
        .collect()
}

fn same_targets(amd: &Value, root: &str) -> usize {
    let ours = halobox_targets(root);
    let theirs: HashMap<String, String> = amd[root]
        .as_object()
        .unwrap_or_else(|| panic!("AMD's decoder gave nothing for {root}"))
        .iter()
        .map(|(k, v)| (k.clone(), v["target"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(ours, theirs, "{root}: halobox's gfx targets against AMD's");
    ours.len()
}

#[test]
fn amds_decoder_agrees_with_halobox_on_every_kfd_node() {
    let b = binaries();
    // Every host snapshot the project has.
    let hosts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts");
    let mut roots: Vec<String> = std::fs::read_dir(&hosts)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.path().display().to_string())
        .collect();
    roots.sort();
    let amd = amd_decoder(&b, "sysroots", &roots);
    let gpus: usize = roots.iter().map(|r| same_targets(&amd, r)).sum();
    assert!(gpus >= 5, "only {gpus} GPU nodes in tests/fixtures/hosts");
    for r in &roots {
        for (_, t) in amd[r.as_str()].as_object().unwrap() {
            assert_eq!(
                (
                    t["target"].as_str(),
                    t["sub_family"].as_str(),
                    t["family"].as_str()
                ),
                (Some("gfx1151"), Some("gfx115x"), Some("gfx11")),
                "{r}"
            );
        }
    }

    // The detect snapshots (tests/snapshots): each node's recorded
    // gfx_target against AMD's decoding of its gfx_target_version.
    let snaps = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut recorded = Vec::new();
    for e in std::fs::read_dir(&snaps).unwrap().filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".detect.json.snap") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        let json = text.splitn(3, "---\n").nth(2).unwrap();
        let v: Value = serde_json::from_str(json).unwrap();
        for n in v["gpu"]["nodes"].as_array().unwrap() {
            let gtv = n["gfx_target_version"].as_u64().unwrap_or(0);
            if gtv != 0 {
                recorded.push((
                    name.clone(),
                    gtv,
                    n["gfx_target"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    assert!(
        !recorded.is_empty(),
        "no GPU node in tests/snapshots/*.detect.json.snap"
    );
    let versions: Vec<String> = recorded.iter().map(|(_, v, _)| v.to_string()).collect();
    let amd = amd_decoder(&b, "versions", &versions);
    for (snap, gtv, target) in &recorded {
        assert_eq!(
            amd[gtv.to_string()]["target"].as_str(),
            Some(target.as_str()),
            "{snap}: gfx_target_version {gtv}"
        );
    }

    // AMD's own fixtures: a KFD node of every target rocm-bootstrap knows
    // (gfx900 to gfx1251), written by its test helper.
    let tmp = tempfile::tempdir().unwrap();
    let amd = amd_decoder(&b, "fixtures", &[tmp.path().display().to_string()]);
    let roots: Vec<&String> = amd.as_object().unwrap().keys().collect();
    assert!(
        roots.len() >= 30,
        "rocm-bootstrap knows {} targets",
        roots.len()
    );
    for r in roots {
        same_targets(&amd, r);
    }
}

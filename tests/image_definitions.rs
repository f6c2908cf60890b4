//! The image definitions in images/ parse, pin every input, and match their
//! Containerfile; broken definitions fail with a message that names the problem.

mod common;

use std::path::Path;

use common::{halobox, run};
use halobox::config::{COMMUNITY_IMAGE, DEFAULT_IMAGE};
use halobox::image::definition::{self, inexact, is_commit, unpinned_image};

fn fixture_def(dir: &Path, body: &str) -> String {
    std::fs::copy(
        "tests/fixtures/images/multistage.Containerfile",
        dir.join("multistage.Containerfile"),
    )
    .unwrap();
    std::fs::copy("tests/fixtures/images/payload.txt", dir.join("payload.txt")).unwrap();
    let p = dir.join("multistage.toml");
    std::fs::write(&p, body).unwrap();
    p.display().to_string()
}

const GOOD: &str = r#"
name = "multistage"
containerfile = "multistage.Containerfile"
context = "."
include = ["multistage.Containerfile", "payload.txt"]
target = "final"
[images]
BASE = "localhost/halobox-test:1@sha256:16a98b96412e533f5851e04a1984e2dde72db705cc0fb29ff992f7c2b383e118"
[versions]
PAYLOAD_VERSION = "1.2.3"
"#;

#[test]
fn shipped_definitions_pin_everything() {
    let mut n = 0;
    for entry in std::fs::read_dir("images").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        n += 1;
        let def = definition::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let f = &def.file;
        assert!(!f.git.is_empty(), "{}: no git pins", path.display());
        for (k, g) in &f.git {
            assert!(is_commit(&g.commit), "{k}: {}", g.commit);
        }
        for (k, v) in &f.versions {
            assert!(inexact(v).is_none(), "{k} = {v}");
        }
        for (k, a) in &f.artifacts {
            assert_eq!(a.sha256.len(), 64, "{k}");
        }
        for (k, v) in &f.images {
            assert!(
                unpinned_image(v).is_none() && v.contains("@sha256:"),
                "{k} = {v}"
            );
        }
        for v in f.build_args().values() {
            let l = v.to_ascii_lowercase();
            assert!(
                l != "latest" && l != "head" && !l.ends_with(":latest"),
                "{v}"
            );
        }
        // Every ARG without a default is pinned (load checks it; say it here too).
        for (arg, has_default) in &def.parsed.args {
            assert!(*has_default || f.build_args().contains_key(arg), "{arg}");
        }
        let out = run(&["build", path.to_str().unwrap(), "--dry-run"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        n >= 3,
        "images/ should hold rccl-gfx1151, vllm-therock-gfx1151 and llama-cpp-gfx1151"
    );
    for name in ["rccl-gfx1151", "vllm-therock-gfx1151", "llama-cpp-gfx1151"] {
        assert!(Path::new(&format!("images/{name}.toml")).exists(), "{name}");
    }
}

#[test]
fn the_rccl_image_and_the_runtime_share_every_pin() {
    let rccl = definition::load(Path::new("images/rccl-gfx1151.toml")).unwrap();
    let runtime = definition::load(Path::new("images/vllm-therock-gfx1151.toml")).unwrap();
    assert_eq!(rccl.containerfile, runtime.containerfile);
    assert_eq!(rccl.file.include, runtime.file.include);
    assert_eq!(
        rccl.file.build_args(),
        runtime.file.build_args(),
        "CI builds the rccl stage from rccl-gfx1151.toml and the image reuses it from the cache: the pins must agree"
    );
}

#[test]
fn refresh_defaults_to_the_channel_this_project_publishes() {
    let runtime = definition::load(Path::new("images/vllm-therock-gfx1151.toml")).unwrap();
    let publish = runtime
        .file
        .publish
        .expect("[publish] in vllm-therock-gfx1151.toml");
    assert_eq!(DEFAULT_IMAGE, publish.repository);
    assert_ne!(DEFAULT_IMAGE, COMMUNITY_IMAGE);
    let workflow = std::fs::read_to_string(".github/workflows/publish.yml").unwrap();
    assert!(
        workflow.contains(".publish.repository"),
        "publish.yml pushes where the definition says"
    );
    assert!(
        !workflow.contains("add-layer"),
        "publish.yml builds the image with its one RCCL; nothing is layered on top"
    );
    let readme = std::fs::read_to_string("README.md").unwrap();
    assert!(readme.contains(DEFAULT_IMAGE) && readme.contains(COMMUNITY_IMAGE));
}

#[test]
fn the_fixture_loads_and_resolves() {
    let tmp = tempfile::tempdir().unwrap();
    let p = fixture_def(tmp.path(), GOOD);
    let out = halobox()
        .args(["build", &p, "--dry-run", "--json", "--tag", "localhost/x:1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["args"]["BASE"],
        "localhost/halobox-test:1@sha256:16a98b96412e533f5851e04a1984e2dde72db705cc0fb29ff992f7c2b383e118"
    );
    assert_eq!(v["target"], "final");
    assert_eq!(v["tags"][0], "localhost/x:1");
    assert!(v["labels"]["org.opencontainers.image.created"].is_string());
}

fn fails_with(body: &str, extra: &[&str], needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let p = fixture_def(tmp.path(), body);
    let mut args = vec!["build", p.as_str(), "--dry-run"];
    args.extend_from_slice(extra);
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in:\n{err}"
    );
}

#[test]
fn bad_definitions_say_what_is_wrong() {
    fails_with(
        &format!("colour = \"red\"\n{GOOD}"),
        &[],
        "unknown field `colour`",
    );
    fails_with(
        &GOOD.replace("[versions]\nPAYLOAD_VERSION = \"1.2.3\"\n", ""),
        &[],
        "missing pin",
    );
    fails_with(
        &GOOD.replace("1.2.3", "latest"),
        &[],
        "versions.PAYLOAD_VERSION",
    );
    fails_with(
        &GOOD.replace(
            "@sha256:16a98b96412e533f5851e04a1984e2dde72db705cc0fb29ff992f7c2b383e118",
            "",
        ),
        &[],
        "images.BASE = \"localhost/halobox-test:1\": has no digest",
    );
    fails_with(
        &GOOD.replace("halobox-test:1@", "halobox-test:latest@"),
        &[],
        "images.BASE",
    );
    fails_with(
        &format!("{GOOD}\n[git.X]\nrepo = \"https://example.org/x\"\ncommit = \"HEAD\"\n"),
        &[],
        "not a full 40-hex commit SHA",
    );
    fails_with(
        &format!("{GOOD}\n[artifacts.T]\nurl = \"https://example.org/t.tgz\"\nsha256 = \"abc\"\n"),
        &[],
        "artifacts.T.sha256",
    );
    fails_with(
        &GOOD.replace("\"final\"", "\"nope\""),
        &[],
        "target \"nope\" is not a stage",
    );
    fails_with(
        GOOD,
        &["--build-arg", "BASE=busybox:latest"],
        "--build-arg BASE",
    );
    fails_with(
        GOOD,
        &["--build-arg", "NOT_AN_ARG=1"],
        "declares no `ARG NOT_AN_ARG`",
    );
    let out = run(&["build", "no-such-image", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("images/no-such-image.toml"));
}

#[test]
fn the_image_carries_what_check_reads_and_ci_checks_it_on_a_node() {
    let containerfile =
        std::fs::read_to_string("containerfiles/vllm-therock-gfx1151.Containerfile").unwrap();
    for (label, arg) in [
        (halobox::check::LABEL_RCCL_SHA256, "RCCL_SHA256"),
        (halobox::check::LABEL_RAY_VERSION, "RAY_VERSION"),
    ] {
        assert!(
            containerfile.contains(&format!("{label}=\"${{{arg}}}\"")),
            "the runtime stage labels {label} from {arg}"
        );
    }
    let runtime = definition::load(Path::new("images/vllm-therock-gfx1151.toml")).unwrap();
    let ray_venv = std::fs::read_to_string("scripts/ray-venv.sh").unwrap();
    let ray = &runtime.file.versions["RAY_VERSION"];
    assert!(
        ray_venv.contains(&format!("RAY_VERSION={ray}\n")),
        "the image's Ray ({ray}) is the Ray the tests run (scripts/ray-venv.sh)"
    );
    let workflow = std::fs::read_to_string(".github/workflows/publish.yml").unwrap();
    for needle in [
        "runs-on: [self-hosted, linux, x64, strix-halo]",
        "if: ${{ vars.HALOBOX_STRIX_RUNNER == 'true' }}",
        "if: ${{ vars.HALOBOX_STRIX_RUNNER != 'true' }}",
        "bin/halobox check \"$NAME\"",
        "needs: [publish, verify-on-strix-halo]",
        "needs: [publish-llama-cpp, verify-llama-cpp-on-strix-halo]",
        "--promote-digest \"$DIGEST\" --channel \"$CHANNEL\"",
        "--unverified",
    ] {
        assert!(workflow.contains(needle), "publish.yml lacks {needle}");
    }
    assert_eq!(
        workflow.matches("halobox publish localhost/").count(),
        workflow.matches("--candidate --to").count(),
        "publish.yml pushes candidates only: a channel moves by --promote-digest once proven"
    );
}

#[test]
fn the_llama_cpp_image_shares_the_gpu_stack_and_carries_its_contract() {
    let llama = definition::load(Path::new("images/llama-cpp-gfx1151.toml")).unwrap();
    let vllm = definition::load(Path::new("images/vllm-therock-gfx1151.toml")).unwrap();
    let (l, v) = (llama.file.build_args(), vllm.file.build_args());
    for pin in [
        "FEDORA_IMAGE",
        "ROCM_VERSION",
        "THEROCK_URL",
        "THEROCK_SHA256",
        "RDMA_CORE_MIN",
        "RDMA_CORE_TAG",
    ] {
        assert_eq!(
            l.get(pin),
            v.get(pin),
            "{pin}: one ROCm and rdma-core for both engines"
        );
    }
    let git = &llama.file.git["LLAMA_CPP"];
    assert_eq!(git.repo, "https://github.com/ggml-org/llama.cpp");
    let script = std::fs::read_to_string("scripts/llama-cpp.sh").unwrap();
    assert!(
        script.contains(&format!("llama.cpp {}", &git.commit[..7])),
        "the image's llama.cpp ({}) is the one the tests' CPU builds vendor (scripts/llama-cpp.sh)",
        git.commit
    );
    assert_eq!(
        llama.file.publish.as_ref().unwrap().repository,
        "ghcr.io/halobox/llama-cpp-gfx1151"
    );
    let containerfile =
        std::fs::read_to_string("containerfiles/llama-cpp-gfx1151.Containerfile").unwrap();
    for needle in [
        "-DGGML_HIP=ON",
        "-DGPU_TARGETS=gfx1151",
        "-DAMDGPU_TARGETS=gfx1151",
        "-DGGML_RPC=ON",
        "-DGGML_RPC_RDMA=ON",
        &format!("{}=\"llama.cpp\"", halobox::check::LABEL_ENGINE),
        &format!(
            "{}=\"${{LLAMA_CPP_COMMIT}}\"",
            halobox::check::LABEL_LLAMA_CPP_COMMIT
        ),
    ] {
        assert!(
            containerfile.contains(needle),
            "the Containerfile lacks {needle}"
        );
    }
    let workflow = std::fs::read_to_string(".github/workflows/publish.yml").unwrap();
    for needle in [
        "halobox build llama-cpp-gfx1151 --dry-run",
        "halobox build llama-cpp-gfx1151 --tag localhost/llama-cpp-gfx1151:ci",
        "halobox publish localhost/llama-cpp-gfx1151:ci",
    ] {
        assert!(workflow.contains(needle), "publish.yml lacks {needle}");
    }
}

/// The vLLM the image builds is the vLLM the serve tests run: VLLM_VERSION of
/// the runtime definition is the one place it is written, scripts/vllm-venv.sh
/// reads it, and the sdist the image downloads is that version.
#[test]
fn the_image_and_the_serve_tests_run_one_vllm() {
    let runtime = definition::load(Path::new("images/vllm-therock-gfx1151.toml")).unwrap();
    let version = runtime
        .file
        .versions
        .get("VLLM_VERSION")
        .expect("VLLM_VERSION in images/vllm-therock-gfx1151.toml")
        .clone();
    let out = std::process::Command::new("bash")
        .args(["scripts/vllm-venv.sh", "--version"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        version,
        "scripts/vllm-venv.sh (the serve tests' vLLM) and the image must install one vLLM"
    );
    let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
    assert!(
        parts[..2] >= [0, 32][..],
        "the image's vLLM {version} is older than the 0.32 the serve tests prove"
    );
    let sdist = &runtime.file.artifacts["VLLM"];
    assert!(
        sdist.url.ends_with(&format!("/vllm-{version}.tar.gz")),
        "[artifacts.VLLM] {} is not vLLM {version}'s source distribution",
        sdist.url
    );
    assert!(
        !runtime.file.git.contains_key("VLLM"),
        "vLLM is pinned once, by VLLM_VERSION and its sdist"
    );
    let containerfile =
        std::fs::read_to_string("containerfiles/vllm-therock-gfx1151.Containerfile").unwrap();
    for needle in [
        "grep -qx \"Version: ${VLLM_VERSION}\" vllm/PKG-INFO",
        "io.halobox.vllm.version=\"${VLLM_VERSION}\"",
    ] {
        assert!(
            containerfile.contains(needle),
            "the Containerfile lacks {needle}"
        );
    }
}

/// `halobox check`'s rdma.core threshold is the image's `RDMA_CORE_MIN`, in
/// every definition, and the tag the image builds is at least that release.
#[test]
fn check_and_the_image_share_one_rdma_core_floor() {
    let (major, minor) = halobox::check::IRDMA_RDMA_CORE_MIN;
    let floor = format!("{major}.{minor}");
    for name in ["vllm-therock-gfx1151", "rccl-gfx1151", "llama-cpp-gfx1151"] {
        let def = definition::load(Path::new(&format!("images/{name}.toml"))).unwrap();
        let v = &def.file.versions;
        assert_eq!(
            v["RDMA_CORE_MIN"], floor,
            "{name}: RDMA_CORE_MIN and `halobox check`'s rdma.core threshold must be one number"
        );
        let tag = v["RDMA_CORE_TAG"].trim_start_matches('v');
        let parse = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap()).collect() };
        assert!(
            parse(tag) >= parse(&floor),
            "{name}: RDMA_CORE_TAG {tag} is older than RDMA_CORE_MIN {floor}"
        );
    }
}

//! What the image's Python stack does in the container: torch sees the GPU,
//! amdsmi (how vLLM finds ROCm), vLLM, the RCCL torch loads is the image's
//! own (stock or patched, as its labels say), and Ray is the pinned version.

use super::probe::{Probe, PythonExit};
use super::{Context, LABEL_RAY_VERSION, LABEL_RCCL_SHA256, tail};
use crate::doctor::Check;

const IMAGE_FIX: &str =
    "use halobox's image (refresh's default, built from images/vllm-therock-gfx1151.toml): ";

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    vec![
        torch(p, ctx),
        torch_nccl(p, ctx),
        amdsmi(p, ctx),
        vllm(p, ctx),
        rccl(p, ctx),
        ray(p, ctx),
    ]
}

fn image_fix(ctx: &Context) -> String {
    format!("{IMAGE_FIX}{}", ctx.recreate())
}

/// The full reason goes with torch, the first Python check.
const NO_PYTHON: &str = "no python in the container (looked for $VIRTUAL_ENV/bin/python3, /opt/venv/bin/python3, /opt/venv/bin/python and python3 on PATH)";
/// The reason the later Python checks give.
const NO_PYTHON_SEE_TORCH: &str = "no python in the container (see torch)";

/// Why a Python part printed nothing: it crashed, timed out or never ran.
fn silent(part: &str, exit: Option<&PythonExit>) -> String {
    match exit {
        Some(e) if e.code == 124 => format!("python timed out (120 s) in its {part} part"),
        Some(e) if e.code > 128 => format!(
            "python died of signal {} in its {part} part: {}",
            e.code - 128,
            e.tail
        ),
        Some(e) => format!("python exited {} in its {part} part: {}", e.code, e.tail),
        None => format!("the probe did not reach its {part} part"),
    }
}

/// What the Python part `id` reported, or the check that says why there is
/// nothing (no python: SKIP; it printed nothing: FAIL).
fn reported<'a, T>(
    p: &Probe,
    ctx: &Context,
    id: &str,
    seen: &'a Option<T>,
    no_python: &str,
) -> Result<&'a T, Check> {
    if p.python.is_none() {
        return Err(Check::skip(id, no_python));
    }
    seen.as_ref()
        .ok_or_else(|| Check::fail(id, silent(id, p.python_exit(id)), image_fix(ctx)))
}

fn torch(p: &Probe, ctx: &Context) -> Check {
    let id = "torch";
    let t = match reported(p, ctx, id, &p.torch, NO_PYTHON) {
        Ok(t) => t,
        Err(c) => return c,
    };
    if let Some(e) = &t.import_error {
        return Check::fail(id, format!("import torch: {e}"), image_fix(ctx));
    }
    let version = t.version.as_deref().unwrap_or("?");
    let Some(hip) = &t.hip else {
        return Check::fail(
            id,
            format!("torch {version} is not a ROCm build (torch.version.hip is None)"),
            image_fix(ctx),
        );
    };
    let this = format!("torch {version} (HIP {hip})");
    if t.cuda != Some(true) {
        let err = t
            .cuda_error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        return Check::fail(
            id,
            format!("{this} imports, but torch.cuda.is_available() is not True{err}"),
            "fix the gpu, devices and groups checks above first (torch needs /dev/kfd and the render node, openable)",
        );
    }
    let arch = t.arch.as_deref().unwrap_or("?");
    let device = t.device.as_deref().unwrap_or("?");
    let count = t.device_count.unwrap_or(0);
    let sees = format!("{this} sees {count} GPU: {device} ({arch})");
    if arch.split(':').next() == Some("gfx1151") {
        Check::pass(id, sees)
    } else {
        Check::fail(
            id,
            format!("{sees}, not gfx1151"),
            "unset HSA_OVERRIDE_GFX_VERSION (see env) and run it on a Strix Halo node",
        )
    }
}

fn amdsmi(p: &Probe, ctx: &Context) -> Check {
    let id = "amdsmi";
    let a = match reported(p, ctx, id, &p.amdsmi, NO_PYTHON_SEE_TORCH) {
        Ok(a) => a,
        Err(c) => return c,
    };
    if let Some(e) = &a.import_error {
        return Check::fail(
            id,
            format!("import amdsmi: {e}: vLLM detects ROCm through amdsmi and would not select it"),
            format!(
                "pip install /opt/rocm/share/amd_smi   # ROCm's amdsmi package, into the image's venv\n# or {}",
                image_fix(ctx)
            ),
        );
    }
    if let Some(e) = &a.init_error {
        return Check::fail(
            id,
            format!("import amdsmi works, amdsmi_init() fails: {e}: vLLM would not select ROCm"),
            "amdsmi needs /dev/kfd and /dev/dri (see devices, groups and gpu above)",
        );
    }
    match a.processors {
        Some(n) if n > 0 => Check::pass(
            id,
            format!("import amdsmi works and it sees {n} GPU (how vLLM detects ROCm)"),
        ),
        _ => Check::fail(
            id,
            "amdsmi sees no GPU: vLLM would not select ROCm",
            "amdsmi needs /dev/kfd and /dev/dri (see devices, groups and gpu above)",
        ),
    }
}

fn vllm(p: &Probe, ctx: &Context) -> Check {
    let id = "vllm";
    let v = match reported(p, ctx, id, &p.vllm, NO_PYTHON_SEE_TORCH) {
        Ok(v) => v,
        Err(c) => return c,
    };
    if let Some(e) = &v.import_error {
        return Check::fail(id, format!("import vllm: {e}"), image_fix(ctx));
    }
    let version = v.version.as_deref().unwrap_or("?");
    // `RocmPlatform`: vllm/platforms/rocm.py of vLLM v0.32.0 (the version of
    // images/vllm-therock-gfx1151.toml), the class `current_platform` is on ROCm.
    match v.platform.as_deref() {
        Some("RocmPlatform") | None => Check::pass(
            id,
            format!(
                "vllm {version} imports{}",
                if v.platform.is_some() {
                    ", platform ROCm"
                } else {
                    ""
                }
            ),
        ),
        Some(other) => Check::fail(
            id,
            format!("vllm {version} imports but picks the platform {other}, not ROCm"),
            "vLLM selects ROCm when amdsmi sees a GPU: fix amdsmi (and gpu) above",
        ),
    }
}

fn torch_nccl(p: &Probe, ctx: &Context) -> Check {
    let id = "torch.nccl";
    let t = match reported(p, ctx, "torch", &p.torch, NO_PYTHON_SEE_TORCH) {
        Ok(t) => t,
        Err(c) => return Check { id: id.into(), ..c },
    };
    if t.import_error.is_some() {
        return Check::skip(id, "torch does not import (see torch)");
    }
    match &t.nccl {
        Some(Ok(true)) => Check::pass(id, "torch.distributed has NCCL (RCCL)"),
        Some(Ok(false)) => Check::fail(
            id,
            "torch.distributed.is_nccl_available() is False: vLLM cannot run tensor parallel across GPUs or nodes",
            image_fix(ctx),
        ),
        Some(Err(e)) => Check::fail(id, format!("import torch.distributed: {e}"), image_fix(ctx)),
        None => Check::fail(id, silent("torch", p.python_exit("torch")), image_fix(ctx)),
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

fn rccl(p: &Probe, ctx: &Context) -> Check {
    let id = "rccl";
    if p.python.is_none() {
        return Check::skip(id, format!("{NO_PYTHON_SEE_TORCH}: nothing loads RCCL"));
    }
    match &p.torch {
        Some(t) if t.import_error.is_none() => {}
        _ => {
            return Check::skip(
                id,
                "torch does not import (see torch), so it loaded no RCCL",
            );
        }
    }
    if p.rccl_loaded.is_empty() {
        return Check::fail(
            id,
            "torch loaded no librccl (ROCm torch links librccl.so.1): tensor parallelism would have no collective library",
            image_fix(ctx),
        );
    }
    let loaded: Vec<String> = p
        .rccl_loaded
        .iter()
        .map(|r| {
            format!(
                "{} (sha256 {})",
                r.path,
                r.sha256.as_deref().map(short).unwrap_or("unreadable")
            )
        })
        .collect();
    let loaded_text = loaded.join(", ");
    let all = |want: &str| {
        p.rccl_loaded
            .iter()
            .all(|r| r.sha256.as_deref() == Some(want))
    };
    let hot_fix = "# a hot fix with `halobox image add-layer` must replace every path `find / -xdev -name 'librccl.so*'` lists in the image";
    if let Some(want) = ctx.label(LABEL_RCCL_SHA256) {
        return if all(want) {
            Check::pass(
                id,
                format!(
                    "torch loads {loaded_text}: the RCCL the image label {LABEL_RCCL_SHA256} names"
                ),
            )
        } else {
            Check::fail(
                id,
                format!(
                    "torch loads {loaded_text}, but the image label {LABEL_RCCL_SHA256} is {}: not the image's RCCL",
                    short(want)
                ),
                format!("{}\n{hot_fix}", image_fix(ctx)),
            )
        };
    }
    let label = if ctx.labels.contains_key(LABEL_RCCL_SHA256) {
        "is empty (a local build without --build-arg RCCL_SHA256)"
    } else {
        "is absent (an image halobox did not build)"
    };
    match &p.rccl_file {
        Some(recorded) if all(recorded) => Check::warn(
            id,
            format!(
                "torch loads {loaded_text}, the library the build recorded in /opt/halobox/librccl.so.1.sha256; the image label {LABEL_RCCL_SHA256} {label}, so it is not confirmed as CI's build"
            ),
            "publish through .github/workflows/publish.yml (it sets the label), or build with --build-arg RCCL_SHA256=<sha256 of the rccl stage's librccl.so.1>",
        ),
        Some(recorded) => Check::fail(
            id,
            format!(
                "torch loads {loaded_text}, but the image's build recorded {} in /opt/halobox/librccl.so.1.sha256",
                short(recorded)
            ),
            format!("{}\n{hot_fix}", image_fix(ctx)),
        ),
        None => Check::warn(
            id,
            format!(
                "torch loads {loaded_text}; the image label {LABEL_RCCL_SHA256} {label}: cannot tell whether it is the image's RCCL"
            ),
            image_fix(ctx),
        ),
    }
}

/// `ray, version 2.51.1` → `2.51.1`.
fn ray_version(out: &str) -> Option<&str> {
    let (_, rest) = out.rsplit_once("version ")?;
    rest.split_whitespace().next()
}

fn ray(p: &Probe, ctx: &Context) -> Check {
    let id = "ray";
    let (pin, source, strict) = match (ctx.label(LABEL_RAY_VERSION), ctx.ray_pin) {
        (Some(v), _) => (
            Some(v),
            format!("the image label {LABEL_RAY_VERSION}"),
            true,
        ),
        (None, Some(v)) => (
            Some(v),
            format!(
                "RAY_VERSION of this halobox's images/vllm-therock-gfx1151.toml (the image has no {LABEL_RAY_VERSION} label)"
            ),
            false,
        ),
        (None, None) => (None, String::new(), false),
    };
    let Some((path, out)) = &p.ray else {
        return Check::fail(
            id,
            "no ray in the container ($VIRTUAL_ENV/bin, /opt/venv/bin, PATH): `halobox cluster` runs Ray there",
            image_fix(ctx),
        );
    };
    let Some(have) = ray_version(out) else {
        return Check::fail(
            id,
            format!("`{path} --version` printed: {}", tail(out, 2)),
            image_fix(ctx),
        );
    };
    let Some(pin) = pin else {
        return Check::warn(
            id,
            format!("ray {have} ({path}); no pinned version to compare it with"),
            image_fix(ctx),
        );
    };
    let summary = format!("ray {have} ({path}), pinned {pin} by {source}");
    if have == pin {
        Check::pass(id, summary)
    } else if strict {
        Check::fail(
            id,
            format!("{summary}: the image's venv was changed after the build"),
            format!(
                "{}   # every node must run the same Ray; `pip install` in the container does not survive a refresh",
                ctx.recreate()
            ),
        )
    } else {
        Check::warn(
            id,
            format!("{summary}: every node of a cluster must run the same Ray"),
            image_fix(ctx),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::find;
    use crate::check::probe::parse;
    use crate::doctor::Status;
    use std::collections::HashMap;

    const SHA: &str = "5b0c1f3e9a3d4e0f8c2a7b6d9e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b";

    fn ctx(labels: &HashMap<String, String>) -> Context<'_> {
        Context {
            name: "vllm",
            backend: Some("toolbox"),
            memlock_asked: Some(-1),
            labels,
            ray_pin: Some("2.51.1"),
            host: None,
        }
    }

    fn node() -> Probe {
        parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"))
    }

    fn labelled(rccl: &str, ray: &str) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_RCCL_SHA256.to_string(), rccl.to_string()),
            (LABEL_RAY_VERSION.to_string(), ray.to_string()),
        ])
    }

    #[test]
    fn a_healthy_node_passes_every_python_check() {
        let labels = labelled(SHA, "2.51.1");
        for c in checks(&node(), &ctx(&labels)) {
            assert_eq!(c.status, Status::Pass, "{c:?}");
        }
        let r = rccl(&node(), &ctx(&labels));
        assert!(
            r.summary
                .contains("_rocm_sdk_libraries_gfx1151/lib/librccl.so.1 (sha256 5b0c1f3e9a3d)"),
            "{r:?}"
        );
    }

    #[test]
    fn another_rccl_than_the_label_fails() {
        let labels = labelled(&"0".repeat(64), "2.51.1");
        let r = rccl(&node(), &ctx(&labels));
        assert_eq!(r.status, Status::Fail);
        assert!(r.summary.contains("not the image's RCCL"), "{r:?}");
    }

    #[test]
    fn without_a_label_the_recorded_file_is_a_warning_and_nothing_is_unknown() {
        let empty = labelled("", "2.51.1");
        let r = rccl(&node(), &ctx(&empty));
        assert_eq!(r.status, Status::Warn);
        assert!(r.summary.contains("is empty"), "{r:?}");
        let none = HashMap::new();
        let mut p = node();
        p.rccl_file = None;
        let r = rccl(&p, &ctx(&none));
        assert_eq!(r.status, Status::Warn);
        assert!(r.summary.contains("is absent"), "{r:?}");
    }

    #[test]
    fn torch_distributed_without_nccl_fails() {
        let labels = HashMap::new();
        let mut p = node();
        assert_eq!(torch_nccl(&p, &ctx(&labels)).status, Status::Pass);
        p.torch.as_mut().unwrap().nccl = Some(Ok(false));
        let c = torch_nccl(&p, &ctx(&labels));
        assert_eq!(c.status, Status::Fail);
        assert!(c.summary.contains("is_nccl_available() is False"), "{c:?}");
        p.torch.as_mut().unwrap().import_error =
            Some("ImportError: undefined symbol: ncclCommResume".into());
        assert_eq!(torch_nccl(&p, &ctx(&labels)).status, Status::Skip);
    }

    #[test]
    fn ray_against_the_label_or_the_definition() {
        let labels = labelled(SHA, "2.50.0");
        let r = ray(&node(), &ctx(&labels));
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.summary
                .contains("pinned 2.50.0 by the image label io.halobox.ray.version")
        );
        let none = HashMap::new();
        let mut x = ctx(&none);
        let r = ray(&node(), &x);
        assert_eq!(r.status, Status::Pass);
        assert!(r.summary.contains("RAY_VERSION of this halobox's"), "{r:?}");
        x.ray_pin = Some("2.40.0");
        assert_eq!(ray(&node(), &x).status, Status::Warn);
        let mut p = node();
        p.ray = None;
        assert_eq!(ray(&p, &x).status, Status::Fail);
    }

    #[test]
    fn no_python_skips_with_the_reason() {
        let labels = HashMap::new();
        let p = parse(include_str!(
            "../../tests/fixtures/probe/podman-busybox.txt"
        ));
        let c = checks(&p, &ctx(&labels));
        for id in ["torch", "torch.nccl", "amdsmi", "vllm", "rccl"] {
            let x = find(&c, id);
            assert_eq!(x.status, Status::Skip, "{x:?}");
            assert!(x.summary.contains("no python in the container"), "{x:?}");
        }
        assert_eq!(find(&c, "ray").status, Status::Fail);
    }

    #[test]
    fn python_without_the_stack_fails_with_the_import_error() {
        let labels = HashMap::new();
        let p = parse(include_str!(
            "../../tests/fixtures/probe/python-no-torch.txt"
        ));
        let c = checks(&p, &ctx(&labels));
        let get = |id: &str| find(&c, id);
        assert_eq!(get("torch").status, Status::Fail);
        assert!(get("torch").summary.contains("No module named 'torch'"));
        assert!(
            get("amdsmi")
                .summary
                .contains("vLLM detects ROCm through amdsmi")
        );
        assert_eq!(get("vllm").status, Status::Fail);
        assert_eq!(get("rccl").status, Status::Skip);
    }

    #[test]
    fn a_crash_and_a_cpu_torch_are_named() {
        let labels = HashMap::new();
        let p = parse(
            "@@hbx python /opt/venv/bin/python3 3.12.11\n@@hbx py.exit torch 139 Segmentation fault\n@@hbx amdsmi.import ok\n@@hbx amdsmi.init error AmdSmiLibraryException: Error code: 8\n@@hbx end\n",
        );
        let t = torch(&p, &ctx(&labels));
        assert!(t.summary.contains("signal 11"), "{t:?}");
        assert_eq!(amdsmi(&p, &ctx(&labels)).status, Status::Fail);
        let p = parse(
            "@@hbx python /usr/bin/python3 3.12.3\n@@hbx torch.import ok 2.11.0+cpu -\n@@hbx torch.cuda False 0\n@@hbx end\n",
        );
        let t = torch(&p, &ctx(&labels));
        assert!(t.summary.contains("not a ROCm build"), "{t:?}");
    }
}

//! The llama.cpp image's contract (images/llama-cpp-gfx1151.toml): the
//! binaries `halobox serve --engine llama.cpp` runs, and the gfx1151 device
//! `llama-server --list-devices` must list where a GPU is visible.

use super::probe::Probe;
use super::{Context, GFX1151, LABEL_ENGINE, LABEL_LLAMA_CPP_COMMIT, tail};
use crate::doctor::Check;

/// Where halobox publishes the llama.cpp image (images/llama-cpp-gfx1151.toml).
const IMAGE: &str = "ghcr.io/halobox/llama-cpp-gfx1151";
/// The RPC server's names: the current one first, then the one before mid-2026.
const RPC_SERVERS: [&str; 2] = ["ggml-rpc-server", "rpc-server"];

/// True when the container is a llama.cpp one: its image says so, or it
/// holds a `llama-server`.
pub(super) fn is_llama_image(p: &Probe, ctx: &Context) -> bool {
    ctx.label(LABEL_ENGINE) == Some("llama.cpp") || p.llama_bin("llama-server").is_some()
}

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    vec![binaries(p, ctx), devices(p, ctx)]
}

fn image_fix(ctx: &Context) -> String {
    format!(
        "use halobox's llama.cpp image (built from images/llama-cpp-gfx1151.toml): {} --image {IMAGE}",
        ctx.recreate()
    )
}

fn binaries(p: &Probe, ctx: &Context) -> Check {
    let id = "llama.binaries";
    let server = p.llama_bin("llama-server");
    let rpc = RPC_SERVERS
        .iter()
        .find_map(|n| p.llama_bin(n).map(|path| (*n, path)));
    let (Some(server), Some((rpc_name, rpc_path))) = (server, rpc) else {
        let mut missing = Vec::new();
        if server.is_none() {
            missing.push("llama-server".to_string());
        }
        if rpc.is_none() {
            missing.push("ggml-rpc-server (or the older rpc-server)".to_string());
        }
        return Check::fail(
            id,
            format!(
                "missing: {} (looked on PATH and in /opt/llama.cpp/bin, /usr/local/bin, /app)",
                missing.join(", ")
            ),
            image_fix(ctx),
        );
    };
    let version = p
        .llama_version
        .as_deref()
        .map(|v| format!(" ({v})"))
        .unwrap_or_default();
    let summary = format!("llama-server at {server}{version}, {rpc_name} at {rpc_path}");
    if let (Some(commit), Some(v)) = (ctx.label(LABEL_LLAMA_CPP_COMMIT), &p.llama_version)
        && let Some(short) = built_from(v)
        && !commit.starts_with(short)
    {
        return Check::fail(
            id,
            format!("{summary}: built from {short}, but the image's label says {commit}"),
            image_fix(ctx),
        );
    }
    Check::pass(id, summary)
}

/// The commit in `version: 11312 (0c1e5709)`.
fn built_from(version: &str) -> Option<&str> {
    let inner = version.split_once('(')?.1.split_once(')')?.0.trim();
    (inner.len() >= 7 && inner.bytes().all(|b| b.is_ascii_hexdigit())).then_some(inner)
}

/// The devices of `llama-server --list-devices`: the `NAME: description`
/// lines after `Available devices:`.
fn listed(lines: &[String]) -> Vec<&str> {
    lines
        .iter()
        .skip_while(|l| !l.starts_with("Available devices"))
        .skip(1)
        .map(String::as_str)
        .filter(|l| {
            l.split_once(": ")
                .is_some_and(|(name, _)| !name.is_empty() && !name.contains(' '))
        })
        .collect()
}

fn devices(p: &Probe, ctx: &Context) -> Check {
    let id = "llama.devices";
    if p.llama_bin("llama-server").is_none() {
        return Check::skip(id, "no llama-server in the container (see llama.binaries)");
    }
    let out = p.llama_list.join("\n");
    match p.llama_list_exit {
        Some(0) => {}
        Some(124) => {
            return Check::fail(
                id,
                "llama-server --list-devices did not end within 120 s",
                format!(
                    "`halobox enter {} -- llama-server --list-devices` to look by hand",
                    ctx.name
                ),
            );
        }
        code => {
            let how = code.map_or("did not finish".to_string(), |c| format!("exited {c}"));
            return Check::fail(
                id,
                format!("llama-server --list-devices {how}: {}", tail(&out, 3)),
                image_fix(ctx),
            );
        }
    }
    let devices = listed(&p.llama_list);
    let shown = if devices.is_empty() {
        "none".to_string()
    } else {
        devices.join("; ")
    };
    if out.to_ascii_lowercase().contains("gfx1151") {
        return Check::pass(id, format!("llama-server lists gfx1151: {shown}"));
    }
    let gpu_visible = p
        .kfd_nodes
        .iter()
        .any(|n| n.gfx_target_version == Some(GFX1151));
    if !gpu_visible {
        return Check::skip(
            id,
            format!(
                "llama-server lists no gfx1151 device (devices: {shown}): no gfx1151 GPU is visible in the container (see gpu)"
            ),
        );
    }
    Check::fail(
        id,
        format!(
            "the container sees a gfx1151 GPU, but llama-server lists no gfx1151 device (devices: {shown}): its GPU backend is not built for gfx1151 or cannot open the GPU"
        ),
        image_fix(ctx),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::find;
    use crate::check::probe::parse;
    use crate::doctor::Status;
    use std::collections::HashMap;

    fn ctx(labels: &HashMap<String, String>) -> Context<'_> {
        Context {
            name: "llama",
            backend: Some("podman"),
            memlock_asked: Some(-1),
            labels,
            ray_pin: None,
            host: None,
        }
    }

    const HIP_NODE: &str = "@@hbx kfd yes\n@@hbx kfd.node 1 110501 128\n\
        @@hbx llama.bin llama-server /opt/llama.cpp/bin/llama-server\n\
        @@hbx llama.bin ggml-rpc-server /opt/llama.cpp/bin/ggml-rpc-server\n\
        @@hbx llama.bin rpc-server -\n\
        @@hbx llama.version version: 11312 (0c1e5709)\n\
        @@hbx llama.dev ggml_cuda_init: found 1 ROCm devices:\n\
        @@hbx llama.dev   Device 0: AMD Radeon Graphics, gfx1151 (0x1151), VMM: no, Wave Size: 32\n\
        @@hbx llama.dev Available devices:\n\
        @@hbx llama.dev   ROCm0: AMD Radeon Graphics (126976 MiB, 126000 MiB free)\n\
        @@hbx llama.list 0\n";

    #[test]
    fn a_node_with_the_hip_build_passes() {
        let labels = HashMap::from([(
            LABEL_LLAMA_CPP_COMMIT.to_string(),
            "0c1e57098bba43ac29e6e3b677cdceebdd22334f".to_string(),
        )]);
        let p = parse(HIP_NODE);
        assert!(is_llama_image(&p, &ctx(&labels)));
        let c = checks(&p, &ctx(&labels));
        let b = find(&c, "llama.binaries");
        assert_eq!(b.status, Status::Pass, "{b:?}");
        assert!(
            b.summary
                .contains("ggml-rpc-server at /opt/llama.cpp/bin/ggml-rpc-server")
        );
        let d = find(&c, "llama.devices");
        assert_eq!(d.status, Status::Pass, "{d:?}");
        assert!(d.summary.contains("ROCm0: AMD Radeon Graphics"), "{d:?}");
    }

    #[test]
    fn another_commit_than_the_label_fails() {
        let labels = HashMap::from([(LABEL_LLAMA_CPP_COMMIT.to_string(), "f".repeat(40))]);
        let c = binaries(&parse(HIP_NODE), &ctx(&labels));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.summary.contains("built from 0c1e5709"), "{c:?}");
    }

    #[test]
    fn the_older_rpc_server_name_is_enough_and_a_missing_one_fails() {
        let p = parse(&HIP_NODE.replace(
            "ggml-rpc-server /opt/llama.cpp/bin/ggml-rpc-server",
            "ggml-rpc-server -",
        ));
        let labels = HashMap::new();
        let c = binaries(&p, &ctx(&labels));
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.summary
                .contains("ggml-rpc-server (or the older rpc-server)")
        );
        assert!(c.fix.as_deref().unwrap().contains(IMAGE), "{c:?}");
        let p = parse(&format!(
            "{}@@hbx llama.bin rpc-server /usr/local/bin/rpc-server\n",
            HIP_NODE.replace(
                "ggml-rpc-server /opt/llama.cpp/bin/ggml-rpc-server",
                "ggml-rpc-server -"
            )
        ));
        assert_eq!(binaries(&p, &ctx(&labels)).status, Status::Pass);
    }

    #[test]
    fn without_a_gpu_the_list_is_reported_and_skipped_with_it_a_fail() {
        let labels = HashMap::from([(LABEL_ENGINE.to_string(), "llama.cpp".to_string())]);
        let cpu = "@@hbx kfd no\n@@hbx llama.bin llama-server /opt/llama.cpp/bin/llama-server\n\
            @@hbx llama.dev Available devices:\n@@hbx llama.list 0\n";
        let d = devices(&parse(cpu), &ctx(&labels));
        assert_eq!(d.status, Status::Skip, "{d:?}");
        assert!(
            d.summary.contains("devices: none") && d.summary.contains("no gfx1151 GPU is visible")
        );
        let gpu = format!("@@hbx kfd.node 1 110501 128\n{cpu}");
        assert_eq!(devices(&parse(&gpu), &ctx(&labels)).status, Status::Fail);
        let crashed = cpu.replace("llama.list 0", "llama.list 134");
        let d = devices(&parse(&crashed), &ctx(&labels));
        assert_eq!(d.status, Status::Fail);
        assert!(d.summary.contains("exited 134"), "{d:?}");
    }

    #[test]
    fn a_vllm_image_is_not_a_llama_one() {
        let labels = HashMap::new();
        let p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        assert!(!is_llama_image(&p, &ctx(&labels)));
    }
}

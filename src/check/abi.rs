//! The RCCL ABI gate of the image build, run inside the container: does the
//! librccl that `libtorch_hip.so` loads define every `nccl*`/`rccl*` symbol
//! it needs? (A librccl that lacks one makes `import torch` fail with
//! "undefined symbol".)

use super::Context;
use super::probe::Probe;
use crate::doctor::Check;

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    vec![rccl_abi(p, ctx), rccl_build(p, ctx)]
}

/// Does the image's librccl carry the multi-node fix, and is fault injection
/// compiled in? RCCL built with `-DFAULT_INJECTION=ON` (the 7.14 packages)
/// shims the net-ib transport, which slows multi-node collectives of 64-512
/// MB (ROCm/TheRock issue 7903); ROCm/rocm-systems PRs 8484 and 8512 keep
/// those shims off unless `RCCL_IB_FAULT_INJECTION` is set. What each file
/// holds is in [`super::probe::RcclBuild`]. WARN for any fault injection
/// (a release build has none), PASS for a build without it.
fn rccl_build(p: &Probe, ctx: &Context) -> Check {
    let id = "rccl.build";
    if p.rccl_builds.is_empty() {
        return Check::skip(
            id,
            "no librccl.so* under /opt, /usr/lib, /usr/lib64 or /usr/local/lib",
        );
    }
    let fix = || {
        format!(
            "build RCCL without fault injection (halobox's image with `--build-arg RCCL=patched`: rocm-systems at RCCL_TAG with -DFAULT_INJECTION=OFF), then {}",
            ctx.recreate()
        )
    };
    let slow: Vec<&str> = p
        .rccl_builds
        .iter()
        .filter(|b| b.fault_injection && !b.ib_gate)
        .map(|b| b.path.as_str())
        .collect();
    if !slow.is_empty() {
        return Check::warn(
            id,
            format!(
                "{} has fault injection compiled in without the net-ib gate (RCCL_IB_FAULT_INJECTION, rocm-systems PR 8512): it lacks the multi-node fix, and collectives of 64-512 MB across nodes run slow (TheRock issue 7903)",
                slow.join(", ")
            ),
            fix(),
        );
    }
    let gated: Vec<&str> = p
        .rccl_builds
        .iter()
        .filter(|b| b.ib_gate || b.fault_injection)
        .map(|b| b.path.as_str())
        .collect();
    if !gated.is_empty() {
        return Check::warn(
            id,
            format!(
                "{} carries the multi-node fix (net-ib fault injection off unless RCCL_IB_FAULT_INJECTION is set, rocm-systems PRs 8484/8512) but has fault injection compiled in: a test build, not a release one",
                gated.join(", ")
            ),
            fix(),
        );
    }
    let all: Vec<&str> = p.rccl_builds.iter().map(|b| b.path.as_str()).collect();
    Check::pass(
        id,
        format!(
            "{}: built without fault injection, so the multi-node slowdown of TheRock issue 7903 cannot occur",
            all.join(", ")
        ),
    )
}

fn rccl_abi(p: &Probe, ctx: &Context) -> Check {
    let id = "rccl.abi";
    let fix = || {
        format!(
            "use an image whose RCCL passed the build's ABI gate (halobox's image, built from images/vllm-therock-gfx1151.toml): {}",
            ctx.recreate()
        )
    };
    if p.rccl_gates.is_empty() {
        return Check::skip(
            id,
            match p.rccl_gate_skipped.as_deref() {
                Some("notorch") => "no libtorch_hip.so in the container",
                _ => {
                    "the image has no /opt/halobox/bin/rccl-abi-check.sh (or no bash, nm or ldd) to run the gate with"
                }
            },
        );
    }
    let mut ok = Vec::new();
    for g in &p.rccl_gates {
        let Some(lib) = &g.lib else {
            return Check::fail(
                id,
                format!("{} finds no librccl (ldd: not found)", g.consumer),
                fix(),
            );
        };
        match g.code {
            Some(0) => ok.push(format!("{} loads {lib}", g.consumer)),
            Some(1) => {
                return Check::fail(
                    id,
                    format!(
                        "{lib}, which {} loads, lacks {}: import torch fails with \"undefined symbol\"",
                        g.consumer,
                        g.missing.join(", ")
                    ),
                    fix(),
                );
            }
            other => {
                return Check::warn(
                    id,
                    format!(
                        "the gate could not read {} or {lib} (exit {})",
                        g.consumer,
                        other.map_or("?".to_string(), |c| c.to_string())
                    ),
                    format!(
                        "`halobox enter {} -- bash /opt/halobox/bin/rccl-abi-check.sh {} -- {lib}` shows why",
                        ctx.name, g.consumer
                    ),
                );
            }
        }
    }
    Check::pass(
        id,
        format!(
            "{}, which defines every nccl*/rccl* symbol torch needs",
            ok.join("; ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::probe::parse;
    use crate::doctor::Status;
    use std::collections::HashMap;

    fn ctx(labels: &HashMap<String, String>) -> Context<'_> {
        Context {
            name: "vllm",
            backend: Some("toolbox"),
            memlock_asked: Some(-1),
            labels,
            ray_pin: None,
            host: None,
        }
    }

    #[test]
    fn the_gate_passes_fails_naming_symbols_or_skips() {
        let labels = HashMap::new();
        let x = ctx(&labels);
        let p = parse(include_str!("../../tests/fixtures/probe/strix-halo.txt"));
        let c = rccl_abi(&p, &x);
        assert_eq!(c.status, Status::Pass, "{c:?}");
        assert!(
            c.summary
                .contains("_rocm_sdk_libraries_gfx1151/lib/librccl.so.1"),
            "{c:?}"
        );
        let p = parse(
            "@@hbx rccl.gate /t/libtorch_hip.so /opt/rocm/lib/librccl.so.1 1 ncclCommResume \n",
        );
        let c = rccl_abi(&p, &x);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.summary.contains(
                "/opt/rocm/lib/librccl.so.1, which /t/libtorch_hip.so loads, lacks ncclCommResume"
            ),
            "{c:?}"
        );
        let p = parse("@@hbx rccl.gate /t/libtorch_hip.so - none\n");
        assert_eq!(rccl_abi(&p, &x).status, Status::Fail);
        let p = parse("@@hbx rccl.gate /t/libtorch_hip.so /l 2 \n");
        assert_eq!(rccl_abi(&p, &x).status, Status::Warn);
        let p = parse("@@hbx rccl.gate - - unavailable\n");
        let c = rccl_abi(&p, &x);
        assert_eq!(c.status, Status::Skip);
        assert!(c.summary.contains("/opt/halobox/bin/rccl-abi-check.sh"));
        let p = parse("@@hbx rccl.gate - - notorch\n");
        assert!(rccl_abi(&p, &x).summary.contains("no libtorch_hip.so"));
    }

    #[test]
    fn fault_injection_warns_and_the_net_ib_gate_is_named() {
        let labels = HashMap::new();
        let x = ctx(&labels);
        let c = rccl_build(&parse("@@hbx rccl.build /o/librccl.so.1 yes no\n"), &x);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.summary.contains("lacks the multi-node fix"), "{c:?}");
        assert!(c.summary.contains("TheRock issue 7903"), "{c:?}");
        let c = rccl_build(&parse("@@hbx rccl.build /o/librccl.so.1 yes yes\n"), &x);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.summary.contains("carries the multi-node fix"), "{c:?}");
        let c = rccl_build(
            &parse(
                "@@hbx rccl.build /o/librccl.so.1 no no\n@@hbx rccl.build /p/librccl.so.1 no no\n",
            ),
            &x,
        );
        assert_eq!(c.status, Status::Pass, "{c:?}");
        assert!(
            c.summary.contains("/o/librccl.so.1, /p/librccl.so.1"),
            "{c:?}"
        );
        // One slow copy among good ones is what counts.
        let c = rccl_build(
            &parse(
                "@@hbx rccl.build /o/librccl.so.1 no no\n@@hbx rccl.build /q/librccl.so.1 yes no\n",
            ),
            &x,
        );
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.summary.starts_with("/q/librccl.so.1 "), "{c:?}");
        assert_eq!(rccl_build(&parse(""), &x).status, Status::Skip);
    }
}

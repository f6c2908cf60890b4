//! The RCCL ABI gate of the image build, run inside the container: does the
//! librccl that `libtorch_hip.so` loads define every `nccl*`/`rccl*` symbol
//! it needs? (A librccl that lacks one makes `import torch` fail with
//! "undefined symbol".) And does every librccl carry gfx1151 code objects
//! and the multi-node fix?

use super::Context;
use super::probe::{CodeObjects, Probe};
use crate::doctor::Check;

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    vec![
        rccl_abi(p, ctx),
        rccl_build(p, ctx),
        rccl_code_objects(p, ctx),
    ]
}

/// Does every librccl hold gfx1151 code objects? Counted by the image's own
/// marker check (`/opt/halobox/bin/rccl-markers.sh`) as offload-bundle
/// entries, compressed bundles unpacked; a bundle magic that is not a
/// bundle is named, not counted. FAIL for a librccl with none (its kernels
/// cannot run on Strix Halo), WARN when compressed bundles could not be read.
fn rccl_code_objects(p: &Probe, ctx: &Context) -> Check {
    let id = "rccl.code_objects";
    if p.rccl_builds.is_empty() {
        return Check::skip(
            id,
            "no librccl.so* under /opt, /usr/lib, /usr/lib64 or /usr/local/lib",
        );
    }
    let counted: Vec<(&str, CodeObjects)> = p
        .rccl_builds
        .iter()
        .filter_map(|b| b.code_objects.map(|c| (b.path.as_str(), c)))
        .collect();
    if counted.is_empty() {
        return Check::skip(
            id,
            "the image has no /opt/halobox/bin/rccl-markers.sh (or no bash) to count code objects with",
        );
    }
    let fix = || {
        format!(
            "use an image whose RCCL passed the build's marker check (halobox's image, built from images/vllm-therock-gfx1151.toml): {}",
            ctx.recreate()
        )
    };
    let not_bundle = |c: &CodeObjects| {
        if c.not_bundle > 0 {
            format!(", {} bundle magic(s) not a bundle", c.not_bundle)
        } else {
            String::new()
        }
    };
    if let Some((path, c)) = counted
        .iter()
        .find(|(_, c)| c.gfx1151 == 0 && c.unreadable == 0)
    {
        return Check::fail(
            id,
            format!(
                "{path} has no gfx1151 code objects ({} offload bundle(s) read{}): RCCL's kernels cannot run on Strix Halo",
                c.bundles,
                not_bundle(c)
            ),
            fix(),
        );
    }
    if let Some((path, c)) = counted.iter().find(|(_, c)| c.gfx1151 == 0) {
        return Check::warn(
            id,
            format!(
                "{path}: {} compressed offload bundle(s) could not be unpacked (zlib, or no zstd in the image), and the {} read hold no gfx1151 code objects",
                c.unreadable, c.bundles
            ),
            format!(
                "`halobox enter {} -- bash /opt/halobox/bin/rccl-markers.sh {path}` shows what it reads",
                ctx.name
            ),
        );
    }
    Check::pass(
        id,
        counted
            .iter()
            .map(|(path, c)| {
                format!(
                    "{path}: {} gfx1151 code object(s) in {} offload bundle(s){}",
                    c.gfx1151,
                    c.bundles,
                    not_bundle(c)
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
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

    #[test]
    fn code_objects_are_counted_by_the_marker_check() {
        let labels = HashMap::new();
        let x = ctx(&labels);
        let c = rccl_code_objects(
            &parse("@@hbx rccl.build /o/librccl.so.1 no no 45 45 0 1\n"),
            &x,
        );
        assert_eq!(c.status, Status::Pass, "{c:?}");
        assert_eq!(
            c.summary,
            "/o/librccl.so.1: 45 gfx1151 code object(s) in 45 offload bundle(s), 1 bundle magic(s) not a bundle"
        );
        let c = rccl_code_objects(
            &parse(
                "@@hbx rccl.build /o/librccl.so.1 no no 1 1 0 0\n@@hbx rccl.build /d/librccl.so.1 yes no 0 1 0 0\n",
            ),
            &x,
        );
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(
            c.summary.starts_with(
                "/d/librccl.so.1 has no gfx1151 code objects (1 offload bundle(s) read)"
            ),
            "{c:?}"
        );
        let c = rccl_code_objects(
            &parse("@@hbx rccl.build /o/librccl.so.1 no no 0 1 1 0\n"),
            &x,
        );
        assert_eq!(c.status, Status::Warn, "{c:?}");
        // An image without the marker script: the counts are `-`.
        let c = rccl_code_objects(&parse("@@hbx rccl.build /o/librccl.so.1 no no -\n"), &x);
        assert_eq!(c.status, Status::Skip, "{c:?}");
        assert!(c.summary.contains("rccl-markers.sh"), "{c:?}");
        // The older probe line without counts still parses.
        let p = parse("@@hbx rccl.build /o/librccl.so.1 yes no\n");
        assert_eq!(p.rccl_builds[0].code_objects, None);
        assert!(p.rccl_builds[0].fault_injection);
        assert_eq!(rccl_code_objects(&parse(""), &x).status, Status::Skip);
    }
}

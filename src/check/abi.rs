//! The RCCL ABI gate of the image build, run inside the container: does the
//! librccl that `libtorch_hip.so` loads define every `nccl*`/`rccl*` symbol
//! it needs? (A librccl that lacks one makes `import torch` fail with
//! "undefined symbol".)

use super::Context;
use super::probe::Probe;
use crate::doctor::Check;

pub(super) fn checks(p: &Probe, ctx: &Context) -> Vec<Check> {
    vec![rccl_abi(p, ctx)]
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
}

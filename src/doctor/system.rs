//! Host-wide checks: leaking environment variables, container tooling, and
//! host files that could not be read.

use super::Check;
use crate::host::HostFacts;

pub(super) fn checks(facts: &HostFacts) -> Vec<Check> {
    let mut out = vec![env(facts), tools(facts)];
    if !facts.captures_missing.is_empty() {
        out.push(snapshot_gaps(facts));
    }
    if !facts.read_issues.is_empty() {
        out.push(read_issues(facts));
    }
    out
}

/// What a snapshot without some `captured/` files cannot tell.
fn snapshot_gaps(facts: &HostFacts) -> Check {
    let what = facts
        .captures_missing
        .iter()
        .map(|c| {
            let cost = match c.as_str() {
                "captured/ip-addr.json" => {
                    "interface addresses are known only from RoCE v2 GIDs (no prefixes, none for other interfaces)"
                }
                "captured/dev-stat.txt" => "device node owners and modes are unknown",
                _ => "its facts are unknown",
            };
            format!("{c} is missing: {cost}")
        })
        .collect::<Vec<_>>()
        .join("; ");
    Check::info("host.snapshot", what)
}

fn env(facts: &HostFacts) -> Check {
    let id = "env.hazards";
    if facts.env_hazards.is_empty() {
        return Check::pass(id, "no GPU or NCCL override variables set");
    }
    let list = facts
        .env_hazards
        .iter()
        .map(|v| format!("{}={}", v.name, v.value))
        .collect::<Vec<_>>()
        .join(", ");
    let hsa = facts
        .env_hazards
        .iter()
        .any(|v| v.name == "HSA_OVERRIDE_GFX_VERSION");
    let others = facts.env_hazards.len() > usize::from(hsa);
    let why = match (hsa, others) {
        (true, false) => {
            "HSA_OVERRIDE_GFX_VERSION makes ROCm treat gfx1151 as another GPU and crashes it"
        }
        (true, true) => {
            "HSA_OVERRIDE_GFX_VERSION makes ROCm treat gfx1151 as another GPU and crashes it; the others leak into containers and override what halobox computes per node"
        }
        _ => "they leak into containers and override what halobox computes per node",
    };
    let names = facts
        .env_hazards
        .iter()
        .map(|v| v.name.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    Check::warn(
        id,
        format!("{list} set: {why}"),
        format!(
            "unset {names}\n# and remove the export from ~/.bashrc, ~/.profile or /etc/environment"
        ),
    )
}

fn tools(facts: &HostFacts) -> Check {
    let id = "tools.containers";
    let found: Vec<&str> = ["podman", "docker", "toolbox", "distrobox"]
        .into_iter()
        .filter(|t| facts.tool(t).is_some())
        .collect();
    if facts.tool("podman").is_some() || facts.tool("docker").is_some() {
        Check::pass(id, format!("found {}", found.join(", ")))
    } else {
        Check::fail(
            id,
            if found.is_empty() {
                "no container engine: halobox needs podman or docker".to_string()
            } else {
                format!("found {} but no podman or docker engine", found.join(", "))
            },
            "Fedora: sudo dnf install podman toolbox\nDebian/Ubuntu: sudo apt-get install podman podman-toolbox",
        )
    }
}

fn read_issues(facts: &HostFacts) -> Check {
    let list = facts
        .read_issues
        .iter()
        .map(|i| format!("{}: {}", i.path, i.error))
        .collect::<Vec<_>>()
        .join("; ");
    Check::warn(
        "host.readable",
        format!("some host files could not be read, so checks above may be incomplete: {list}"),
        "run halobox doctor as the user who runs the containers; in a snapshot, re-copy the files named",
    )
}

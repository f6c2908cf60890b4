//! GPU checks: a gfx1151 agent exists and its device nodes can be opened.

use super::kernel::CARVEOUT_LIMIT_BYTES;
use super::{Check, has_gpu};
use crate::host::HostFacts;
use crate::host::devnodes::DeviceNode;
use crate::host::gpu::KfdNode;
use crate::units::format_bytes;

/// The GPU target halobox's image is built for.
pub const TARGET: &str = "gfx1151";

pub(super) fn checks(facts: &HostFacts) -> Vec<Check> {
    let gpus: Vec<&KfdNode> = facts.gpu.nodes.iter().filter(|n| n.is_gpu()).collect();
    let target = gpus
        .iter()
        .find(|n| n.gfx_target.as_deref() == Some(TARGET))
        .copied();
    let present = match (target, gpus.first().copied()) {
        (Some(n), _) => Check::pass(
            "gpu.present",
            format!(
                "{TARGET} GPU at KFD node {}{}",
                n.id,
                n.render_node
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
        ),
        (None, Some(other)) => Check::fail(
            "gpu.present",
            format!(
                "the GPU is {} (gfx_target_version {}), not {TARGET}: halobox's image and patched RCCL are built for {TARGET} (Strix Halo)",
                other.gfx_target.as_deref().unwrap_or("an unknown target"),
                other.gfx_target_version.unwrap_or_default()
            ),
            "run halobox on a Ryzen AI Max (Strix Halo) node; if this is one, check that HSA_OVERRIDE_GFX_VERSION is not set and that the kernel is recent (6.16 or newer knows gfx1151)",
        ),
        (None, None) if facts.gpu.kfd_topology => Check::fail(
            "gpu.present",
            "the KFD topology lists no GPU agent (only CPU nodes)",
            "check `dmesg | grep -i amdgpu` for a driver error; with the BIOS carve-out at 512 MiB the iGPU still has to appear under /sys/class/kfd/kfd/topology/nodes",
        ),
        (None, None) => Check::fail(
            "gpu.present",
            "no AMD GPU: /sys/class/kfd is absent (amdgpu is not loaded, or this is not an AMD GPU host)",
            "on a Strix Halo node: `sudo modprobe amdgpu` and check `dmesg | grep -i kfd`; on a build or CI machine without a GPU this check fails by design",
        ),
    };
    let mut out = vec![present];
    if !has_gpu(facts) {
        out.push(Check::skip(
            "gpu.kfd_access",
            "no GPU: /dev/kfd is not needed",
        ));
        out.push(Check::skip(
            "gpu.render_access",
            "no GPU: no render node to open",
        ));
        out.push(Check::skip("gpu.carveout", "no GPU: no carve-out"));
        return out;
    }
    out.push(match &facts.gpu.kfd {
        None => Check::fail(
            "gpu.kfd_access",
            "/dev/kfd is missing although the KFD topology exists",
            "check that udev created /dev/kfd (`ls -l /dev/kfd`); reload with `sudo udevadm trigger`",
        ),
        Some(node) => access_check("gpu.kfd_access", facts, node, Some("video")),
    });
    let render = target
        .or(gpus.first().copied())
        .and_then(|n| n.render_node.as_deref());
    out.push(match render {
        None => Check::fail(
            "gpu.render_access",
            "the GPU's KFD node has no drm_render_minor",
            "check `ls -l /dev/dri` and `dmesg | grep -i drm`",
        ),
        Some(path) => match facts.gpu.dri.iter().find(|d| d.path == path) {
            None => Check::fail(
                "gpu.render_access",
                format!("{path} (the GPU's render node) does not exist"),
                "check that udev created it (`ls -l /dev/dri`); reload with `sudo udevadm trigger`",
            ),
            Some(node) => access_check("gpu.render_access", facts, node, Some("video")),
        },
    });
    out.push(carveout(facts));
    out
}

/// The BIOS carve-out ("UMA frame buffer"): memory the iGPU owns and the
/// OS never sees. The guides set it to the minimum (512 MB) and give the
/// GPU system RAM through the GTT instead.
fn carveout(facts: &HostFacts) -> Check {
    let id = "gpu.carveout";
    let Some(bytes) = facts.gpu.carveout_bytes() else {
        return Check::skip(
            id,
            "the iGPU's carve-out is unknown (no /sys/class/drm/card*/device/mem_info_vram_total of an AMD card)",
        );
    };
    let size = format_bytes(bytes);
    if bytes > CARVEOUT_LIMIT_BYTES {
        Check::warn(
            id,
            format!(
                "the BIOS reserves {size} of RAM for the iGPU (UMA frame buffer): the OS and the GTT cannot use it, and GTT sizes computed from MemTotal come out too small"
            ),
            "in the BIOS set the UMA frame buffer / iGPU memory size to the minimum (512 MB), then size the GTT (kernel.gtt)",
        )
    } else {
        Check::pass(
            id,
            format!("BIOS carve-out {size}: the iGPU gets its memory through the GTT"),
        )
    }
}

/// Can the user open `node` for read and write? The fix adds the user to
/// the node's group and to `companion` (`video` for the GPU, `rdma`).
pub(super) fn access_check(
    id: &str,
    facts: &HostFacts,
    node: &DeviceNode,
    companion: Option<&str>,
) -> Check {
    let user = &facts.user;
    let who = user.name.as_deref().unwrap_or("this user");
    if node.mode.is_none() {
        let dev_stat = crate::host::devnodes::DEV_STAT.trim_start_matches('/');
        return Check::skip(
            id,
            if facts.captures_missing.iter().any(|c| c == dev_stat) {
                format!(
                    "{}: mode and owner unknown: the snapshot has no {dev_stat} (its device nodes are placeholders)",
                    node.path
                )
            } else {
                format!("{}: mode and owner could not be read", node.path)
            },
        );
    }
    let group = node.gid.and_then(|g| group_name(facts, g));
    let mode = node.mode.as_deref().unwrap_or("????");
    let others_rw = node.mode_bits().is_some_and(|m| m & 0o006 == 0o006);
    let group_rw = node.mode_bits().is_some_and(|m| m & 0o060 == 0o060);
    let owner_rw = node.mode_bits().is_some_and(|m| m & 0o600 == 0o600);
    let desc = format!(
        "{} (mode {mode}, group {})",
        node.path,
        group.clone().unwrap_or_else(|| match node.gid {
            Some(0) => "root".into(),
            Some(g) => g.to_string(),
            None => "?".into(),
        })
    );
    if user.is_root() {
        return Check::pass(id, format!("{desc}: running as root"));
    }
    if others_rw {
        return Check::pass(id, format!("{desc}: open to every user"));
    }
    if owner_rw && user.uid.is_some() && node.uid == user.uid {
        return Check::pass(id, format!("{desc}: {who} owns it"));
    }
    if group_rw && node.gid.is_some_and(|g| user.has_gid(g)) {
        return Check::pass(id, format!("{desc}: {who} is in that group"));
    }
    if node.gid == Some(0) {
        let name = node.name();
        let grp = companion.unwrap_or("render");
        return Check::fail(
            id,
            format!("{desc}: only root can open it"),
            format!(
                "echo 'KERNEL==\"{name}\", GROUP=\"{grp}\", MODE=\"0660\"' | sudo tee -a /etc/udev/rules.d/90-device-groups.rules && sudo udevadm trigger\nsudo usermod -aG {grp} {who}   # then log out and back in"
            ),
        );
    }
    let grp = group
        .or_else(|| node.gid.map(|g| g.to_string()))
        .unwrap_or_else(|| "render".into());
    let groups = match companion.filter(|c| *c != grp) {
        Some(c) => format!("{grp},{c}"),
        None => grp.clone(),
    };
    Check::fail(
        id,
        format!("{desc}: {who} cannot open it (not in group {grp})"),
        format!("sudo usermod -aG {groups} {who}   # then log out and back in (or `newgrp {grp}`)"),
    )
}

fn group_name(facts: &HostFacts, gid: u32) -> Option<String> {
    facts
        .user
        .device_groups
        .iter()
        .find(|g| g.gid == Some(gid))
        .map(|g| g.name.clone())
}

//! Kernel parameter checks: IOMMU pass-through, `pci=realloc`, ASPM off,
//! and a GTT large enough for the iGPU to use this machine's unified
//! memory (computed from the whole RAM: MemTotal plus the BIOS carve-out).

use super::{Check, Pending, Status, has_gpu, has_rdma};
use crate::host::HostFacts;
use crate::host::kernel::{KernelParam, param_in};
use crate::units::format_bytes;

const KIB_PER_GIB: u64 = 1 << 20;
/// RAM is sold in multiples of this; MemTotal is rounded up to it.
const RAM_STEP_GIB: u64 = 8;
/// RAM left to the OS when the GPU may map the rest.
const OS_RESERVE_GIB: u64 = 4;
/// 4 KiB pages per MiB.
const PAGES_PER_MIB: u64 = 256;
/// A BIOS carve-out above this is "large": the guides set 512 MB.
pub const CARVEOUT_LIMIT_BYTES: u64 = 1 << 30;

/// The GTT size (MiB) and TTM page limit recommended for `mem_total_kib` of RAM:
/// the nominal RAM (MemTotal rounded up to 8 GiB) less 4 GiB for the OS.
/// 128 GB board → (126976, 32505856), as the guides use.
pub fn recommended_gtt(mem_total_kib: u64) -> (u64, u64) {
    let step = RAM_STEP_GIB * KIB_PER_GIB;
    let nominal_gib = mem_total_kib.div_ceil(step) * RAM_STEP_GIB;
    let gib = nominal_gib.saturating_sub(OS_RESERVE_GIB).max(1);
    let mib = gib * 1024;
    (mib, mib * PAGES_PER_MIB)
}

/// The GTT size (MiB) and TTM page limit for this machine, when its RAM is
/// known and the BIOS carve-out is small (a large one must shrink first: the
/// GTT sized for the whole RAM would then exceed what the OS sees).
pub fn gtt_for(facts: &HostFacts) -> Option<(u64, u64)> {
    let carveout = facts.gpu.carveout_bytes().unwrap_or(0);
    let mem_total = facts.kernel.mem_total_kib?;
    (carveout <= CARVEOUT_LIMIT_BYTES).then(|| recommended_gtt(mem_total + carveout / 1024))
}

fn boot_fix(args: &str) -> String {
    format!(
        "Fedora: sudo grubby --update-kernel=ALL --args=\"{args}\"\n\
         Debian/Ubuntu: add `{args}` to GRUB_CMDLINE_LINUX in /etc/default/grub, then sudo update-grub\n\
         then reboot"
    )
}

pub(super) fn checks(facts: &HostFacts) -> Vec<Check> {
    let k = &facts.kernel;
    const IDS: [&str; 4] = [
        "kernel.iommu",
        "kernel.pci_realloc",
        "kernel.pcie_aspm",
        "kernel.gtt",
    ];
    if k.cmdline.is_none() {
        let why = "/proc/cmdline could not be read";
        return IDS.iter().map(|id| Check::skip(id, why)).collect();
    }
    if !has_gpu(facts) && !has_rdma(facts) {
        let why = "tuning for the iGPU and RDMA NIC; this host has neither";
        return IDS.iter().map(|id| Check::skip(id, why)).collect();
    }
    vec![
        or_next_boot(facts, &["iommu", "amd_iommu"], iommu),
        or_next_boot(facts, &["pci"], pci_realloc),
        or_next_boot(facts, &["pcie_aspm"], aspm),
        or_next_boot(facts, &["amdgpu.gttsize", "ttm.pages_limit"], gtt),
    ]
}

/// `check` on the running kernel's parameters; when that is a WARN or FAIL
/// but the command line configured for the next boot passes, a PASS that
/// waits for the reboot, naming the files and what the running kernel has
/// of `keys`.
fn or_next_boot(
    facts: &HostFacts,
    keys: &[&str],
    check: fn(&HostFacts, &[KernelParam]) -> Check,
) -> Check {
    let now = check(facts, &facts.kernel.params);
    if !now.is_fault() {
        return now;
    }
    let Some(next) = facts.boot.next_boot() else {
        return now;
    };
    let then = check(facts, &next.params);
    if then.status != Status::Pass {
        return now;
    }
    let running: Vec<String> = facts
        .kernel
        .params
        .iter()
        .filter(|p| keys.contains(&p.key.as_str()))
        .map(|p| match &p.value {
            Some(v) => format!("{}={v}", p.key),
            None => p.key.clone(),
        })
        .collect();
    let running = if running.is_empty() {
        format!("no {}", keys.join(" or "))
    } else {
        running.join(" ")
    };
    let boot = &facts.boot;
    if boot.boot_entry.is_none() && !boot.newer_than_grub_cfg.is_empty() {
        return Check::warn(
            &now.id,
            format!(
                "{} is configured in {}, but {} is older: the next boot does not get it until update-grub runs (the running kernel has {running})",
                then.summary,
                boot.newer_than_grub_cfg.join(", "),
                crate::host::boot::GRUB_CFG
            ),
            "sudo update-grub\nthen reboot",
        );
    }
    Check::pending(
        &now.id,
        Pending::Reboot,
        format!(
            "{} configured in {}: takes effect after a reboot (the running kernel has {running})",
            then.summary,
            next.files.join(", ")
        ),
    )
}

fn pci_realloc(_: &HostFacts, params: &[KernelParam]) -> Check {
    let id = "kernel.pci_realloc";
    // `pci=` takes comma-separated options and may be given more than once.
    let options: Vec<&str> = params
        .iter()
        .filter(|p| p.key == "pci")
        .filter_map(|p| p.value.as_deref())
        .flat_map(|v| v.split(','))
        .collect();
    let last = options
        .iter()
        .rev()
        .find(|o| o.starts_with("realloc"))
        .copied();
    match last {
        Some("realloc") | Some("realloc=on") => Check::pass(id, "pci=realloc"),
        other => Check::warn(
            id,
            format!(
                "{}: the guides boot with pci=realloc so the kernel reassigns PCI BARs the firmware left too small (the 100GbE NIC's and the iGPU's on these boards)",
                match other {
                    Some(v) => format!("pci={v}"),
                    None => "pci=realloc is not set".into(),
                }
            ),
            boot_fix("pci=realloc"),
        ),
    }
}

fn iommu(_: &HostFacts, params: &[KernelParam]) -> Check {
    let id = "kernel.iommu";
    match (param_in(params, "iommu"), param_in(params, "amd_iommu")) {
        (Some(Some("pt")), _) => Check::pass(id, "iommu=pt (pass-through)"),
        (_, Some(Some("off"))) => Check::pass(id, "amd_iommu=off"),
        (other, amd) => Check::warn(
            id,
            format!(
                "IOMMU is translating DMA ({}): pass-through removes that cost for the NIC and the iGPU",
                match (other, amd) {
                    (Some(Some(v)), _) => format!("iommu={v}"),
                    (_, Some(Some(v))) => format!("amd_iommu={v}"),
                    _ => "neither iommu=pt nor amd_iommu=off is set".into(),
                }
            ),
            boot_fix("iommu=pt"),
        ),
    }
}

fn aspm(_: &HostFacts, params: &[KernelParam]) -> Check {
    let id = "kernel.pcie_aspm";
    match param_in(params, "pcie_aspm") {
        Some(Some("off")) => Check::pass(id, "pcie_aspm=off"),
        value => {
            let typo = param_in(params, "pcie_asm").is_some();
            Check::warn(
                id,
                format!(
                    "{}: PCIe power saving adds latency spikes and link renegotiation on the 100GbE NIC{}",
                    match value {
                        Some(Some(v)) => format!("pcie_aspm={v}"),
                        _ => "pcie_aspm=off is not set".into(),
                    },
                    if typo {
                        " (`pcie_asm=off` is set: a typo the kernel ignores)"
                    } else {
                        ""
                    }
                ),
                boot_fix("pcie_aspm=off"),
            )
        }
    }
}

fn gtt(facts: &HostFacts, params: &[KernelParam]) -> Check {
    let id = "kernel.gtt";
    if !has_gpu(facts) {
        return Check::skip(id, "no GPU: GTT size does not matter");
    }
    let k = &facts.kernel;
    let Some(mem_total) = k.mem_total_kib else {
        return Check::skip(id, "MemTotal unknown: cannot size the GTT");
    };
    // MemTotal does not count the BIOS carve-out: the board's RAM is both.
    let carveout_kib = facts.gpu.carveout_bytes().unwrap_or(0) / 1024;
    let (rec_mib, rec_pages) = recommended_gtt(mem_total + carveout_kib);
    let wanted = format!("amdgpu.gttsize={rec_mib} ttm.pages_limit={rec_pages}");
    if carveout_kib * 1024 > CARVEOUT_LIMIT_BYTES {
        return Check::warn(
            id,
            format!(
                "the BIOS reserves {} for the iGPU (gpu.carveout), so MemTotal ({} MiB) is not this machine's RAM: set the carve-out to the minimum first, then give the GTT {rec_mib} MiB",
                format_bytes(carveout_kib * 1024),
                mem_total / 1024
            ),
            format!(
                "1. BIOS: UMA frame buffer size (iGPU memory) → the minimum (512 MB)\n2. {}",
                boot_fix(&wanted).replace('\n', "\n   ")
            ),
        );
    }
    let fix = boot_fix(&wanted);
    let total = mem_total;
    let total_mib = total / 1024;
    let num = |key: &str| match param_in(params, key) {
        Some(Some(v)) => Some(v.parse::<u64>().ok()),
        _ => None,
    };
    let gttsize = num("amdgpu.gttsize");
    let pages = num("ttm.pages_limit");
    if gttsize == Some(None) || pages == Some(None) {
        return Check::warn(id, "amdgpu.gttsize or ttm.pages_limit is not a number", fix);
    }
    let gtt_mib = gttsize.flatten();
    let pages_mib = pages.flatten().map(|p| p / PAGES_PER_MIB);
    let effective = match (gtt_mib, pages_mib) {
        (None, None) => {
            return Check::warn(
                id,
                format!(
                    "no GTT size set: the iGPU gets the kernel default (about half of {} MiB RAM); for this machine use {rec_mib} MiB",
                    total_mib
                ),
                fix,
            );
        }
        (Some(g), Some(p)) if g != p => {
            return Check::warn(
                id,
                format!(
                    "amdgpu.gttsize={g} MiB but ttm.pages_limit allows {p} MiB: they must agree"
                ),
                fix,
            );
        }
        (_, Some(p)) => p,
        (Some(g), None) => g,
    };
    if effective > total_mib {
        Check::warn(
            id,
            format!(
                "GTT {effective} MiB is more than the {total_mib} MiB of RAM: the GPU can starve the OS"
            ),
            fix,
        )
    } else if effective * 2 < rec_mib {
        Check::warn(
            id,
            format!(
                "GTT {effective} MiB lets the iGPU use under half of what this machine can give it ({rec_mib} MiB)"
            ),
            fix,
        )
    } else {
        Check::pass(
            id,
            format!("GTT {effective} MiB of {total_mib} MiB RAM (recommended here: {rec_mib} MiB)"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtt_for_128_gb_matches_the_guides() {
        // A 128 GB board with a 512 MiB carve-out reports ~127 GiB MemTotal.
        assert_eq!(recommended_gtt(132_000_000), (126_976, 32_505_856));
        // 64 GB board: 60 GiB.
        assert_eq!(recommended_gtt(65_000_000), (61_440, 15_728_640));
    }
}

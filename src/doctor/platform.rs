//! The running kernel and the installed GPU firmware against the versions
//! known good or bad for gfx1151 ([`super::versions`]).

use super::versions::{self, KernelVerdict};
use super::{Check, has_gpu};
use crate::host::{HostFacts, kernel};

pub(super) fn checks(facts: &HostFacts) -> Vec<Check> {
    vec![kernel(facts), firmware(facts)]
}

fn upgrade_kernel(facts: &HostFacts) -> String {
    let os = &facts.os;
    if os.is_like("fedora") {
        "sudo dnf upgrade --refresh 'kernel*' && sudo reboot   # Fedora 43 ships 6.18.x".into()
    } else if os.id.as_deref() == Some("ubuntu") {
        "sudo apt-get update && sudo apt-get install --install-recommends linux-generic-hwe-24.04 && sudo reboot   # 24.04 HWE 6.17.0-19 or later; Ubuntu 26.04's kernel also qualifies".into()
    } else {
        "install a 6.18.4 or later kernel from your distribution (Debian 13: `sudo apt-get install -t trixie-backports linux-image-amd64` once backports carries 6.18.4+), then reboot".into()
    }
}

fn kernel(facts: &HostFacts) -> Check {
    let id = "kernel.version";
    if !has_gpu(facts) {
        return Check::skip(
            id,
            "no GPU: the kernel requirements are gfx1151's (Strix Halo)",
        );
    }
    let Some(release) = facts.kernel.release.as_deref() else {
        return Check::skip(
            id,
            "the kernel release could not be read (/proc/sys/kernel/osrelease, /proc/version and the BOOT_IMAGE= of /proc/cmdline)",
        );
    };
    let shown = match facts.kernel.release_from.as_deref() {
        Some(from) if from != kernel::OSRELEASE => format!("{release} (read from {from})"),
        _ => release.to_string(),
    };
    let ubuntu = facts.os.id.as_deref() == Some("ubuntu");
    match versions::judge_kernel(release, ubuntu) {
        Some(KernelVerdict::Verified) => Check::pass(
            id,
            format!("{shown}: the kernel the RoCE cluster guide verified on Fedora 43"),
        ),
        Some(KernelVerdict::Good) => Check::pass(
            id,
            format!(
                "{shown} has the KFD fixes gfx1151 needs (AMD: 6.18.4+, Ubuntu 24.04 HWE 6.17.0-19+, OEM 6.14.0-1018+; the guides verified 6.18.5/6.18.6)"
            ),
        ),
        Some(KernelVerdict::TooOld { needs }) => Check::fail(
            id,
            format!(
                "{shown} lacks the KFD fixes gfx1151 needs ({needs}): AMD says GPU compute may fail to start or behave unpredictably, and community setups report crashes on kernels older than 6.18.4"
            ),
            upgrade_kernel(facts),
        ),
        None => Check::warn(
            id,
            format!(
                "kernel release {shown:?} not understood: cannot tell whether it has the KFD fixes gfx1151 needs (6.18.4+)"
            ),
            "uname -r   # gfx1151 needs Linux 6.18.4+, Ubuntu 24.04 HWE 6.17.0-19+ or OEM 6.14.0-1018+",
        ),
    }
}

fn firmware_fix(facts: &HostFacts) -> String {
    let os = &facts.os;
    if os.is_like("fedora") {
        format!(
            "sudo dnf upgrade --refresh amd-gpu-firmware linux-firmware   # {} or later\nsudo dracut -f && sudo reboot",
            versions::GOOD_FIRMWARE
        )
    } else if os.is_like("arch") {
        "sudo pacman -Syu linux-firmware-amdgpu   # a release newer than 20251125; or downgrade to 20251111\nsudo mkinitcpio -P && sudo reboot".into()
    } else if os.is_like("debian") {
        "sudo apt-get update && sudo apt-get install --only-upgrade firmware-amd-graphics linux-firmware\nsudo update-initramfs -u && sudo reboot".into()
    } else {
        format!(
            "install linux-firmware {} or later (or 20251111), rebuild the initramfs and reboot",
            versions::GOOD_FIRMWARE
        )
    }
}

fn firmware(facts: &HostFacts) -> Check {
    let id = "gpu.firmware";
    if !has_gpu(facts) {
        return Check::skip(id, "no GPU: its firmware does not matter");
    }
    let pkg = facts.firmware.gpu_package();
    let mes = facts.gpu.mes_fw_version();
    let mes_note = mes
        .map(|m| format!(", MES firmware {m} loaded"))
        .unwrap_or_default();
    if let Some(p) = pkg
        && p.upstream_date() == Some(versions::BAD_FIRMWARE)
    {
        return Check::fail(
            id,
            format!(
                "{} {} ({}){mes_note}: linux-firmware {} breaks ROCm on Strix Halo (instability, GPU hangs)",
                p.name,
                p.version,
                p.manager,
                versions::BAD_FIRMWARE
            ),
            firmware_fix(facts),
        );
    }
    if mes == Some(versions::BAD_MES) {
        return Check::warn(
            id,
            format!(
                "MES firmware {} is loaded{}: this MES build was reported to hang Strix Halo under ROCm (ROCm issue #5724)",
                versions::BAD_MES,
                pkg.map(|p| format!(" (package {} {})", p.name, p.version))
                    .unwrap_or_default()
            ),
            firmware_fix(facts),
        );
    }
    match pkg {
        Some(p) => Check::pass(
            id,
            format!(
                "{} {} ({}){mes_note}: not the known-bad {} (the community's stable setup runs {})",
                p.name,
                p.version,
                p.manager,
                versions::BAD_FIRMWARE,
                versions::GOOD_FIRMWARE
            ),
        ),
        None if facts.sysroot.is_some() => Check::skip(
            id,
            format!(
                "no GPU firmware package found in the snapshot (var/lib/dpkg/status, var/lib/pacman/local or {}){mes_note}",
                crate::host::firmware::RPM_Q.trim_start_matches('/')
            ),
        ),
        None => Check::skip(
            id,
            format!(
                "the GPU firmware package version could not be read (no dpkg, pacman or rpm database){mes_note}"
            ),
        ),
    }
}

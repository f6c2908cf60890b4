//! Kernels and GPU firmware known good or bad for gfx1151 (Strix Halo),
//! from public reports (the sources are listed in `docs/known-versions.md`):
//!
//! - AMD, "AMD Strix Halo system optimization" (ROCm docs, "Required kernel
//!   version"): two KFD fixes are required; they are in Ubuntu 24.04 HWE
//!   `6.17.0-19.19~24.04.2` or later, Ubuntu 24.04 OEM `6.14.0-1018` or
//!   later, and Linux `6.18.4` or later elsewhere. Without them "GPU compute
//!   workloads might fail to initialize or exhibit unpredictable behavior".
//! - kyuz0/amd-strix-halo-toolboxes README, "Stable Configuration": kernels
//!   older than 6.18.4 "have a bug that causes stability issues on gfx1151";
//!   "do NOT use linux-firmware-20251125" (breaks ROCm on Strix Halo); the
//!   stable setup runs linux-firmware 20260110.
//! - The RDMA cluster guide (kyuz0/amd-strix-halo-vllm-toolboxes) verified
//!   6.18.5-200.fc43 and 6.18.6-200.fc43 on Fedora 43.
//! - ROCm issue #5724: MES firmware 0x83 hangs Strix Halo under ROCm.

use std::fmt;

/// The mainline release every non-Ubuntu kernel needs.
pub const MIN_MAINLINE: (u32, u32, u32) = (6, 18, 4);
/// Ubuntu 24.04 HWE: `6.17.0-19` or later.
pub const MIN_UBUNTU_HWE: ((u32, u32, u32), u32) = ((6, 17, 0), 19);
/// Ubuntu 24.04 OEM: `6.14.0-1018` or later.
pub const MIN_UBUNTU_OEM: ((u32, u32, u32), u32) = ((6, 14, 0), 1018);
/// Kernels the RDMA cluster guide ran (Fedora 43).
pub const GUIDE_VERIFIED: [&str; 2] = ["6.18.5-200.fc43.x86_64", "6.18.6-200.fc43.x86_64"];
/// The linux-firmware release that breaks ROCm on Strix Halo.
pub const BAD_FIRMWARE: u32 = 20251125;
/// The linux-firmware release of the community toolbox's stable setup.
pub const GOOD_FIRMWARE: u32 = 20260110;
/// The MES scheduler firmware reported to hang Strix Halo.
pub const BAD_MES: &str = "0x00000083";

/// A kernel release as `uname -r` prints it, split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// `major.minor.patch`.
    pub version: (u32, u32, u32),
    /// The distribution's ABI number after the first `-` (`6.17.0-19-generic` → 19).
    pub abi: Option<u32>,
    /// The Ubuntu flavour suffix, when there is one.
    pub flavour: Flavour,
}

/// The kind of kernel, as far as the release string tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Ubuntu's generic (GA or HWE) kernels: `-generic`, `-lowlatency`.
    UbuntuGeneric,
    /// Ubuntu's OEM kernels: `-oem`.
    UbuntuOem,
    /// Anything else (Fedora, Debian, Arch, mainline).
    Other,
}

/// Parses `6.18.5-200.fc43.x86_64`, `6.17.0-19-generic`, `6.14.0-1018-oem`,
/// `6.12.48+deb13-amd64`.
pub fn parse_release(release: &str) -> Option<Release> {
    let head = release.split(['-', '+', '_']).next()?;
    let mut nums = head.split('.').map(|n| n.parse::<u32>());
    let version = (
        nums.next()?.ok()?,
        nums.next()?.ok()?,
        nums.next().unwrap_or(Ok(0)).ok()?,
    );
    let rest = release[head.len()..].trim_start_matches('-');
    let abi = rest
        .split(['-', '.', '+'])
        .next()
        .and_then(|a| a.parse().ok());
    let flavour = if release.ends_with("-oem") {
        Flavour::UbuntuOem
    } else if release.ends_with("-generic") || release.ends_with("-lowlatency") {
        Flavour::UbuntuGeneric
    } else {
        Flavour::Other
    };
    Some(Release {
        version,
        abi,
        flavour,
    })
}

/// How a kernel stands for gfx1151.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelVerdict {
    /// The guides ran exactly this kernel.
    Verified,
    /// Carries the required KFD fixes.
    Good,
    /// Lacks them; `needs` says what would.
    TooOld {
        /// The minimum for this kind of kernel.
        needs: String,
    },
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b, c) = self.version;
        write!(f, "{a}.{b}.{c}")
    }
}

/// Judges a kernel release; `ubuntu` says whether os-release names Ubuntu.
pub fn judge_kernel(release: &str, ubuntu: bool) -> Option<KernelVerdict> {
    if GUIDE_VERIFIED.contains(&release) {
        return Some(KernelVerdict::Verified);
    }
    let r = parse_release(release)?;
    let ok = match (ubuntu, r.flavour) {
        (true, Flavour::UbuntuOem) => {
            r.version >= (6, 18, 0)
                || (r.version == MIN_UBUNTU_OEM.0 && r.abi.is_some_and(|a| a >= MIN_UBUNTU_OEM.1))
        }
        (true, Flavour::UbuntuGeneric) => {
            // Ubuntu kernels keep the patch level at 0 and backport fixes.
            r.version >= (6, 18, 0)
                || (r.version == MIN_UBUNTU_HWE.0 && r.abi.is_some_and(|a| a >= MIN_UBUNTU_HWE.1))
        }
        _ => r.version >= MIN_MAINLINE,
    };
    if ok {
        return Some(KernelVerdict::Good);
    }
    let needs = match (ubuntu, r.flavour) {
        (true, Flavour::UbuntuOem) => "Ubuntu 24.04 OEM 6.14.0-1018 or later".to_string(),
        (true, _) => "Ubuntu 24.04 HWE 6.17.0-19 or later".to_string(),
        _ => "Linux 6.18.4 or later".to_string(),
    };
    Some(KernelVerdict::TooOld { needs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases() {
        let r = parse_release("6.18.5-200.fc43.x86_64").unwrap();
        assert_eq!(
            (r.version, r.abi, r.flavour),
            ((6, 18, 5), Some(200), Flavour::Other)
        );
        let r = parse_release("6.17.0-19-generic").unwrap();
        assert_eq!(
            (r.version, r.abi, r.flavour),
            ((6, 17, 0), Some(19), Flavour::UbuntuGeneric)
        );
        let r = parse_release("6.12.48+deb13-amd64").unwrap();
        assert_eq!(r.version, (6, 12, 48));
        assert_eq!(parse_release("7.0-rc2").unwrap().version, (7, 0, 0));
        assert!(parse_release("garbage").is_none());
    }

    #[test]
    fn verdicts() {
        use KernelVerdict::*;
        assert_eq!(
            judge_kernel("6.18.5-200.fc43.x86_64", false),
            Some(Verified)
        );
        assert_eq!(judge_kernel("6.18.9-200.fc43.x86_64", false), Some(Good));
        assert_eq!(judge_kernel("6.19.2-arch1-1", false), Some(Good));
        assert!(matches!(
            judge_kernel("6.18.3-200.fc43.x86_64", false),
            Some(TooOld { .. })
        ));
        assert!(matches!(
            judge_kernel("6.12.48+deb13-amd64", false),
            Some(TooOld { .. })
        ));
        assert_eq!(judge_kernel("6.17.0-19-generic", true), Some(Good));
        assert_eq!(judge_kernel("6.17.0-35-generic", true), Some(Good));
        assert!(matches!(
            judge_kernel("6.17.0-14-generic", true),
            Some(TooOld { .. })
        ));
        assert!(matches!(
            judge_kernel("6.14.0-37-generic", true),
            Some(TooOld { .. })
        ));
        assert_eq!(judge_kernel("6.14.0-1018-oem", true), Some(Good));
        assert!(matches!(
            judge_kernel("6.14.0-1017-oem", true),
            Some(TooOld { .. })
        ));
        assert_eq!(judge_kernel("7.0.0-14-generic", true), Some(Good));
        assert_eq!(judge_kernel("nonsense", false), None);
    }
}

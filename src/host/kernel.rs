//! Kernel facts: boot parameters (`/proc/cmdline`), memory size
//! (`/proc/meminfo`) and release.

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// One kernel boot parameter: `key` or `key=value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct KernelParam {
    /// The name before `=` (e.g. `amdgpu.gttsize`).
    pub key: String,
    /// The text after the first `=`, without surrounding quotes.
    pub value: Option<String>,
}

/// What the running kernel was booted with.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct KernelFacts {
    /// Kernel release from `/proc/sys/kernel/osrelease`, else (a snapshot
    /// without it) from `/proc/version` or the `BOOT_IMAGE=` of `/proc/cmdline`.
    pub release: Option<String>,
    /// The host path the release was read from.
    pub release_from: Option<String>,
    /// `/proc/cmdline` as read, trimmed.
    pub cmdline: Option<String>,
    /// Every parameter of the command line, in order.
    pub params: Vec<KernelParam>,
    /// `MemTotal` from `/proc/meminfo`, in KiB.
    pub mem_total_kib: Option<u64>,
}

impl KernelFacts {
    /// The value of the last occurrence of `key` (the kernel uses the last one);
    /// `Some(None)` for a flag without a value, `None` when absent.
    pub fn param(&self, key: &str) -> Option<Option<&str>> {
        param_in(&self.params, key)
    }
}

/// The value of the last `key` in `params`, as [`KernelFacts::param`].
pub fn param_in<'a>(params: &'a [KernelParam], key: &str) -> Option<Option<&'a str>> {
    params
        .iter()
        .rev()
        .find(|p| p.key == key)
        .map(|p| p.value.as_deref())
}

/// Reads the kernel facts.
pub fn read(r: &Reader) -> KernelFacts {
    let cmdline = r.line("/proc/cmdline");
    let params = cmdline.as_deref().map(parse_cmdline).unwrap_or_default();
    let mem_total_kib = r.text("/proc/meminfo").and_then(|text| {
        let v = parse_meminfo_total(&text);
        if v.is_none() {
            r.note("/proc/meminfo", "no readable MemTotal line");
        }
        v
    });
    let (release, release_from) = release(r, &params);
    KernelFacts {
        release,
        release_from,
        cmdline,
        params,
        mem_total_kib,
    }
}

/// Where the release is written, best first.
pub const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
const PROC_VERSION: &str = "/proc/version";
const CMDLINE: &str = "/proc/cmdline";

/// The release and the file it came from: `osrelease`, else the third word
/// of `/proc/version` (`Linux version 6.18.5-200.fc43.x86_64 (…`), else the
/// kernel image named by `BOOT_IMAGE=` (`…/vmlinuz-6.18.5-200.fc43.x86_64`).
fn release(r: &Reader, params: &[KernelParam]) -> (Option<String>, Option<String>) {
    let found = r
        .line(OSRELEASE)
        .filter(|s| !s.is_empty())
        .map(|s| (s, OSRELEASE))
        .or_else(|| {
            r.text_quiet(PROC_VERSION)
                .and_then(|t| release_in_version(&t))
                .map(|s| (s, PROC_VERSION))
        })
        .or_else(|| {
            param_in(params, "BOOT_IMAGE")
                .flatten()
                .and_then(release_in_boot_image)
                .map(|s| (s, CMDLINE))
        });
    match found {
        Some((release, from)) => (Some(release), Some(from.to_string())),
        None => (None, None),
    }
}

/// `Linux version 6.12.48+deb13-amd64 (debian-kernel@…) …` → `6.12.48+deb13-amd64`.
pub fn release_in_version(text: &str) -> Option<String> {
    let mut words = text.split_whitespace();
    (words.next()? == "Linux" && words.next()? == "version")
        .then(|| words.next())
        .flatten()
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

/// `(hd0,gpt2)/vmlinuz-6.18.5-200.fc43.x86_64` → `6.18.5-200.fc43.x86_64`;
/// `None` for an image without a version (`/vmlinuz`).
pub fn release_in_boot_image(image: &str) -> Option<String> {
    let name = image.rsplit('/').next()?;
    let release = name
        .strip_prefix("vmlinuz-")
        .or_else(|| name.strip_prefix("vmlinux-"))
        .or_else(|| name.strip_prefix("bzImage-"))?;
    release
        .starts_with(|c: char| c.is_ascii_digit())
        .then(|| release.to_string())
}

/// Splits a kernel command line into parameters the way the kernel does:
/// whitespace separates, double quotes group (`key="a b"`), quotes are dropped,
/// and everything after a lone `--` belongs to init, not the kernel.
pub fn parse_cmdline(cmdline: &str) -> Vec<KernelParam> {
    let mut params = parse_tokens(cmdline);
    if let Some(end) = params
        .iter()
        .position(|p| p.key == "--" && p.value.is_none())
    {
        params.truncate(end);
    }
    params
}

fn parse_tokens(cmdline: &str) -> Vec<KernelParam> {
    split_words(cmdline)
        .iter()
        .map(|w| split_param(w))
        .collect()
}

/// Splits text into words the way the kernel splits its command line (and
/// `iptables-save` quotes its arguments): whitespace separates, double
/// quotes group and are dropped.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_quotes = false;
    let mut started = false;
    for c in text.chars() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                started = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if started {
                    words.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            c => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(current);
    }
    words
}

fn split_param(token: &str) -> KernelParam {
    match token.split_once('=') {
        Some((k, v)) => KernelParam {
            key: k.to_string(),
            value: Some(v.to_string()),
        },
        None => KernelParam {
            key: token.to_string(),
            value: None,
        },
    }
}

/// `MemTotal:  131072000 kB` → 131072000.
pub fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let mut parts = rest.split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => Some(n),
            Some(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_from_version_and_boot_image() {
        assert_eq!(
            release_in_version(
                "Linux version 6.18.5-200.fc43.x86_64 (mockbuild@fedora) (gcc 15) #1 SMP\n"
            )
            .as_deref(),
            Some("6.18.5-200.fc43.x86_64")
        );
        assert_eq!(release_in_version("Linux version\n"), None);
        assert_eq!(release_in_version(""), None);
        assert_eq!(
            release_in_boot_image("(hd0,gpt2)/vmlinuz-6.18.5-200.fc43.x86_64").as_deref(),
            Some("6.18.5-200.fc43.x86_64")
        );
        assert_eq!(
            release_in_boot_image("/boot/vmlinuz-6.12.48+deb13-amd64").as_deref(),
            Some("6.12.48+deb13-amd64")
        );
        assert_eq!(release_in_boot_image("/vmlinuz"), None);
        assert_eq!(release_in_boot_image("/vmlinuz-linux"), None);
    }

    #[test]
    fn cmdline_keeps_order_values_and_quotes() {
        let p = parse_cmdline(
            "BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro  quiet iommu=pt dyndbg=\"file x.c +p\" amdgpu.gttsize=126976\n",
        );
        let keys: Vec<_> = p.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "BOOT_IMAGE",
                "ro",
                "quiet",
                "iommu",
                "dyndbg",
                "amdgpu.gttsize"
            ]
        );
        assert_eq!(p[4].value.as_deref(), Some("file x.c +p"));
        assert_eq!(p[1].value, None);
    }

    #[test]
    fn init_arguments_are_not_kernel_params() {
        let p = parse_cmdline("quiet iommu=pt -- --addr 0.0.0.0 pcie_aspm=off");
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn last_occurrence_wins() {
        let k = KernelFacts {
            params: parse_cmdline("iommu=off iommu=pt quiet"),
            ..Default::default()
        };
        assert_eq!(k.param("iommu"), Some(Some("pt")));
        assert_eq!(k.param("quiet"), Some(None));
        assert_eq!(k.param("pcie_aspm"), None);
    }

    #[test]
    fn meminfo_total() {
        assert_eq!(
            parse_meminfo_total("MemTotal:       131596288 kB\nMemFree: 1 kB\n"),
            Some(131596288)
        );
        assert_eq!(parse_meminfo_total("MemTotal: lots\n"), None);
        assert_eq!(parse_meminfo_total(""), None);
    }
}

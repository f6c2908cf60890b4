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
    /// Kernel release from `/proc/sys/kernel/osrelease`.
    pub release: Option<String>,
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
    KernelFacts {
        release: r.line("/proc/sys/kernel/osrelease"),
        cmdline,
        params,
        mem_total_kib,
    }
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

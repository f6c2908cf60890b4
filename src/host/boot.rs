//! The kernel command line configured for the next boot: the grub defaults
//! (`/etc/default/grub`, then `/etc/default/grub.d/*.cfg`, which Debian's
//! `update-grub` turns into grub.cfg) and the default boot loader entry
//! (`/boot/loader/entries/*.conf`, which grubby and rpm-ostree edit).

use schemars::JsonSchema;
use serde::Serialize;

use super::kernel::{KernelParam, parse_cmdline};
use super::reader::Reader;

/// The grub defaults file.
pub const GRUB_DEFAULT: &str = "/etc/default/grub";
/// Its drop-in directory.
pub const GRUB_DIR: &str = "/etc/default/grub.d";
/// The boot loader entries (Boot Loader Specification).
pub const ENTRIES_DIR: &str = "/boot/loader/entries";
/// grub's environment block on Fedora (`saved_entry`).
const GRUBENV: &str = "/boot/grub2/grubenv";
/// What Debian's `update-grub` writes from the grub defaults.
pub const GRUB_CFG: &str = "/boot/grub/grub.cfg";

/// One `GRUB_CMDLINE_LINUX[_DEFAULT]=` line of a grub defaults file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GrubAssignment {
    /// `GRUB_CMDLINE_LINUX` or `GRUB_CMDLINE_LINUX_DEFAULT`.
    pub var: String,
    /// The value without its quotes.
    pub value: String,
}

/// A grub defaults file and its command-line assignments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GrubFile {
    /// Host path.
    pub path: String,
    /// Its `GRUB_CMDLINE_LINUX[_DEFAULT]=` lines, in order.
    pub assignments: Vec<GrubAssignment>,
}

/// A command line configured in files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ConfiguredCmdline {
    /// The files it comes from (host paths).
    pub files: Vec<String>,
    /// The command line.
    pub cmdline: String,
    /// Its parameters, in order.
    pub params: Vec<KernelParam>,
}

impl ConfiguredCmdline {
    fn new(files: Vec<String>, cmdline: String) -> Self {
        let params = parse_cmdline(&cmdline);
        Self {
            files,
            cmdline,
            params,
        }
    }
}

/// What the next boot's kernel command line is configured to be.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct BootConfig {
    /// The grub defaults files that exist, in the order grub-mkconfig reads them.
    pub grub_files: Vec<GrubFile>,
    /// The default boot loader entry's `options`, when there are entries.
    pub boot_entry: Option<ConfiguredCmdline>,
    /// Grub defaults files changed after `/boot/grub/grub.cfg` was written:
    /// `update-grub` has not run since, so the next boot does not get them.
    pub newer_than_grub_cfg: Vec<String>,
}

impl BootConfig {
    /// The command line the grub defaults give (`None` without grub defaults).
    pub fn grub(&self) -> Option<ConfiguredCmdline> {
        if self.grub_files.is_empty() {
            return None;
        }
        let files = self
            .grub_files
            .iter()
            .filter(|f| !f.assignments.is_empty())
            .map(|f| f.path.clone())
            .collect();
        Some(ConfiguredCmdline::new(
            files,
            grub_cmdline(&self.grub_files),
        ))
    }

    /// The next boot's command line: the boot loader entry where there is
    /// one (the boot loader reads it), else the grub defaults.
    pub fn next_boot(&self) -> Option<ConfiguredCmdline> {
        self.boot_entry.clone().or_else(|| self.grub())
    }
}

/// Reads the boot configuration.
pub fn read(r: &Reader) -> BootConfig {
    let mut paths = vec![GRUB_DEFAULT.to_string()];
    paths.extend(r.files_ending(GRUB_DIR, ".cfg"));
    let grub_files: Vec<GrubFile> = paths
        .into_iter()
        .filter_map(|path| {
            let text = r.text_quiet(&path)?;
            Some(GrubFile {
                assignments: grub_assignments(&text),
                path,
            })
        })
        .collect();
    let modified = |p: &str| r.metadata(p).and_then(|m| m.modified().ok());
    let newer_than_grub_cfg = match modified(GRUB_CFG) {
        Some(cfg) => grub_files
            .iter()
            .filter(|f| modified(&f.path).is_some_and(|m| m > cfg))
            .map(|f| f.path.clone())
            .collect(),
        None => Vec::new(),
    };
    BootConfig {
        grub_files,
        boot_entry: boot_entry(r),
        newer_than_grub_cfg,
    }
}

fn grub_assignments(text: &str) -> Vec<GrubAssignment> {
    text.lines()
        .filter_map(|line| {
            let (var, value) = line.trim().split_once('=')?;
            matches!(var, "GRUB_CMDLINE_LINUX" | "GRUB_CMDLINE_LINUX_DEFAULT").then(|| {
                GrubAssignment {
                    var: var.to_string(),
                    value: unquote(value).to_string(),
                }
            })
        })
        .collect()
}

/// `value` without one pair of surrounding double or single quotes.
pub fn unquote(value: &str) -> &str {
    let v = value.trim();
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v)
}

/// The command line grub-mkconfig builds from `files`: `GRUB_CMDLINE_LINUX`
/// then `GRUB_CMDLINE_LINUX_DEFAULT`. An assignment that mentions a variable
/// (`"$GRUB_CMDLINE_LINUX_DEFAULT x"`) appends; any other replaces.
pub fn grub_cmdline(files: &[GrubFile]) -> String {
    let mut linux: Vec<String> = Vec::new();
    let mut default_args: Vec<String> = Vec::new();
    for a in files.iter().flat_map(|f| &f.assignments) {
        let target = if a.var == "GRUB_CMDLINE_LINUX" {
            &mut linux
        } else {
            &mut default_args
        };
        let words: Vec<String> = a.value.split_whitespace().map(str::to_string).collect();
        if !words.iter().any(|w| w.starts_with('$')) {
            target.clear();
        }
        target.extend(words.into_iter().filter(|w| !w.starts_with('$')));
    }
    linux.extend(default_args);
    linux.join(" ")
}

/// The `options` of the entry the boot loader starts by default: grubenv's
/// `saved_entry` when it names an entry, else the newest kernel's.
fn boot_entry(r: &Reader) -> Option<ConfiguredCmdline> {
    let names: Vec<String> = r
        .dir(ENTRIES_DIR)?
        .into_iter()
        .filter(|n| n.ends_with(".conf") && !n.contains("rescue"))
        .collect();
    let entries: Vec<(String, String)> = names
        .iter()
        .filter_map(|n| {
            let path = format!("{ENTRIES_DIR}/{n}");
            r.text_quiet(&path).map(|t| (path, t))
        })
        .collect();
    let saved = r
        .text_quiet(GRUBENV)
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("saved_entry=").map(str::to_string))
        })
        .map(|id| format!("{ENTRIES_DIR}/{}.conf", id.trim()));
    let (path, text) = entries
        .iter()
        .find(|(p, _)| Some(p) == saved.as_ref())
        .or_else(|| {
            entries
                .iter()
                .max_by(|a, b| version_cmp(&entry_version(&a.1), &entry_version(&b.1)))
        })?;
    let options = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("options"))
        .map(|o| o.trim().to_string())?;
    Some(ConfiguredCmdline::new(vec![path.clone()], options))
}

fn entry_version(text: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("version"))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// Compares versions segment by segment, numbers as numbers
/// (`6.17.10` after `6.17.9`).
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let segments = |s: &str| -> Vec<(u64, String)> {
        let mut out = Vec::new();
        let mut rest = s;
        while !rest.is_empty() {
            let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            if digits > 0 {
                let (d, r) = rest.split_at(digits);
                out.push((d.parse().unwrap_or(u64::MAX), String::new()));
                rest = r;
            } else {
                let n = rest
                    .find(|c: char| c.is_ascii_digit())
                    .unwrap_or(rest.len());
                let (t, r) = rest.split_at(n);
                out.push((0, t.to_string()));
                rest = r;
            }
        }
        out
    };
    segments(a).cmp(&segments(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> GrubFile {
        GrubFile {
            path: path.into(),
            assignments: grub_assignments(text),
        }
    }

    #[test]
    fn grub_defaults_and_dropins_give_the_next_cmdline() {
        let files = [
            file(
                GRUB_DEFAULT,
                "# comment\nGRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX='iommu=pt'\n",
            ),
            file(
                "/etc/default/grub.d/50-x.cfg",
                "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT pci=realloc\"\n",
            ),
        ];
        assert_eq!(grub_cmdline(&files), "iommu=pt quiet pci=realloc");
        // A later plain assignment replaces what came before.
        let files = [
            files[0].clone(),
            files[1].clone(),
            file(
                "/etc/default/grub.d/99-y.cfg",
                "GRUB_CMDLINE_LINUX_DEFAULT=\"splash\"\n",
            ),
        ];
        assert_eq!(grub_cmdline(&files), "iommu=pt splash");
        let config = BootConfig {
            grub_files: files.to_vec(),
            ..BootConfig::default()
        };
        let next = config.next_boot().unwrap();
        assert_eq!(next.files.len(), 3);
        assert_eq!(next.params[0].key, "iommu");
    }

    #[test]
    fn newer_kernels_sort_after_older() {
        use std::cmp::Ordering::Less;
        assert_eq!(version_cmp("6.17.9-300.fc43", "6.17.10-300.fc43"), Less);
        assert_eq!(version_cmp("6.9.1", "6.17.0"), Less);
    }
}

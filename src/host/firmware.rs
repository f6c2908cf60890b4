//! The installed GPU firmware package and its version: the dpkg database
//! (`/var/lib/dpkg/status`), pacman's (`/var/lib/pacman/local/<name>-<ver>/`)
//! or rpm's (`rpm -q` on the live host, `captured/rpm-q.txt` in a snapshot:
//! the rpm database is SQLite, which halobox does not read).

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// Where a snapshot keeps `rpm -q amd-gpu-firmware linux-firmware`.
pub const RPM_Q: &str = "/captured/rpm-q.txt";

/// Packages that carry `/lib/firmware/amdgpu` on the distributions halobox
/// meets: Fedora splits it into `amd-gpu-firmware`, Arch into
/// `linux-firmware-amdgpu`, Debian ships `firmware-amd-graphics`, Ubuntu
/// keeps everything in `linux-firmware`.
pub const GPU_FIRMWARE_PACKAGES: [&str; 4] = [
    "amd-gpu-firmware",
    "linux-firmware-amdgpu",
    "firmware-amd-graphics",
    "linux-firmware",
];

/// One installed package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Version as the package manager prints it (`20260110-1.fc43`,
    /// `20240318.git3b128b60-0ubuntu2.19`).
    pub version: String,
    /// `dpkg`, `pacman` or `rpm`.
    pub manager: String,
}

impl Package {
    /// The upstream linux-firmware release date the version starts with
    /// (`20251125-2` → 20251125), after any epoch.
    pub fn upstream_date(&self) -> Option<u32> {
        let v = self
            .version
            .split_once(':')
            .map_or(&self.version[..], |(_, v)| v);
        let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
        (digits.len() == 8).then(|| digits.parse().ok()).flatten()
    }
}

/// Installed GPU firmware packages, most specific first.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct FirmwareFacts {
    /// Installed packages among [`GPU_FIRMWARE_PACKAGES`], in that order.
    pub packages: Vec<Package>,
}

impl FirmwareFacts {
    /// The package that holds the amdgpu firmware.
    pub fn gpu_package(&self) -> Option<&Package> {
        self.packages.first()
    }
}

/// Reads the package databases.
pub fn read(r: &Reader) -> FirmwareFacts {
    let mut found = dpkg(r);
    found.extend(pacman(r));
    if found.is_empty() {
        found.extend(rpm(r));
    }
    found.sort_by_key(|p| GPU_FIRMWARE_PACKAGES.iter().position(|n| *n == p.name));
    FirmwareFacts { packages: found }
}

fn dpkg(r: &Reader) -> Vec<Package> {
    r.text_quiet("/var/lib/dpkg/status")
        .map(|t| parse_dpkg_status(&t))
        .unwrap_or_default()
}

/// The wanted packages that `dpkg` lists as installed.
pub fn parse_dpkg_status(text: &str) -> Vec<Package> {
    text.split("\n\n")
        .filter_map(|stanza| {
            let field = |key: &str| {
                stanza
                    .lines()
                    .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            };
            let name = field("Package")?;
            let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
            if !installed || !GPU_FIRMWARE_PACKAGES.contains(&name.as_str()) {
                return None;
            }
            Some(Package {
                version: field("Version")?,
                name,
                manager: "dpkg".into(),
            })
        })
        .collect()
}

fn pacman(r: &Reader) -> Vec<Package> {
    let dir = "/var/lib/pacman/local";
    if !r.exists(dir) {
        return Vec::new();
    }
    r.dir(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|entry| parse_name_version(entry, "pacman"))
        .collect()
}

/// `linux-firmware-amdgpu-20251125-2` → that package at `20251125-2`
/// (pacman's folder names, and rpm's `NAME-VERSION-RELEASE.ARCH`).
pub fn parse_name_version(entry: &str, manager: &str) -> Option<Package> {
    // The longest wanted name that prefixes the entry and is followed by a version.
    let name = GPU_FIRMWARE_PACKAGES
        .iter()
        .filter(|n| {
            entry
                .strip_prefix(*n)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        })
        .max_by_key(|n| n.len())?;
    let mut version = &entry[name.len() + 1..];
    if manager == "rpm" {
        version = version
            .rsplit_once('.')
            .filter(|(_, arch)| ["noarch", "x86_64"].contains(arch))
            .map_or(version, |(v, _)| v);
    }
    Some(Package {
        name: name.to_string(),
        version: version.to_string(),
        manager: manager.into(),
    })
}

/// Where rpm-based systems keep the rpm database (Fedora's first, the
/// older path second).
const RPM_DATABASES: [&str; 2] = ["/usr/lib/sysimage/rpm", "/var/lib/rpm"];

/// The host's rpm database folder, when it has one. Debian ships an `rpm`
/// command too, whose default database is `~/.rpmdb`: asking it would
/// create that folder in the user's home, so rpm is only asked about a
/// database that exists.
fn rpm_database(r: &Reader) -> Option<&'static str> {
    RPM_DATABASES.into_iter().find(|dir| {
        ["rpmdb.sqlite", "Packages"]
            .iter()
            .any(|file| r.exists(&format!("{dir}/{file}")))
    })
}

fn rpm(r: &Reader) -> Vec<Package> {
    let text = if r.root().is_live() {
        let Some(database) = rpm_database(r) else {
            return Vec::new();
        };
        let Ok(out) = crate::proc::command("rpm")
            .args(["--dbpath", database, "-q"])
            .args(["amd-gpu-firmware", "linux-firmware"])
            .output()
        else {
            return Vec::new();
        };
        r.write(RPM_Q, &out.stdout);
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        match r.text_quiet(RPM_Q) {
            Some(t) => t,
            None => return Vec::new(),
        }
    };
    text.lines()
        .filter(|l| !l.contains(" is not installed"))
        .filter_map(|l| parse_name_version(l.trim(), "rpm"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpkg_status() {
        let p = parse_dpkg_status(
            "Package: linux-firmware\nStatus: install ok installed\nVersion: 20240318.git3b128b60-0ubuntu2.19\n\nPackage: firmware-amd-graphics\nStatus: deinstall ok config-files\nVersion: 20230210-5\n",
        );
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].version, "20240318.git3b128b60-0ubuntu2.19");
        assert_eq!(p[0].upstream_date(), Some(20240318));
    }

    #[test]
    fn names_and_versions() {
        let p = parse_name_version("linux-firmware-amdgpu-20251125-2", "pacman").unwrap();
        assert_eq!(
            (p.name.as_str(), p.version.as_str()),
            ("linux-firmware-amdgpu", "20251125-2")
        );
        let p = parse_name_version("amd-gpu-firmware-20260110-1.fc43.noarch", "rpm").unwrap();
        assert_eq!(p.version, "20260110-1.fc43");
        assert_eq!(p.upstream_date(), Some(20260110));
        assert!(
            parse_name_version("linux-firmware-whence-20251111-1.fc43.noarch", "rpm").is_none()
        );
        assert!(parse_name_version("linux-api-headers-6.10-1", "pacman").is_none());
        let epoch = Package {
            name: "x".into(),
            version: "1:20251125-1".into(),
            manager: "dpkg".into(),
        };
        assert_eq!(epoch.upstream_date(), Some(20251125));
    }
}

//! What setup reads beyond doctor's facts: the current content of every file
//! a fix writes, the kernel command line the next boot gets without
//! halobox's own grub drop-in (from the host facts' boot configuration), the
//! user whose limits and groups are fixed, and which tools are installed.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::{groups, kernel, memlock, network, usb4};
use crate::host::boot::{GrubFile, grub_cmdline};
use crate::host::{HostFacts, HostRoot, Reader};

/// The distribution family, as the fixes differ by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Distro {
    /// Fedora and derivatives with grubby.
    Fedora,
    /// Fedora Atomic (Silverblue, Kinoite, CoreOS…): rpm-ostree.
    FedoraAtomic,
    /// Debian and derivatives (not Ubuntu).
    Debian,
    /// Ubuntu (netplan).
    Ubuntu,
    /// Anything else: no kernel-parameter or network fixes.
    Other,
}

/// The user whose memlock, groups and rootless podman unit are fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TargetUser {
    /// Login name.
    pub name: String,
    /// Numeric uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// Setup's own facts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SetupFacts {
    /// The snapshot written to, or `None` for this host.
    pub sysroot: Option<String>,
    /// The distribution family.
    pub distro: Distro,
    /// The user to fix (`--user`, else `SUDO_USER` under sudo, else the caller).
    pub user: Option<TargetUser>,
    /// Whether halobox runs as root (effective uid 0).
    pub root: bool,
    /// Content of each file a fix may write (`None`: absent).
    pub files: BTreeMap<String, Option<String>>,
    /// The kernel command line the next boot gets, where it can be known
    /// (grub defaults, boot loader entries, `rpm-ostree kargs`).
    pub next_cmdline: Option<String>,
    /// Programs found (by name).
    pub programs: Vec<String>,
    /// The NetworkManager connection on the data-plane interface (live only).
    pub nm_connection: Option<String>,
    /// Its `ethernet.mtu` now.
    pub nm_mtu: Option<String>,
}

impl SetupFacts {
    /// The content of `path` when it exists.
    pub fn file(&self, path: &str) -> Option<&str> {
        self.files.get(path).and_then(|c| c.as_deref())
    }

    /// True when `program` is installed.
    pub fn has_program(&self, program: &str) -> bool {
        self.programs.iter().any(|p| p == program)
    }
}

/// Programs the fixes run.
const PROGRAMS: [&str; 14] = [
    "ip",
    "systemctl",
    "usermod",
    "groupadd",
    "gpasswd",
    "groupdel",
    "grubby",
    "rpm-ostree",
    "update-grub",
    "nmcli",
    "netplan",
    "firewall-cmd",
    "ufw",
    "devlink",
];

/// Where a snapshot's programs are looked for.
const BIN_DIRS: [&str; 6] = crate::host::tools::SNAPSHOT_PATH;

/// Reads setup's facts from the host behind `root`; `user` overrides the
/// target user.
pub fn gather(
    root: HostRoot,
    facts: &HostFacts,
    user: Option<&str>,
    interface: Option<&str>,
) -> SetupFacts {
    let r = Reader::new(root);
    let live = r.root().is_live();
    let distro = distro(&r, facts);
    let passwd = r.text("/etc/passwd").unwrap_or_default();
    let sudo_user = std::env::var("SUDO_USER").ok().filter(|_| live);
    let name = user
        .map(str::to_string)
        .or(sudo_user.filter(|u| u != "root"))
        .or_else(|| facts.user.name.clone());
    let user = name.and_then(|n| passwd_user(&passwd, &n));
    let mut files = BTreeMap::new();
    let mut paths: Vec<String> = [
        memlock::LIMITS_FILE,
        memlock::SYSTEM_DROPIN,
        groups::GROUP,
        groups::GSHADOW,
        kernel::GRUB_DROPIN,
        network::TRUSTED_ZONE,
        network::TRUSTED_ZONE_VENDOR,
        network::NETPLAN_FILE,
        network::ROCE_UNIT,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(u) = &user {
        paths.push(memlock::user_dropin(&u.home));
    }
    paths.extend(facts.network.usb4().map(|i| usb4::keyfile_path(&i.name)));
    for p in paths {
        let content = r.text_quiet(&p);
        files.insert(p, content);
    }
    let programs: Vec<String> = PROGRAMS
        .iter()
        .filter(|p| BIN_DIRS.iter().any(|d| r.exists(&format!("{d}/{p}"))))
        .map(|p| p.to_string())
        .collect();
    let boot = &facts.boot;
    let next_cmdline = match distro {
        Distro::Debian | Distro::Ubuntu => {
            let others: Vec<GrubFile> = boot
                .grub_files
                .iter()
                .filter(|f| f.path != kernel::GRUB_DROPIN)
                .cloned()
                .collect();
            Some(grub_cmdline(&others))
        }
        Distro::Fedora => boot.boot_entry.as_ref().map(|e| e.cmdline.clone()),
        Distro::FedoraAtomic if live => crate::proc::command("rpm-ostree")
            .arg("kargs")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => None,
    };
    let has_nmcli = programs.iter().any(|p: &String| p == "nmcli");
    let nm_connection = interface
        .filter(|_| live && has_nmcli)
        .and_then(|i| nmcli(&["-g", "GENERAL.CONNECTION", "device", "show", i]));
    let nm_mtu = nm_connection
        .as_deref()
        .and_then(|c| nmcli(&["-g", "802-3-ethernet.mtu", "connection", "show", c]));
    SetupFacts {
        nm_connection,
        nm_mtu,
        sysroot: r.root().sysroot_dir().map(|p| p.display().to_string()),
        distro,
        user,
        root: nix::unistd::geteuid().is_root(),
        files,
        next_cmdline,
        programs,
    }
}

/// One value printed by nmcli, when it runs and prints one.
fn nmcli(args: &[&str]) -> Option<String> {
    let out = crate::proc::command("nmcli").args(args).output().ok()?;
    let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Terse output prints an unset value (`--`) as an empty line.
    (out.status.success() && !value.is_empty() && value != "--").then_some(value)
}

fn distro(r: &Reader, facts: &HostFacts) -> Distro {
    let os = &facts.os;
    if os.is_like("fedora") || os.is_like("rhel") {
        let variant = r
            .text_quiet("/etc/os-release")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("VARIANT_ID="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default();
        if r.exists("/run/ostree-booted") || variant.contains("atomic") || variant == "coreos" {
            Distro::FedoraAtomic
        } else {
            Distro::Fedora
        }
    } else if os.id.as_deref() == Some("ubuntu") {
        Distro::Ubuntu
    } else if os.is_like("debian") || os.is_like("ubuntu") {
        Distro::Debian
    } else {
        Distro::Other
    }
}

fn passwd_user(passwd: &str, name: &str) -> Option<TargetUser> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || f[0] != name {
            return None;
        }
        Some(TargetUser {
            name: f[0].to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: f[5].to_string(),
        })
    })
}

//! The invoking user and the device groups (render, video, rdma).
//!
//! Live: uid and supplementary groups from the kernel (getuid, getgroups).
//! Snapshot: `/proc/self/status` (`Uid:`, `Gid:`, `Groups:`), and membership by
//! user name from `/etc/passwd` and `/etc/group`.

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// Groups that decide access to GPU and RDMA device nodes.
pub const DEVICE_GROUPS: [&str; 3] = ["render", "video", "rdma"];

/// A line of `/etc/group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    /// Group name.
    pub name: String,
    /// Numeric gid.
    pub gid: u32,
    /// Listed members.
    pub members: Vec<String>,
}

/// A device group and whether the user is in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DeviceGroup {
    /// `render`, `video` or `rdma`.
    pub name: String,
    /// Its gid, when `/etc/group` has it.
    pub gid: Option<u32>,
    /// Whether the invoking user is a member; `None` when unknown.
    pub member: Option<bool>,
}

/// Who runs halobox.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct UserFacts {
    /// User name from `/etc/passwd`.
    pub name: Option<String>,
    /// Home directory from `/etc/passwd`.
    pub home: Option<String>,
    /// Login shell from `/etc/passwd`.
    pub shell: Option<String>,
    /// Real uid.
    pub uid: Option<u32>,
    /// Primary gid.
    pub gid: Option<u32>,
    /// Supplementary gids.
    pub groups: Vec<u32>,
    /// render / video / rdma.
    pub device_groups: Vec<DeviceGroup>,
}

impl UserFacts {
    /// True when the user is root.
    pub fn is_root(&self) -> bool {
        self.uid == Some(0)
    }

    /// True when the user's primary or a supplementary group is `gid`.
    pub fn has_gid(&self, gid: u32) -> bool {
        self.gid == Some(gid) || self.groups.contains(&gid)
    }
}

/// Reads the user and device groups.
pub fn read(r: &Reader) -> UserFacts {
    let group_file = group_file(r);
    let passwd = r.text("/etc/passwd").unwrap_or_default();
    let (uid, gid, mut groups) = if r.root().is_live() {
        r.touch_read("/proc/self/status");
        let groups = nix::unistd::getgroups()
            .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
            .unwrap_or_default();
        (
            Some(nix::unistd::getuid().as_raw()),
            Some(nix::unistd::getgid().as_raw()),
            groups,
        )
    } else {
        r.text("/proc/self/status")
            .map(|s| parse_status_ids(&s))
            .unwrap_or((None, None, Vec::new()))
    };
    let entry = uid.and_then(|u| passwd_entry(&passwd, u));
    let name = entry.as_ref().map(|e| e.0.clone());
    if !r.root().is_live()
        && let Some(name) = &name
    {
        for g in &group_file {
            if g.members.iter().any(|m| m == name) && !groups.contains(&g.gid) {
                groups.push(g.gid);
            }
        }
    }
    groups.sort_unstable();
    groups.dedup();
    let (home, shell) = entry.map(|e| (Some(e.1), Some(e.2))).unwrap_or_default();
    let mut user = UserFacts {
        name,
        home,
        shell,
        uid,
        gid,
        groups,
        device_groups: Vec::new(),
    };
    user.device_groups = DEVICE_GROUPS
        .iter()
        .map(|&name| {
            let gid = group_file.iter().find(|g| g.name == name).map(|g| g.gid);
            DeviceGroup {
                name: name.to_string(),
                gid,
                member: match (gid, uid) {
                    (Some(g), Some(_)) => Some(user.has_gid(g)),
                    (None, Some(_)) => Some(false),
                    _ => None,
                },
            }
        })
        .collect();
    user
}

/// The entries of `/etc/group` (none when it cannot be read).
pub fn group_file(r: &Reader) -> Vec<GroupEntry> {
    r.text("/etc/group")
        .map(|t| parse_group(&t))
        .unwrap_or_default()
}

/// Parses `/etc/group`; malformed lines are skipped.
pub fn parse_group(text: &str) -> Vec<GroupEntry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let mut f = line.split(':');
            let name = f.next()?.to_string();
            let _password = f.next()?;
            let gid = f.next()?.parse().ok()?;
            let members = f
                .next()
                .unwrap_or("")
                .split(',')
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect();
            Some(GroupEntry { name, gid, members })
        })
        .collect()
}

/// Name, home and shell of `uid` in an `/etc/passwd` text.
fn passwd_entry(passwd: &str, uid: u32) -> Option<(String, String, String)> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() < 7 || f[2].parse::<u32>().ok()? != uid {
            return None;
        }
        Some((f[0].to_string(), f[5].to_string(), f[6].to_string()))
    })
}

/// Real uid, real gid and supplementary groups from `/proc/<pid>/status`.
pub fn parse_status_ids(status: &str) -> (Option<u32>, Option<u32>, Vec<u32>) {
    let first = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    let groups = status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    (first("Uid:"), first("Gid:"), groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_file() {
        let g = parse_group("root:x:0:\nrender:x:105:halo,bob\nbroken\nvideo:x:39:\n");
        assert_eq!(g.len(), 3);
        assert_eq!(g[1].members, ["halo", "bob"]);
        assert_eq!(g[2].gid, 39);
    }

    #[test]
    fn status_ids() {
        let (u, g, groups) = parse_status_ids(
            "Name:\tbash\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t10 39 105 \n",
        );
        assert_eq!((u, g), (Some(1000), Some(1000)));
        assert_eq!(groups, [10, 39, 105]);
    }
}

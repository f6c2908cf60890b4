//! Owner and mode of device nodes (`/dev/kfd`, `/dev/dri/*`, `/dev/infiniband/*`).
//!
//! A snapshot tree cannot hold device nodes, so it holds empty files plus
//! `captured/dev-stat.txt`, the output of
//! `stat -c '%n %a %u %g' /dev/kfd /dev/dri/* /dev/infiniband/*` on that host.
//! Only those lines count: the placeholder files' own metadata says nothing
//! about the captured host, so a node without a line (or a snapshot without
//! the file) has an unknown mode and owner.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

use schemars::JsonSchema;
use serde::Serialize;

use super::reader::Reader;

/// Where a snapshot keeps the captured `stat` lines for its device nodes.
pub const DEV_STAT: &str = "/captured/dev-stat.txt";

/// A device node and who may open it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DeviceNode {
    /// Host path, e.g. `/dev/dri/renderD128`.
    pub path: String,
    /// Permission bits as four octal digits, e.g. `0660`.
    pub mode: Option<String>,
    /// Owner uid.
    pub uid: Option<u32>,
    /// Owner gid.
    pub gid: Option<u32>,
}

impl DeviceNode {
    /// Permission bits as a number.
    pub fn mode_bits(&self) -> Option<u32> {
        self.mode
            .as_deref()
            .and_then(|m| u32::from_str_radix(m, 8).ok())
    }

    /// The node's file name (`kfd`, `uverbs0`, `rdma_cm`).
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or_default()
    }
}

/// Captured `stat` lines of a snapshot, by path.
#[derive(Debug, Default)]
pub struct StatTable {
    entries: BTreeMap<String, (u32, u32, u32)>,
    live: bool,
}

impl StatTable {
    /// Loads the snapshot's table; empty on the live host.
    pub fn load(r: &Reader) -> Self {
        if r.root().is_live() {
            return Self {
                live: true,
                ..Self::default()
            };
        }
        let Some(text) = r.text(DEV_STAT) else {
            return Self::default();
        };
        let mut map = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match parse_stat_line(line) {
                Some((path, entry)) => {
                    map.insert(path, entry);
                }
                None => r.note(
                    DEV_STAT,
                    format!("line {}: expected 'PATH MODE UID GID', got {line:?}", n + 1),
                ),
            }
        }
        Self {
            entries: map,
            live: false,
        }
    }
}

/// `/dev/kfd 660 0 105` → (`/dev/kfd`, (0o660, 0, 105)).
pub fn parse_stat_line(line: &str) -> Option<(String, (u32, u32, u32))> {
    let mut parts = line.split_whitespace();
    let path = parts.next()?;
    let mode = u32::from_str_radix(parts.next()?, 8).ok()?;
    let uid = parts.next()?.parse().ok()?;
    let gid = parts.next()?.parse().ok()?;
    if parts.next().is_some() || mode > 0o7777 {
        return None;
    }
    Some((path.to_string(), (mode, uid, gid)))
}

/// The node at `host_path` if it exists.
pub fn read(r: &Reader, table: &StatTable, host_path: &str) -> Option<DeviceNode> {
    if !r.exists(host_path) {
        return None;
    }
    let (mode, uid, gid) = match table.entries.get(host_path) {
        Some(&(m, u, g)) => (Some(m), Some(u), Some(g)),
        None if !table.live => (None, None, None),
        None => match r.metadata(host_path) {
            Some(m) => {
                let (mode, uid, gid) = (m.mode() & 0o7777, m.uid(), m.gid());
                if m.file_type().is_char_device() || m.file_type().is_block_device() {
                    r.write(
                        DEV_STAT,
                        format!("{host_path} {mode:o} {uid} {gid}\n").as_bytes(),
                    );
                }
                (Some(mode), Some(uid), Some(gid))
            }
            None => (None, None, None),
        },
    };
    Some(DeviceNode {
        path: host_path.to_string(),
        mode: mode.map(|m| format!("{m:04o}")),
        uid,
        gid,
    })
}

/// Every node in a `/dev` directory whose name passes `keep`.
pub fn read_dir(
    r: &Reader,
    table: &StatTable,
    dir: &str,
    keep: impl Fn(&str) -> bool,
) -> Vec<DeviceNode> {
    if !r.exists(dir) {
        return Vec::new();
    }
    r.dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| keep(n))
        .filter_map(|n| read(r, table, &format!("{dir}/{n}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines() {
        assert_eq!(
            parse_stat_line("/dev/kfd 660 0 105"),
            Some(("/dev/kfd".into(), (0o660, 0, 105)))
        );
        assert_eq!(parse_stat_line("/dev/kfd 999 0 105"), None);
        assert_eq!(parse_stat_line("/dev/kfd 660 0"), None);
        assert_eq!(parse_stat_line("/dev/kfd 660 0 1 extra"), None);
    }
}

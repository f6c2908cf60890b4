//! Device groups: the target user joins the groups that own the GPU device
//! nodes (`/dev/kfd`, `/dev/dri/renderD*`, usually `render`) and `video`,
//! and those of the RDMA nodes (`/dev/infiniband/uverbs*`, `rdma_cm`) and
//! `rdma`, for the nodes others cannot open.
//!
//! Decided from `/etc/group` itself, not from who runs halobox: under sudo
//! the caller is root, who opens every node, while the user to fix is not.
//! On the live host `usermod -aG` does it; in a snapshot `/etc/group` (and
//! `/etc/gshadow` when present) are edited as files.

use super::{Action, Cmd, Input, Step, When, write_if_changed};
use crate::host::devnodes::DeviceNode;
use crate::host::users::parse_group;

/// The group file.
pub const GROUP: &str = "/etc/group";
/// The shadow group file.
pub const GSHADOW: &str = "/etc/gshadow";

pub(super) fn steps(input: &Input) -> Vec<Step> {
    let Some(user) = &input.setup.user else {
        return Vec::new();
    };
    let groups = parse_group(input.setup.file(GROUP).unwrap_or_default());
    let f = &input.facts.gpu;
    let mut nodes: Vec<(&str, &DeviceNode, &str)> = Vec::new();
    if let Some(kfd) = &f.kfd {
        nodes.push(("gpu.kfd_access", kfd, "video"));
    }
    nodes.extend(
        f.dri
            .iter()
            .filter(|d| d.path.contains("renderD"))
            .map(|d| ("gpu.render_access", d, "video")),
    );
    nodes.extend(
        input
            .facts
            .rdma
            .user_nodes()
            .map(|n| ("rdma.access", n, "rdma")),
    );
    let mut wanted: Vec<String> = Vec::new();
    let mut checks: Vec<String> = Vec::new();
    for (check, node, companion) in nodes {
        let (Some(bits), Some(gid)) = (node.mode_bits(), node.gid) else {
            continue;
        };
        // Open to all already, closed to the group too, or root's own
        // group (membership in it is not what a device needs).
        if bits & 0o006 == 0o006 || bits & 0o060 != 0o060 || gid == 0 {
            continue;
        }
        let Some(g) = groups.iter().find(|g| g.gid == gid) else {
            continue;
        };
        for name in [g.name.as_str(), companion] {
            let in_it = groups
                .iter()
                .find(|e| e.name == name)
                .is_some_and(|e| e.gid == user.gid || e.members.contains(&user.name));
            let exists = groups.iter().any(|e| e.name == name);
            if exists && !in_it && !wanted.iter().any(|w| w == name) {
                wanted.push(name.to_string());
            }
        }
        if !checks.iter().any(|c| c == check) {
            checks.push(check.to_string());
        }
    }
    if wanted.is_empty() {
        return Vec::new();
    }
    let actions = if input.setup.sysroot.is_some() {
        let mut actions: Vec<Action> = Vec::new();
        for (path, member_field) in [(GROUP, 3), (GSHADOW, 3)] {
            if let Some(old) = input.setup.file(path) {
                let new = add_member(old, &wanted, &user.name, member_field);
                actions.extend(write_if_changed(path, Some(old), new));
            }
        }
        actions
    } else {
        wanted
            .iter()
            .map(|g| {
                input.command(Cmd::reversible(
                    &["usermod", "-aG", g, &user.name],
                    &["gpasswd", "-d", &user.name, g],
                ))
            })
            .collect()
    };
    vec![Step {
        family: "groups".into(),
        checks,
        title: format!("add {} to {}", user.name, wanted.join(", ")),
        needs_root: true,
        when: When::Relogin,
        actions,
    }]
}

/// `text` (a group or gshadow file) with `user` added to the member list
/// (field `field`, 0-based) of each group in `groups`; other lines untouched.
fn add_member(text: &str, groups: &[String], user: &str, field: usize) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let mut f: Vec<String> = body.split(':').map(str::to_string).collect();
        if f.len() > field && groups.contains(&f[0]) {
            let mut members: Vec<&str> = f[field].split(',').filter(|m| !m.is_empty()).collect();
            if !members.contains(&user) {
                members.push(user);
            }
            f[field] = members.join(",");
            out.push_str(&f.join(":"));
            out.push_str(&line[body.len()..]);
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_added_once_and_other_lines_kept() {
        let text = "root:x:0:\nrender:x:105:\nvideo:x:39:bob\n# comment\n";
        let g = vec!["render".to_string(), "video".to_string()];
        let out = add_member(text, &g, "halo", 3);
        assert_eq!(
            out,
            "root:x:0:\nrender:x:105:halo\nvideo:x:39:bob,halo\n# comment\n"
        );
        assert_eq!(add_member(&out, &g, "halo", 3), out);
        let parsed = parse_group(&out);
        assert!(parsed[1].members.contains(&"halo".to_string()));
    }
}

//! `halobox setup` live, as root inside a throwaway container of the Debian
//! image scripts/engines/start.sh builds (localhost/halobox-distro:1): real
//! limits.d and systemd drop-in files, real `usermod`, checked with the
//! container's own `id` and `getent`, then `--undo`; and as an unprivileged
//! user, refused. Never touches this machine's configuration. Run under
//! `flock /tmp/halobox-live.lock` (it uses rootful podman).

mod common;

use std::process::Output;

use common::engines::{PODMAN, cleanup, cli, require};

const IMAGE: &str = "localhost/halobox-distro:1";

fn exec(name: &str, user: &str, script: &str) -> Output {
    cli(
        "podman",
        &["exec", "--user", user, name, "sh", "-c", script],
    )
}

fn ok(out: Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "failed: {text}");
    text
}

/// A container with a GPU-like `/dev/kfd` (mode 0660, group render), a
/// user `halo` outside that group, the stock 8 MiB memlock (podman's default here), podman's
/// binary present (as `podman` on a real host), and this halobox bound in.
fn start(name: &str) {
    require(PODMAN);
    cleanup("podman", &[name]);
    let bin = env!("CARGO_BIN_EXE_halobox");
    ok(cli(
        "podman",
        &[
            "run",
            "-d",
            "--name",
            name,
            "--network",
            "none",
            "--device",
            "/dev/null:/dev/kfd",
            "-v",
            &format!("{bin}:/usr/local/bin/halobox:ro"),
            IMAGE,
            "sleep",
            "infinity",
        ],
    ));
    ok(exec(
        name,
        "root",
        "groupadd -r render && chgrp render /dev/kfd && chmod 0660 /dev/kfd \
         && useradd -m -u 1500 -s /bin/bash halo \
         && ln -s /bin/true /usr/bin/podman",
    ));
}

#[test]
fn setup_as_root_in_a_debian_container_then_undo() {
    let name = "hbx-setup-root";
    start(name);
    let before = ok(exec(
        name,
        "root",
        "cat /etc/group /etc/gshadow /etc/passwd; ls -A /etc/security/limits.d /etc/systemd/system",
    ));
    let plan = ok(exec(name, "root", "halobox setup --dry-run --user halo"));
    assert!(plan.contains("run: usermod -aG render halo"), "{plan}");
    assert!(plan.contains("run: usermod -aG video halo"), "{plan}");
    assert!(
        plan.contains("systemctl is not installed: systemctl daemon-reload"),
        "{plan}"
    );
    let applied = ok(exec(name, "root", "halobox setup --yes --user halo"));
    for line in [
        "wrote /etc/security/limits.d/90-halobox-memlock.conf",
        "wrote /etc/systemd/system/podman.service.d/memlock.conf",
        "wrote /home/halo/.config/systemd/user/podman.service.d/memlock.conf",
        "ran usermod -aG render halo",
        "left to do: log out and back in",
    ] {
        assert!(applied.contains(line), "missing {line:?} in:\n{applied}");
    }
    // The container's own tools see the changes.
    let id = ok(exec(name, "root", "id -nG halo"));
    assert!(id.split_whitespace().any(|g| g == "render"), "{id}");
    assert!(id.split_whitespace().any(|g| g == "video"), "{id}");
    let render = ok(exec(name, "root", "getent group render"));
    assert!(render.trim_end().ends_with(":halo"), "{render}");
    assert_eq!(
        ok(exec(
            name,
            "root",
            "cat /etc/systemd/system/podman.service.d/memlock.conf"
        )),
        "[Service]\nLimitMEMLOCK=infinity\n"
    );
    assert_eq!(
        ok(exec(
            name,
            "root",
            "stat -c %u:%g /home/halo/.config/systemd/user/podman.service.d/memlock.conf"
        ))
        .trim(),
        "1500:1500"
    );
    // A new login of halo gets the limit through PAM's limits.d.
    let limits = ok(exec(
        name,
        "root",
        "cat /etc/security/limits.d/90-halobox-memlock.conf",
    ));
    assert!(limits.contains("* hard memlock unlimited"), "{limits}");
    // Idempotent: the second run has nothing to do.
    let again = ok(exec(name, "root", "halobox setup --yes --user halo"));
    assert!(again.contains("nothing to do"), "{again}");
    // Undo: groups left, files removed, /etc/group and friends as before.
    let undone = ok(exec(name, "root", "halobox setup --undo --yes"));
    assert!(undone.contains("ran gpasswd -d halo render"), "{undone}");
    let id = ok(exec(name, "root", "id -nG halo"));
    assert!(!id.contains("render") && !id.contains("video"), "{id}");
    let after = ok(exec(
        name,
        "root",
        "cat /etc/group /etc/gshadow /etc/passwd; ls -A /etc/security/limits.d /etc/systemd/system",
    ));
    assert_eq!(after, before);
    let left = ok(exec(
        name,
        "root",
        "ls -A /home/halo /var/lib; test ! -e /var/lib/halobox && echo gone",
    ));
    assert!(!left.contains(".config") && left.contains("gone"), "{left}");
    cleanup("podman", &[name]);
}

#[test]
fn setup_as_an_unprivileged_user_is_refused_and_changes_nothing() {
    let name = "hbx-setup-user";
    start(name);
    let out = exec(name, "halo", "halobox setup --yes");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("error: setup needs root for: podman (memlock.podman_service), memlock (memlock.user), groups (gpu.kfd_access); nothing changed\n  hint: run it as root (sudo halobox setup)"),
        "{text}"
    );
    let files = ok(exec(
        name,
        "root",
        "ls -A /etc/security/limits.d /home/halo; id -nG halo",
    ));
    assert!(
        !files.contains("halobox") && !files.contains(".config"),
        "{files}"
    );
    assert!(!files.contains("render"), "{files}");
    cleanup("podman", &[name]);
}

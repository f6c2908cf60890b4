//! `halobox setup` against copies of the snapshot fixtures: the plan, the
//! writes into the copy, doctor passing afterwards (memlock and kernel
//! parameters as pending a re-login or reboot), a second run changing
//! nothing, `--undo` restoring every file byte for byte and doctor's
//! verdicts with it, and the refusals.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{check, copy_tree, fixture_path, halobox, run_json};

/// Every entry of a tree: kind, mode and content (or link target).
fn state(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (u32, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let body = if meta.file_type().is_symlink() {
            std::fs::read_link(&p)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else if meta.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            Vec::new()
        };
        out.insert(rel, (meta.mode(), body));
        if meta.is_dir() {
            walk(root, &p, out);
        }
    }
}

fn copy(name: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_path(name), dir.path());
    let s = dir.path().display().to_string();
    (dir, s)
}

fn setup(args: &[&str]) -> std::process::Output {
    halobox().arg("setup").args(args).output().unwrap()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn setup_fixes_a_snapshot_copy_then_changes_nothing_and_undo_restores_every_byte() {
    let (_dir, root) = copy("broken-e810");
    let before = state(Path::new(&root));
    let (untouched, _) = run_json(&["doctor", "--json", "--sysroot", &root]);
    let out = setup(&["--sysroot", &root, "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    for line in [
        "wrote /etc/security/limits.d/90-halobox-memlock.conf",
        "wrote /etc/group",
        "wrote /etc/firewalld/zones/trusted.xml",
        "wrote /etc/default/grub.d/90-halobox.cfg",
        "wrote /home/halo/.config/systemd/user/podman.service.d/memlock.conf",
        "not run under --sysroot: update-grub",
        "gpu.kfd_access: FAIL -> PASS",
        "net.firewall: FAIL -> PASS",
        "kernel.iommu: WARN -> PASS (after reboot)",
        "memlock.user: FAIL -> PASS (after re-login)",
        "left to do: reboot",
    ] {
        assert!(said.contains(line), "missing {line:?} in:\n{said}");
    }
    let r = Path::new(&root);
    assert_eq!(
        std::fs::read_to_string(r.join("etc/security/limits.d/90-halobox-memlock.conf")).unwrap(),
        "# written by halobox setup: RDMA pins the memory it registers\n* soft memlock unlimited\n* hard memlock unlimited\n"
    );
    let grub = std::fs::read_to_string(r.join("etc/default/grub.d/90-halobox.cfg")).unwrap();
    assert!(
        grub.contains(
            "GRUB_CMDLINE_LINUX_DEFAULT=\"${GRUB_CMDLINE_LINUX_DEFAULT} iommu=pt pci=realloc pcie_aspm=off\""
        ),
        "{grub}"
    );
    // The changed /etc/group was backed up next to itself, byte for byte.
    let backups: Vec<_> = std::fs::read_dir(r.join("etc"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("group.halobox-bak."))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(
        std::fs::read(r.join("etc").join(&backups[0])).unwrap(),
        before["etc/group"].1
    );
    // doctor on the copy passes what setup fixed in files: at once, or as
    // waiting for the re-login or reboot that makes the running system see it.
    let (report, _) = run_json(&["doctor", "--json", "--sysroot", &root]);
    for (id, pending) in [
        ("gpu.kfd_access", None),
        ("gpu.render_access", None),
        ("net.firewall", None),
        ("memlock.user", Some("re-login")),
        ("memlock.podman_service", Some("re-login")),
        ("kernel.iommu", Some("reboot")),
        ("kernel.pci_realloc", Some("reboot")),
        ("kernel.pcie_aspm", Some("reboot")),
    ] {
        let c = check(&report, id);
        assert_eq!(c["status"], "PASS", "{id}: {report:#}");
        assert_eq!(c["pending"].as_str(), pending, "{id}: {c:#}");
        assert!(
            check(&untouched, id)["status"] != "PASS",
            "{id} passed before setup"
        );
    }
    let summary = check(&report, "memlock.user")["summary"].as_str().unwrap();
    for part in [
        "/etc/security/limits.d/90-halobox-memlock.conf",
        "next login",
        "soft 8 MiB, hard 8 MiB",
    ] {
        assert!(summary.contains(part), "{part:?} not in {summary}");
    }
    let summary = check(&report, "kernel.iommu")["summary"].as_str().unwrap();
    assert!(
        summary.contains("/etc/default/grub.d/90-halobox.cfg: takes effect after a reboot"),
        "{summary}"
    );
    let shown = String::from_utf8(
        halobox()
            .args(["doctor", "--sysroot", &root])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        shown.contains("PASS  kernel.iommu            (after reboot) iommu=pt"),
        "{shown}"
    );
    assert!(
        shown.contains("(2 after re-login, 3 after reboot)"),
        "{shown}"
    );
    // A second run finds nothing to do and changes nothing.
    let after_first = state(r);
    let out = setup(&["--sysroot", &root, "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to do"), "{}", text(&out));
    assert_eq!(state(r), after_first, "the second run changed the tree");
    // --undo restores every file byte for byte and removes what it created.
    let out = setup(&["--sysroot", &root, "--undo", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("restored /etc/group"), "{}", text(&out));
    assert_eq!(state(r), before, "undo did not restore the tree");
    // ...and doctor's verdicts with it.
    let (undone, _) = run_json(&["doctor", "--json", "--sysroot", &root]);
    for id in [
        "memlock.user",
        "memlock.podman_service",
        "kernel.iommu",
        "kernel.pci_realloc",
        "kernel.pcie_aspm",
    ] {
        assert_eq!(check(&undone, id), check(&untouched, id), "{id}");
        assert!(check(&undone, id).get("pending").is_none(), "{id}");
    }
    let out = setup(&["--sysroot", &root, "--undo", "--yes"]);
    assert!(text(&out).contains("nothing to undo"), "{}", text(&out));
}

#[test]
fn dry_run_prints_the_plan_by_when_it_takes_effect_and_changes_nothing() {
    let (_dir, root) = copy("broken-e810");
    let before = state(Path::new(&root));
    let out = setup(&["--sysroot", &root, "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    let now = said.find("takes effect now:").expect("now group");
    let relogin = said
        .find("takes effect after logging out and back in:")
        .expect("relogin group");
    let reboot = said
        .find("takes effect after a reboot:")
        .expect("reboot group");
    assert!(now < relogin && relogin < reboot, "{said}");
    for line in [
        "--- /dev/null\n      +++ /etc/security/limits.d/90-halobox-memlock.conf",
        "-render:x:992:\n      +render:x:992:halo",
        "not fixed by halobox (do these by hand):",
        "rdma.firmware:",
        "ip link set enp194s0np0 mtu 9000   # not run under --sysroot",
    ] {
        assert!(said.contains(line), "missing {line:?} in:\n{said}");
    }
    assert_eq!(state(Path::new(&root)), before);
    let (plan, code) = run_json(&["setup", "--sysroot", &root, "--dry-run", "--json"]);
    assert_eq!(code, 0);
    let families: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["family"].as_str().unwrap())
        .collect();
    assert_eq!(
        families,
        ["podman", "firewall", "memlock", "groups", "kernel"]
    );
    assert_eq!(plan["steps"][4]["when"], "reboot");
    assert_eq!(state(Path::new(&root)), before);
}

#[test]
fn only_and_skip_select_fixes_and_unknown_names_are_refused() {
    let (_dir, root) = copy("broken-e810");
    let (plan, _) = run_json(&[
        "setup",
        "--sysroot",
        &root,
        "--dry-run",
        "--json",
        "--only",
        "memlock,kernel.iommu",
    ]);
    let families: Vec<&str> = plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["family"].as_str().unwrap())
        .collect();
    assert_eq!(families, ["memlock", "kernel"]);
    let (plan, _) = run_json(&[
        "setup",
        "--sysroot",
        &root,
        "--dry-run",
        "--json",
        "--skip",
        "kernel,groups,podman",
    ]);
    assert_eq!(plan["steps"].as_array().unwrap().len(), 2, "{plan:#}");
    let out = setup(&["--sysroot", &root, "--dry-run", "--only", "memlok"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("unknown fix memlok\n  hint:"),
        "{}",
        text(&out)
    );
}

#[test]
fn without_a_terminal_and_without_yes_nothing_is_applied() {
    let (_dir, root) = copy("broken-e810");
    let before = state(Path::new(&root));
    let out = halobox()
        .args(["setup", "--sysroot", &root])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("error: not applying the plan without confirmation: no terminal to ask on\n  hint: review it with --dry-run, then pass --yes"),
        "{}",
        text(&out)
    );
    assert_eq!(state(Path::new(&root)), before);
}

#[test]
fn a_symlink_out_of_the_snapshot_is_never_written_through() {
    let (_dir, root) = copy("broken-e810");
    let outside = tempfile::tempdir().unwrap();
    let r = Path::new(&root);
    std::fs::create_dir_all(r.join("etc/security")).unwrap();
    std::os::unix::fs::symlink(outside.path(), r.join("etc/security/limits.d")).unwrap();
    let out = setup(&["--sysroot", &root, "--yes", "--only", "memlock"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("is absolute"), "{}", text(&out));
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn the_kernel_fix_follows_the_distribution() {
    let (_dir, root) = copy("broken-e810");
    let r = Path::new(&root);
    std::fs::write(
        r.join("etc/os-release"),
        "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=43\nPRETTY_NAME=\"Fedora Linux 43\"\n",
    )
    .unwrap();
    let out = setup(&["--sysroot", &root, "--dry-run", "--only", "kernel"]);
    let said = text(&out);
    assert!(
        said.contains("grubby --update-kernel=ALL --args=iommu=pt   # not run under --sysroot"),
        "{said}"
    );
    // The boot entry (what grubby edits) already has them: doctor passes
    // them as waiting for a reboot and setup plans nothing.
    std::fs::create_dir_all(r.join("boot/loader/entries")).unwrap();
    std::fs::write(
        r.join("boot/loader/entries/abc-6.18.5-200.fc43.x86_64.conf"),
        "title Fedora\nversion 6.18.5-200.fc43.x86_64\noptions root=UUID=1 ro iommu=pt pci=realloc pcie_aspm=off\n",
    )
    .unwrap();
    let plan_kernel = || {
        text(&setup(&[
            "--sysroot",
            &root,
            "--dry-run",
            "--only",
            "kernel",
        ]))
    };
    let said = plan_kernel();
    assert!(said.contains("nothing to do"), "{said}");
    let (report, _) = run_json(&["doctor", "--json", "--sysroot", &root]);
    assert_eq!(check(&report, "kernel.pcie_aspm")["pending"], "reboot");
    std::fs::remove_dir_all(r.join("boot")).unwrap();
    std::fs::write(
        r.join("etc/os-release"),
        "NAME=\"Fedora Linux\"\nID=fedora\nVARIANT_ID=silverblue\nVERSION_ID=43\n",
    )
    .unwrap();
    std::fs::create_dir_all(r.join("run")).unwrap();
    std::fs::write(r.join("run/ostree-booted"), "").unwrap();
    let said = plan_kernel();
    assert!(
        said.contains("rpm-ostree kargs --append-if-missing=pcie_aspm=off"),
        "{said}"
    );
    // Debian with the parameters already in /etc/default/grub: nothing to do.
    std::fs::write(r.join("etc/os-release"), "ID=debian\nVERSION_ID=13\n").unwrap();
    std::fs::create_dir_all(r.join("etc/default")).unwrap();
    std::fs::write(
        r.join("etc/default/grub"),
        "GRUB_CMDLINE_LINUX=\"iommu=pt pci=realloc pcie_aspm=off\"\n",
    )
    .unwrap();
    let said = plan_kernel();
    assert!(said.contains("nothing to do"), "{said}");
}

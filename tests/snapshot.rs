//! `halobox snapshot`: a snapshot of a host judges like the host. `doctor
//! --json` live and `doctor --json --sysroot` on the unpacked snapshot are
//! compared check by check, on this machine and on a namespace node with an
//! engine; `--redact` leaves no MAC or hostname and replaces consistently.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::netns::Nodes;
use serde_json::Value;

/// Checks that can only be judged on the running host, with the reason.
/// None so far: every fact doctor uses is stored in the snapshot.
const LIVE_ONLY: &[(&str, &str)] = &[];

/// id → (status, summary, fix) of a doctor report.
fn checks(report: &Value) -> BTreeMap<String, (Value, Value, Value)> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                (c["status"].clone(), c["summary"].clone(), c["fix"].clone()),
            )
        })
        .collect()
}

fn json(out: &Output, what: &str) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The same verdict, summary and fix for every check, but the live-only
/// ones. `before` and `after` are doctor live just before the snapshot and
/// just after it: a check whose live answer changed in between (another
/// test's interfaces or engine service came or went) is not comparable.
fn same_verdicts(before: &Value, after: &Value, snap: &Value, host: &str) {
    let (live, after, snap) = (checks(before), checks(after), checks(snap));
    let ids: Vec<&String> = live.keys().chain(snap.keys()).collect();
    assert!(live.len() > 10, "{host}: {} checks", live.len());
    let mut moved = 0;
    for id in ids {
        if let Some((_, why)) = LIVE_ONLY.iter().find(|(l, _)| l == id) {
            eprintln!("{host}: {id} is judged live only: {why}");
            continue;
        }
        if live.get(id) != after.get(id) {
            eprintln!("{host}: {id} changed on the live host while the test ran");
            moved += 1;
            continue;
        }
        assert_eq!(
            live.get(id),
            snap.get(id),
            "{host}: {id} differs between doctor live (left) and on its snapshot (right)"
        );
    }
    assert!(
        moved <= 2,
        "{host}: {moved} checks changed while the test ran"
    );
}

fn unpack(archive: &Path, into: &Path) {
    let file = fs::File::open(archive).expect("the archive");
    tar::Archive::new(flate2::read::GzDecoder::new(file))
        .unpack(into)
        .expect("unpack the snapshot");
}

/// A halobox command that sees no cluster.toml (`doctor` live reads the
/// user's; a snapshot is judged as another machine).
fn halobox(config: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_halobox"));
    cmd.env("XDG_CONFIG_HOME", config)
        .env("HOME", config)
        .env_remove("HSA_OVERRIDE_GFX_VERSION");
    cmd
}

/// This machine, with a tool installed where a user's installer puts it
/// (on PATH, outside the system directories a snapshot is searched in).
#[test]
fn a_snapshot_of_this_machine_judges_like_this_machine() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("local-bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("distrobox"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(bin.join("distrobox"), fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = dir.path().join("here.tar.gz");
    let doctor_live = || {
        halobox(dir.path())
            .env("PATH", &path)
            .args(["doctor", "--json"])
            .output()
            .unwrap()
    };
    let before = doctor_live();
    let made = halobox(dir.path())
        .env("PATH", &path)
        .arg("snapshot")
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", common::text(&made));
    let after = doctor_live();
    unpack(&out, dir.path());
    let root = dir.path().join("here");
    for must in [
        "proc/self/limits",
        "captured/ip-addr.json",
        "captured/dev-stat.txt",
        "usr/local/bin/distrobox",
    ] {
        assert!(root.join(must).exists(), "{must} is in the snapshot");
    }
    let snap = halobox(dir.path())
        .args(["doctor", "--json", "--sysroot"])
        .arg(&root)
        .output()
        .unwrap();
    same_verdicts(
        &json(&before, "doctor"),
        &json(&after, "doctor"),
        &json(&snap, "doctor --sysroot"),
        "this machine",
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".partial-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// On a namespace node with podman (its own /run, engine service, stand-in
/// GPU and RDMA device nodes), halobox run there snapshots that node.
#[test]
fn a_snapshot_of_a_node_with_an_engine_judges_like_the_node() {
    let nodes = Nodes::up_with_engine(&["9000", "9000"], "podman");
    let bin = env!("CARGO_BIN_EXE_halobox");
    let out = nodes.path("node-a.tar.gz");
    let out_s = out.to_str().unwrap();
    let config = nodes.path("config");
    fs::create_dir_all(&config).unwrap();
    let on_a = |args: &[&str]| {
        let mut argv = vec![bin];
        argv.extend_from_slice(args);
        nodes
            .on_node('a', &argv)
            .env("XDG_CONFIG_HOME", &config)
            .output()
            .expect("run halobox on node a")
    };
    let before = on_a(&["doctor", "--json"]);
    let made = on_a(&["snapshot", out_s]);
    assert!(made.status.success(), "{}", common::text(&made));
    let after = on_a(&["doctor", "--json"]);
    let root = nodes.path("unpacked");
    unpack(&out, &root);
    let root = root.join("node-a");
    let snap = on_a(&["doctor", "--json", "--sysroot", root.to_str().unwrap()]);
    same_verdicts(
        &json(&before, "doctor on node a"),
        &json(&after, "doctor on node a"),
        &json(&snap, "its snapshot"),
        "node a",
    );
    // The node's own facts, not this machine's: its own address.
    let services = fs::read_to_string(root.join("captured/ip-addr.json")).unwrap();
    assert!(services.contains(&nodes.ip(1)), "{services}");
}

/// `--dry-run` lists the files and writes nothing.
#[test]
fn dry_run_lists_the_files_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plan.tar.gz");
    let listed = halobox(dir.path())
        .args(["snapshot", "--dry-run"])
        .arg(&out)
        .output()
        .unwrap();
    let text = common::ok(&listed);
    for must in [
        "plan/proc/self/limits",
        "plan/captured/ip-addr.json",
        "plan/captured/dev-stat.txt",
        "plan/proc/meminfo",
    ] {
        assert!(text.contains(must), "{must} not listed:\n{text}");
    }
    assert!(text.contains("would write"), "{text}");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "wrote something"
    );
}

/// Bad names and an existing archive are refused before anything is read.
#[test]
fn bad_output_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let zip = halobox(dir.path())
        .arg("snapshot")
        .arg(dir.path().join("x.zip"))
        .output()
        .unwrap();
    assert_eq!(zip.status.code(), Some(2));
    assert!(common::text(&zip).contains("hint: name it with .tar.gz"));
    let taken = dir.path().join("taken.tar.gz");
    fs::write(&taken, "mine").unwrap();
    let refused = halobox(dir.path())
        .arg("snapshot")
        .arg(&taken)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(common::text(&refused).contains("--force"));
    assert_eq!(fs::read_to_string(&taken).unwrap(), "mine");
    let missing = halobox(dir.path())
        .arg("snapshot")
        .arg(dir.path().join("no/such/dir/x.tar.gz"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(common::text(&missing).contains("mkdir -p"));
}

/// Every file of an unpacked tree, by path relative to it.
fn files(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()) {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, String::from_utf8_lossy(&fs::read(&p).unwrap()).into());
            }
        }
    }
    out
}

/// True when `word` stands in `text` as a name of its own (not inside
/// `vmlinuz` for a host called `vm`).
fn names_word(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(at, _)| {
        !text[..at].chars().next_back().is_some_and(is_name)
            && !text[at + word.len()..].chars().next().is_some_and(is_name)
    })
}

/// This machine's MACs (but the all-zero one) by interface.
fn live_macs() -> BTreeMap<String, String> {
    fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let mac = fs::read_to_string(e.path().join("address")).ok()?;
            let mac = mac.trim().to_lowercase();
            (mac.len() == 17 && mac != "00:00:00:00:00:00").then_some((name, mac))
        })
        .collect()
}

#[test]
fn redaction_leaves_no_mac_or_hostname_and_replaces_consistently() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("red.tar.gz");
    let doctor_live = || {
        let out = halobox(dir.path())
            .args(["doctor", "--json"])
            .output()
            .unwrap();
        json(&out, "doctor")
    };
    let before = doctor_live();
    let made = halobox(dir.path())
        .args(["snapshot", "--redact", "--redact-addresses"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", common::text(&made));
    unpack(&out, dir.path());
    let root = dir.path().join("red");
    let all = files(&root);
    let macs = live_macs();
    assert!(!macs.is_empty(), "this machine has interfaces with MACs");
    let hostname = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let hostname = hostname.trim();
    let ip_json = &all["captured/ip-addr.json"];
    let links: Value = serde_json::from_str(ip_json).unwrap();
    let mut originals_v4 = Vec::new();
    for addrs in nix::ifaddrs::getifaddrs().unwrap() {
        if let Some(sin) = addrs.address.as_ref().and_then(|a| a.as_sockaddr_in())
            && !sin.ip().is_loopback()
        {
            originals_v4.push(sin.ip().to_string());
        }
    }
    for (path, text) in &all {
        let lower = text.to_lowercase();
        for (ifname, mac) in &macs {
            assert!(
                !lower.contains(mac),
                "{path} still has {ifname}'s MAC {mac}"
            );
        }
        if hostname.len() >= 2 && hostname != "localhost" {
            assert!(!names_word(text, hostname), "{path} still names {hostname}");
        }
        for ip in &originals_v4 {
            let found = text.match_indices(ip.as_str()).any(|(at, _)| {
                let after = text[at + ip.len()..].chars().next();
                !after.is_some_and(|c| c.is_ascii_digit())
            });
            assert!(!found, "{path} still has the address {ip}");
        }
    }
    // Of /etc/passwd only the invoking user's entry is left.
    if let Some(passwd) = all.get("etc/passwd") {
        assert!(passwd.lines().count() <= 1, "{passwd}");
        let uid = nix::unistd::getuid().as_raw().to_string();
        assert!(
            passwd
                .lines()
                .all(|l| l.split(':').nth(2) == Some(uid.as_str())),
            "{passwd}"
        );
    }
    // One mapping: each interface's replaced MAC is the same in sysfs-free
    // ip-addr.json everywhere it appears, and two interfaces never share one.
    let mut seen = BTreeMap::new();
    for link in links.as_array().unwrap() {
        let (Some(name), Some(mac)) = (link["ifname"].as_str(), link["address"].as_str()) else {
            continue;
        };
        if mac == "00:00:00:00:00:00" {
            continue;
        }
        if let Some(orig) = macs.get(name)
            && let Some(other) = seen.insert(mac.to_string(), orig.clone())
        {
            assert_eq!(&other, orig, "two MACs became {mac}");
        }
        assert!(mac.starts_with("02:00:"), "{name}: {mac}");
    }
    // The redacted snapshot still judges like the host: every verdict is
    // the same (the summaries name the replaced addresses).
    let after = doctor_live();
    let snap = halobox(dir.path())
        .args(["doctor", "--json", "--sysroot"])
        .arg(&root)
        .output()
        .unwrap();
    let verdicts = |v: &Value| -> Value {
        let mut v = v.clone();
        for c in v["checks"].as_array_mut().unwrap() {
            c["summary"] = Value::Null;
            c["fix"] = Value::Null;
        }
        v
    };
    same_verdicts(
        &verdicts(&before),
        &verdicts(&after),
        &verdicts(&json(&snap, "doctor --sysroot on the redacted snapshot")),
        "this machine, redacted",
    );
}

/// Only `.partial-` files halobox left in `dir`.
fn partials(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial-"))
        .collect()
}

/// Ctrl-C at any moment leaves either no archive or a whole one, and never
/// the temporary file.
#[test]
fn ctrl_c_leaves_a_whole_archive_or_none() {
    use std::time::Duration;
    for delay_ms in [50u64, 200, 400, 700, 1000, 1500] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("int.tar.gz");
        let mut child = halobox(dir.path())
            .arg("snapshot")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let status = child.wait().unwrap();
        assert!(partials(dir.path()).is_empty(), "after {delay_ms} ms");
        if out.exists() {
            unpack(&out, dir.path());
            assert!(dir.path().join("int/proc/self/limits").exists());
        } else {
            assert!(!status.success(), "after {delay_ms} ms: exit 0 without OUT");
        }
    }
}

/// The writer stopped by a signal, or failing at the rename, leaves
/// neither OUT nor its temporary file.
#[test]
fn a_stopped_or_failed_write_leaves_nothing() {
    use halobox::host::snapshot::{Body, Entry, Tree, WriteError, write_archive};
    use std::sync::atomic::AtomicBool;
    let mut tree = Tree::new();
    tree.insert(
        "/proc/meminfo".into(),
        Entry {
            mode: 0o644,
            mtime: 0,
            body: Body::File(b"MemTotal: 1 kB\n".to_vec()),
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.tar.gz");
    let stopped = write_archive(&tree, "s", &out, &AtomicBool::new(true));
    assert!(
        matches!(stopped, Err(WriteError::Interrupted(_))),
        "{stopped:?}"
    );
    assert!(!out.exists() && partials(dir.path()).is_empty());
    // OUT is a directory with something in it: the rename fails.
    fs::create_dir_all(out.join("busy")).unwrap();
    let failed = write_archive(&tree, "s", &out, &AtomicBool::new(false));
    assert!(matches!(failed, Err(WriteError::Io { .. })), "{failed:?}");
    assert!(partials(dir.path()).is_empty());
    fs::remove_dir_all(&out).unwrap();
    write_archive(&tree, "s", &out, &AtomicBool::new(false)).unwrap();
    unpack(&out, dir.path());
    assert_eq!(
        fs::read_to_string(dir.path().join("s/proc/meminfo")).unwrap(),
        "MemTotal: 1 kB\n"
    );
}

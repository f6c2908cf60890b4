//! `refresh`, `enter`, `list` and `rm` against real engines: rootful and
//! rootless podman through its API socket, dockerd, toolbox, and local
//! registries (scripts/engines/start.sh brings them up).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::engines::{self, AUTH_REPO, DOCKER, PODMAN, REPO, cleanup, cli, inspect, require};
use common::spy::{SECRETS, Spies, assert_no_secret};
use common::{halobox, run};
use serde_json::Value;

fn refresh(engine: &str, name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["refresh", "--engine", engine, "--name", name];
    args.extend_from_slice(extra);
    run(&args)
}

/// A refresh of the test image `REPO:1` with `backend` and `memlock`.
fn backend_refresh(engine: &str, name: &str, backend: &str, memlock: &str) -> std::process::Output {
    let image = format!("{REPO}:1");
    refresh(
        engine,
        name,
        &[
            "--backend",
            backend,
            "--image",
            &image,
            "--memlock",
            memlock,
        ],
    )
}

/// A podman-backend refresh with memlock 8 MiB (this machine's hard limit).
fn podman_refresh(name: &str, image: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--backend", "podman", "--image", image, "--memlock", "8M"];
    args.extend_from_slice(extra);
    refresh(PODMAN, name, &args)
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn id(program: &str, name: &str) -> String {
    inspect(program, name).expect("container exists")["Id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn memlock_of(c: &Value) -> i64 {
    c["HostConfig"]["Ulimits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| {
            let n = u["Name"].as_str().unwrap().to_ascii_lowercase();
            n == "memlock" || n == "rlimit_memlock"
        })
        .unwrap_or_else(|| panic!("no memlock ulimit in {}", c["HostConfig"]["Ulimits"]))["Soft"]
        .as_i64()
        .unwrap()
}

fn devices_of(c: &Value) -> Vec<String> {
    let mut d: Vec<String> = c["HostConfig"]["Devices"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|d| d["PathOnHost"].as_str().unwrap().to_string())
        .collect();
    d.sort();
    d
}

fn enter_output(name: &str, engine: &str, cmd: &[&str]) -> (String, i32) {
    let mut args = vec!["enter", name, "--engine", engine, "--"];
    args.extend_from_slice(cmd);
    let out = run(&args);
    (
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        out.status.code().unwrap(),
    )
}

#[test]
fn podman_refresh_enter_update_and_rollback() {
    require(PODMAN);
    let name = "hbx-podman";
    cleanup(
        "podman",
        &[name, "hbx-podman-halobox-new", "hbx-podman-prev"],
    );
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    let c = inspect("podman", name).unwrap();
    assert_eq!(c["State"]["Running"], true);
    assert_eq!(c["Config"]["Labels"]["dev.halobox.managed"], "true");
    assert_eq!(
        c["Config"]["Labels"]["dev.halobox.image"],
        format!("{REPO}:20240101-000000")
    );
    assert!(
        c["Config"]["Labels"]["dev.halobox.image-digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(memlock_of(&c), 8 << 20);
    // The engine's default seccomp profile is on (2: filter mode).
    assert_eq!(
        enter_output(
            name,
            PODMAN,
            &["sh", "-c", "grep '^Seccomp:' /proc/1/status"]
        ),
        ("Seccomp:\t2".into(), 0)
    );
    // podman 4.3 reports IpcMode "shareable" even for --ipc host: compare
    // the namespaces themselves.
    for ns in ["ipc", "net"] {
        let host = std::fs::read_link(format!("/proc/self/ns/{ns}")).unwrap();
        let (inside, _) = enter_output(name, PODMAN, &["readlink", &format!("/proc/self/ns/{ns}")]);
        assert_eq!(
            inside,
            host.display().to_string(),
            "{ns} namespace is not the host's"
        );
    }
    for dev in engines::host_infiniband_nodes() {
        assert!(
            devices_of(&c).contains(&dev),
            "{dev} not passed through: {:?}",
            devices_of(&c)
        );
    }
    // runc cannot keep groups: the host's video GID is added instead.
    let video = cli("getent", &["group", "video"]);
    let video_gid = String::from_utf8_lossy(&video.stdout)
        .split(':')
        .nth(2)
        .unwrap()
        .to_string();
    let groups = c["HostConfig"]["GroupAdd"].to_string();
    assert!(groups.contains(&video_gid), "{groups}");

    assert_eq!(
        enter_output(name, PODMAN, &["sh", "-c", "ulimit -l"]),
        ("8192".into(), 0)
    );
    assert_eq!(enter_output(name, PODMAN, &["sh", "-c", "exit 3"]).1, 3);

    // A new image version: a new container, and both versions stay pinned.
    let first = id("podman", name);
    ok(&podman_refresh(name, &format!("{REPO}:2"), &["--yes"]));
    assert_ne!(id("podman", name), first);
    let c = inspect("podman", name).unwrap();
    assert_eq!(
        c["Config"]["Labels"]["dev.halobox.image"],
        format!("{REPO}:20240601-000000")
    );
    for tag in ["20240101-000000", "20240601-000000"] {
        assert!(
            cli("podman", &["image", "exists", &format!("{REPO}:{tag}")])
                .status
                .success()
        );
    }
    assert!(inspect("podman", "hbx-podman-halobox-old").is_none());

    // Rollback brings back the container the update replaced.
    ok(&refresh(
        PODMAN,
        name,
        &[
            "--backend",
            "podman",
            "--rollback",
            "--memlock",
            "8M",
            "--yes",
        ],
    ));
    let c = inspect("podman", name).unwrap();
    assert_eq!(c["Config"]["Image"], format!("{REPO}:20240101-000000"));
    assert_eq!(c["Id"], first.as_str());

    let (list, code) = common::run_json(&["list", "--json", "--engine", PODMAN]);
    assert_eq!(code, 0);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == name && c["labels"]["dev.halobox.backend"] == "podman")
    );
    cleanup("podman", &[name, "hbx-podman-prev"]);
}

#[test]
fn toolbox_container_is_listed_entered_and_has_the_memlock() {
    require(PODMAN);
    require("unix:///run/dbus/system_bus_socket");
    let name = "hbx-toolbox";
    cleanup("podman", &[name, "hbx-toolbox-halobox-new"]);
    ok(&backend_refresh(PODMAN, name, "toolbox", "4M"));
    let c = inspect("podman", name).unwrap();
    assert_eq!(
        c["Config"]["Labels"]["com.github.containers.toolbox"],
        "true"
    );
    assert_eq!(memlock_of(&c), 4 << 20);
    let list = cli("toolbox", &["list", "--containers"]);
    assert!(
        String::from_utf8_lossy(&list.stdout).contains(name),
        "toolbox list: {list:?}"
    );
    let inside = cli(
        "toolbox",
        &["run", "-c", name, "sh", "-c", "ulimit -l; echo ran-inside"],
    );
    let text = String::from_utf8_lossy(&inside.stdout);
    assert!(
        text.contains("4096") && text.contains("ran-inside"),
        "{inside:?}"
    );
    // `toolbox run` is a child of halobox: it gets no secret from halobox's environment.
    let spies = Spies::new();
    spies.add("toolbox", false, "exec /usr/bin/toolbox \"$@\"");
    let mut enter = halobox();
    enter.env("PATH", spies.path()).args([
        "enter",
        name,
        "--engine",
        PODMAN,
        "--",
        "sh",
        "-c",
        "ulimit -l",
    ]);
    for (k, v) in SECRETS {
        enter.env(k, v);
    }
    let out = ok(&enter.output().unwrap());
    assert!(out.trim().ends_with("4096"), "{out}");
    assert_no_secret(&spies.record("toolbox"));
    cleanup("podman", &[name]);
}

#[test]
fn docker_refresh_sets_groups_devices_and_memlock() {
    require(DOCKER);
    let name = "hbx-docker";
    cleanup("docker", &[name, "hbx-docker-halobox-new"]);
    ok(&backend_refresh(DOCKER, name, "docker", "8M"));
    let c = inspect("docker", name).unwrap();
    assert_eq!(memlock_of(&c), 8 << 20);
    assert!(!c["HostConfig"]["GroupAdd"].as_array().unwrap().is_empty());
    assert_eq!(c["HostConfig"]["NetworkMode"], "host");
    assert_eq!(devices_of(&c), engines::host_infiniband_nodes());
    assert_eq!(
        enter_output(name, DOCKER, &["sh", "-c", "ulimit -l"]),
        ("8192".into(), 0)
    );
    assert_eq!(
        enter_output(
            name,
            DOCKER,
            &["sh", "-c", "grep '^Seccomp:' /proc/1/status"]
        ),
        ("Seccomp:\t2".into(), 0),
        "the engine's default seccomp profile is off"
    );
    // A toolbox container needs podman.
    let out = refresh(
        DOCKER,
        name,
        &["--backend", "toolbox", "--image", &format!("{REPO}:1")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the toolbox backend needs podman"),
        "{}",
        stderr(&out)
    );
    cleanup("docker", &[name]);
}

#[test]
fn rootless_podman_refresh() {
    let socket = "unix:///run/user/1500/podman/podman.sock";
    require(socket);
    let image = format!("{REPO}:1");
    let out = as_halotest(&[
        "refresh",
        "--engine",
        socket,
        "--name",
        "hbx-rootless",
        "--backend",
        "podman",
        "--image",
        &image,
        "--memlock",
        "8M",
        "--json",
    ]);
    let outcome: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(outcome["name"], "hbx-rootless");
    let out = as_halotest(&[
        "enter",
        "hbx-rootless",
        "--engine",
        socket,
        "--",
        "sh",
        "-c",
        "ulimit -l",
    ]);
    assert_eq!(ok(&out).trim(), "8192");
    ok(&as_halotest(&[
        "rm",
        "hbx-rootless",
        "--yes",
        "--engine",
        socket,
    ]));
}

#[test]
fn dry_run_changes_nothing_and_shows_the_command() {
    require(PODMAN);
    let before = cli("podman", &["ps", "-a", "--format", "{{.Names}}"]).stdout;
    let out = refresh(
        PODMAN,
        "hbx-dry",
        &[
            "--backend",
            "toolbox",
            "--image",
            &format!("{REPO}:1"),
            "--memlock",
            "4M",
            "--dry-run",
            "--json",
        ],
    );
    let plan: Value = serde_json::from_str(&ok(&out)).unwrap();
    let cmd = plan["create_command"].as_str().unwrap();
    assert!(
        cmd.starts_with("podman create --name hbx-dry-halobox-new"),
        "{cmd}"
    );
    for want in [
        "--ulimit memlock=4194304:4194304",
        "--no-hosts",
        "--dns none",
        "com.github.containers.toolbox=true",
        "--privileged",
    ] {
        assert!(cmd.contains(want), "{want} missing from {cmd}");
    }
    let text = ok(&refresh(
        PODMAN,
        "hbx-dry",
        &[
            "--backend",
            "podman",
            "--image",
            &format!("{REPO}:1"),
            "--memlock",
            "8M",
            "--dry-run",
        ],
    ));
    assert!(
        text.contains("dry run: nothing was changed") && text.contains("1. pull"),
        "{text}"
    );
    assert_eq!(
        cli("podman", &["ps", "-a", "--format", "{{.Names}}"]).stdout,
        before
    );
}

#[test]
fn memlock_that_cannot_be_granted_fails_before_creating_anything() {
    require(PODMAN);
    let name = "hbx-memlock";
    cleanup("podman", &[name, "hbx-memlock-halobox-new"]);
    let out = refresh(
        PODMAN,
        name,
        &["--backend", "podman", "--image", &format!("{REPO}:1")],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("hard memlock limit of 8 MiB") && err.contains("LimitMEMLOCK=infinity"),
        "{err}"
    );
    assert!(inspect("podman", name).is_none());
    assert!(inspect("podman", "hbx-memlock-halobox-new").is_none());
    ok(&refresh(
        PODMAN,
        name,
        &[
            "--backend",
            "podman",
            "--image",
            &format!("{REPO}:1"),
            "--memlock-clamp",
        ],
    ));
    assert_eq!(memlock_of(&inspect("podman", name).unwrap()), 8 << 20);
    cleanup("podman", &[name]);
}

#[test]
fn missing_image_and_name_conflict_leave_containers_alone() {
    require(PODMAN);
    let name = "hbx-conflict";
    cleanup(
        "podman",
        &[name, "hbx-conflict-halobox-new", "hbx-conflict-prev"],
    );
    assert!(
        cli(
            "podman",
            &["create", "--name", name, &format!("{REPO}:1"), "true"]
        )
        .status
        .success()
    );
    let foreign = id("podman", name);
    let out = podman_refresh(name, &format!("{REPO}:1"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("was not made by halobox"),
        "{}",
        stderr(&out)
    );
    assert_eq!(id("podman", name), foreign);

    ok(&podman_refresh(
        name,
        &format!("{REPO}:1"),
        &["--adopt", "--yes"],
    ));
    let ours = id("podman", name);
    assert_ne!(ours, foreign);
    // The adopted container is kept like any replaced one; the next
    // refresh lets it go only with --adopt again.
    assert_eq!(id("podman", "hbx-conflict-prev"), foreign);
    let out = podman_refresh(name, "127.0.0.1:5000/halobox/nope:1", &["--yes"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("hbx-conflict-prev exists and was not made by halobox"),
        "{}",
        stderr(&out)
    );

    let out = podman_refresh(name, "127.0.0.1:5000/halobox/nope:1", &["--yes", "--adopt"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("refresh failed while pulling") && err.contains("was left as it was"),
        "{err}"
    );
    assert_eq!(id("podman", name), ours);
    assert_eq!(inspect("podman", name).unwrap()["State"]["Running"], true);
    assert!(inspect("podman", "hbx-conflict-halobox-new").is_none());
    cleanup("podman", &[name, "hbx-conflict-prev"]);
}

#[test]
fn engine_socket_gone_is_a_clear_error() {
    let out = run(&[
        "refresh",
        "--engine",
        "unix:///tmp/halobox-no-such.sock",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no container engine API answered"), "{err}");
    assert!(
        err.contains("/tmp/halobox-no-such.sock") && err.contains("no such socket"),
        "{err}"
    );
    assert!(
        err.contains("systemctl --user enable --now podman.socket"),
        "{err}"
    );
    let out = run(&["list", "--engine", "unix:///tmp/halobox-no-such.sock"]);
    assert_eq!(out.status.code(), Some(1));
}

/// A registry the test owns, on 127.0.0.1:5002 (insecure in registries.conf).
struct Registry {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:5002\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .args(["serve", config.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry (scripts/engines/install.sh installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect("127.0.0.1:5002").is_err() {
            assert!(Instant::now() < deadline, "registry on 5002 did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, _dir: dir }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn registry_stopped_leaves_the_old_container_and_a_failed_start_cleans_up() {
    require(PODMAN);
    let name = "hbx-regstop";
    cleanup(
        "podman",
        &[name, "hbx-regstop-halobox-new", "hbx-regstop-prev"],
    );
    let mut registry = Registry::start();
    let copy = |src: &str, dst: &str| {
        let out = cli(
            "skopeo",
            &[
                "copy",
                "--src-tls-verify=false",
                "--dest-tls-verify=false",
                src,
                dst,
            ],
        );
        assert!(out.status.success(), "skopeo copy: {out:?}");
    };
    copy(
        &format!("docker://{REPO}:1"),
        "docker://127.0.0.1:5002/halobox/test:1",
    );
    ok(&podman_refresh(name, "127.0.0.1:5002/halobox/test:1", &[]));
    let before = id("podman", name);

    // An image whose container cannot start (no /bin/sh): the new container
    // is removed again and the old one keeps running.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "no shell here\n").unwrap();
    let tar = dir.path().join("root.tar");
    assert!(
        Command::new("tar")
            .args([
                "-C",
                dir.path().to_str().unwrap(),
                "-cf",
                tar.to_str().unwrap(),
                "hello.txt"
            ])
            .status()
            .unwrap()
            .success()
    );
    let imported = cli(
        "podman",
        &[
            "import",
            "--change",
            "LABEL org.opencontainers.image.created=2024-09-01T00:00:00Z",
            tar.to_str().unwrap(),
            "localhost/halobox-nosh:1",
        ],
    );
    assert!(imported.status.success(), "{imported:?}");
    copy(
        "containers-storage:localhost/halobox-nosh:1",
        "docker://127.0.0.1:5002/halobox/nosh:1",
    );
    let out = podman_refresh(name, "127.0.0.1:5002/halobox/nosh:1", &["--yes"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("refresh failed while starting the new container")
            && err.contains("was left as it was")
            && err.contains("was removed"),
        "{err}"
    );
    assert!(inspect("podman", "hbx-regstop-halobox-new").is_none());
    assert_eq!(id("podman", name), before);

    registry.stop();
    let out = podman_refresh(name, "127.0.0.1:5002/halobox/test:1", &["--yes"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("refresh failed while pulling")
            && err.contains("existing container hbx-regstop was left as it was"),
        "{err}"
    );
    let c = inspect("podman", name).unwrap();
    assert_eq!(c["Id"], before.as_str());
    assert_eq!(c["State"]["Running"], true);
    cleanup("podman", &[name]);
}

#[test]
fn registry_credentials_work_and_never_show() {
    require(PODMAN);
    let password = std::fs::read_to_string("/tmp/halobox-engines/registry-auth/password")
        .expect("the auth registry's password (scripts/engines/start.sh writes it)");
    let password = password.trim();
    let name = "hbx-auth";
    cleanup("podman", &[name, "hbx-auth-halobox-new"]);
    let args = [
        "refresh",
        "--engine",
        PODMAN,
        "--name",
        name,
        "--backend",
        "podman",
        "--image",
        &format!("{AUTH_REPO}:1"),
        "--memlock",
        "8M",
    ];

    let out = halobox()
        .args(args)
        .env_remove("HALOBOX_REGISTRY_USER")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("authentication required"),
        "{}",
        stderr(&out)
    );

    // Credentials not bound to this registry are not sent to it.
    let out = halobox()
        .args(args)
        .env_remove("HALOBOX_REGISTRY")
        .env("HALOBOX_REGISTRY_USER", "halobox")
        .env("HALOBOX_REGISTRY_PASSWORD", password)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains(password), "the password leaked:\n{err}");
    assert!(
        err.contains("HALOBOX_REGISTRY is not, so they are not sent to 127.0.0.1:5001")
            && err.contains("authentication required")
            && err.contains("HALOBOX_REGISTRY=127.0.0.1:5001"),
        "{err}"
    );
    assert!(inspect("podman", name).is_none());

    for extra in [&["--dry-run"][..], &[]] {
        let out = halobox()
            .args(args)
            .args(extra)
            .env("HALOBOX_REGISTRY", "127.0.0.1:5001")
            .env("HALOBOX_REGISTRY_USER", "halobox")
            .env("HALOBOX_REGISTRY_PASSWORD", password)
            .output()
            .unwrap();
        let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(out.status.success(), "{all}");
        assert!(!all.contains(password), "the password leaked:\n{all}");
    }
    assert!(inspect("podman", name).is_some());
    cleanup("podman", &[name]);
}

#[test]
fn rm_asks_and_only_removes_its_own() {
    require(PODMAN);
    let name = "hbx-rm";
    cleanup("podman", &[name, "hbx-rm-foreign"]);
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    let out = run(&["rm", name, "--engine", PODMAN]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("pass --yes"));
    assert!(inspect("podman", name).is_some());
    assert!(
        cli(
            "podman",
            &[
                "create",
                "--name",
                "hbx-rm-foreign",
                &format!("{REPO}:1"),
                "true"
            ]
        )
        .status
        .success()
    );
    let out = run(&["rm", "hbx-rm-foreign", "--yes", "--engine", PODMAN]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("was not made by halobox"));
    ok(&run(&["rm", name, "--yes", "--engine", PODMAN]));
    assert!(inspect("podman", name).is_none());
    let out = run(&["enter", name, "--engine", PODMAN, "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("halobox refresh --name hbx-rm"));
    cleanup("podman", &["hbx-rm-foreign"]);
}

/// Runs halobox as `halotest` with extra environment (secrets included).
fn as_halotest_with(env: &[(&str, &str)], args: &[&str], cwd: &str) -> std::process::Output {
    let mut cmd = Command::new("runuser");
    cmd.args([
        "-u",
        "halotest",
        "--",
        "env",
        "XDG_RUNTIME_DIR=/run/user/1500",
        "HOME=/home/halotest",
    ]);
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(env!("CARGO_BIN_EXE_halobox"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn as_halotest(args: &[&str]) -> std::process::Output {
    as_halotest_with(&[], args, "/")
}

const ROOTLESS: &str = "unix:///run/user/1500/podman/podman.sock";

/// `halobox refresh` of distrobox container `name` as halotest, with `extra`.
fn distrobox_refresh(env: &[(&str, &str)], name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "refresh",
        "--engine",
        ROOTLESS,
        "--backend",
        "distrobox",
        "--name",
        name,
        "--image",
        "127.0.0.1:5000/halobox/distro:1",
    ];
    args.extend_from_slice(extra);
    as_halotest_with(env, &args, "/")
}

#[test]
fn distrobox_refresh_and_enter_as_a_user() {
    let socket = ROOTLESS;
    require(socket);
    let name = "hbx-distro";
    let _ = as_halotest(&["rm", name, "--yes", "--engine", socket]);
    ok(&distrobox_refresh(&[], name, &["--memlock", "8M"]));
    let list = as_halotest(&["list", "--json", "--engine", socket]);
    let list: Value = serde_json::from_str(&ok(&list)).unwrap();
    let c = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .expect("listed");
    assert_eq!(c["labels"]["dev.halobox.backend"], "distrobox");
    assert_eq!(c["labels"]["manager"], "distrobox");
    let out = as_halotest(&[
        "enter",
        name,
        "--engine",
        socket,
        "--",
        "sh",
        "-c",
        "ulimit -l; id -un",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&ok(&out).into_bytes()).trim(),
        "8192\nhalotest"
    );
    // distrobox passes --ulimit host: more than this user's own limit cannot be had.
    let out = distrobox_refresh(&[], name, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("distrobox gives containers this user's own limits"),
        "{}",
        stderr(&out)
    );
    ok(&as_halotest(&["rm", name, "--yes", "--engine", socket]));
}

#[test]
fn distrobox_as_root_says_how_to_run_it() {
    require(PODMAN);
    let out = refresh(
        PODMAN,
        "hbx-distro-root",
        &[
            "--backend",
            "distrobox",
            "--image",
            "127.0.0.1:5000/halobox/distro:1",
            "--memlock",
            "8M",
            "--dry-run",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("distrobox refuses to run as root"),
        "{}",
        stderr(&out)
    );
}

/// tmux gives `halobox enter` a real terminal: the shell sees a TTY of the
/// window's size, a resize reaches it, and its exit code comes back.
#[test]
fn interactive_enter_has_a_tty_and_passes_the_exit_code() {
    require(PODMAN);
    let name = "hbx-tty";
    cleanup("podman", &[name, "hbx-tty-halobox-new"]);
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    // A server of its own: no other tmux session can interfere.
    let socket = format!("halobox-test-{}", std::process::id());
    let session = "enter";
    let tmux = |args: &[&str]| {
        let mut all = vec!["-L", socket.as_str()];
        all.extend_from_slice(args);
        cli("tmux", &all)
    };
    let command = format!(
        "{} enter {name} --engine {PODMAN}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_halobox")
    );
    assert!(
        tmux(&[
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "100",
            "-y",
            "30",
            &command
        ])
        .status
        .success()
    );
    let screen = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-t", session, "-p"]).stdout).into_owned()
    };
    let wait_for = |text: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = screen();
            if s.contains(text) {
                return s;
            }
            assert!(Instant::now() < deadline, "{text:?} never appeared:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for("/ #");
    tmux(&["send-keys", "-t", session, "stty size; ulimit -l", "Enter"]);
    wait_for("30 100");
    tmux(&["resize-window", "-t", session, "-x", "120", "-y", "40"]);
    // The new size travels from tmux's terminal to halobox (SIGWINCH) and
    // on to the container's (the engine's resize call): a command typed at
    // once can run before it arrives, so ask until it has.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !screen().contains("40 120") {
        assert!(
            Instant::now() < deadline,
            "the container's terminal never became 40x120:\n{}",
            screen()
        );
        tmux(&["send-keys", "-t", session, "stty size", "Enter"]);
        std::thread::sleep(Duration::from_millis(500));
    }
    tmux(&["send-keys", "-t", session, "exit 5", "Enter"]);
    let s = wait_for("EXIT=5");
    assert!(s.contains("8192"), "{s}");
    let _ = tmux(&["kill-server"]);
    cleanup("podman", &[name]);
}

/// The Debian test image (glibc, like the host the halobox binary is built
/// on) in the plain-HTTP registry.
const DISTRO: &str = "127.0.0.1:5000/halobox/distro:1";

/// Refresh, enter, upgrade in place and refresh again with `engine`: the
/// container runs the host's halobox from /run/halobox/bin, read-only,
/// which holds only halobox (not the secret next to the binary); an
/// upgrade by rename reaches the running container at the next halobox
/// command, without a refresh; and a file in the Hugging Face cache
/// survives the refresh.
fn halobox_inside_and_weights_survive(program: &str, engine: &str) {
    require(engine);
    let name = format!("hbx-inside-{program}");
    let temp = format!("{name}-halobox-new");
    cleanup(program, &[&name, &temp]);
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("halobox");
    std::fs::copy(env!("CARGO_BIN_EXE_halobox"), &exe).unwrap();
    // What sits next to a binary in ~/Downloads or $HOME.
    std::fs::write(bin.join("id_ed25519"), "SECRET-KEY-77\n").unwrap();
    let hf = dir.path().join("hf");
    let data = dir.path().join("data");
    let halobox = |args: &[&str]| {
        Command::new(&exe)
            .args(args)
            .env("HF_HOME", &hf)
            .env("XDG_DATA_HOME", &data)
            .output()
            .unwrap()
    };
    let enter = |cmd: &[&str]| {
        let mut args = vec!["enter", name.as_str(), "--engine", engine, "--"];
        args.extend_from_slice(cmd);
        let out = halobox(&args);
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            out.status.code().unwrap(),
        )
    };
    let refresh = || {
        ok(&halobox(&[
            "refresh",
            "--engine",
            engine,
            "--name",
            &name,
            "--backend",
            program,
            "--image",
            DISTRO,
            "--memlock",
            "8M",
            "--yes",
        ]));
        id(program, &name)
    };
    let first = refresh();
    let c = inspect(program, &name).unwrap();
    assert_eq!(
        c["Config"]["Labels"]["dev.halobox.halobox"],
        "/run/halobox/bin/halobox"
    );
    let (version, code) = enter(&["/run/halobox/bin/halobox", "--version"]);
    assert_eq!(code, 0, "{version}");
    assert!(
        version.starts_with(concat!("halobox ", env!("CARGO_PKG_VERSION"), " (commit ")),
        "{version}"
    );
    // Only halobox: nothing of the folder the binary sits in.
    assert_eq!(
        enter(&["ls", "-A", "/run/halobox/bin"]),
        ("halobox".into(), 0)
    );
    let (found, _) = enter(&["sh", "-c", "grep -rl SECRET-KEY-77 /run/halobox; true"]);
    assert_eq!(found, "", "the secret next to the binary is visible inside");
    // Read-only: nothing inside can change the host's binary.
    let (_, code) = enter(&["sh", "-c", "echo x > /run/halobox/bin/x"]);
    assert_ne!(code, 0, "the binary's folder must be read-only inside");
    // Weights downloaded inside land in the host's cache.
    let (hf_home, _) = enter(&["sh", "-c", "echo $HF_HOME"]);
    assert_eq!(hf_home, hf.display().to_string());
    let (_, code) = enter(&[
        "sh",
        "-c",
        "mkdir -p $HF_HOME/hub && echo weights-1 > $HF_HOME/hub/marker",
    ]);
    assert_eq!(code, 0);
    assert_eq!(
        std::fs::read_to_string(hf.join("hub/marker")).unwrap(),
        "weights-1\n"
    );
    // An upgrade by rename (as `install` and package managers do) reaches
    // the running container at the next halobox command: it renames the
    // new binary into the folder the container binds.
    let next = bin.join(".halobox.new");
    let mut upgraded = std::fs::read(env!("CARGO_BIN_EXE_halobox")).unwrap();
    upgraded.extend_from_slice(b"halobox-upgraded");
    std::fs::write(&next, &upgraded).unwrap();
    std::fs::set_permissions(&next, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::rename(&next, &exe).unwrap();
    assert_eq!(
        enter(&["tail", "-c", "16", "/run/halobox/bin/halobox"]),
        ("halobox-upgraded".into(), 0)
    );
    assert_eq!(
        enter(&["ls", "-A", "/run/halobox/bin"]),
        ("halobox".into(), 0)
    );
    // A refresh makes a new container; the weights are still there.
    let second = refresh();
    assert_ne!(first, second, "refresh made no new container");
    assert_eq!(
        enter(&["sh", "-c", "cat $HF_HOME/hub/marker"]),
        ("weights-1".into(), 0)
    );
    cleanup(program, &[&name, &temp]);
}

/// An `HF_HOME` that would show the container `/`, a system folder or
/// the home folder is refused before anything is made, `--dry-run` too.
#[test]
fn an_hf_home_that_shows_the_system_or_the_home_is_refused() {
    require(PODMAN);
    let home = tempfile::tempdir().unwrap();
    let link = home.path().join("hf-link");
    std::os::unix::fs::symlink("/etc", &link).unwrap();
    let h = home.path().display().to_string();
    for (hf, shown) in [
        ("/".to_string(), "/".to_string()),
        ("/etc".into(), "/etc".into()),
        (h.clone(), h.clone()),
        (link.display().to_string(), "/etc".into()),
    ] {
        for mode in [&["--dry-run"][..], &["--yes"][..]] {
            let out = halobox()
                .args(["refresh", "--engine", PODMAN, "--name", "hbx-hf-refused"])
                .args(["--backend", "podman", "--image", DISTRO, "--memlock", "8M"])
                .args(mode)
                .env("HF_HOME", &hf)
                .env("HOME", &h)
                .output()
                .unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "HF_HOME={hf}: {err}");
            assert!(
                err.contains(&format!("error: HF_HOME={shown} is "))
                    && err.contains("\n  hint: use a folder of its own"),
                "HF_HOME={hf}: {err}"
            );
        }
    }
    assert!(inspect("podman", "hbx-hf-refused").is_none());
}

#[test]
fn podman_container_runs_halobox_and_keeps_the_hf_cache() {
    halobox_inside_and_weights_survive("podman", PODMAN);
}

#[test]
fn docker_container_runs_halobox_and_keeps_the_hf_cache() {
    halobox_inside_and_weights_survive("docker", DOCKER);
}

/// `halobox list --json` names on `engine`.
fn listed(engine: &str) -> Vec<String> {
    let out = run(&["list", "--json", "--engine", engine]);
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// A container that got halobox's labels from its image (a commit of a
/// halobox container) is not halobox's: not listed, not removed, not
/// replaced. A container halobox creates from that image is halobox's.
#[test]
fn labels_from_a_committed_image_do_not_make_a_container_halobox_s() {
    for (program, engine, backend) in [("podman", PODMAN, "podman"), ("docker", DOCKER, "docker")] {
        require(engine);
        let (name, copy, made) = ("hbx-own", "hbx-own-copy", "hbx-own-made");
        let image = format!("localhost/hbx-own-commit-{program}:1");
        cleanup(
            program,
            &[
                name,
                copy,
                made,
                "hbx-own-halobox-new",
                "hbx-own-copy-halobox-new",
            ],
        );
        let refresh_args = |n: &str, image: &str| {
            refresh(
                engine,
                n,
                &["--backend", backend, "--image", image, "--memlock", "8M"],
            )
        };
        ok(&refresh_args(name, &format!("{REPO}:1")));
        let commit = cli(program, &["commit", name, &image]);
        assert!(commit.status.success(), "{commit:?}");
        let created = cli(program, &["create", "--name", copy, &image]);
        assert!(created.status.success(), "{created:?}");
        let c = inspect(program, copy).unwrap();
        assert_eq!(
            c["Config"]["Labels"]["dev.halobox.managed"], "true",
            "inherited"
        );
        let before = id(program, copy);

        let names = listed(engine);
        assert!(names.contains(&name.to_string()), "{program}: {names:?}");
        assert!(!names.contains(&copy.to_string()), "{program}: {names:?}");

        let out = run(&["rm", copy, "--yes", "--engine", engine]);
        assert_eq!(out.status.code(), Some(2), "{program}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("only because its image"),
            "{}",
            stderr(&out)
        );
        assert_eq!(id(program, copy), before);

        let out = refresh_args(copy, &format!("{REPO}:1"));
        assert_eq!(out.status.code(), Some(1), "{program}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("carries halobox's labels only because its image")
                && err.contains("--adopt"),
            "{program}: {err}"
        );
        assert_eq!(id(program, copy), before);
        assert!(inspect(program, "hbx-own-copy-halobox-new").is_none());

        if program == "podman" {
            // halobox's own container from that image is halobox's.
            let pushed = cli(
                "podman",
                &[
                    "push",
                    "--tls-verify=false",
                    &image,
                    "127.0.0.1:5000/halobox/own-commit:1",
                ],
            );
            assert!(pushed.status.success(), "{pushed:?}");
            ok(&refresh_args(made, "127.0.0.1:5000/halobox/own-commit:1"));
            assert!(listed(engine).contains(&made.to_string()));
            ok(&run(&["rm", made, "--yes", "--engine", engine]));
            let _ = cli(
                "podman",
                &[
                    "rmi",
                    "127.0.0.1:5000/halobox/own-commit:1",
                    "127.0.0.1:5000/halobox/own-commit:20240101-000000",
                ],
            );
        }
        cleanup(program, &[name, copy, made]);
        let _ = cli(program, &["rmi", &image]);
    }
}

/// podman reports states bollard's enums lack (`stopped` between a
/// container's exit and podman's cleanup). Made deterministic: conmon and
/// the container's process are killed and the exit file conmon would write
/// is written, so podman reports `stopped` and no cleanup ever runs.
#[test]
fn podman_stopped_state_is_listed_and_entered() {
    require(PODMAN);
    let name = "hbx-stopped";
    cleanup("podman", &[name, "hbx-stopped-halobox-new"]);
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    let c = inspect("podman", name).unwrap();
    let pid = |k: &str| c["State"][k].as_i64().unwrap().to_string();
    let killed = cli("kill", &["-9", &pid("ConmonPid"), &pid("Pid")]);
    assert!(killed.status.success(), "{killed:?}");
    let exits = std::path::Path::new("/run/libpod/exits");
    assert!(
        exits.is_dir(),
        "podman's exit-file folder {exits:?} is missing"
    );
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(exits.join(c["Id"].as_str().unwrap()), "137").unwrap();
    let state = |n: &str| inspect("podman", n).unwrap()["State"]["Status"].clone();
    assert_eq!(state(name), "stopped");

    let out = run(&["list", "--json", "--engine", PODMAN]);
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    let listed = v
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned();
    assert_eq!(listed.expect("listed")["state"], "stopped");
    let out = run(&["list", "--engine", PODMAN]);
    assert!(
        ok(&out)
            .lines()
            .any(|l| l.starts_with(name) && l.contains("stopped"))
    );

    let (out, code) = enter_output(name, PODMAN, &["echo", "inside"]);
    assert_eq!((out.as_str(), code), ("inside", 0));
    assert_eq!(state(name), "running");
    cleanup("podman", &[name]);
}

/// An argument a shell would take apart: quotes, `$HOME`, a tab, `;`, a
/// backslash, a glob and a newline.
const NASTY: &str = "a'b\"c $HOME\td;e \\n * `x`\nz";

/// In a distrobox container a command's argv arrives byte for byte (no
/// shell on the host re-reads it), runs as distrobox's user in its
/// directory; `serve` on a distrobox head gets HF_TOKEN through; and the
/// distrobox processes halobox starts get no secret.
#[test]
fn distrobox_commands_arrive_byte_for_byte_and_secrets_stay_out() {
    let socket = ROOTLESS;
    require(socket);
    let name = "hbx-distro-argv";
    let _ = as_halotest(&["rm", name, "--yes", "--engine", socket]);
    let spies = Spies::new();
    spies.add("distrobox", false, "exec /usr/bin/distrobox \"$@\"");
    // The Ray query serve asks the head first: one alive node with a GPU.
    spies.add(
        "ssh",
        false,
        &format!(
            "echo '{{\"nodes\": [{{\"ip\": \"{}\", \"id\": \"n\", \"alive\": true, \"head\": true, \"resources\": {{\"GPU\": 1.0}}}}], \"error\": null}}'",
            common::local_ipv4()
        ),
    );
    let path = spies.path();
    let mut env: Vec<(&str, &str)> = SECRETS.to_vec();
    env.push(("PATH", &path));
    ok(&distrobox_refresh(&env, name, &["--memlock", "8M"]));

    let out = as_halotest_with(
        &env,
        &[
            "enter", name, "--engine", socket, "--", "printf", "[%s]\\n", NASTY, "x  y",
        ],
        "/",
    );
    assert_eq!(ok(&out), format!("[{NASTY}]\n[x  y]\n"));
    let out = as_halotest_with(
        &env,
        &[
            "enter",
            name,
            "--engine",
            socket,
            "--",
            "sh",
            "-c",
            "id -un; pwd; echo $CONTAINER_ID",
        ],
        "/home/halotest",
    );
    assert_eq!(ok(&out), format!("halotest\n/home/halotest\n{name}\n"));
    let out = as_halotest_with(&env, &["enter", name, "--engine", socket, "--", "pwd"], "/");
    assert_eq!(ok(&out), "/run/host\n");

    // serve on a distrobox head: a stand-in vllm in the container records
    // what it got (the container binds the host's /tmp).
    let seen = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        seen.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let fake_vllm = format!(
        "#!/bin/sh\nprintf '%s' \"$HF_TOKEN\" > {d}/token\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > {d}/args\n",
        d = seen.path().display()
    );
    let mut install = Command::new("runuser")
        .args([
            "-u",
            "halotest",
            "--",
            "env",
            "XDG_RUNTIME_DIR=/run/user/1500",
            "podman",
            "exec",
            "-i",
            "-u",
            "0",
            name,
            "sh",
            "-c",
            "cat > /usr/local/bin/vllm && chmod 755 /usr/local/bin/vllm",
        ])
        .current_dir("/")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut install.stdin.take().unwrap(), fake_vllm.as_bytes()).unwrap();
    assert!(install.wait().unwrap().success());
    let cluster = seen.path().join("cluster.toml");
    std::fs::write(
        &cluster,
        format!(
            "halobox = \"{}\"\ntransport = \"ethernet\"\n[[node]]\nssh = \"halotest@head\"\nip = \"{}\"\nbackend = \"distrobox\"\ncontainer = \"{name}\"\n",
            env!("CARGO_BIN_EXE_halobox"),
            common::local_ipv4()
        ),
    )
    .unwrap();
    let out = as_halotest_with(
        &env,
        &[
            "serve",
            "m",
            "--cluster",
            cluster.to_str().unwrap(),
            "--",
            "--extra",
            NASTY,
        ],
        "/",
    );
    // The stand-in ends at once: serve says so and reports nothing as served.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr.contains("vLLM exited before its API answered"),
        "{stderr}"
    );
    assert_no_secret(&spies.record("ssh"));
    let token = std::fs::read_to_string(seen.path().join("token")).expect("vllm ran");
    assert_eq!(token, SECRETS[0].1);
    let args = std::fs::read_to_string(seen.path().join("args")).unwrap();
    let args: Vec<&str> = args.trim_end_matches('\0').split('\0').collect();
    assert_eq!(args[..2], ["serve", "m"]);
    assert_eq!(args[args.len() - 2..], ["--extra", NASTY]);

    // A shell (no command) goes through `distrobox enter`: without secrets.
    let out = as_halotest_with(&env, &["enter", name, "--engine", socket], "/");
    assert!(out.status.success(), "{out:?}");
    let record = spies.record("distrobox");
    assert!(
        record.contains("== distrobox create") && record.contains("== distrobox enter"),
        "{record}"
    );
    assert_no_secret(&record);
    ok(&as_halotest(&["rm", name, "--yes", "--engine", socket]));
}

/// `halobox check NAME --json` on a container of a busybox test image: this
/// machine has no GPU, RDMA device or python, so it FAILs (exit 1).
fn check_json(engine: &str, name: &str) -> Value {
    let (v, code) = common::run_json(&["check", name, "--engine", engine, "--json"]);
    assert_eq!(code, 1, "{v:#}");
    v
}

/// What the busybox test image gives here: memlock, devices and groups PASS;
/// the GPU FAILs (none on this host either), the Python checks SKIP (no
/// python), Ray FAILs (not installed).
fn assert_checked_without_gpu(v: &Value, via: &str, memlock_as_created: Option<&str>) {
    let get = |id: &str| {
        let c = common::check(v, id);
        (
            c["status"].as_str().unwrap().to_string(),
            c["summary"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(v["via"], via, "{v:#}");
    for id in ["memlock", "devices", "groups", "env"] {
        assert_eq!(get(id).0, "PASS", "{id}: {v:#}");
    }
    if let Some(m) = memlock_as_created {
        assert!(
            get("memlock")
                .1
                .contains(&format!("as the container was created ({m})")),
            "{v:#}"
        );
    }
    for dev in engines::host_infiniband_nodes() {
        assert!(get("devices").1.contains(&dev), "{v:#}");
    }
    let (gpu, why) = get("gpu");
    assert_eq!(gpu, "FAIL");
    assert!(why.contains("the host has none either"), "{why}");
    assert_eq!(get("rdma.ports").0, "SKIP");
    for id in ["torch", "amdsmi", "vllm", "rccl"] {
        let (status, why) = get(id);
        assert_eq!(status, "SKIP", "{id}: {why}");
        assert!(why.contains("no python in the container"), "{id}: {why}");
    }
    let (ray, why) = get("ray");
    assert_eq!(ray, "FAIL");
    assert!(why.contains("no ray in the container"), "{why}");
    assert_eq!(v["summary"]["fail"], 2, "{v:#}");
}

#[test]
fn check_podman_and_docker_containers_from_inside() {
    require(PODMAN);
    require(DOCKER);
    let name = "hbx-check";
    cleanup("podman", &[name, "hbx-check-halobox-new"]);
    cleanup("docker", &[name, "hbx-check-halobox-new"]);
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    let v = check_json(PODMAN, name);
    assert_checked_without_gpu(&v, "engine exec", Some("8 MiB"));
    assert_eq!(v["backend"], "podman");
    assert_eq!(v["image"], format!("{REPO}:20240101-000000"));
    // The text form: one line per check, the fix under each FAIL.
    let out = run(&["check", name, "--engine", PODMAN]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("through engine exec"), "{text}");
    assert!(text.contains("PASS  memlock"), "{text}");
    assert!(
        text.contains("fix: run `halobox doctor` on the host"),
        "{text}"
    );
    // A stopped container is started, as `halobox enter` does.
    assert!(cli("podman", &["stop", "-t", "0", name]).status.success());
    assert_checked_without_gpu(&check_json(PODMAN, name), "engine exec", Some("8 MiB"));
    cleanup("podman", &[name]);

    ok(&backend_refresh(DOCKER, name, "docker", "8M"));
    let v = check_json(DOCKER, name);
    assert_checked_without_gpu(&v, "engine exec", Some("8 MiB"));
    assert_eq!(v["backend"], "docker");
    cleanup("docker", &[name]);

    let out = run(&["check", name, "--engine", PODMAN]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("halobox refresh --name hbx-check"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_goes_through_toolbox_run_and_distrobox_enter() {
    require(PODMAN);
    require("unix:///run/dbus/system_bus_socket");
    let name = "hbx-check-tb";
    cleanup("podman", &[name, "hbx-check-tb-halobox-new"]);
    ok(&backend_refresh(PODMAN, name, "toolbox", "4M"));
    assert_checked_without_gpu(&check_json(PODMAN, name), "toolbox run", Some("4 MiB"));
    cleanup("podman", &[name]);

    // distrobox as a user, on the rootless engine; distrobox passes --ulimit
    // host, so there is no memlock of the container's own to compare with.
    let socket = "unix:///run/user/1500/podman/podman.sock";
    require(socket);
    let name = "hbx-check-db";
    let _ = as_halotest(&["rm", name, "--yes", "--engine", socket]);
    ok(&as_halotest(&[
        "refresh",
        "--engine",
        socket,
        "--backend",
        "distrobox",
        "--name",
        name,
        "--image",
        "127.0.0.1:5000/halobox/distro:1",
        "--memlock",
        "8M",
    ]));
    let out = as_halotest(&["check", name, "--engine", socket, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_checked_without_gpu(&v, "distrobox exec", None);
    assert!(
        common::check(&v, "groups")["summary"]
            .as_str()
            .unwrap()
            .starts_with("halotest (uid 1500"),
        "{v:#}"
    );
    ok(&as_halotest(&["rm", name, "--yes", "--engine", socket]));
}

#[test]
fn refresh_check_says_what_failed_and_keeps_the_new_container() {
    require(PODMAN);
    let name = "hbx-refresh-check";
    cleanup(
        "podman",
        &[
            name,
            "hbx-refresh-check-halobox-new",
            "hbx-refresh-check-prev",
        ],
    );
    ok(&podman_refresh(name, &format!("{REPO}:1"), &[]));
    let out = podman_refresh(name, &format!("{REPO}:2"), &["--check", "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("halobox check: {name}")), "{text}");
    assert!(
        stderr(&out).contains(&format!(
            "error: the new {name} fails gpu, ray\n  hint: it stays in place; roll back with `halobox refresh --rollback --name {name}`"
        )),
        "{}",
        stderr(&out)
    );
    let c = inspect("podman", name).expect("the new container stays");
    assert_eq!(c["Config"]["Image"], format!("{REPO}:20240601-000000"));
    assert_eq!(c["State"]["Running"], true);
    // --json: one document, the outcome with the check inside.
    let out = refresh(
        PODMAN,
        name,
        &[
            "--backend",
            "podman",
            "--rollback",
            "--memlock",
            "8M",
            "--check",
            "--json",
            "--yes",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], name);
    assert_checked_without_gpu(&v["check"], "engine exec", Some("8 MiB"));
    let c = inspect("podman", name).unwrap();
    assert_eq!(c["Config"]["Image"], format!("{REPO}:20240101-000000"));
    // --dry-run says the check would run.
    let out = podman_refresh(name, &format!("{REPO}:2"), &["--check", "--dry-run"]);
    assert!(
        ok(&out).contains(&format!("check {name} from inside (halobox check {name})")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    cleanup(
        "podman",
        &[
            name,
            "hbx-refresh-check-halobox-new",
            "hbx-refresh-check-prev",
        ],
    );
}

/// `list` while another process removes halobox containers (two runs at
/// once): a container that goes between the engine's list and its inspect
/// is simply gone, not an error (podman answers that inspect with HTTP 500
/// "no such container", not 404).
#[test]
fn list_while_containers_are_removed_succeeds() {
    for (program, engine) in [("podman", PODMAN), ("docker", DOCKER)] {
        require(engine);
        let pulled = cli(program, &["pull", "-q", &format!("{REPO}:1")]);
        assert!(pulled.status.success(), "{pulled:?}");
        let names: Vec<String> = (0..20).map(|i| format!("hbx-vanish-{i}")).collect();
        let left = cli(program, &["ps", "-aq", "--filter", "name=hbx-vanish-"]);
        for id in String::from_utf8_lossy(&left.stdout).split_whitespace() {
            cli(program, &["rm", "-f", id]);
        }
        for n in &names {
            let made = cli(
                program,
                &[
                    "run",
                    "-d",
                    "--stop-signal",
                    "KILL",
                    "--name",
                    n,
                    "--label",
                    "dev.halobox.managed=true",
                    "--label",
                    &format!("dev.halobox.instance={n}"),
                    &format!("{REPO}:1"),
                    "sleep",
                    "1000",
                ],
            );
            assert!(made.status.success(), "{made:?}");
        }
        let remover = {
            let names = names.clone();
            std::thread::spawn(move || {
                for n in &names {
                    let gone = cli(program, &["rm", "-f", n]);
                    assert!(gone.status.success(), "{gone:?}");
                }
            })
        };
        let mut lists = 0;
        while !remover.is_finished() {
            let out = run(&["list", "--json", "--engine", engine]);
            assert!(
                out.status.success(),
                "{program}: list failed while containers were removed: {}",
                stderr(&out)
            );
            lists += 1;
        }
        remover.join().unwrap();
        assert!(lists > 1, "{program}: list ran {lists} time(s)");
        assert!(listed(engine).iter().all(|n| !n.starts_with("hbx-vanish-")));
    }
}

/// `halobox check` of a container whose image's Python prints OSC 52
/// (clipboard), OSC 0 (title) and CSI 2J (clear screen) in its version and
/// its probe's facts, then a 300 MB line: what reaches the terminal has no
/// control or escape character and stays within the capture's bounds.
#[test]
fn check_of_an_image_whose_probe_sends_escapes_and_300_mb() {
    require(PODMAN);
    let image = "localhost/halobox-hostile-probe:1";
    let built = cli(
        "podman",
        &[
            "build",
            "-q",
            "-t",
            image,
            "-f",
            "tests/fixtures/images/hostile-probe.Containerfile",
            "tests/fixtures/images",
        ],
    );
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let name = "hbx-hostile-probe";
    cleanup("podman", &[name]);
    let started = cli(
        "podman",
        &["run", "-d", "--name", name, image, "sleep", "infinity"],
    );
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let out = halobox()
        .args(["check", name, "--engine", PODMAN])
        .output()
        .unwrap();
    let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
    assert!(all.len() < 4 << 20, "{} bytes printed", all.len());
    let text = String::from_utf8_lossy(&all);
    let head = &text[..text.len().min(3000)];
    assert!(
        !text
            .chars()
            .any(|c| c == '\u{1b}' || c == '\u{7}' || c == '\u{9b}' || c == '\r'),
        "{head:?}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("FAIL  torch ")
                && l.ends_with(" import torch: boom-from-the-image")),
        "{head}"
    );
    assert!(!text.contains("pwned-title"), "{head}");
    cleanup("podman", &[name]);
}

/// A `podman system service` started for one test, killed when dropped.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The limit `name` (`nproc`, `nofile`) in `/proc/PID/limits`: (soft, hard).
fn proc_limit(pid: u32, row: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text.lines().find(|l| l.starts_with(row)).unwrap();
    let f: Vec<&str> = line[row.len()..].split_whitespace().collect();
    (f[0].parse().unwrap(), f[1].parse().unwrap())
}

fn ulimit_of(c: &Value, name: &str) -> (i64, i64) {
    let u = c["HostConfig"]["Ulimits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| {
            u["Name"]
                .as_str()
                .unwrap()
                .to_ascii_lowercase()
                .ends_with(name)
        })
        .unwrap_or_else(|| panic!("no {name} ulimit in {}", c["HostConfig"]["Ulimits"]))
        .clone();
    (u["Soft"].as_i64().unwrap(), u["Hard"].as_i64().unwrap())
}

/// The CI failure of 2026-11-28: a test node's podman service (its own
/// mount namespace, the same socket path, a higher nproc limit) was taken
/// for the engine, and the container asked for more than the real service
/// could grant (runc: "error setting rlimit type 6: operation not
/// permitted"). Here a service in another mount namespace listens on the
/// same path, started first so it comes first in /proc, with the machine's
/// limits; the one the path reaches from here has a lower nproc.
#[test]
fn a_podman_service_in_another_mount_namespace_is_not_the_engine() {
    require(PODMAN);
    let name = "hbx-mntns";
    cleanup("podman", &[name, "hbx-mntns-halobox-new", "hbx-mntns-prev"]);
    let run_dir = "/run/hbx-mntns";
    let socket = format!("unix://{run_dir}/podman.sock");
    let scratch = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(run_dir).unwrap();
    let decoy_root = scratch.path().display().to_string();
    let decoy = Service(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs tmpfs {run_dir} && exec podman --root {decoy_root}/root \
                 --runroot {decoy_root}/runroot system service --time=0 {socket}"
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("unshare (util-linux)"),
    );
    let (_, hard) = proc_limit(std::process::id(), "Max processes");
    let low = (hard / 2).min(4096);
    let real = Service(
        Command::new("prlimit")
            .arg(format!("--nproc={low}:{low}"))
            .args(["podman", "system", "service", "--time=0", &socket])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prlimit (util-linux)"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let ping = || {
        cli(
            "curl",
            &[
                "-sf",
                "--unix-socket",
                &format!("{run_dir}/podman.sock"),
                "http://d/_ping",
            ],
        )
        .status
        .success()
    };
    while !ping() {
        assert!(
            Instant::now() < deadline,
            "the test's podman service did not answer on {socket}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Both run `podman system service … {socket}`; only `real` is behind it here.
    let decoy_pid = decoy.0.id();
    assert!(
        std::fs::read_link(format!("/proc/{decoy_pid}/ns/mnt")).unwrap()
            != std::fs::read_link("/proc/self/ns/mnt").unwrap(),
        "the decoy service shares this mount namespace"
    );
    assert!(proc_limit(decoy_pid, "Max processes").1 > proc_limit(real.0.id(), "Max processes").1);

    let image = format!("{REPO}:1");
    let out = refresh(
        &socket,
        name,
        &["--backend", "podman", "--image", &image, "--memlock", "8M"],
    );
    let c = inspect("podman", name);
    cleanup("podman", &[name, "hbx-mntns-halobox-new", "hbx-mntns-prev"]);
    drop(real);
    drop(decoy);
    let _ = std::fs::remove_dir(run_dir);
    ok(&out);
    let c = c.expect("the container exists");
    assert_eq!(c["State"]["Running"], true);
    let low = i64::try_from(low).unwrap();
    assert_eq!(ulimit_of(&c, "nproc"), (low, low));
}

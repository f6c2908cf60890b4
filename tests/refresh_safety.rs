//! A refresh cannot lose a container: it asks (or needs `--yes`) before it
//! replaces one, keeps the old one as `NAME-prev` for `--rollback`, swaps in
//! only a container that stays up, finishes a swap before it obeys
//! SIGINT/SIGTERM, is repaired by the next `list`/`enter`/`refresh` when it
//! was killed mid-swap, and runs once per name at a time. Against the real
//! rootful podman and dockerd (scripts/engines/start.sh), with test-only
//! pauses between the renames (`HALOBOX_TEST_PAUSE_AT=swap`).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use common::engines::{DOCKER, PODMAN, REPO, cleanup, cli, inspect, require};

/// halobox with its own journal directory, so a test sees only its own.
struct Halobox {
    state: tempfile::TempDir,
}

impl Halobox {
    fn new() -> Halobox {
        Halobox {
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_halobox"));
        c.args(args)
            .env("XDG_STATE_HOME", self.state.path())
            .env_remove("HSA_OVERRIDE_GFX_VERSION")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `refresh --name NAME --backend B --image IMAGE --memlock 8M EXTRA…`.
    fn refresh(&self, engine: &str, name: &str, image: &str, extra: &[&str]) -> Output {
        self.run(&refresh_args(engine, name, image, extra))
    }

    /// Journal files left behind.
    fn journal(&self) -> Vec<String> {
        std::fs::read_dir(self.state.path().join("halobox/refresh"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn program(engine: &str) -> &'static str {
    if engine == DOCKER { "docker" } else { "podman" }
}

fn refresh_args<'a>(
    engine: &'a str,
    name: &'a str,
    image: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    backend_args(engine, program(engine), name, image, extra)
}

fn backend_args<'a>(
    engine: &'a str,
    backend: &'a str,
    name: &'a str,
    image: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec![
        "refresh",
        "--engine",
        engine,
        "--name",
        name,
        "--backend",
        backend,
        "--memlock",
        "8M",
    ];
    if !image.is_empty() {
        a.extend(["--image", image]);
    }
    a.extend_from_slice(extra);
    a
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output) {
    assert!(out.status.success(), "{}", text(out));
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// (id, running) of a container, or `None`.
fn state(program: &str, name: &str) -> Option<(String, bool)> {
    inspect(program, name).map(|c| {
        (
            c["Id"].as_str().unwrap().to_string(),
            c["State"]["Running"] == true,
        )
    })
}

fn names(program: &str, name: &str) -> Vec<String> {
    let out = cli(program, &["ps", "-a", "--format", "{{.Names}}"]);
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| *n == name || n.starts_with(&format!("{name}-")))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn clean(program: &str, name: &str) {
    let all = [
        name.to_string(),
        format!("{name}-prev"),
        format!("{name}-halobox-new"),
        format!("{name}-halobox-old"),
    ];
    cleanup(program, &all.iter().map(String::as_str).collect::<Vec<_>>());
}

/// Writes a file into the container through `halobox enter`.
fn write_data(h: &Halobox, engine: &str, name: &str, content: &str) {
    ok(&h.run(&[
        "enter",
        name,
        "--engine",
        engine,
        "--",
        "sh",
        "-c",
        &format!("echo {content} > /root/data.txt"),
    ]));
}

fn read_data(h: &Halobox, engine: &str, name: &str) -> String {
    let out = h.run(&[
        "enter",
        name,
        "--engine",
        engine,
        "--",
        "cat",
        "/root/data.txt",
    ]);
    ok(&out);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// True when a stopped container's own files include /root/data.txt.
fn has_data(program: &str, name: &str) -> bool {
    let out = cli(program, &["diff", name]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.ends_with("/root/data.txt"))
}

/// Test images in the loopback registry: `exits-shell`, whose /bin/sh
/// sleeps 2 s and exits 3 (so any command run by sh, halobox's idle loop
/// included, ends after 2 s), and `exits-entrypoint`, whose ENTRYPOINT is
/// `sh -c 'sleep 2; exit 3'`. Built from localhost/halobox-test:1.
fn exiting_images() {
    static BUILT: Once = Once::new();
    BUILT.call_once(|| {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            (
                "exits-shell",
                "FROM localhost/halobox-test:1\nRUN [\"/bin/busybox\", \"sh\", \"-c\", \"rm /bin/sh && printf '#!/bin/busybox sh\\\\nsleep 2\\\\nexit 3\\\\n' > /bin/sh && chmod 755 /bin/sh\"]\n",
            ),
            (
                "exits-entrypoint",
                "FROM localhost/halobox-test:1\nENTRYPOINT [\"sh\", \"-c\", \"sleep 2; exit 3\"]\n",
            ),
        ];
        for (repo, containerfile) in files {
            let file = dir.path().join(repo);
            std::fs::write(&file, containerfile).unwrap();
            let local = format!("localhost/halobox-{repo}:1");
            let built = cli(
                "podman",
                &["build", "-q", "-f", file.to_str().unwrap(), "-t", &local, dir.path().to_str().unwrap()],
            );
            assert!(built.status.success(), "podman build {repo}: {built:?}");
            let pushed = cli(
                "podman",
                &["push", "-q", "--tls-verify=false", &local, &format!("docker://127.0.0.1:5000/halobox/{repo}:1")],
            );
            assert!(pushed.status.success(), "podman push {repo}: {pushed:?}");
        }
    });
}

#[test]
fn replacing_without_a_terminal_needs_yes() {
    require(PODMAN);
    let h = Halobox::new();
    let name = "hbx-yes";
    clean("podman", name);
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
    let (before, _) = state("podman", name).unwrap();
    let out = h.refresh(PODMAN, name, &format!("{REPO}:2"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not replacing hbx-yes without confirmation: pass --yes")
            && err.contains("kept as hbx-yes-prev"),
        "{err}"
    );
    assert_eq!(state("podman", name), Some((before, true)));
    assert_eq!(names("podman", name), [name]);
    clean("podman", name);
}

/// tmux gives the refresh a terminal: the prompt names what is stopped,
/// kept and deleted with their filesystem changes, and Enter means no.
#[test]
fn the_prompt_says_what_is_kept_and_deleted_and_defaults_to_no() {
    require(PODMAN);
    let h = Halobox::new();
    let name = "hbx-prompt";
    clean("podman", name);
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
    write_data(&h, PODMAN, name, "older");
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:2"), &["--yes"]));
    write_data(&h, PODMAN, name, "newer");
    let before = names("podman", name);
    let socket = format!("halobox-prompt-{}", std::process::id());
    let tmux = |args: &[&str]| {
        let mut all = vec!["-L", socket.as_str()];
        all.extend_from_slice(args);
        cli("tmux", &all)
    };
    let command = format!(
        "XDG_STATE_HOME={} {} {}; echo EXIT=$?; sleep 60",
        h.state.path().display(),
        env!("CARGO_BIN_EXE_halobox"),
        refresh_args(PODMAN, name, &format!("{REPO}:1"), &[]).join(" ")
    );
    assert!(
        tmux(&[
            "new-session",
            "-d",
            "-s",
            "p",
            "-x",
            "200",
            "-y",
            "40",
            &command
        ])
        .status
        .success()
    );
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen =
                String::from_utf8_lossy(&tmux(&["capture-pane", "-t", "p", "-p", "-J"]).stdout)
                    .into_owned();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "{what:?} never appeared:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let screen = wait_for("[y/N]");
    assert!(
        screen.contains("hbx-prompt (127.0.0.1:5000/halobox/test:20240601-000000; ")
            && screen.contains("will be stopped and kept as hbx-prompt-prev")
            && screen.contains(
                "The older hbx-prompt-prev (127.0.0.1:5000/halobox/test:20240101-000000; "
            )
            && screen.contains("will be deleted")
            && screen.contains("changed path"),
        "{screen}"
    );
    tmux(&["send-keys", "-t", "p", "Enter"]);
    let screen = wait_for("EXIT=");
    let _ = tmux(&["kill-server"]);
    assert!(
        screen.contains("nothing changed") && screen.contains("EXIT=1"),
        "{screen}"
    );
    assert_eq!(names("podman", name), before);
    assert_eq!(read_data(&h, PODMAN, name), "newer");
    assert!(has_data("podman", &format!("{name}-prev")));
    clean("podman", name);
}

#[test]
fn the_old_container_is_kept_as_prev_and_rollback_brings_it_back() {
    for engine in [PODMAN, DOCKER] {
        require(engine);
        let p = program(engine);
        let h = Halobox::new();
        let name = "hbx-keep";
        clean(p, name);
        let prev = format!("{name}-prev");
        ok(&h.refresh(engine, name, &format!("{REPO}:1"), &[]));
        let (first, _) = state(p, name).unwrap();
        write_data(&h, engine, name, "first");
        ok(&h.refresh(engine, name, &format!("{REPO}:2"), &["--yes"]));
        let (second, running) = state(p, name).unwrap();
        assert!(running && second != first);
        // The replaced container is stopped and kept, with its files.
        assert_eq!(state(p, &prev), Some((first.clone(), false)), "{engine}");
        assert!(
            has_data(p, &prev),
            "{engine}: the data file is not in {prev}"
        );
        // Rollback: the kept container comes back with its files; the
        // current one becomes NAME-prev, so a second rollback swaps back.
        ok(&h.refresh(engine, name, "", &["--rollback", "--yes"]));
        assert_eq!(state(p, name), Some((first.clone(), true)), "{engine}");
        assert_eq!(read_data(&h, engine, name), "first");
        assert_eq!(state(p, &prev), Some((second.clone(), false)), "{engine}");
        ok(&h.refresh(engine, name, "", &["--rollback", "--yes"]));
        assert_eq!(state(p, name), Some((second.clone(), true)), "{engine}");
        assert_eq!(state(p, &prev), Some((first.clone(), false)), "{engine}");
        // The next refresh deletes the generation before the one it keeps.
        ok(&h.refresh(engine, name, &format!("{REPO}:1"), &["--yes"]));
        assert_eq!(state(p, &prev), Some((second, false)), "{engine}");
        assert!(inspect(p, &first).is_none(), "{engine}: {first} was kept");
        assert_eq!(names(p, name), [name.to_string(), prev.clone()]);
        assert!(h.journal().is_empty(), "{:?}", h.journal());
        // `halobox rm NAME` removes the kept one too.
        ok(&h.run(&["rm", name, "--yes", "--engine", engine]));
        assert!(names(p, name).is_empty(), "{engine}: {:?}", names(p, name));
    }
}

#[test]
fn an_image_entrypoint_that_exits_does_not_decide() {
    exiting_images();
    for engine in [PODMAN, DOCKER] {
        require(engine);
        let p = program(engine);
        let h = Halobox::new();
        let name = "hbx-entrypoint";
        clean(p, name);
        ok(&h.refresh(
            engine,
            name,
            "127.0.0.1:5000/halobox/exits-entrypoint:1",
            &[],
        ));
        std::thread::sleep(Duration::from_secs(3));
        let c = inspect(p, name).unwrap();
        assert_eq!(c["State"]["Running"], true, "{engine}: {}", c["State"]);
        clean(p, name);
    }
}

/// toolbox: the container runs at once, but toolbx's init-container dies
/// before it writes its readiness stamp.
#[test]
fn a_container_that_exits_after_two_seconds_is_never_swapped_in() {
    exiting_images();
    for (engine, backend) in [(PODMAN, "podman"), (DOCKER, "docker"), (PODMAN, "toolbox")] {
        require(engine);
        if backend == "toolbox" {
            require("unix:///run/dbus/system_bus_socket");
        }
        let p = program(engine);
        let h = Halobox::new();
        let name = "hbx-exits";
        clean(p, name);
        let good = format!("{REPO}:1");
        ok(&h.run(&backend_args(engine, backend, name, &good, &[])));
        let (before, _) = state(p, name).unwrap();
        let bad = "127.0.0.1:5000/halobox/exits-shell:1";
        let out = h.run(&backend_args(engine, backend, name, bad, &["--yes"]));
        assert_eq!(out.status.code(), Some(1), "{backend}: {}", text(&out));
        let err = stderr(&out);
        let why = if backend == "toolbox" {
            "toolbox's init-container stopped before it was ready"
        } else {
            "settle window: it exited with code 3"
        };
        assert!(
            err.contains("did not stay up")
                && err.contains(why)
                && err.contains("the existing container hbx-exits was left as it was")
                && err.contains("was removed"),
            "{backend}: {err}"
        );
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(state(p, name), Some((before, true)), "{backend}");
        assert_eq!(names(p, name), [name], "{backend}");
        assert!(h.journal().is_empty());
        clean(p, name);
    }
}

/// A halobox run whose stderr lines arrive on a channel.
struct Watched {
    child: Child,
    lines: Receiver<String>,
    all: Arc<Mutex<String>>,
}

impl Watched {
    fn spawn(mut cmd: Command) -> Watched {
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = channel();
        let all = Arc::new(Mutex::new(String::new()));
        let sink = all.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                let _ = tx.send(line);
            }
        });
        Watched { child, lines, all }
    }

    /// Waits for a stderr line containing `marker`.
    fn wait_for(&mut self, marker: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(marker) => return,
                Ok(_) => {}
                Err(_) => panic!(
                    "{marker:?} never appeared; stderr:\n{}",
                    self.all.lock().unwrap()
                ),
            }
        }
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let all = self.all.lock().unwrap().clone();
        (status, all)
    }
}

/// A refresh of `name` to REPO:2 that pauses `secs` between its renames.
fn paused_refresh(h: &Halobox, name: &str, secs: &str) -> Watched {
    let image = format!("{REPO}:2");
    let mut cmd = h.command(&refresh_args(PODMAN, name, &image, &["--yes"]));
    cmd.env("HALOBOX_TEST_PAUSE_AT", "swap")
        .env("HALOBOX_TEST_PAUSE_SECS", secs);
    let mut w = Watched::spawn(cmd);
    w.wait_for("HALOBOX_TEST_PAUSED at swap", Duration::from_secs(60));
    w
}

#[test]
fn sigint_and_sigterm_at_the_swap_finish_it_first() {
    require(PODMAN);
    use nix::sys::signal::Signal;
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let h = Halobox::new();
        let name = "hbx-signal";
        clean("podman", name);
        ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
        let (old, _) = state("podman", name).unwrap();
        write_data(&h, PODMAN, name, "precious");
        let w = paused_refresh(&h, name, "2");
        // The old container is aside and the name is free: the worst moment.
        assert!(inspect("podman", name).is_none());
        w.signal(signal);
        let (status, err) = w.finish();
        assert_eq!(status.signal(), Some(signal as i32), "{status:?}\n{err}");
        assert!(err.contains("arrived during the swap"), "{err}");
        let (new, running) = state("podman", name).expect("the name is taken again");
        assert!(running && new != old, "{err}");
        let prev = format!("{name}-prev");
        assert_eq!(state("podman", &prev), Some((old, false)), "{err}");
        assert!(has_data("podman", &prev));
        assert_eq!(names("podman", name), [name.to_string(), prev]);
        assert!(h.journal().is_empty(), "{:?}", h.journal());
        clean("podman", name);
    }
}

#[test]
fn a_refresh_killed_at_the_swap_is_repaired_by_list_enter_and_refresh() {
    require(PODMAN);
    use nix::sys::signal::Signal;
    for repairer in ["list", "enter", "refresh"] {
        let h = Halobox::new();
        let name = "hbx-killed";
        clean("podman", name);
        ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
        let (old, _) = state("podman", name).unwrap();
        write_data(&h, PODMAN, name, "precious");
        let w = paused_refresh(&h, name, "30");
        w.signal(Signal::SIGKILL);
        let _ = w.finish();
        assert_eq!(
            names("podman", name),
            [format!("{name}-halobox-new"), format!("{name}-halobox-old")]
        );
        assert_eq!(h.journal().len(), 1);
        let out = match repairer {
            "list" => h.run(&["list", "--engine", PODMAN]),
            "enter" => h.run(&["enter", name, "--engine", PODMAN, "--", "true"]),
            _ => h.refresh(PODMAN, name, &format!("{REPO}:1"), &["--yes"]),
        };
        ok(&out);
        let err = stderr(&out);
        assert!(
            err.contains(&format!("put {name}-halobox-old back as {name}"))
                && err.contains(&format!("remove {name}-halobox-new"))
                && err.contains("done"),
            "{repairer}: {err}"
        );
        assert!(h.journal().is_empty(), "{repairer}: {:?}", h.journal());
        if repairer == "refresh" {
            // Repaired, then refreshed: the user's container is kept.
            let prev = format!("{name}-prev");
            assert_eq!(state("podman", &prev).map(|s| s.0), Some(old), "{err}");
            assert!(has_data("podman", &prev));
        } else {
            assert_eq!(state("podman", name), Some((old, true)), "{repairer}");
            assert_eq!(read_data(&h, PODMAN, name), "precious");
            assert_eq!(names("podman", name), [name]);
        }
        clean("podman", name);
    }
}

/// The new container cannot take the name (someone took it during the
/// swap): the old one cannot be put back either, and the error says so
/// with the command that does it; the new one is removed.
#[test]
fn a_failed_swap_reports_the_real_result_of_every_put_back() {
    require(PODMAN);
    let h = Halobox::new();
    let name = "hbx-putback";
    clean("podman", name);
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
    let (old, _) = state("podman", name).unwrap();
    let w = paused_refresh(&h, name, "2");
    let squatter = cli(
        "podman",
        &["create", "--name", name, &format!("{REPO}:1"), "true"],
    );
    assert!(squatter.status.success(), "{squatter:?}");
    let (status, err) = w.finish();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "refresh failed while giving the new container the name {name}"
        )) && err.contains(&format!("putting the old {name} back failed"))
            && err.contains(&format!("podman rename {} {name}", &old[..12]))
            && err.contains("was removed"),
        "{err}"
    );
    assert_eq!(
        state("podman", &format!("{name}-halobox-old")).map(|s| s.0),
        Some(old)
    );
    assert!(inspect("podman", &format!("{name}-halobox-new")).is_none());
    clean("podman", name);
}

#[test]
fn a_second_refresh_fails_at_once_or_waits() {
    require(PODMAN);
    let h = Halobox::new();
    let name = "hbx-lock";
    clean("podman", name);
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
    // Paused long enough that the second run below meets it paused, however
    // slowly a busy machine starts that run (4 s were too few once).
    let mut first = paused_refresh(&h, name, "20");
    let pid = first.child.id();
    let out = h.refresh(PODMAN, name, &format!("{REPO}:1"), &["--yes"]);
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "it waited for the first run to end"
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        stderr(&out).contains(&format!(
            "another halobox run (pid {pid}) is changing container {name}"
        )) && stderr(&out).contains("--wait"),
        "{}",
        stderr(&out)
    );
    // The second run touched nothing of the first's.
    assert!(inspect("podman", &format!("{name}-halobox-new")).is_some());
    let waiter = h.refresh(PODMAN, name, &format!("{REPO}:1"), &["--yes", "--wait"]);
    let (status, err) = first.finish();
    assert!(status.success(), "{err}");
    ok(&waiter);
    assert!(stderr(&waiter).contains(&format!("waiting for the halobox run (pid {pid})")));
    let c = inspect("podman", name).unwrap();
    assert_eq!(
        c["Config"]["Labels"]["dev.halobox.image"],
        format!("{REPO}:20240101-000000")
    );
    let prev = inspect("podman", &format!("{name}-prev")).unwrap();
    assert_eq!(
        prev["Config"]["Labels"]["dev.halobox.image"],
        format!("{REPO}:20240601-000000")
    );
    clean("podman", name);
}

/// The lock names the engine, not its spelling, and lives where the
/// environment cannot move it: while a refresh through
/// `unix:///run/podman/podman.sock` is at its swap, a refresh through
/// `unix:///var/run/podman/podman.sock` (the same engine; one with another
/// `XDG_RUNTIME_DIR` too) is refused, and `list`/`enter` through it leave
/// the running refresh alone instead of "repairing" it.
#[test]
fn two_spellings_of_one_engine_share_the_lock() {
    require(PODMAN);
    let other = "unix:///var/run/podman/podman.sock";
    let h = Halobox::new();
    let name = "hbx-spell";
    clean("podman", name);
    ok(&h.refresh(PODMAN, name, &format!("{REPO}:1"), &[]));
    let first = paused_refresh(&h, name, "8");
    let pid = first.child.id();
    let busy = format!("another halobox run (pid {pid}) is changing container {name}");
    let out = h.refresh(other, name, &format!("{REPO}:1"), &["--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stderr(&out).contains(&busy), "{}", text(&out));
    let runtime = tempfile::tempdir().unwrap();
    let out = h
        .command(&refresh_args(other, name, &format!("{REPO}:1"), &["--yes"]))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env("TMPDIR", runtime.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stderr(&out).contains(&busy), "{}", text(&out));
    let alone = format!("{name}: a refresh (pid {pid}) is changing it now; left alone");
    let out = h.run(&["list", "--engine", other]);
    assert!(stderr(&out).contains(&alone), "{}", text(&out));
    let out = h.run(&["enter", name, "--engine", other, "--", "true"]);
    assert!(stderr(&out).contains(&alone), "{}", text(&out));
    // The first run's staged container is still there: nothing was touched.
    assert!(inspect("podman", &format!("{name}-halobox-new")).is_some());
    let (status, err) = first.finish();
    assert!(status.success(), "{err}");
    clean("podman", name);
}

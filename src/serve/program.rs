//! The small POSIX `sh` programs `serve` runs in the head's container (each
//! as `sh -c PROGRAM halobox-serve ARGS…`): start the engine detached with
//! its log in a file, look at it, follow its log, stop it. The engine's
//! process id, its log and the `/dev/shm` segments that existed before it
//! started live in [`DIR`] inside the container, so `serve status`, `logs`
//! and `stop` find them from any later halobox run on the head. The folder
//! is the container user's own (0700, not a link) in that user's state
//! folder: toolbox and distrobox containers share the host's `/tmp` with
//! every other user, who could make the folder there first.

/// Where the programs keep the engine's pid, log and shm list (in the
/// container; a shell expression): `${XDG_STATE_HOME:-$HOME/.local/state}
/// /halobox/serve`, where no other user can make it first. The folder an
/// older halobox used, `${TMPDIR:-/tmp}/halobox-serve-UID`, is still used
/// while the new one does not exist and it is this user's own (not a link),
/// so an engine it started is still found; one of another user's there is
/// passed over. Without HOME or XDG_STATE_HOME, the old folder.
pub const DIR: &str = "$(n=\"${XDG_STATE_HOME:-$HOME/.local/state}/halobox/serve\"; o=\"${TMPDIR:-/tmp}/halobox-serve-$(id -u)\"; \
     if [ -z \"$XDG_STATE_HOME$HOME\" ] || { [ ! -e \"$n\" ] && [ ! -L \"$n\" ] && [ -d \"$o\" ] && [ ! -L \"$o\" ] && [ -O \"$o\" ]; }; \
     then printf %s \"$o\"; else printf %s \"$n\"; fi)";
/// The engine's log, in the container (as printed).
pub const LOG: &str = "${XDG_STATE_HOME:-~/.local/state}/halobox/serve/engine.log";

/// `alive`: true when process `$pid` exists and is not a zombie (an
/// orphaned engine is reparented to the container's init, which may never
/// reap it, so `kill -0` alone would call a dead engine alive).
pub const ALIVE_FN: &str = r#"alive() { [ -r "/proc/$1/stat" ] || return 1; case "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null)" in Z*|X*|x*|'') return 1 ;; esac; return 0; }"#;

/// The shell functions the programs trust a pid file with, after
/// [`ALIVE_FN`]:
/// - `started PID`: the process's start time (`/proc/PID/stat` field 22,
///   fixed at fork; empty when there is no such process);
/// - `owndir`: `$d` is a folder of this user's own, not a link (else a
///   message and exit 95: toolbox and distrobox share the host's `/tmp`,
///   where another user could plant one);
/// - `readpid FILE`: sets `pid` and `start` from a file of this user's own
///   (not a link) holding `PID START`; fails when there is none, and on a
///   pid that is not a number above 1 (`kill -1` would reach every process);
/// - `same`: process `$pid` is the one started at `$start` (a reused pid
///   never is);
/// - `mygroup`: the process group `-$pid` can only be the one halobox
///   started: its leader is that process, or its number is still taken by
///   the group (the kernel reuses no pid a group still holds).
pub const PID_FNS: &str = r#"started() { _s=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null) || return 1; set -- $_s; [ "$#" -ge 20 ] || return 1; shift 19; echo "$1"; }; owndir() { if [ -L "$d" ] || [ ! -d "$d" ] || [ ! -O "$d" ]; then echo "halobox: $d is not this user's own folder: remove it" >&2; exit 95; fi; }; readpid() { pid=; start=; [ -f "$1" ] && [ ! -L "$1" ] && [ -O "$1" ] || return 1; read -r pid start <"$1"; case "$pid" in ''|*[!0-9]*) pid=; return 1 ;; esac; [ "$pid" -gt 1 ] || { pid=; return 1; }; }; same() { [ -n "$start" ] && [ "$(started "$pid")" = "$start" ]; }; mygroup() { same || [ ! -e "/proc/$pid" ]; }"#;

/// The pid file `FILE` as `PID START` for the process `$!` (`$1` the file).
pub(crate) const RECORD_FN: &str = r#"record() { echo "$! $(started "$!")" >"$1"; }"#;

/// Shell that reads the pid file `$d/NAME` for `state` and `stop`: prints
/// `none` and exits when there is no engine to look at (no folder, no
/// file, or one that names no engine: removed, with a word on stderr).
pub(crate) fn read_pid_file(name: &str) -> String {
    format!(
        "if [ ! -e \"$d\" ] && [ ! -L \"$d\" ]; then echo none; exit 0; fi; owndir; \
         if ! readpid \"$d/{name}\"; then \
         if [ -e \"$d/{name}\" ] || [ -L \"$d/{name}\" ]; then echo \"halobox: $d/{name} names no process halobox started: removed\" >&2; rm -f \"$d/{name}\"; fi; \
         echo none; exit 0; fi; "
    )
}

/// Starts `"$@"` detached (its own session, so a stop reaches its whole
/// process group) with stdin from /dev/null and its output in [`LOG`];
/// first takes the folder's start lock (`flock`, held until the pid is
/// written: a second start at the same moment is refused, exit 94) and
/// refuses when an engine halobox started runs there already (exit 94),
/// removes the compile cache when `clear_cache` (`cache` is the path as
/// the shell expands it), and reads each of `secrets` from one stdin line into
/// the environment (exit 97 when a line is missing), and exports Ray's
/// token variables when the container holds the cluster's token. Records
/// `PID START` (see [`PID_FNS`]) and prints `halobox-serve-pid PID`. A
/// `check` (a shell fragment) runs right after the running-engine test,
/// before anything is changed: it refuses the start by printing
/// `halobox-check WORD` and exiting [`CHECK_REFUSED`].
pub fn start(secrets: &[String], clear_cache: Option<&str>, check: Option<&str>) -> String {
    start_with(secrets, clear_cache, check, false)
}

/// [`start`], for a supervisor's restart when `restart`: then it refuses
/// (exit [`HELD`]) while [`HELD_FILE`] says a `serve stop`, `cluster down`
/// or `bench serving --ab-transport` holds the serve; any other start
/// removes that mark (the serve is the user's again).
pub fn start_with(
    secrets: &[String],
    clear_cache: Option<&str>,
    check: Option<&str>,
    restart: bool,
) -> String {
    let mut s = format!(
        "{ALIVE_FN}; {PID_FNS}; {RECORD_FN}; d=\"{DIR}\"; mkdir -p -m 0700 \"$d\" || exit 95; owndir; \
         {LOCK}; \
         if readpid \"$d/engine.pid\" && alive \"$pid\" && same; then \
         echo \"halobox: an engine started by halobox serve already runs in this container (pid $pid)\" >&2; exit 94; fi; "
    );
    if restart {
        s.push_str(&format!(
            "if [ -e \"$d/{HELD_FILE}\" ]; then echo \"halobox: a serve stop, cluster down or --ab-transport holds this serve: no restart\" >&2; exit {HELD}; fi; "
        ));
    } else {
        s.push_str(&format!("rm -f \"$d/{HELD_FILE}\"; "));
    }
    if let Some(check) = check {
        s.push_str(check);
        s.push_str("; ");
    }
    if let Some(cache) = clear_cache {
        s.push_str(&format!(
            "rm -rf -- \"{cache}\" || exit 96; echo \"halobox: removed {cache}\" >&2; "
        ));
    }
    for name in secrets {
        s.push_str(&format!("IFS= read -r {name} || exit 97; export {name}; "));
    }
    if secrets.iter().any(|n| n == super::plan::SECRETS[1]) {
        s.push_str(&vllm_key_module());
    }
    // vLLM is a Ray driver: it needs the cluster's token where `cluster up`
    // left it for the container's user.
    s.push_str(&crate::cluster::auth::driver_exports(None));
    // Every worker's lines reach the log with its node's prefix: Ray's
    // dedup would fold a remote worker's line into the head's same line,
    // and the log is where halobox names the nodes the workers run on.
    s.push_str("export RAY_DEDUP_LOGS=0; ");
    s.push_str(
        "ls /dev/shm 2>/dev/null | grep '^psm_' >\"$d/shm.before\"; \
         : >\"$d/engine.log\"; \
         setsid \"$@\" </dev/null >>\"$d/engine.log\" 2>&1 9>&- & \
         record \"$d/engine.pid\"; echo \"halobox-serve-pid $!\"",
    );
    s
}

/// Writes [`super::api_key::VLLM_MODULE_SOURCE`] to `$d/python` (the
/// folder of this user's own) and puts that folder first on `PYTHONPATH`,
/// for `vllm serve --middleware` ([`super::api_key::VLLM_MIDDLEWARE`]) to
/// import: the key vLLM takes is then asked for on every route. The source
/// goes as one line (`printf %b` turns its `\n` back into line breaks).
fn vllm_key_module() -> String {
    let one_line = super::api_key::VLLM_MODULE_SOURCE
        .replace('\\', "\\\\")
        .replace('\n', "\\n");
    format!(
        "mkdir -p -m 0700 \"$d/python\" && printf %b {src} >\"$d/python/{module}.py\" || exit 95; \
         export PYTHONPATH=\"$d/python${{PYTHONPATH:+:$PYTHONPATH}}\"; ",
        src = crate::shell::quote(&one_line),
        module = super::api_key::VLLM_MODULE
    )
}

/// Takes `$d/start.lock` on fd 9 for the rest of the program, without
/// waiting: another start holding it is refused (exit 94). A container
/// without `flock` starts unlocked, and says so.
const LOCK: &str = "if command -v flock >/dev/null 2>&1; then exec 9>>\"$d/start.lock\" || exit 95; \
     flock -n 9 || { echo \"halobox: another halobox serve is starting an engine in this container right now\" >&2; exit 94; }; \
     else echo \"halobox: no flock in this container: a second serve started at this moment would not be refused\" >&2; fi";

/// The mark a deliberate stop leaves in [`DIR`] (`serve stop`, `cluster
/// down`, `--ab-transport`): no supervisor restarts the serve while it is
/// there.
pub const HELD_FILE: &str = "held";
/// The start program's exit status when a supervisor's restart is refused
/// because of [`HELD_FILE`].
pub const HELD: i32 = 93;

/// The start program's exit status when its check refused the start.
pub const CHECK_REFUSED: i32 = 98;

/// Prints `running PID`, `exited PID` or `none` (no engine started here).
/// A pid whose process started at another time than recorded is a reused
/// one: `exited`.
pub fn state() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; d=\"{DIR}\"; if [ -e \"$d/{HELD_FILE}\" ]; then echo {HELD_FILE}; fi; {read}\
         if alive \"$pid\" && same; then echo \"running $pid\"; else echo \"exited $pid\"; fi",
        read = read_pid_file("engine.pid")
    )
}

/// Stops the engine: SIGTERM to its process group, up to `$1` seconds for
/// it to end, then SIGKILL, and SIGKILL to whatever of its group is left.
/// Only a process that [`PID_FNS`]' `same` says is the one halobox started
/// is signalled (its group only while `mygroup`): never a reused pid, never
/// pid 1 or below, never from a file another user planted.
/// The group is named `kill -SIG -PID`: dash (Debian's and Ubuntu's
/// `/bin/sh`) refuses the `--` of `kill -SIG -- -PID`. Then it removes its pid file and the `/dev/shm`
/// `psm_*` segments that were not there before it started (vLLM leaves two
/// behind even after a clean stop). Prints `stopped PID`, `gone PID` (it had
/// ended already) or `none`.
pub fn stop() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; d=\"{DIR}\"; grace=${{1:-30}}; {hold}{read}\
         word=gone; \
         if alive \"$pid\" && same; then word=stopped; kill -TERM \"-$pid\" 2>/dev/null || kill -TERM \"$pid\" 2>/dev/null; \
         i=0; while alive \"$pid\" && same && [ \"$i\" -lt \"$((grace * 5))\" ]; do sleep 0.2; i=$((i + 1)); done; \
         if alive \"$pid\" && same; then kill -KILL \"-$pid\" 2>/dev/null || kill -KILL \"$pid\" 2>/dev/null; sleep 0.5; fi; fi; \
         if mygroup; then kill -KILL \"-$pid\" 2>/dev/null; fi; \
         for f in $(ls /dev/shm 2>/dev/null | grep '^psm_'); do \
         grep -qx \"$f\" \"$d/shm.before\" 2>/dev/null || rm -f \"/dev/shm/$f\"; done; \
         rm -f \"$d/engine.pid\"; echo \"$word $pid\"",
        read = read_pid_file("engine.pid"),
        hold = HOLD
    )
}

/// With `$2` = `hold`, the stop first leaves [`HELD_FILE`] (under the
/// start lock, waiting up to 60 s for a start under way to finish): no
/// supervisor's restart starts after it.
const HOLD: &str = "if [ \"$2\" = hold ] && [ -d \"$d\" ] && [ ! -L \"$d\" ] && [ -O \"$d\" ]; then \
     if command -v flock >/dev/null 2>&1; then exec 9>>\"$d/start.lock\" && flock -w 60 9; fi; \
     : >\"$d/held\"; exec 9>&-; fi; ";

/// Prints the engine's log: the last `$1` lines, then, with `$2` = `-f`,
/// what it writes from then on, until the engine ends (GNU tail's
/// `--pid`; a `tail` without it follows until the reader goes away). An
/// exec whose client is gone keeps running in the container: bound to the
/// engine's life, `serve --detach`'s reader ends with the engine.
pub fn logs() -> String {
    format!(
        "{PID_FNS}; d=\"{DIR}\"; f=\"$d/engine.log\"; if [ -e \"$d\" ] || [ -L \"$d\" ]; then owndir; fi; \
         [ -f \"$f\" ] || {{ echo \"halobox: no engine log in this container ($f)\" >&2; exit 3; }}; \
         [ \"$2\" = -f ] || exec tail -n \"${{1:-100}}\" \"$f\"; \
         readpid \"$d/engine.pid\"; \
         if [ -n \"$pid\" ] && tail --pid=\"$pid\" -n 0 /dev/null 2>/dev/null; then exec tail -n \"${{1:-100}}\" -F --pid=\"$pid\" \"$f\"; fi; \
         exec tail -n \"${{1:-100}}\" -F \"$f\""
    )
}

/// Prints how many whole lines the engine's log has (0 without a log): where
/// a watcher that starts after the launch follows on from.
pub fn log_length() -> String {
    format!(
        "{PID_FNS}; d=\"{DIR}\"; f=\"$d/engine.log\"; if [ -e \"$d\" ] || [ -L \"$d\" ]; then owndir; fi; \
         if [ -f \"$f\" ]; then wc -l <\"$f\"; else echo 0; fi"
    )
}

/// `sh -c PROGRAM halobox-serve ARGS…` as argv.
pub fn argv(program: String, args: &[String]) -> Vec<String> {
    let mut a = vec![
        "sh".to_string(),
        "-c".into(),
        program,
        "halobox-serve".into(),
    ];
    a.extend(args.iter().cloned());
    a
}

/// Runs a serve program with `sh -c` and `args`, its folder moved to `dir`:
/// its stdout (trimmed), then its stderr. For the programs' tests.
#[cfg(test)]
pub(crate) fn run_in(program: &str, args: &[&str], dir: &std::path::Path) -> String {
    let out = crate::proc::command("sh")
        .arg("-c")
        .arg(program.replace(DIR, &dir.display().to_string()))
        .arg("halobox-serve")
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[cfg(test)]
mod tests {
    use super::run_in as sh;
    use super::*;

    /// The programs against a real `sleep` in a private folder: started,
    /// seen running, refused a second time, stopped (its group too).
    #[test]
    fn start_state_stop_a_real_process() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(sh(&state(), &[], dir.path()), "none");
        let started = sh(&start(&[], None, None), &["sleep", "300"], dir.path());
        let pid = started
            .strip_prefix("halobox-serve-pid ")
            .unwrap()
            .to_string();
        assert!(sh(&state(), &[], dir.path()).starts_with("running "));
        let again = sh(&start(&[], None, None), &["sleep", "300"], dir.path());
        assert!(again.contains("already runs"), "{again}");
        assert_eq!(sh(&stop(), &["5"], dir.path()), format!("stopped {pid}"));
        assert_eq!(sh(&state(), &[], dir.path()), "none");
        // Gone, or a zombie its new parent has not reaped yet.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let st = stat.rsplit_once(") ").map_or("", |(_, r)| r);
        assert!(stat.is_empty() || st.starts_with('Z'), "{stat}");
    }

    /// A real `sh`: the secrets arrive in the engine's environment from
    /// stdin (not its arguments), and the compile cache is gone first.
    /// `logs -f` ends when the engine ends (its reader would otherwise stay
    /// in the container after `serve --detach` for good).
    #[test]
    fn following_ends_with_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        sh(
            &start(&[], None, None),
            &["sh", "-c", "echo one; sleep 1; echo two"],
            dir.path(),
        );
        let mut tail = crate::proc::command("sh")
            .arg("-c")
            .arg(logs().replace(DIR, &dir.path().display().to_string()))
            .args(["halobox-serve", "10", "-f"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while tail.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 15 {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let ended = tail.try_wait().unwrap().is_some();
        let _ = tail.kill();
        let out = tail.wait_with_output().unwrap();
        assert!(ended, "tail -F still follows 15 s after the engine ended");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\n");
    }

    /// The log's length in a real `sh`: 0 without a log, then its whole lines.
    #[test]
    fn log_length_counts_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let engine = dir.path().join("engine");
        std::fs::create_dir(&engine).unwrap();
        assert_eq!(run_in(&log_length(), &[], &engine).trim(), "0");
        std::fs::write(engine.join("engine.log"), "one\ntwo\nthr").unwrap();
        assert_eq!(run_in(&log_length(), &[], &engine).trim(), "2");
    }

    /// What the engine started is stopped with it (its process group), in
    /// this machine's `sh` (dash here, as in Debian-based images).
    #[test]
    fn stop_ends_the_engines_children_too() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        sh(
            &start(&[], None, None),
            &[
                "sh",
                "-c",
                "sleep 300 & echo $! >\"$1/child\"; wait",
                "x",
                &d,
            ],
            dir.path(),
        );
        let child = dir.path().join("child");
        // The file exists before the shell writes the pid into it.
        let mut pid = String::new();
        for _ in 0..100 {
            pid = std::fs::read_to_string(&child)
                .unwrap_or_default()
                .trim()
                .to_string();
            if !pid.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(pid.parse::<u32>().is_ok(), "no pid in {}", child.display());
        assert!(sh(&stop(), &["5"], dir.path()).starts_with("stopped "));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let st = stat.rsplit_once(") ").map_or("", |(_, r)| r);
        assert!(
            stat.is_empty() || st.starts_with('Z'),
            "the child lives on: {stat}"
        );
    }

    #[test]
    fn secrets_reach_the_engine_and_the_cache_is_cleared() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache/torch_compile_cache");
        std::fs::create_dir_all(&cache).unwrap();
        let program = start(
            &["HF_TOKEN".into(), "VLLM_API_KEY".into()],
            Some(&cache.display().to_string()),
            None,
        )
        .replace(DIR, &dir.path().display().to_string());
        let mut child = crate::proc::command("sh")
            .arg("-c")
            .arg(program)
            .args([
                "halobox-serve",
                "sh",
                "-c",
                "echo \"$HF_TOKEN|$VLLM_API_KEY|$*\"",
                "x",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"hf_secret\nkey secret\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("halobox: removed"));
        assert!(!cache.exists());
        std::thread::sleep(std::time::Duration::from_millis(300));
        let log = std::fs::read_to_string(dir.path().join("engine.log")).unwrap();
        assert_eq!(log, "hf_secret|key secret|\n");
    }

    /// A real `sleep` in its own process group, for the stop programs to
    /// find or spare; killed and reaped when dropped.
    struct Sleeper(std::process::Child);

    impl Sleeper {
        fn new() -> Sleeper {
            use std::os::unix::process::CommandExt as _;
            Sleeper(
                crate::proc::command("sleep")
                    .arg("300")
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            )
        }
        fn pid(&self) -> u32 {
            self.0.id()
        }
        fn lives(&mut self) -> bool {
            self.0.try_wait().unwrap().is_none()
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A pid file that names a live process halobox did not start (a pid
    /// file without the start time, and one whose start time is not the
    /// process's: its pid was reused) is never signalled, nor its group;
    /// `state` calls it exited.
    #[test]
    fn a_reused_pid_is_never_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("engine.pid");
        let mut other = Sleeper::new();
        for text in [
            format!("{}\n", other.pid()),
            format!("{} 12345\n", other.pid()),
        ] {
            std::fs::write(&pidfile, &text).unwrap();
            assert_eq!(
                sh(&state(), &[], dir.path()),
                format!("exited {}", other.pid()),
                "{text}"
            );
            assert_eq!(
                sh(&stop(), &["1"], dir.path()),
                format!("gone {}", other.pid()),
                "{text}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert!(
                other.lives(),
                "stop signalled a process it did not start ({text})"
            );
        }
        let rpc = dir.path().join("rpc.pid");
        std::fs::write(&rpc, format!("{}\n", other.pid())).unwrap();
        let said = sh(&super::super::rpc::stop(), &[], dir.path());
        assert_eq!(said, format!("gone {}", other.pid()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            other.lives(),
            "the RPC stop signalled a process it did not start"
        );
    }

    /// `echo 1 > engine.pid` does not make `stop` run `kill -TERM -1`: in a
    /// pid namespace of its own (where `-1` reaches only its processes), a
    /// sleeper beside the stop program lives on.
    #[test]
    fn pid_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("engine.pid"), "1\n").unwrap();
        let program = stop().replace(DIR, &dir.path().display().to_string());
        let out = crate::proc::command("unshare")
            .args(["--pid", "--fork", "--mount-proc", "sh", "-c"])
            .arg(
                "sleep 300 & s=$!; sh -c \"$1\" halobox-serve 1; sleep 0.3; \
                 if kill -0 \"$s\" 2>/dev/null; then echo lives; kill \"$s\"; else echo killed; fi",
            )
            .args(["ns", &program])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            ["none", "lives"],
            "{out:?}"
        );
    }

    /// A pid file or folder another user made (toolbox and distrobox share
    /// the host's `/tmp`) is not trusted: the file is ignored, the folder
    /// refused, and the process they name lives on.
    #[test]
    fn planted_files_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let started = sh(&start(&[], None, None), &["sleep", "300"], dir.path());
        let pid: u32 = started
            .strip_prefix("halobox-serve-pid ")
            .unwrap()
            .parse()
            .unwrap();
        let pidfile = dir.path().join("engine.pid");
        let record = std::fs::read_to_string(&pidfile).unwrap();
        let alive = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
        };
        // Another user's file (this test runs as root: uid 4242 is not it).
        let other = nix::unistd::Uid::from_raw(4242);
        std::fs::remove_file(&pidfile).unwrap();
        std::fs::write(&pidfile, &record).unwrap();
        nix::unistd::chown(&pidfile, Some(other), None).unwrap();
        let out = sh(&state(), &[], dir.path());
        assert!(
            out.starts_with("nonehalobox: ") && out.contains("names no process halobox started"),
            "{out}"
        );
        // A link to a file of this user's own is no better.
        let elsewhere = tempfile::tempdir().unwrap();
        let real = elsewhere.path().join("pid");
        std::fs::write(&real, &record).unwrap();
        std::fs::remove_file(&pidfile).ok();
        std::os::unix::fs::symlink(&real, &pidfile).unwrap();
        let out = sh(&stop(), &["1"], dir.path());
        assert!(out.starts_with("nonehalobox: "), "{out}");
        assert!(alive(), "stop signalled the pid of a linked file");
        // The folder itself another user's.
        std::fs::remove_file(&pidfile).ok();
        std::fs::write(&pidfile, &record).unwrap();
        nix::unistd::chown(dir.path(), Some(other), None).unwrap();
        let out = sh(&stop(), &["1"], dir.path());
        assert!(out.contains("is not this user's own folder"), "{out}");
        assert!(alive(), "stop signalled from another user's folder");
        nix::unistd::chown(dir.path(), Some(nix::unistd::getuid()), None).unwrap();
        assert_eq!(sh(&stop(), &["5"], dir.path()), format!("stopped {pid}"));
    }

    /// The folder is in the user's state folder: another user's folder at
    /// the old name in `$TMPDIR` (made there first) blocks nothing. The old
    /// folder, the user's own, is still used while the new one does not
    /// exist (an engine an older halobox started is found).
    #[test]
    fn the_folder_is_where_no_other_user_makes_it_first() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let uid = nix::unistd::getuid();
        let old = tmp.path().join(format!("halobox-serve-{uid}"));
        std::fs::create_dir(&old).unwrap();
        if uid.is_root() {
            nix::unistd::chown(&old, Some(nix::unistd::Uid::from_raw(4242)), None).unwrap();
        }
        let run = |program: String, args: &[&str]| {
            let out = crate::proc::command("sh")
                .arg("-c")
                .arg(program)
                .arg("halobox-serve")
                .args(args)
                .env("TMPDIR", tmp.path())
                .env("HOME", &home)
                .env_remove("XDG_STATE_HOME")
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
                + &String::from_utf8_lossy(&out.stderr)
        };
        assert_eq!(run(state(), &[]), "none");
        let started = run(start(&[], None, None), &["sleep", "300"]);
        let pid = started
            .strip_prefix("halobox-serve-pid ")
            .unwrap()
            .to_string();
        let new = home.join(".local/state/halobox/serve");
        assert!(new.join("engine.pid").is_file());
        assert_eq!(run(state(), &[]), format!("running {pid}"));
        assert_eq!(run(stop(), &["5"]), format!("stopped {pid}"));
        assert_eq!(std::fs::read_dir(&old).unwrap().count(), 0);
        // An older halobox's own folder, and no new one yet.
        std::fs::remove_dir_all(home.join(".local")).unwrap();
        nix::unistd::chown(&old, Some(uid), None).unwrap();
        let started = run(start(&[], None, None), &["sleep", "300"]);
        let pid = started
            .strip_prefix("halobox-serve-pid ")
            .unwrap()
            .to_string();
        assert!(old.join("engine.pid").is_file() && !new.exists());
        assert_eq!(run(stop(), &["5"]), format!("stopped {pid}"));
    }

    /// Two starts at the same moment (each one's check takes a second, so
    /// they overlap): one engine starts, the other is refused (94).
    #[test]
    fn two_starts_at_once_start_one_engine() {
        let dir = tempfile::tempdir().unwrap();
        let program =
            start(&[], None, Some("sleep 1")).replace(DIR, &dir.path().display().to_string());
        let spawn = || {
            crate::proc::command("sh")
                .arg("-c")
                .arg(&program)
                .args(["halobox-serve", "sleep", "300"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let started: Vec<_> = outs.iter().filter(|o| o.status.success()).collect();
        let refused: Vec<_> = outs
            .iter()
            .filter(|o| o.status.code() == Some(94))
            .collect();
        let stopped = sh(&stop(), &["5"], dir.path());
        assert_eq!((started.len(), refused.len()), (1, 1), "{outs:?}");
        assert!(
            String::from_utf8_lossy(&refused[0].stderr).contains("another halobox serve"),
            "{outs:?}"
        );
        assert!(stopped.starts_with("stopped "), "{stopped}");
    }

    /// A deliberate stop (`hold`) leaves the mark: the state shows it, a
    /// supervisor's restart is refused (93) and starts nothing, a user's
    /// start removes it; a supervisor's own stop leaves none.
    #[test]
    fn a_held_serve_is_not_restarted() {
        let dir = tempfile::tempdir().unwrap();
        sh(&start(&[], None, None), &["sleep", "300"], dir.path());
        assert_eq!(
            sh(&stop(), &["5"], dir.path()).split(' ').next(),
            Some("stopped")
        );
        assert!(
            !dir.path().join(HELD_FILE).exists(),
            "a plain stop held the serve"
        );
        sh(&start(&[], None, None), &["sleep", "300"], dir.path());
        assert!(sh(&stop(), &["5", "hold"], dir.path()).starts_with("stopped "));
        assert!(dir.path().join(HELD_FILE).exists());
        assert_eq!(sh(&state(), &[], dir.path()), "held\nnone");
        let program =
            start_with(&[], None, None, true).replace(DIR, &dir.path().display().to_string());
        let out = crate::proc::command("sh")
            .arg("-c")
            .arg(program)
            .args(["halobox-serve", "sleep", "300"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(HELD), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no restart"),
            "{out:?}"
        );
        assert_eq!(sh(&state(), &[], dir.path()), "held\nnone");
        // The user's start: the mark goes, the engine runs.
        assert!(
            sh(&start(&[], None, None), &["sleep", "300"], dir.path())
                .starts_with("halobox-serve-pid ")
        );
        assert!(!dir.path().join(HELD_FILE).exists());
        assert!(sh(&state(), &[], dir.path()).starts_with("running "));
        assert!(sh(&stop(), &["5"], dir.path()).starts_with("stopped "));
    }

    #[test]
    fn secrets_are_read_from_stdin_not_arguments() {
        let p = start(&["HF_TOKEN".into(), "VLLM_API_KEY".into()], None, None);
        assert!(p.contains("IFS= read -r HF_TOKEN || exit 97; export HF_TOKEN;"));
        assert!(p.find("HF_TOKEN").unwrap() < p.find("VLLM_API_KEY").unwrap());
        assert!(
            p.contains("</dev/null"),
            "the engine must not keep the secrets' stdin"
        );
    }

    /// With `VLLM_API_KEY` handed over, the start program writes halobox's
    /// middleware where the engine's python imports it (`PYTHONPATH`), and
    /// the middleware (driven as ASGI with a stand-in app) answers 401
    /// without the key on every route but `GET /health`, closes a
    /// WebSocket without it, and lets the key through.
    #[test]
    fn the_key_middleware_reaches_the_engine_and_guards_every_route() {
        use std::io::Write;
        let driver = r#"
import asyncio
from halobox_require_key import RequireKey
async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
async def ask(kind, method, path, auth):
    sent = []
    async def send(m):
        sent.append(m)
    async def receive():
        return {"type": "http.request", "body": b""}
    headers = [(b"authorization", auth.encode())] if auth != "-" else []
    scope = {"type": kind, "method": method, "path": path, "headers": headers}
    await RequireKey(app)(scope, receive, send)
    return sent[0].get("status", sent[0].get("code"))
for case in [
    ("http", "POST", "/invocations", "-"), ("http", "GET", "/ping", "-"),
    ("http", "GET", "/metrics", "-"), ("http", "GET", "/metrics", "Bearer nope"),
    ("http", "GET", "/metrics", "Basic k3y"), ("http", "GET", "/health/", "-"),
    ("http", "POST", "/health", "-"), ("http", "OPTIONS", "/v1/models", "-"),
    ("websocket", "GET", "/v1/realtime", "-"), ("http", "GET", "/health", "-"),
    ("http", "GET", "/metrics", "Bearer k3y"), ("http", "POST", "/invocations", "bearer k3y"),
]:
    print(case[1], case[2], case[3], asyncio.run(ask(*case)))
print("end")
"#;
        let dir = tempfile::tempdir().unwrap();
        let program = start(&["VLLM_API_KEY".into()], None, None)
            .replace(DIR, &dir.path().display().to_string());
        let mut child = crate::proc::command("sh")
            .arg("-c")
            .arg(program)
            .args(["halobox-serve", "/usr/bin/python3", "-c", driver])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"k3y\n").unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let log = dir.path().join("engine.log");
        let mut text = String::new();
        for _ in 0..100 {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("end\n") || text.contains("Error") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(
            got,
            [
                "POST /invocations - 401",
                "GET /ping - 401",
                "GET /metrics - 401",
                "GET /metrics Bearer nope 401",
                "GET /metrics Basic k3y 401",
                "GET /health/ - 401",
                "POST /health - 401",
                "OPTIONS /v1/models - 401",
                "GET /v1/realtime - 1008",
                "GET /health - 200",
                "GET /metrics Bearer k3y 200",
                "POST /invocations bearer k3y 200",
                "end",
            ],
            "{text}"
        );
        let module = dir.path().join("python/halobox_require_key.py");
        assert_eq!(
            std::fs::read_to_string(module).unwrap(),
            super::super::api_key::VLLM_MODULE_SOURCE
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("k3y"));
    }
}

//! The small POSIX `sh` programs `serve` runs in the head's container (each
//! as `sh -c PROGRAM halobox-serve ARGS…`): start the engine detached with
//! its log in a file, look at it, follow its log, stop it. The engine's
//! process id, its log and the `/dev/shm` segments that existed before it
//! started live in [`DIR`] inside the container, so `serve status`, `logs`
//! and `stop` find them from any later halobox run on the head. The folder
//! is the container user's own (0700, not a link): toolbox and distrobox
//! containers share the host's `/tmp` with every other user.

/// Where the programs keep the engine's pid, log and shm list (in the
/// container; a shell expression).
pub const DIR: &str = "${TMPDIR:-/tmp}/halobox-serve-$(id -u)";
/// The engine's log, in the container (as printed).
pub const LOG: &str = "/tmp/halobox-serve-UID/engine.log";

/// `alive`: true when process `$pid` exists and is not a zombie (an
/// orphaned engine is reparented to the container's init, which may never
/// reap it, so `kill -0` alone would call a dead engine alive).
pub const ALIVE_FN: &str = r#"alive() { [ -r "/proc/$1/stat" ] || return 1; case "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null)" in Z*|X*|x*|'') return 1 ;; esac; return 0; }"#;

/// Starts `"$@"` detached (its own session, so a stop reaches its whole
/// process group) with stdin from /dev/null and its output in [`LOG`];
/// first refuses when an engine halobox started runs there already (exit
/// 94), removes the compile cache when `clear_cache` (`cache` is the path as
/// the shell expands it), and reads each of `secrets` from one stdin line into
/// the environment (exit 97 when a line is missing), and exports Ray's
/// token variables when the container holds the cluster's token. Prints
/// `halobox-serve-pid PID`. A `check` (a shell fragment) runs right after
/// the running-engine test, before anything is changed: it refuses the
/// start by printing `halobox-check WORD` and exiting [`CHECK_REFUSED`].
pub fn start(secrets: &[String], clear_cache: Option<&str>, check: Option<&str>) -> String {
    let mut s = format!(
        "{ALIVE_FN}; d=\"{DIR}\"; mkdir -p -m 0700 \"$d\" || exit 95; \
         if [ ! -O \"$d\" ] || [ -L \"$d\" ]; then echo \"halobox: $d is not this user's own folder: remove it\" >&2; exit 95; fi; \
         if [ -f \"$d/engine.pid\" ] && alive \"$(cat \"$d/engine.pid\")\"; then \
         echo \"halobox: an engine started by halobox serve already runs in this container (pid $(cat \"$d/engine.pid\"))\" >&2; exit 94; fi; "
    );
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
    // vLLM is a Ray driver: it needs the cluster's token where `cluster up`
    // left it for the container's user.
    s.push_str(&crate::cluster::auth::driver_exports(None));
    s.push_str(
        "ls /dev/shm 2>/dev/null | grep '^psm_' >\"$d/shm.before\"; \
         : >\"$d/engine.log\"; \
         setsid \"$@\" </dev/null >>\"$d/engine.log\" 2>&1 & \
         echo $! >\"$d/engine.pid\"; echo \"halobox-serve-pid $!\"",
    );
    s
}

/// The start program's exit status when its check refused the start.
pub const CHECK_REFUSED: i32 = 98;

/// Prints `running PID`, `exited PID` or `none` (no engine started here).
pub fn state() -> String {
    format!(
        "{ALIVE_FN}; d=\"{DIR}\"; [ -f \"$d/engine.pid\" ] || {{ echo none; exit 0; }}; \
         pid=$(cat \"$d/engine.pid\"); if alive \"$pid\"; then echo \"running $pid\"; else echo \"exited $pid\"; fi"
    )
}

/// Stops the engine: SIGTERM to its process group, up to `$1` seconds for
/// it to end, then SIGKILL, and SIGKILL to whatever of its group is left.
/// The group is named `kill -SIG -PID`: dash (Debian's and Ubuntu's
/// `/bin/sh`) refuses the `--` of `kill -SIG -- -PID`. Then it removes its pid file and the `/dev/shm`
/// `psm_*` segments that were not there before it started (vLLM leaves two
/// behind even after a clean stop). Prints `stopped PID`, `gone PID` (it had
/// ended already) or `none`.
pub fn stop() -> String {
    format!(
        "{ALIVE_FN}; d=\"{DIR}\"; grace=${{1:-30}}; [ -f \"$d/engine.pid\" ] || {{ echo none; exit 0; }}; \
         pid=$(cat \"$d/engine.pid\"); word=gone; \
         if alive \"$pid\"; then word=stopped; kill -TERM \"-$pid\" 2>/dev/null || kill -TERM \"$pid\" 2>/dev/null; \
         i=0; while alive \"$pid\" && [ \"$i\" -lt \"$((grace * 5))\" ]; do sleep 0.2; i=$((i + 1)); done; \
         if alive \"$pid\"; then kill -KILL \"-$pid\" 2>/dev/null || kill -KILL \"$pid\" 2>/dev/null; sleep 0.5; fi; fi; \
         kill -KILL \"-$pid\" 2>/dev/null; \
         for f in $(ls /dev/shm 2>/dev/null | grep '^psm_'); do \
         grep -qx \"$f\" \"$d/shm.before\" 2>/dev/null || rm -f \"/dev/shm/$f\"; done; \
         rm -f \"$d/engine.pid\"; echo \"$word $pid\""
    )
}

/// Prints the engine's log: the last `$1` lines, then, with `$2` = `-f`,
/// what it writes from then on, until the engine ends (GNU tail's
/// `--pid`; a `tail` without it follows until the reader goes away). An
/// exec whose client is gone keeps running in the container: bound to the
/// engine's life, `serve --detach`'s reader ends with the engine.
pub fn logs() -> String {
    format!(
        "d=\"{DIR}\"; f=\"$d/engine.log\"; [ -f \"$f\" ] || {{ echo \"halobox: no engine log in this container ($f)\" >&2; exit 3; }}; \
         [ \"$2\" = -f ] || exec tail -n \"${{1:-100}}\" \"$f\"; \
         pid=$(cat \"$d/engine.pid\" 2>/dev/null); \
         if [ -n \"$pid\" ] && tail --pid=\"$pid\" -n 0 /dev/null 2>/dev/null; then exec tail -n \"${{1:-100}}\" -F --pid=\"$pid\" \"$f\"; fi; \
         exec tail -n \"${{1:-100}}\" -F \"$f\""
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
        for _ in 0..50 {
            if child.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let pid = std::fs::read_to_string(&child).unwrap().trim().to_string();
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
}

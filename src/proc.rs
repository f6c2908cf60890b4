//! Child processes (ssh to a peer or node, local clients) with their output
//! collected line by line, bounded waits, and cleanup on drop. Every child
//! halobox starts is made by [`command`], which keeps secrets out of its
//! environment.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// How a process's output is kept.
#[derive(Debug, Clone, Copy)]
pub struct Capture {
    /// Bytes kept of each log (both streams, and stdout alone): the newest
    /// lines; older ones are dropped and counted. Lines are cut at half of it.
    pub limit: usize,
    /// Applied to every line before anything sees it.
    pub clean: Option<fn(&str) -> String>,
}

impl Capture {
    /// Local tools (clients whose logs are parsed): large bounds, text as printed.
    pub const LOCAL: Capture = Capture {
        limit: 64 << 20,
        clean: None,
    };
}

/// Lines waiting for [`Proc::wait_for_line`]; older ones are dropped beyond it.
const PENDING_LINES: usize = 4096;

/// The first line of a log some of whose earlier output was not kept.
pub const DROPPED_PREFIX: &str = "[halobox: ";

/// The newest lines of one log: at most `limit` bytes are reported, at
/// most twice that held (older text is cut at a line boundary in bulk).
#[derive(Debug)]
struct Kept {
    text: String,
    dropped: u64,
    limit: usize,
}

impl Kept {
    fn new(limit: usize) -> Kept {
        Kept {
            text: String::new(),
            dropped: 0,
            limit,
        }
    }

    fn push(&mut self, line: &str, cut: u64) {
        self.dropped += cut;
        self.text.push_str(line);
        self.text.push('\n');
        if self.text.len() > 2 * self.limit {
            let start = self.start();
            self.text.drain(..start);
            self.dropped += start as u64;
        }
    }

    /// Where the newest whole lines within `limit` bytes begin.
    fn start(&self) -> usize {
        let excess = self.text.len().saturating_sub(self.limit);
        if excess == 0 {
            return 0;
        }
        self.text.as_bytes()[excess - 1..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.text.len(), |i| excess + i)
    }

    /// The kept lines, after a first line saying how much was not kept.
    fn text(&self) -> String {
        let start = self.start();
        let dropped = self.dropped + start as u64;
        let mut s = String::with_capacity(self.text.len() - start + 64);
        if dropped > 0 {
            s.push_str(&format!(
                "{DROPPED_PREFIX}{dropped} bytes of output not kept]\n"
            ));
        }
        s.push_str(&self.text[start..]);
        s
    }
}

/// What the reader threads share with the waiting side.
#[derive(Debug)]
struct Output {
    log: Kept,
    stdout: Kept,
    pending: VecDeque<String>,
    open_streams: u8,
}

type Shared = Arc<(Mutex<Output>, Condvar)>;

/// Variables that hold secrets: no child gets them from halobox's
/// environment (`serve` hands `HF_TOKEN` to vLLM on stdin).
pub const SECRET_VARS: &[&str] = &[
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACE_HUB_TOKEN",
    "HF_API_TOKEN",
    "VLLM_API_KEY",
    "LLAMA_API_KEY",
];

/// Every variable starting with this is a registry credential.
pub const SECRET_PREFIX: &str = "HALOBOX_REGISTRY_";

/// Whether the environment variable `name` holds a secret.
pub fn is_secret(name: &str) -> bool {
    SECRET_VARS.contains(&name) || name.starts_with(SECRET_PREFIX)
}

/// `program` as a child process with this process's environment minus
/// every secret ([`is_secret`]). Every child halobox starts begins here.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_secret) {
            cmd.env_remove(&name);
        }
    }
    cmd
}

/// A running process whose stdout and stderr are read into one log.
pub struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    shared: Shared,
    status: Option<ExitStatus>,
}

/// Why waiting for a line ended without it.
#[derive(Debug)]
pub enum WaitError {
    /// The process ended first.
    Exited,
    /// The time ran out.
    Timeout,
}

/// Bytes split into lines, each cut at `max` bytes (what is cut is
/// counted and reported with the line).
struct Splitter {
    line: Vec<u8>,
    cut: u64,
    max: usize,
}

impl Splitter {
    fn new(capture: Capture) -> Self {
        Self {
            line: Vec::new(),
            cut: 0,
            max: capture.limit / 2,
        }
    }

    /// Takes bytes up to and including the first line break of `buf`;
    /// returns how many it took and, at a line break, the line.
    fn take(&mut self, buf: &[u8]) -> (usize, Option<(String, u64)>) {
        let (part, used, end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = self.max.saturating_sub(self.line.len()).min(part.len());
        self.line.extend_from_slice(&part[..room]);
        self.cut += (part.len() - room) as u64;
        (used, end.then(|| self.line_out()))
    }

    /// The unfinished last line, if any.
    fn rest(&mut self) -> Option<(String, u64)> {
        (!self.line.is_empty() || self.cut > 0).then(|| self.line_out())
    }

    fn line_out(&mut self) -> (String, u64) {
        let text = String::from_utf8_lossy(&self.line)
            .trim_end_matches('\r')
            .to_string();
        self.line.clear();
        (text, std::mem::take(&mut self.cut))
    }
}

fn cleaned(capture: Capture, text: String) -> String {
    match capture.clean {
        Some(clean) => clean(&text),
        None => text,
    }
}

/// Output that does not come from a child of ours (an exec through an
/// engine's API), kept as [`Capture`] says, like a [`Proc`]'s.
pub struct Bounded {
    capture: Capture,
    split: Splitter,
    kept: Kept,
}

impl Bounded {
    /// Nothing kept yet.
    pub fn new(capture: Capture) -> Self {
        Self {
            capture,
            split: Splitter::new(capture),
            kept: Kept::new(capture.limit),
        }
    }

    /// Adds the next bytes of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (used, line) = self.split.take(bytes);
            bytes = &bytes[used..];
            if let Some((text, cut)) = line {
                self.kept.push(&cleaned(self.capture, text), cut);
            }
        }
    }

    /// What was kept, after a first line saying how much was not.
    pub fn text(mut self) -> String {
        if let Some((text, cut)) = self.split.rest() {
            self.kept.push(&cleaned(self.capture, text), cut);
        }
        self.kept.text()
    }
}

/// Calls `f` with each line of `reader` until it ends: cut at half of
/// `capture.limit` bytes (the count of what was cut comes with it) and
/// cleaned as `capture` says. For a stream from a container or a node
/// (vLLM's log echoed by `serve`), pass a capture whose `clean` is
/// [`crate::remote::printable`], as `crate::container::capture::CAPTURE`.
pub fn for_each_line(reader: impl Read, capture: Capture, mut f: impl FnMut(String, u64)) {
    let mut r = BufReader::with_capacity(64 << 10, reader);
    let mut split = Splitter::new(capture);
    loop {
        let buf = match r.fill_buf() {
            Ok([]) => break,
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let (used, line) = split.take(buf);
        r.consume(used);
        if let Some((text, cut)) = line {
            f(cleaned(capture, text), cut);
        }
    }
    if let Some((text, cut)) = split.rest() {
        f(cleaned(capture, text), cut);
    }
}

/// Reads `reader` line by line into the shared logs until it ends.
fn read_lines(reader: impl Read, is_stdout: bool, capture: Capture, shared: &Shared) {
    for_each_line(reader, capture, |text, cut| {
        let (lock, cv) = &**shared;
        let mut o = lock.lock().unwrap();
        o.log.push(&text, cut);
        if is_stdout {
            o.stdout.push(&text, cut);
        }
        if o.pending.len() >= PENDING_LINES {
            o.pending.pop_front();
        }
        o.pending.push_back(text);
        cv.notify_all();
    });
    let (lock, cv) = &**shared;
    lock.lock().unwrap().open_streams -= 1;
    cv.notify_all();
}

impl Proc {
    /// Starts `argv` with piped stdin, stdout and stderr ([`Capture::LOCAL`]).
    pub fn spawn(argv: &[String]) -> io::Result<Proc> {
        Proc::spawn_in(argv, None, Capture::LOCAL)
    }

    /// Starts `argv` with piped stdin, stdout and stderr, output kept as
    /// `capture` says.
    pub fn spawn_with(argv: &[String], capture: Capture) -> io::Result<Proc> {
        Proc::spawn_in(argv, None, capture)
    }

    /// [`Proc::spawn_with`] in the directory `cwd` (this process's when `None`).
    pub fn spawn_in(argv: &[String], cwd: Option<&Path>, capture: Capture) -> io::Result<Proc> {
        Proc::start(argv, cwd, capture, false)
    }

    fn start(
        argv: &[String],
        cwd: Option<&Path>,
        capture: Capture,
        own_group: bool,
    ) -> io::Result<Proc> {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        let mut command = command(prog);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        if own_group {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot run {prog}: {e}")))?;
        let shared: Shared = Arc::new((
            Mutex::new(Output {
                log: Kept::new(capture.limit),
                stdout: Kept::new(capture.limit),
                pending: VecDeque::new(),
                open_streams: 2,
            }),
            Condvar::new(),
        ));
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        for (reader, is_stdout) in [
            (Box::new(out) as Box<dyn Read + Send>, true),
            (Box::new(err), false),
        ] {
            let shared = Arc::clone(&shared);
            thread::spawn(move || read_lines(reader, is_stdout, capture, &shared));
        }
        Ok(Proc {
            stdin: child.stdin.take(),
            child,
            shared,
            status: None,
        })
    }

    /// Writes `data` to the process's stdin, then closes it.
    pub fn send(&mut self, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut stdin = self
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("stdin is closed"))?;
        stdin.write_all(data)?;
        stdin.flush()
    }

    /// Writes `data` to the process's stdin from a thread of its own, then
    /// closes it: a process that stops reading holds that thread, never
    /// the caller (which may then [`Proc::wait`] with a timeout).
    pub fn send_in_background(&mut self, data: Vec<u8>) {
        if let Some(mut stdin) = self.stdin.take() {
            thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(&data);
            });
        }
    }

    /// Writes `data` to the process's stdin and keeps it open.
    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("stdin is closed"))?;
        stdin.write_all(data)?;
        stdin.flush()
    }

    fn lock(&self) -> MutexGuard<'_, Output> {
        self.shared.0.lock().unwrap()
    }

    /// Waits until a line satisfies `ready`, the process ends, or `timeout`.
    pub fn wait_for_line(
        &mut self,
        ready: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<(), WaitError> {
        let deadline = crate::units::deadline(timeout);
        let mut o = self.lock();
        loop {
            while let Some(line) = o.pending.pop_front() {
                if ready(&line) {
                    return Ok(());
                }
            }
            if o.open_streams == 0 {
                drop(o);
                self.reap_until(Instant::now() + Duration::from_secs(5));
                return Err(WaitError::Exited);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WaitError::Timeout);
            }
            o = self.shared.1.wait_timeout(o, left).unwrap().0;
        }
    }

    /// The lines it printed since the last call (stdout and stderr),
    /// waiting up to `timeout` for the first; empty when none came (or it
    /// ended: see [`Proc::try_status`]).
    pub fn lines(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = crate::units::deadline(timeout);
        let mut o = self.lock();
        loop {
            if !o.pending.is_empty() || o.open_streams == 0 {
                return o.pending.drain(..).collect();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Vec::new();
            }
            o = self.shared.1.wait_timeout(o, left).unwrap().0;
        }
    }

    /// The exit status once the process has ended; `None` while it runs.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Closes stdin, waits for the process to end by itself within
    /// `timeout`, else kills it.
    pub fn wait(mut self, timeout: Duration) -> Finished {
        drop(self.stdin.take());
        let ended = self.drain_until(crate::units::deadline(timeout));
        self.finished(ended, None)
    }

    /// Waits up to `timeout` for the process to end with its stdin still
    /// open (a guarded remote command keeps running meanwhile); then closes
    /// stdin (the guard stops the remote command), waits up to `grace`, and
    /// kills it.
    pub fn complete(mut self, timeout: Duration, grace: Duration) -> Finished {
        if self.drain_until(crate::units::deadline(timeout)) {
            return self.finished(true, None);
        }
        drop(self.stdin.take());
        let ended = self.drain_until(crate::units::deadline(grace));
        self.finished(ended, Some(timeout))
    }

    /// Closes stdin (a remote guard then stops the command), waits up to
    /// `grace` for the process to end, then kills it; returns the output.
    pub fn finish(self, grace: Duration) -> String {
        self.wait(grace).output
    }

    /// Everything kept so far (stdout and stderr, interleaved by line).
    pub fn output(&self) -> String {
        self.lock().log.text()
    }

    /// What was kept of stdout alone.
    pub fn stdout(&self) -> String {
        self.lock().stdout.text()
    }

    fn finished(mut self, ended: bool, timed_out: Option<Duration>) -> Finished {
        let status = if ended { self.try_status() } else { None };
        if status.is_none() {
            drop(self.stdin.take());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        Finished {
            status,
            output: self.output(),
            stdout: self.stdout(),
            timed_out,
        }
    }

    /// Waits until both output streams are closed and the process has
    /// ended, or `deadline`; whether it ended.
    fn drain_until(&mut self, deadline: Instant) -> bool {
        let mut o = self.lock();
        while o.open_streams > 0 {
            o.pending.clear();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            o = self.shared.1.wait_timeout(o, left).unwrap().0;
        }
        o.pending.clear();
        drop(o);
        self.reap_until(deadline);
        self.try_status().is_some()
    }

    fn reap_until(&mut self, deadline: Instant) {
        let mut pause = Duration::from_millis(1);
        while self.try_status().is_none() && Instant::now() < deadline {
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            drop(self.stdin.take());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process that ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Exit status; `None` when it had to be killed.
    pub status: Option<ExitStatus>,
    /// stdout and stderr, interleaved by line (what was kept).
    pub output: String,
    /// stdout alone (what was kept).
    pub stdout: String,
    /// The time limit it ran into, if it did.
    pub timed_out: Option<Duration>,
}

/// Runs `argv` to completion within `timeout` (killed after it).
pub fn run(argv: &[String], timeout: Duration) -> io::Result<Finished> {
    Ok(Proc::spawn(argv)?.wait(timeout))
}

/// [`run`] in a process group of its own: a signal to this process's group
/// (Ctrl-C in a terminal, the remote guard's `kill 0`) does not reach it,
/// so what it writes is never cut off halfway (an image committed into
/// podman's storage). Only its own `timeout` kills it.
pub fn run_apart(argv: &[String], timeout: Duration) -> io::Result<Finished> {
    Ok(Proc::start(argv, None, Capture::LOCAL, true)?.wait(timeout))
}

/// Runs `argv` in `cwd` with `input` on its stdin (written by a thread,
/// then closed), to completion within `timeout` (killed after it), its
/// output kept as `capture` says. A child
/// that exits without reading all of `input` is not an error: its status
/// says so.
pub fn run_with_input(
    argv: &[String],
    cwd: &Path,
    input: &[u8],
    timeout: Duration,
    capture: Capture,
) -> io::Result<Finished> {
    let mut p = Proc::spawn_in(argv, Some(cwd), capture)?;
    p.send_in_background(input.to_vec());
    Ok(p.wait(timeout))
}

/// Runs `argv` (stdin empty, output collected) in its own process group
/// from async code; `Ok(None)` when it did not end within `timeout`: the
/// whole group then gets SIGTERM (which sudo passes on), and SIGKILL after
/// a grace period.
pub async fn run_async(
    argv: &[String],
    timeout: Duration,
) -> io::Result<Option<std::process::Output>> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::other("empty command"))?;
    let child = tokio::process::Command::from(command(prog))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(nix::unistd::Pid::from_raw);
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(out) => out.map(Some),
        Err(_) => {
            if let Some(g) = group {
                use nix::sys::signal::{Signal, killpg};
                let _ = killpg(g, Signal::SIGTERM);
                tokio::time::sleep(Duration::from_secs(2)).await;
                let _ = killpg(g, Signal::SIGKILL);
            }
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, capture: Capture) -> Finished {
        let argv = ["sh", "-c", script].map(String::from);
        Proc::spawn_with(&argv, capture)
            .unwrap()
            .wait(Duration::from_secs(10))
    }

    #[test]
    fn output_is_bounded_to_the_newest_lines() {
        let cap = Capture {
            limit: 1000,
            clean: None,
        };
        let done = sh(
            "i=0; while [ $i -lt 500 ]; do echo line$i; i=$((i+1)); done",
            cap,
        );
        assert!(done.status.unwrap().success());
        let first = done.output.lines().next().unwrap();
        assert!(first.starts_with(DROPPED_PREFIX), "{first}");
        assert!(done.output.len() < 1100, "{}", done.output.len());
        assert!(done.output.ends_with("line499\n"));
    }

    #[test]
    fn a_long_line_is_cut_and_counted() {
        let cap = Capture {
            limit: 100,
            clean: None,
        };
        let done = sh("head -c 5000 /dev/zero | tr '\\0' x; echo; echo end", cap);
        assert!(done.output.starts_with(DROPPED_PREFIX), "{}", done.output);
        assert!(done.output.ends_with("end\n"));
        assert!(done.output.len() < 200);
    }

    #[test]
    fn clean_applies_to_every_line() {
        let cap = Capture {
            limit: 1000,
            clean: Some(|l| l.replace('x', "")),
        };
        let mut p =
            Proc::spawn_with(&["sh", "-c", "echo axb; sleep 5"].map(String::from), cap).unwrap();
        p.wait_for_line(|l| l == "ab", Duration::from_secs(5))
            .unwrap();
        assert_eq!(p.stdout(), "ab\n");
    }

    #[test]
    fn run_apart_leads_a_process_group_of_its_own() {
        let argv = ["sh", "-c", "echo $$ $(ps -o pgid= -p $$)"].map(String::from);
        let done = run_apart(&argv, Duration::from_secs(10)).unwrap();
        let ids: Vec<u32> = done
            .stdout
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(ids.len(), 2, "{}", done.output);
        assert_eq!(ids[0], ids[1], "not the leader of its own group");
        assert_ne!(
            ids[1],
            nix::unistd::getpgrp().as_raw() as u32,
            "in the caller's group"
        );
    }

    #[test]
    fn complete_keeps_stdin_open_until_the_time_runs_out() {
        // `cat` ends only when its stdin closes.
        let p = Proc::spawn(&["cat".to_string()]).unwrap();
        let t = Instant::now();
        let done = p.complete(Duration::from_millis(300), Duration::from_secs(5));
        assert!(t.elapsed() >= Duration::from_millis(300));
        assert_eq!(done.timed_out, Some(Duration::from_millis(300)));
        assert!(done.status.unwrap().success(), "cat ended at EOF");
    }

    #[test]
    fn secrets_are_known_by_name() {
        for v in [
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "VLLM_API_KEY",
            "HALOBOX_REGISTRY_PASSWORD",
            "HALOBOX_REGISTRY_USER",
        ] {
            assert!(is_secret(v), "{v}");
        }
        assert!(!is_secret("HALOBOX_IMAGE") && !is_secret("PATH"));
    }

    /// A program that outlives its bound is stopped with everything it started.
    #[test]
    fn run_async_stops_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = rt
            .block_on(run_async(&argv, Duration::from_millis(500)))
            .unwrap();
        assert!(out.is_none());
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let gone = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !gone(&pid) {
            assert!(Instant::now() < deadline, "sleep {pid} outlived the bound");
            thread::sleep(Duration::from_millis(20));
        }
        let done = rt.block_on(run_async(&["true".to_string()], Duration::from_secs(5)));
        assert!(done.unwrap().unwrap().status.success());
    }
}

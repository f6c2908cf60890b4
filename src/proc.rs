//! Child processes (ssh to a peer or node, local clients) with their output
//! collected line by line, bounded waits, and cleanup on drop. Every child
//! halobox starts is made by [`command`], which keeps secrets out of its
//! environment.

use std::io::{self, BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Variables that hold secrets: no child gets them from halobox's
/// environment (`serve` hands `HF_TOKEN` to vLLM on stdin).
pub const SECRET_VARS: &[&str] = &[
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HUGGINGFACE_HUB_TOKEN",
    "HF_API_TOKEN",
    "VLLM_API_KEY",
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
    lines: Receiver<String>,
    log: Arc<Mutex<String>>,
    stdout: Arc<Mutex<String>>,
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

impl Proc {
    /// Starts `argv` with piped stdin, stdout and stderr.
    pub fn spawn(argv: &[String]) -> io::Result<Proc> {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        let mut child = command(prog)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot run {prog}: {e}")))?;
        let (tx, rx) = mpsc::channel();
        let log = Arc::new(Mutex::new(String::new()));
        let stdout = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("piped");
        let err = child.stderr.take().expect("piped");
        for (reader, is_out) in [
            (Box::new(out) as Box<dyn Read + Send>, true),
            (Box::new(err), false),
        ] {
            let tx = tx.clone();
            let log = Arc::clone(&log);
            let only_out = Arc::clone(&stdout);
            thread::spawn(move || {
                for line in BufReader::new(reader).lines() {
                    let Ok(line) = line else { break };
                    let line = line.trim_end_matches('\r').to_string();
                    for (sink, used) in [(&log, true), (&only_out, is_out)] {
                        if used {
                            let mut l = sink.lock().unwrap();
                            l.push_str(&line);
                            l.push('\n');
                        }
                    }
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Ok(Proc {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            log,
            stdout,
            status: None,
        })
    }

    /// Waits until a line satisfies `ready`, the process ends, or `timeout`.
    pub fn wait_for_line(
        &mut self,
        ready: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<(), WaitError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if ready(&line) => return Ok(()),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err(WaitError::Timeout),
                Err(RecvTimeoutError::Disconnected) => {
                    self.reap();
                    return Err(WaitError::Exited);
                }
            }
        }
    }

    /// The exit status once the process has ended; `None` while it runs.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits for the process to end by itself within `timeout`, else kills it.
    pub fn wait(mut self, timeout: Duration) -> Finished {
        let deadline = Instant::now() + timeout;
        drop(self.stdin.take());
        self.drain_until(deadline);
        let status = match self.try_status() {
            Some(s) => Some(s),
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                None
            }
        };
        self.status = status.or(self.status);
        Finished {
            status,
            output: self.output(),
            stdout: self.stdout(),
        }
    }

    /// Closes stdin (the peer's guard then stops the server), waits up to
    /// `grace` for the process to end, then kills it; returns the output.
    pub fn finish(self, grace: Duration) -> String {
        self.wait(grace).output
    }

    /// Everything printed so far (stdout and stderr, interleaved by line).
    pub fn output(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// What was printed on stdout alone.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn drain_until(&mut self, deadline: Instant) {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.reap_until(deadline);
                    return;
                }
                Err(RecvTimeoutError::Timeout) => return,
            }
        }
    }

    /// Output is closed: the process is ending; collect its status.
    fn reap(&mut self) {
        self.reap_until(Instant::now() + Duration::from_secs(5));
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
    /// stdout and stderr, interleaved by line.
    pub output: String,
    /// stdout alone.
    pub stdout: String,
}

/// Runs `argv` to completion within `timeout` (killed after it).
pub fn run(argv: &[String], timeout: Duration) -> io::Result<Finished> {
    Ok(Proc::spawn(argv)?.wait(timeout))
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
        let started = Instant::now();
        let out = rt
            .block_on(run_async(&argv, Duration::from_millis(500)))
            .unwrap();
        assert!(out.is_none());
        assert!(started.elapsed() < Duration::from_secs(10));
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

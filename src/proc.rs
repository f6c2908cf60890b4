//! Child processes (ssh to a peer or node, local clients) with their output
//! collected line by line, bounded waits, and cleanup on drop.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

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
        Self::spawn_in(argv, None)
    }

    /// [`Proc::spawn`] in the directory `cwd` (this process's when `None`).
    pub fn spawn_in(argv: &[String], cwd: Option<&Path>) -> io::Result<Proc> {
        let (prog, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        let mut command = Command::new(prog);
        if let Some(dir) = cwd {
            command.current_dir(dir);
        }
        let mut child = command
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

/// Runs `argv` in `cwd` with `input` on its stdin (written by a thread,
/// then closed), to completion within `timeout` (killed after it). A child
/// that exits without reading all of `input` is not an error: its status
/// says so.
pub fn run_with_input(
    argv: &[String],
    cwd: &Path,
    input: &[u8],
    timeout: Duration,
) -> io::Result<Finished> {
    let mut p = Proc::spawn_in(argv, Some(cwd))?;
    if let Some(mut stdin) = p.stdin.take() {
        let input = input.to_vec();
        thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    Ok(p.wait(timeout))
}

//! Commands on another node over ssh, the one way halobox runs them: under
//! a guard on the node that stops the command when this side goes away
//! (halobox killed, timed out, or done waiting), output kept within
//! [`OUTPUT_LIMIT`] with terminal control characters removed before
//! anything prints it, and one wording for what went wrong, naming the node.
//! A command that reads its own stdin runs without the guard.
//! [`last_json`] is the one reader of a node's JSON report.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::proc::{Capture, DROPPED_PREFIX, Finished, Proc};
use crate::{shell, ssh};

/// Bytes kept of a remote command's output (the newest), per log.
pub const OUTPUT_LIMIT: usize = 1 << 20;

/// How long a remote command gets to stop once halobox stops waiting.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

const CAPTURE: Capture = Capture {
    limit: OUTPUT_LIMIT,
    clean: Some(printable),
};

/// Runs `"$@"` in a new session (`setsid`, so its process group is its
/// own) with ssh's stdin, next to a watcher in the same group that reads a
/// copy of that stdin. ssh's stdin closes when halobox closes it, exits or
/// is killed, or the connection drops; if the command still runs then, the
/// watcher signals its own process group (`kill 0`: TERM, then KILL after
/// 5 s). No process id is ever signalled by number, and the `kill -0 $$`
/// test cannot meet a reused id: the watcher keeps the group, and so the
/// id, alive. When the command has ended by itself, what it left running
/// (Ray's daemons after `ray start`) is not touched.
const GUARD: &str = "trap \"exit 143\" TERM; exec 3<&0; \
( ( trap \"\" TERM; cat <&3 >/dev/null 2>&1; kill -0 $$ 2>/dev/null || exit 0; kill -TERM 0; \
i=0; while [ $i -lt 20 ] && kill -0 $$ 2>/dev/null; do sleep 0.25; i=$((i+1)); done; \
kill -KILL 0 ) >/dev/null 2>&1 & ); \"$@\" 3<&-; exit $?";

/// [`GUARD`] for a command that gets one line of input (a secret): the
/// guard reads it from ssh's stdin first, then hands it to the command on
/// a pipe of its own (`printf` is the shell's builtin: no argument list
/// holds it) and watches the rest of ssh's stdin as [`GUARD`] does.
fn guard_line() -> String {
    GUARD
        .replacen(
            "exec 3<&0;",
            "IFS= read -r halobox_line || exit 97; exec 3<&0;",
            1,
        )
        .replacen(
            "\"$@\" 3<&-;",
            "printf '%s\\n' \"$halobox_line\" | \"$@\" 3<&-;",
            1,
        )
}

/// `setsid -w sh -c PROGRAM halobox-guard CMD…`.
fn guard_words(program: &str, cmd: &[String]) -> Vec<String> {
    let mut a: Vec<String> = ["setsid", "-w", "sh", "-c", program, "halobox-guard"]
        .iter()
        .map(|w| w.to_string())
        .collect();
    a.extend(cmd.iter().cloned());
    a
}

/// The node's shell line that runs `cmd` (argv there) under the guard.
pub fn guarded(cmd: &[String]) -> String {
    shell::line(&guard_argv(cmd))
}

/// `cmd` under the guard, as argv: stopped when its stdin closes (used
/// where the command is not a shell line, as in a container's exec).
pub fn guard_argv(cmd: &[String]) -> Vec<String> {
    guard_words(GUARD, cmd)
}

/// A node reached over ssh.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    target: String,
    options: Vec<String>,
    label: String,
    missing_hint: String,
    /// The socket of this command's master connection to the node, if any.
    control: Option<PathBuf>,
}

/// What kind of failure a remote command had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// ssh itself failed (exit 255): connection, authentication, host key.
    Unreachable,
    /// A command was not found there (exit 127).
    Missing,
    /// It did not finish in time (and was stopped).
    Timeout,
    /// It failed (exit code, when it had one).
    Failed(Option<i32>),
}

/// A remote command that failed, in words that name the node.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct RemoteError {
    /// What kind of failure.
    pub failure: Failure,
    /// The message, with a hint where there is one.
    pub message: String,
}

impl Node {
    /// The node `target` (`[user@]host`, checked with
    /// [`ssh::check_target`]) with extra ssh `options`; `label` names it in
    /// messages ("node b (root@10.0.0.2)"); `missing_hint` says what to do
    /// when a command is not found there.
    pub fn new(target: &str, options: &[String], label: String, missing_hint: String) -> Node {
        Node {
            target: target.to_string(),
            options: options.to_vec(),
            label,
            missing_hint,
            control: None,
        }
    }

    /// This node reached through its master connection in `masters`
    /// (when one started), else as it is.
    pub fn through(&self, masters: &Masters) -> Node {
        let mut n = self.clone();
        n.control = masters.socket(&self.target, &self.options);
        n
    }

    /// The ssh argv that runs the shell line `remote` there.
    fn ssh(&self, remote: &str) -> Vec<String> {
        match &self.control {
            Some(c) => ssh::command_via(&self.target, &self.options, c, remote),
            None => ssh::command(&self.target, &self.options, remote),
        }
    }

    /// The name used in messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The ssh argv that runs `cmd` (argv on the node) under the guard, as
    /// a user would run it (without a master connection).
    pub fn argv(&self, cmd: &[String]) -> Vec<String> {
        ssh::command(&self.target, &self.options, &guarded(cmd))
    }

    /// The ssh argv that runs `cmd` there without the guard (its stdin is
    /// the command's own: [`Node::run_input`], [`Node::spawn_unguarded`]).
    pub fn unguarded_argv(&self, cmd: &[String]) -> Vec<String> {
        self.ssh(&shell::line(cmd))
    }

    /// Starts `cmd` there without the guard: it reads its stdin itself
    /// (and must stop on its own when that closes).
    pub fn spawn_unguarded(&self, cmd: &[String]) -> Result<Proc, RemoteError> {
        ssh::check_target(&self.target).map_err(|e| self.failed(e))?;
        Proc::spawn_with(&self.unguarded_argv(cmd), CAPTURE)
            .map_err(|e| self.failed(format!("{e}\n  hint: install the OpenSSH client (`ssh`)")))
    }

    /// Starts `cmd` there. Dropping (or finishing) the process closes its
    /// stdin, which stops the command on the node.
    pub fn spawn(&self, cmd: &[String]) -> Result<Proc, RemoteError> {
        ssh::check_target(&self.target).map_err(|e| self.failed(e))?;
        Proc::spawn_with(&self.ssh(&guarded(cmd)), CAPTURE)
            .map_err(|e| self.failed(format!("{e}\n  hint: install the OpenSSH client (`ssh`)")))
    }

    /// Runs `cmd` there under the guard with `line` (a secret: never in an
    /// argument) as its only input, within `timeout`; an error unless it
    /// exits 0.
    pub fn run_ok_with_line(
        &self,
        what: &str,
        cmd: &[String],
        line: &str,
        timeout: Duration,
    ) -> Result<Finished, RemoteError> {
        let done = self
            .spawn_with_line(cmd, line)?
            .complete(timeout, STOP_GRACE);
        if done.status.is_some_and(|s| s.success()) {
            Ok(done)
        } else {
            Err(self.error(what, &done))
        }
    }

    /// Starts `cmd` there under the guard with `line` (a secret: never in
    /// an argument) as its only input; stopped there when the process is
    /// dropped.
    pub fn spawn_with_line(&self, cmd: &[String], line: &str) -> Result<Proc, RemoteError> {
        ssh::check_target(&self.target).map_err(|e| self.failed(e))?;
        let words = guard_words(&guard_line(), cmd);
        let mut proc = Proc::spawn_with(&self.ssh(&shell::line(&words)), CAPTURE)
            .map_err(|e| self.failed(format!("{e}\n  hint: install the OpenSSH client (`ssh`)")))?;
        // A write that fails means ssh ended early: its status says why.
        let _ = proc.write(format!("{line}\n").as_bytes());
        Ok(proc)
    }

    /// Runs `cmd` there within `timeout` (then stopped there); `Ok` however
    /// it ended.
    pub fn run(&self, cmd: &[String], timeout: Duration) -> Result<Finished, RemoteError> {
        Ok(self.spawn(cmd)?.complete(timeout, STOP_GRACE))
    }

    /// Runs `cmd` there within `timeout`; an error unless it exits 0.
    pub fn run_ok(
        &self,
        what: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<Finished, RemoteError> {
        let done = self.run(cmd, timeout)?;
        if done.status.is_some_and(|s| s.success()) {
            Ok(done)
        } else {
            Err(self.error(what, &done))
        }
    }

    /// Runs `cmd` there with `input` on its stdin, NOT under the guard
    /// (the guard reads stdin too): `cmd` must read its input to the end and
    /// then finish by itself, so it ends when halobox goes away. An error
    /// unless it exits 0 within `timeout`.
    pub fn run_with_input(
        &self,
        what: &str,
        cmd: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> Result<Finished, RemoteError> {
        let done = self.run_input(cmd, input, timeout)?;
        if done.status.is_some_and(|s| s.success()) {
            Ok(done)
        } else {
            Err(self.error(what, &done))
        }
    }

    /// [`Node::run_with_input`], `Ok` however it ended (an error only when
    /// ssh could not start).
    pub fn run_input(
        &self,
        cmd: &[String],
        input: &[u8],
        timeout: Duration,
    ) -> Result<Finished, RemoteError> {
        let mut proc = self.spawn_unguarded(cmd)?;
        // Written by a thread, so a node that stops reading cannot hold
        // this past `timeout` (ssh is then killed and the write fails); a
        // write that fails means ssh ended early: its status says why.
        proc.send_in_background(input.to_vec());
        let mut done = proc.wait(timeout);
        if done.status.is_none() {
            // `wait` kills only what did not end within `timeout`.
            done.timed_out = Some(timeout);
        }
        Ok(done)
    }

    /// Why `what` (the remote command, as named to the user) did not
    /// succeed, with the last lines it printed.
    pub fn error(&self, what: &str, done: &Finished) -> RemoteError {
        let tail = tail(&done.output, 4);
        let code = done.status.and_then(|s| s.code());
        let label = &self.label;
        let (failure, message) = match (done.timed_out, code) {
            (Some(t), _) => (
                Failure::Timeout,
                format!(
                    "{label}: {what} did not finish within {} s (stopped there): {tail}",
                    t.as_secs()
                ),
            ),
            (None, c) if ssh::unreachable(c) => (
                Failure::Unreachable,
                format!(
                    "{label}: cannot reach it over ssh: {tail}\n  hint: {}",
                    ssh::reach_hint(&self.target)
                ),
            ),
            (None, Some(127)) => (
                Failure::Missing,
                format!(
                    "{label}: a command is missing there ({what}): {tail}\n  hint: {}",
                    self.missing_hint
                ),
            ),
            (None, Some(c)) => (
                Failure::Failed(Some(c)),
                format!("{label}: {what} failed (exit {c}): {tail}"),
            ),
            (None, None) => (
                Failure::Failed(None),
                format!("{label}: {what} was stopped: {tail}"),
            ),
        };
        RemoteError { failure, message }
    }

    fn failed(&self, e: String) -> RemoteError {
        RemoteError {
            failure: Failure::Failed(None),
            message: format!("{}: {e}", self.label),
        }
    }
}

/// How long a master connection may take to log in before halobox goes on
/// without it.
const MASTER_START: Duration = Duration::from_secs(15);

/// One ssh connection per node shared by every command of one halobox run
/// (ssh's ControlMaster): each master logs in, then runs in the background
/// with its standard streams on /dev/null (no pipe of halobox's kept open),
/// its socket in a directory only this user can enter, made for this run.
/// Dropping it closes every master (`-O exit`) and removes the directory;
/// a master whose halobox was killed ends once its clients are gone
/// ([`ssh::MASTER_IDLE_S`]). A node whose master did not start is reached
/// by plain ssh, as is a node whose master is gone.
#[derive(Debug, Default)]
pub struct Masters {
    dir: Option<PathBuf>,
    open: Vec<Master>,
}

#[derive(Debug)]
struct Master {
    target: String,
    socket: PathBuf,
    options: Vec<String>,
}

impl Masters {
    /// A master connection to each distinct node of `nodes`, started in
    /// parallel; nodes whose master cannot log in are left out (their
    /// commands connect by themselves and say why they cannot).
    pub fn start(nodes: &[Node]) -> Masters {
        let Some(dir) = private_dir() else {
            return Masters::default();
        };
        let mut distinct: Vec<&Node> = vec![];
        for n in nodes {
            if ssh::check_target(&n.target).is_ok()
                && !distinct
                    .iter()
                    .any(|d| d.target == n.target && d.options == n.options)
            {
                distinct.push(n);
            }
        }
        let open = std::thread::scope(|s| {
            let started: Vec<_> = distinct
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let socket = dir.join(i.to_string());
                    s.spawn(move || Master::start(n, socket))
                })
                .collect();
            started
                .into_iter()
                .filter_map(|h| h.join().expect("master thread"))
                .collect()
        });
        Masters {
            dir: Some(dir),
            open,
        }
    }

    fn socket(&self, target: &str, options: &[String]) -> Option<PathBuf> {
        self.open
            .iter()
            .find(|m| m.target == target && m.options == options)
            .map(|m| m.socket.clone())
    }
}

impl Master {
    /// Starts the master and waits until it logged in and went to the
    /// background; `None` when it fails or does not within [`MASTER_START`].
    fn start(node: &Node, socket: PathBuf) -> Option<Master> {
        let argv = ssh::master(&node.target, &node.options, &socket);
        let mut child = quiet(&argv).spawn().ok()?;
        let deadline = Instant::now() + MASTER_START;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                _ => break None,
            }
        };
        let m = Master {
            target: node.target.clone(),
            socket,
            options: node.options.clone(),
        };
        if status.is_some_and(|s| s.success()) && m.socket.exists() {
            return Some(m);
        }
        let _ = child.kill();
        let _ = child.wait();
        m.close();
        None
    }

    /// `-O exit`: the master closes its connection and ends.
    fn close(&self) {
        if self.socket.exists() {
            let _ = quiet(&ssh::master_exit(&self.target, &self.socket)).status();
        }
    }
}

/// `argv` with its standard streams on /dev/null.
fn quiet(argv: &[String]) -> std::process::Command {
    let mut c = crate::proc::command(&argv[0]);
    c.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

impl Drop for Masters {
    fn drop(&mut self) {
        for m in &self.open {
            m.close();
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A new directory for the masters' sockets, mode 0700, under the
/// temporary directory (`None` where ssh could not use its path).
fn private_dir() -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = std::env::temp_dir();
    remove_stale(&tmp);
    let dir = tmp.join(format!("halobox-ssh-{}-{seq}-{nanos}", std::process::id()));
    // ssh expands '%' and splits words in ControlPath; sockets have a
    // short path limit.
    let text = dir.to_str()?;
    if text.contains(['%', ' ', '\t', '"', '\'']) || text.len() > 80 {
        return None;
    }
    std::fs::DirBuilder::new().mode(0o700).create(&dir).ok()?;
    Some(dir)
}

/// Removes the empty socket directories that a killed halobox left in
/// `tmp` (its process is gone; a master removes its socket when it ends).
fn remove_stale(tmp: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let uid = nix::unistd::Uid::current().as_raw();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("halobox-ssh-"))
            .and_then(|n| n.split('-').next())
        else {
            continue;
        };
        let mine = e
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if mine && !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Longest line of remote output quoted in a message.
const TAIL_LINE_CHARS: usize = 300;

/// The last `n` non-empty lines of kept output on one line (`a / b / c`),
/// each cut at `TAIL_LINE_CHARS`, noting output that was not kept;
/// `(no output)` when there is none.
pub fn tail(output: &str, n: usize) -> String {
    let dropped = output
        .lines()
        .next()
        .filter(|l| l.starts_with(DROPPED_PREFIX));
    let lines: Vec<String> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(DROPPED_PREFIX))
        .map(|l| match l.char_indices().nth(TAIL_LINE_CHARS) {
            Some((i, _)) => format!("{}…", &l[..i]),
            None => l.to_string(),
        })
        .collect();
    let mut t = lines[lines.len().saturating_sub(n)..].join(" / ");
    if t.is_empty() {
        t = "(no output)".into();
    }
    if let Some(d) = dropped {
        t.push(' ');
        t.push_str(d);
    }
    t
}

/// Reads a JSON document a node printed, with every string in it (keys
/// too) made [`printable`]: a JSON escape like `\u001b` survives the line
/// cleaning as text and would come back as a control character.
pub fn parse_json<T: serde::de::DeserializeOwned>(line: &str) -> serde_json::Result<T> {
    parse_json_with(line, &printable)
}

/// The report `command` printed on `node`: its last line that is a JSON
/// object, read with [`parse_json`]. `output` is all it printed; its last
/// lines go into the one error wording, which names the node and the
/// command.
pub fn last_json<T: serde::de::DeserializeOwned>(
    node: &str,
    command: &str,
    stdout: &str,
    output: &str,
) -> Result<T, String> {
    let line = stdout
        .lines()
        .rev()
        .map(str::trim_start)
        .find(|l| l.starts_with('{'));
    let why = match line.map(parse_json) {
        Some(Ok(v)) => return Ok(v),
        Some(Err(e)) => e.to_string(),
        None => "no JSON line".into(),
    };
    Err(format!(
        "{node}: {command} printed no report this halobox reads ({why}): {}\n  hint: the same halobox on every node and in its container (`halobox cluster install`, then `halobox refresh`)",
        tail(output, 3)
    ))
}

/// [`parse_json`], but strings keep their line breaks (each line made
/// [`printable`]): for multi-line text such as a doctor check's fix.
pub fn parse_json_lines<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    parse_json_with(text, &printable_lines)
}

/// `text` with each of its lines made [`printable`], its line breaks kept.
pub fn printable_lines(text: &str) -> String {
    text.split('\n')
        .map(printable)
        .collect::<Vec<_>>()
        .join("\n")
}

fn parse_json_with<T: serde::de::DeserializeOwned>(
    text: &str,
    clean_str: &dyn Fn(&str) -> String,
) -> serde_json::Result<T> {
    fn clean(v: serde_json::Value, f: &dyn Fn(&str) -> String) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(f(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(|v| clean(v, f)).collect()),
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, v)| (printable(&k), clean(v, f)))
                    .collect(),
            ),
            v => v,
        }
    }
    serde_json::from_value(clean(serde_json::from_str(text)?, clean_str))
}

/// `line` safe to print on a terminal: ANSI escape sequences (CSI, OSC,
/// DCS and the like, 7- and 8-bit) removed, and every control character
/// but tab (C0 with `\r`, DEL, C1) and the bidirectional overrides with it.
pub fn printable(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\t' => out.push(c),
            '\u{1b}' => match it.next() {
                Some('[') => skip_csi(&mut it),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut it),
                // nF sequences: intermediates, then one final byte.
                Some('\u{20}'..='\u{2f}') => {
                    for n in it.by_ref() {
                        if !('\u{20}'..='\u{2f}').contains(&n) {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut it),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Skips a control sequence's parameters and its final byte.
fn skip_csi(it: &mut impl Iterator<Item = char>) {
    for c in it.by_ref() {
        if !('\u{20}'..='\u{3f}').contains(&c) {
            break;
        }
    }
}

/// Skips a control string up to its terminator (BEL, ESC \ or ST).
fn skip_string(it: &mut std::iter::Peekable<impl Iterator<Item = char>>) {
    while let Some(c) = it.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if it.peek() == Some(&'\\') {
                    it.next();
                }
                return;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every reader of a node's report says the same: the node, the
    /// command, why, and the output's last lines.
    #[test]
    fn the_last_json_line_is_the_report_and_its_absence_is_named() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct R {
            a: u32,
        }
        let out = "log line\n{\"a\": 1}\n  {\"a\": 2}\ntrailer\n";
        assert_eq!(last_json::<R>("node n1", "`x`", out, out), Ok(R { a: 2 }));
        let none = last_json::<R>("node n1", "`halobox x`", "no json\n", "boom\n").unwrap_err();
        assert!(
            none.starts_with(
                "node n1: `halobox x` printed no report this halobox reads (no JSON line): "
            ),
            "{none}"
        );
        assert!(none.contains("boom"), "{none}");
        let bad = last_json::<R>("node n2", "`y`", "{\"b\": 1}\n", "").unwrap_err();
        assert!(bad.starts_with("node n2: `y` printed no report"), "{bad}");
    }

    use super::*;

    #[test]
    fn printable_strips_escapes_and_controls() {
        let cases = [
            ("\u{1b}[31;1mred\u{1b}[0m", "red"),
            ("a\rb\u{7}c\u{8}d\u{7f}e\u{85}f", "abcdef"),
            ("tab\tkept", "tab\tkept"),
            ("\u{1b}]0;title\u{7}x", "x"),
            ("\u{1b}]8;;http://e\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}(Bx\u{1b}7y", "xy"),
            ("\u{9b}2Jz", "z"),
            ("\u{1b}P1$r\u{1b}\\ok", "ok"),
            ("abc\u{202e}fed", "abcfed"),
            ("µs and ü stay", "µs and ü stay"),
        ];
        for (raw, want) in cases {
            assert_eq!(printable(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn json_strings_come_back_printable() {
        let v: std::collections::BTreeMap<String, Vec<String>> =
            parse_json(r#"{"a\u001b[1m": ["x\u001b]0;t\u0007y", "\u009b2Jz"]}"#).unwrap();
        assert_eq!(v["a"], ["xy", "z"]);
        let v: Vec<String> = parse_json_lines(r#"["a\u001b[1m\nb\r\n"]"#).unwrap();
        assert_eq!(v, ["a\nb\n"]);
    }

    #[test]
    fn tail_is_bounded_and_says_what_was_dropped() {
        assert_eq!(tail("", 3), "(no output)");
        assert_eq!(tail("a\n\nb\nc\nd\n", 2), "c / d");
        let long = "x".repeat(1000);
        let t = tail(&format!("{long}\n"), 1);
        assert_eq!(t.chars().count(), TAIL_LINE_CHARS + 1);
        let t = tail(
            &format!("{DROPPED_PREFIX}9 bytes of output not kept]\nlast\n"),
            3,
        );
        assert_eq!(t, "last [halobox: 9 bytes of output not kept]");
    }

    #[test]
    fn guard_wraps_the_command_and_keeps_its_words() {
        let line = guarded(&["echo".into(), "a b".into(), "it's".into()]);
        assert!(line.starts_with("setsid -w sh -c '"), "{line}");
        assert!(
            line.ends_with(" halobox-guard echo 'a b' 'it'\\''s'"),
            "{line}"
        );
        let argv =
            Node::new("root@n1", &[], "node n1".into(), String::new()).argv(&["true".into()]);
        assert_eq!(argv[..3], ["ssh", "-o", "StrictHostKeyChecking=yes"]);
        assert_eq!(argv[argv.len() - 2], "root@n1");
    }

    #[test]
    fn guard_runs_the_command_and_passes_its_exit_code() {
        // The guard as the node's shell runs it, here.
        let run = |cmd: &[&str]| {
            let cmd: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            let argv = ["sh".to_string(), "-c".into(), guarded(&cmd)];
            Proc::spawn_with(&argv, CAPTURE)
                .unwrap()
                .complete(Duration::from_secs(10), STOP_GRACE)
        };
        let done = run(&["sh", "-c", "printf '\\033[1mhi\\033[0m\\n'; exit 3"]);
        assert_eq!(done.status.unwrap().code(), Some(3));
        assert_eq!(done.output, "hi\n");
    }

    #[test]
    fn the_line_reaches_the_command_on_a_pipe_of_its_own() {
        let program = guard_line();
        assert!(
            program.contains("IFS= read -r halobox_line") && program.contains("| \"$@\" 3<&-;")
        );
        let argv = [
            "sh".to_string(),
            "-c".into(),
            shell::line(&guard_words(
                &program,
                &[
                    "sh".into(),
                    "-c".into(),
                    "read -r l; echo \"got $l\"; cat".into(),
                ],
            )),
        ];
        let mut p = Proc::spawn_with(&argv, CAPTURE).unwrap();
        p.write(b"s3cret\nnot for the command\n").unwrap();
        let done = p.complete(Duration::from_secs(10), STOP_GRACE);
        assert_eq!(done.status.unwrap().code(), Some(0), "{done:?}");
        assert_eq!(done.output, "got s3cret\n");
    }

    #[test]
    fn guard_stops_the_command_when_stdin_closes() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 300", mark.display());
        let argv = [
            "sh".to_string(),
            "-c".into(),
            guarded(&["sh".into(), "-c".into(), script]),
        ];
        let p = Proc::spawn_with(&argv, CAPTURE).unwrap();
        let t = std::time::Instant::now();
        while !mark.exists() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "no pid file: the guard never ran it"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let done = p.complete(Duration::from_millis(200), Duration::from_secs(10));
        assert!(done.timed_out.is_some());
        assert_eq!(done.status.and_then(|s| s.code()), Some(143), "{done:?}");
        let pid = std::fs::read_to_string(&mark).unwrap();
        let proc_dir = format!("/proc/{}", pid.trim());
        let t = std::time::Instant::now();
        while std::path::Path::new(&proc_dir).exists() {
            assert!(t.elapsed() < Duration::from_secs(60), "sleep still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

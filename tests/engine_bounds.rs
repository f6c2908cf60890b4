//! A wedged engine socket is an error that names it, within the bound, never
//! a hang: a stand-in unix socket that accepts connections and never
//! answers, or answers `/_ping` as Docker 20.10 does and then stalls every
//! other request, pointed at by `--engine`.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the stand-in answers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Accepts and reads, never writes.
    Silent,
    /// Answers `/_ping`, then stalls.
    PingOnly,
}

struct Wedged {
    _dir: tempfile::TempDir,
    socket: String,
}

fn serve(mut conn: UnixStream, mode: Mode) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        seen.extend_from_slice(&buf[..n]);
        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = seen.drain(..end + 4).collect();
            let line = String::from_utf8_lossy(&head);
            if mode == Mode::PingOnly && line.starts_with("GET /_ping ") {
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nServer: Docker/20.10.24 (linux)\r\nContent-Length: 2\r\n\r\nOK",
                );
            }
        }
    }
}

impl Wedged {
    fn start(mode: Mode) -> Wedged {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wedged.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                std::thread::spawn(move || serve(conn, mode));
            }
        });
        Wedged {
            socket: path.display().to_string(),
            _dir: dir,
        }
    }
}

/// Runs halobox with `args`; kills it (and fails) if it outlives `limit`,
/// a hang detector far above the bound, not a measurement.
fn bounded(args: &[String], limit: Duration) -> (i32, String) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code().unwrap_or(-1), err);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("halobox {args:?} still ran after {limit:?}: it hangs on a wedged engine");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `list`, `refresh` and `enter` against `mode`, all at once; each must end
/// with exit 1, naming the socket and the bound it gave up after (`says`),
/// with a hint. How long that took depends on the machine's load, so it is
/// not asserted: a run still going at several times the bound is a hang.
fn check(mode: Mode, bound: Duration, says: &[&str]) {
    let w = Wedged::start(mode);
    let engine = format!("unix://{}", w.socket);
    let commands: Vec<Vec<String>> = [
        vec!["list"],
        vec!["refresh", "--name", "hbx-wedged", "--backend", "docker"],
        vec!["enter", "hbx-wedged", "--", "true"],
    ]
    .iter()
    .map(|c| {
        let mut a: Vec<String> = vec![c[0].to_string(), "--engine".into(), engine.clone()];
        a.extend(c[1..].iter().map(|s| s.to_string()));
        a
    })
    .collect();
    let hang = bound * 4 + Duration::from_secs(120);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = commands
            .iter()
            .map(|a| s.spawn(|| bounded(a, hang)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (args, (code, err)) in commands.iter().zip(results) {
        assert_eq!(code, 1, "{mode:?} {args:?}: {err}");
        assert!(err.contains(&w.socket), "{mode:?} {args:?}: {err}");
        assert!(err.contains("hint:"), "{mode:?} {args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{mode:?} {args:?}: no {s:?} in {err}");
        }
    }
}

#[test]
fn a_socket_that_never_answers_fails_within_the_ping_bound() {
    check(
        Mode::Silent,
        Duration::from_secs(5),
        &["did not answer /_ping within 5s"],
    );
}

#[test]
fn an_engine_that_stalls_after_ping_fails_within_the_call_bound() {
    check(
        Mode::PingOnly,
        Duration::from_secs(30),
        &["did not answer within 30s while", "curl --unix-socket"],
    );
}

//! llama.cpp's RPC servers, one in every node's container but the head's:
//! the small POSIX `sh` programs that start one (bound to the node's
//! data-plane address only, SIGPIPE ignored, detached, its pid and log in
//! [`super::program::DIR`]), look at it and stop it; and the RPC `HELLO`
//! that tells from the head whether one answers, which protocol it speaks,
//! and whether another head holds it (an RPC server serves one client at a
//! time: a second one would hang).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::program::{ALIVE_FN, DIR, PID_FNS, RECORD_FN};

/// The RPC protocol major version halobox speaks its `HELLO` in (llama.cpp
/// `RPC_PROTO_MAJOR_VERSION`, with 24 bytes of connection capabilities).
pub const PROTO_MAJOR: u8 = 7;
/// `RPC_CMD_HELLO` (fixed at 14 upstream).
const CMD_HELLO: u8 = 14;
/// `RPC_CONN_CAPS_SIZE`.
const CAPS: usize = 24;

/// Starts the RPC server detached: `$1` the data-plane address it binds,
/// `$2` its port, `$3` the command (empty: `ggml-rpc-server`, else
/// `rpc-server`, next to `$4` (the `llama-server` command) when that is a
/// path, else on the PATH). Exits 98 when there is none, 99 when the port
/// is taken or it does not listen within 10 s (its log on stderr); prints
/// `halobox-rpc-pid PID BIN` (also when one halobox started runs already).
pub fn start() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; {RECORD_FN}; d=\"{DIR}\"; mkdir -p -m 0700 \"$d\" || exit 95; owndir; \
         if readpid \"$d/rpc.pid\" && alive \"$pid\" && same; then echo \"halobox-rpc-pid $pid (already running)\"; exit 0; fi; \
         bin=$3; \
         if [ -z \"$bin\" ]; then \
         case \"$4\" in */*) for c in \"${{4%/*}}/ggml-rpc-server\" \"${{4%/*}}/rpc-server\"; do [ -x \"$c\" ] && {{ bin=$c; break; }}; done ;; esac; \
         [ -n \"$bin\" ] || for c in ggml-rpc-server rpc-server; do command -v \"$c\" >/dev/null 2>&1 && {{ bin=$c; break; }}; done; \
         [ -n \"$bin\" ] || {{ echo \"halobox: no ggml-rpc-server or rpc-server in this container (looked next to $4 and on the PATH)\" >&2; exit 98; }}; \
         elif ! command -v \"$bin\" >/dev/null 2>&1; then echo \"halobox: no \\`$bin\\` in this container\" >&2; exit 98; fi; \
         hex=$(printf '%04X' \"$2\"); \
         listening() {{ awk -v p=\":$hex\" '$4 == \"0A\" && substr($2, length($2) - 4) == p {{ f = 1 }} END {{ exit !f }}' /proc/net/tcp; }}; \
         if listening; then echo \"halobox: port $2 is already taken in this node's network\" >&2; exit 99; fi; \
         : >\"$d/rpc.log\"; \
         setsid sh -c 'trap \"\" PIPE; exec \"$@\"' halobox-rpc \"$bin\" -H \"$1\" -p \"$2\" -c </dev/null >>\"$d/rpc.log\" 2>&1 & \
         pid=$!; record \"$d/rpc.pid\"; i=0; \
         while [ \"$i\" -lt 50 ]; do \
         if ! alive \"$pid\"; then rm -f \"$d/rpc.pid\"; echo \"halobox: $bin ended at once:\" >&2; tail -n 5 \"$d/rpc.log\" >&2; exit 99; fi; \
         if listening; then echo \"halobox-rpc-pid $pid $bin\"; exit 0; fi; \
         sleep 0.2; i=$((i + 1)); done; \
         echo \"halobox: $bin does not listen on $1:$2 after 10 s:\" >&2; tail -n 5 \"$d/rpc.log\" >&2; exit 99"
    )
}

/// Prints `running PID`, `frozen PID` (stopped by a signal), `exited PID`
/// or `none`, then the last `$1` lines of its log.
pub fn state() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; d=\"{DIR}\"; {read}\
         if alive \"$pid\" && same; then case \"$(sed 's/^.*) //' \"/proc/$pid/stat\" 2>/dev/null)\" in T*|t*) echo \"frozen $pid\" ;; *) echo \"running $pid\" ;; esac; \
         else echo \"exited $pid\"; fi; tail -n \"${{1:-0}}\" \"$d/rpc.log\" 2>/dev/null; true",
        read = super::program::read_pid_file("rpc.pid")
    )
}

/// Stops the RPC server (SIGTERM and SIGCONT, 5 s, then SIGKILL) and
/// removes its pid file; signals only the process halobox started (see
/// [`PID_FNS`]). Prints `stopped PID`, `gone PID` or `none`.
pub fn stop() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; d=\"{DIR}\"; {read}word=gone; \
         if alive \"$pid\" && same; then word=stopped; kill -TERM \"$pid\" 2>/dev/null; kill -CONT \"$pid\" 2>/dev/null; \
         i=0; while alive \"$pid\" && same && [ \"$i\" -lt 25 ]; do sleep 0.2; i=$((i + 1)); done; \
         if alive \"$pid\" && same; then kill -KILL \"$pid\" 2>/dev/null; sleep 0.3; fi; fi; \
         rm -f \"$d/rpc.pid\"; echo \"$word $pid\"",
        read = super::program::read_pid_file("rpc.pid")
    )
}

/// What one RPC server said to a `HELLO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// It answered: its protocol version.
    Version(u8, u8, u8),
    /// Nothing listens there.
    Refused,
    /// It took the connection but did not answer in time: another head
    /// holds it (one client at a time), or the process is frozen.
    Silent,
    /// It answered in another form, or hung up: another protocol version.
    Other(String),
    /// Another network error.
    Failed(String),
}

impl Hello {
    /// The version as `7.0.0`.
    pub fn version(&self) -> Option<String> {
        match self {
            Hello::Version(a, b, c) => Some(format!("{a}.{b}.{c}")),
            _ => None,
        }
    }
}

/// `RPC_CMD_GET_DEVICE_MEMORY`.
const CMD_DEVICE_MEMORY: u8 = 11;

/// Says `HELLO` to the RPC server at `addr` (every step within `timeout`)
/// and hangs up.
pub fn hello(addr: SocketAddr, timeout: Duration) -> Hello {
    hello_then_memory(addr, timeout).0
}

/// [`hello`], then (when it answered in this protocol) the total memory of
/// its first device in bytes: the host's RAM for a CPU or unified-memory
/// server.
pub fn hello_then_memory(addr: SocketAddr, timeout: Duration) -> (Hello, Option<u64>) {
    let (h, s) = say_hello(addr, timeout);
    let mem = match (&h, s) {
        (Hello::Version(PROTO_MAJOR, ..), Some(mut s)) => device_memory(&mut s).ok(),
        _ => None,
    };
    (h, mem)
}

fn device_memory(s: &mut TcpStream) -> io::Result<u64> {
    let mut req = vec![CMD_DEVICE_MEMORY];
    req.extend_from_slice(&4u64.to_le_bytes());
    req.extend_from_slice(&0u32.to_le_bytes());
    s.write_all(&req)?;
    let mut size = [0u8; 8];
    s.read_exact(&mut size)?;
    if u64::from_le_bytes(size) != 16 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "memory answer size",
        ));
    }
    let mut body = [0u8; 16];
    s.read_exact(&mut body)?;
    Ok(u64::from_le_bytes(body[8..16].try_into().expect("8 bytes")))
}

fn say_hello(addr: SocketAddr, timeout: Duration) -> (Hello, Option<TcpStream>) {
    let h = |x| (x, None);
    let mut s = match TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return h(Hello::Refused),
        Err(e) if e.kind() == io::ErrorKind::TimedOut => return h(Hello::Silent),
        Err(e) => return h(Hello::Failed(e.to_string())),
    };
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    let mut req = vec![CMD_HELLO];
    req.extend_from_slice(&(CAPS as u64).to_le_bytes());
    req.extend_from_slice(&[0u8; CAPS]);
    if let Err(e) = s.write_all(&req) {
        return h(Hello::Failed(e.to_string()));
    }
    let mut size = [0u8; 8];
    match s.read_exact(&mut size) {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            return h(Hello::Silent);
        }
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return h(Hello::Other(
                "it hung up at HELLO (it expects another request)".into(),
            ));
        }
        Err(e) => return h(Hello::Failed(e.to_string())),
    }
    let n = u64::from_le_bytes(size);
    if !(4..=64).contains(&n) {
        return h(Hello::Other(format!("a {n}-byte HELLO answer")));
    }
    let mut body = vec![0u8; usize::try_from(n).unwrap_or(4)];
    match s.read_exact(&mut body) {
        Ok(()) => (Hello::Version(body[0], body[1], body[2]), Some(s)),
        Err(e) => h(Hello::Failed(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::program::run_in as sh;
    use std::net::TcpListener;

    /// A real RPC server's first answer, played by a socket: the version
    /// read; a server that holds the connection without answering is
    /// silent; a closed port is refused.
    #[test]
    fn hello_against_real_sockets() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = [0u8; 33];
            c.read_exact(&mut req).unwrap();
            let mut rsp = 28u64.to_le_bytes().to_vec();
            rsp.extend_from_slice(&[7, 0, 0, 0]);
            rsp.extend_from_slice(&[0; 24]);
            c.write_all(&rsp).unwrap();
            req
        });
        assert_eq!(hello(addr, Duration::from_secs(5)), Hello::Version(7, 0, 0));
        let req = t.join().unwrap();
        assert_eq!(req[0], 14);
        assert_eq!(u64::from_le_bytes(req[1..9].try_into().unwrap()), 24);
        let busy = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            hello(busy.local_addr().unwrap(), Duration::from_millis(500)),
            Hello::Silent
        );
        let gone = busy.local_addr().unwrap();
        drop(busy);
        assert_eq!(hello(gone, Duration::from_secs(2)), Hello::Refused);
    }

    /// The programs against a fake server (`sleep`, which never listens):
    /// a missing binary is named; one that does not listen is stopped and
    /// reported; state and stop of a real process.
    #[test]
    fn start_names_a_missing_binary_and_a_silent_one() {
        let dir = tempfile::tempdir().unwrap();
        let out = sh(
            &start(),
            &["127.0.0.1", "1", "", "/nonexistent/llama-server"],
            dir.path(),
        );
        assert!(out.contains("no ggml-rpc-server or rpc-server"), "{out}");
        let out = sh(&start(), &["127.0.0.1", "1", "no-such-rpc", ""], dir.path());
        assert!(out.contains("no `no-such-rpc`"), "{out}");
        assert_eq!(sh(&state(), &[], dir.path()), "none");
        assert_eq!(sh(&stop(), &[], dir.path()), "none");
    }

    #[test]
    fn state_and_stop_of_a_frozen_process() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = crate::proc::command("sleep").arg("300").spawn().unwrap();
        let pid = child.id();
        let start = crate::serve::state::Process::of(pid).unwrap().start;
        std::fs::write(dir.path().join("rpc.pid"), format!("{pid} {start}\n")).unwrap();
        assert_eq!(sh(&state(), &[], dir.path()), format!("running {pid}"));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGSTOP,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(sh(&state(), &[], dir.path()), format!("frozen {pid}"));
        let stopper = std::thread::spawn({
            let p = stop();
            let d = dir.path().to_path_buf();
            move || sh(&p, &[], &d)
        });
        let _ = child.wait();
        assert_eq!(stopper.join().unwrap(), format!("stopped {pid}"));
        assert_eq!(sh(&state(), &[], dir.path()), "none");
    }
}

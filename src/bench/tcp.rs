//! halobox's own TCP benchmark: a server (`halobox bench serve`, run on the
//! peer) and a client (here), speaking a small framed protocol.
//!
//! Every connection opens with a 13-byte hello: the magic `HBXBNCH1`, a mode
//! byte and a big-endian `u32` parameter.
//! - echo (1, parameter = message size ≤ 64 KiB): the server echoes each
//!   message; the client times round trips.
//! - sink (2): the client streams bytes, then shuts down its write side; the
//!   server answers with the `u64` count of bytes it received.
//! - bye (3), followed by the run's 32-byte stop token: the server answers
//!   one byte and exits; a wrong token closes the connection and nothing
//!   stops. The server makes the token when it starts and prints it on its
//!   ready line, which only its own client (over ssh) reads.
//!
//! The server is bounded: at most [`MAX_CONNECTIONS`] at once, a timeout on
//! every read and every write (a client that stops reading cannot pin it),
//! and it exits after [`ServeOptions::idle_timeout`] without a connection.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::socket::{self as sock, AddressFamily, SockFlag, SockType, SockaddrIn, sockopt};
use nix::sys::time::TimeVal;

/// The first bytes of every connection.
pub const MAGIC: &[u8; 8] = b"HBXBNCH1";
/// The server's default TCP port.
pub const DEFAULT_PORT: u16 = 5301;
/// Largest echo message the server accepts.
pub const MAX_ECHO_BYTES: u32 = 64 * 1024;
/// Most connections the server serves at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The line the server prints on stdout once it listens (followed by the
/// address, then [`TOKEN_WORD`] and the stop token in hex).
pub const READY_PREFIX: &str = "halobox bench serve: listening on ";
/// The word before the stop token on the ready line.
pub const TOKEN_WORD: &str = " stop-token ";
/// How long a connection may wait on a read or a write by default.
pub const IO_TIMEOUT_S: u64 = 30;
/// Bytes per write in the bandwidth test (iperf3's default for TCP).
pub const WRITE_BYTES: usize = 128 * 1024;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
const IO_TIMEOUT: Duration = Duration::from_secs(IO_TIMEOUT_S);

/// The per-run token that stops a server (32 random bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct StopToken([u8; 32]);

impl std::fmt::Debug for StopToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopToken(********)")
    }
}

impl StopToken {
    /// A new token from the kernel's random source.
    pub fn generate() -> io::Result<StopToken> {
        let mut b = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        Ok(StopToken(b))
    }

    /// Its hex form (as the ready line prints it).
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The token a ready line names.
    pub fn from_ready_line(line: &str) -> Option<StopToken> {
        let (_, hex_text) = line.split_once(TOKEN_WORD)?;
        let bytes = hex::decode(hex_text.trim()).ok()?;
        Some(StopToken(bytes.try_into().ok()?))
    }

    /// Equal to `other`, compared in constant time.
    fn matches(&self, other: &[u8; 32]) -> bool {
        self.0
            .iter()
            .zip(other)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// The server's ready line for `addr` and `token`.
pub fn ready_line(addr: SocketAddr, token: &StopToken) -> String {
    format!("{READY_PREFIX}{addr}{TOKEN_WORD}{}", token.hex())
}

/// What a connection asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Echo messages of the given size.
    Echo(u32),
    /// Count bytes until EOF.
    Sink,
    /// Stop the server.
    Bye,
}

impl Mode {
    /// The 13-byte hello for this mode.
    pub fn hello(self) -> [u8; 13] {
        let (code, param) = match self {
            Mode::Echo(n) => (1u8, n),
            Mode::Sink => (2, 0),
            Mode::Bye => (3, 0),
        };
        let mut h = [0u8; 13];
        h[..8].copy_from_slice(MAGIC);
        h[8] = code;
        h[9..].copy_from_slice(&param.to_be_bytes());
        h
    }

    /// Decodes a hello; `None` for anything else.
    pub fn from_hello(h: &[u8; 13]) -> Option<Mode> {
        if &h[..8] != MAGIC {
            return None;
        }
        let param = u32::from_be_bytes([h[9], h[10], h[11], h[12]]);
        match h[8] {
            1 if (1..=MAX_ECHO_BYTES).contains(&param) => Some(Mode::Echo(param)),
            2 => Some(Mode::Sink),
            3 => Some(Mode::Bye),
            _ => None,
        }
    }
}

/// How `halobox bench serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to listen on.
    pub bind: IpAddr,
    /// Port to listen on (0: any free port).
    pub port: u16,
    /// Exit after this long without any connection.
    pub idle_timeout: Duration,
    /// How long a connection may wait on one read or write.
    pub io_timeout: Duration,
    /// The token a bye must carry.
    pub token: StopToken,
}

/// Why the server stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A client said bye.
    Bye,
    /// No connection for the idle timeout.
    Idle,
}

struct Shared {
    stop: AtomicBool,
    active: AtomicUsize,
    last_activity: Mutex<Instant>,
    wake: Condvar,
    reason: Mutex<Option<StopReason>>,
}

impl Shared {
    fn touch(&self) {
        *self.last_activity.lock().unwrap() = Instant::now();
        self.wake.notify_all();
    }

    fn stop(&self, why: StopReason, addr: SocketAddr) {
        self.reason.lock().unwrap().get_or_insert(why);
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        let _ = TcpStream::connect_timeout(&reachable(addr), Duration::from_secs(1));
    }
}

fn reachable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
    } else {
        addr
    }
}

/// Where `bench serve` listens without `--bind`: this machine's data-plane
/// address (the one address on an RDMA interface), never every interface
/// unasked.
pub fn default_bind(facts: &crate::host::HostFacts) -> Result<IpAddr, String> {
    use crate::dataplane::Selection;
    let why = match crate::dataplane::select(facts, None) {
        Selection::Chosen(dp) => return Ok(IpAddr::V4(dp.ip)),
        Selection::Ambiguous { candidates } => format!(
            "several RDMA interfaces have addresses ({})",
            candidates
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Selection::NoCandidate | Selection::IpNotFound { .. } => {
            "no RDMA interface has an IPv4 address".into()
        }
    };
    Err(format!(
        "cannot tell this machine's data-plane address: {why}\n  hint: pass --bind ADDR (the address the peer reaches; --bind 0.0.0.0 listens on every interface)"
    ))
}

/// Listens, calls `ready` with the bound address, and serves until a client
/// says bye or nothing connects for the idle timeout.
pub fn serve(opts: &ServeOptions, ready: impl FnOnce(SocketAddr)) -> io::Result<StopReason> {
    let listener = TcpListener::bind((opts.bind, opts.port))?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        last_activity: Mutex::new(Instant::now()),
        wake: Condvar::new(),
        reason: Mutex::new(None),
    });
    ready(addr);
    let idle = opts.idle_timeout;
    let watchdog = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            let mut last = shared.last_activity.lock().unwrap();
            loop {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                let quiet = last.elapsed();
                if quiet >= idle && shared.active.load(Ordering::SeqCst) == 0 {
                    drop(last);
                    shared.stop(StopReason::Idle, addr);
                    return;
                }
                let wait = idle.saturating_sub(quiet).max(Duration::from_millis(50));
                last = shared.wake.wait_timeout(last, wait).unwrap().0;
            }
        })
    };
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        shared.touch();
        if shared.active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            continue;
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(&shared);
        let (token, io_timeout) = (opts.token.clone(), opts.io_timeout);
        thread::spawn(move || {
            let outcome = handle(stream, &token, io_timeout);
            shared.active.fetch_sub(1, Ordering::SeqCst);
            shared.touch();
            if let Ok(Mode::Bye) = outcome {
                shared.stop(StopReason::Bye, addr);
            }
        });
    }
    shared.wake.notify_all();
    let _ = watchdog.join();
    let reason = shared.reason.lock().unwrap().unwrap_or(StopReason::Idle);
    Ok(reason)
}

fn handle(mut s: TcpStream, token: &StopToken, io_timeout: Duration) -> io::Result<Mode> {
    s.set_read_timeout(Some(HELLO_TIMEOUT.min(io_timeout)))?;
    s.set_write_timeout(Some(io_timeout))?;
    let mut hello = [0u8; 13];
    s.read_exact(&mut hello)?;
    let mode = Mode::from_hello(&hello)
        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "not a halobox bench hello"))?;
    if mode == Mode::Bye {
        let mut sent = [0u8; 32];
        s.read_exact(&mut sent)?;
        if !token.matches(&sent) {
            return Err(io::Error::new(ErrorKind::InvalidData, "wrong stop token"));
        }
    }
    s.set_read_timeout(Some(io_timeout))?;
    match mode {
        Mode::Echo(size) => {
            s.set_nodelay(true)?;
            let mut buf = vec![0u8; size as usize];
            loop {
                match s.read_exact(&mut buf) {
                    Ok(()) => s.write_all(&buf)?,
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(mode),
                    Err(e) => return Err(e),
                }
            }
        }
        Mode::Sink => {
            let mut buf = vec![0u8; 1 << 20];
            let mut total: u64 = 0;
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => total += n as u64,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            s.write_all(&total.to_be_bytes())?;
        }
        Mode::Bye => s.write_all(&[1])?,
    }
    Ok(mode)
}

/// Where the client connects: the peer's address and, optionally, the local
/// address to send from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The server.
    pub peer: SocketAddr,
    /// Local source address (bind before connect).
    pub local: Option<Ipv4Addr>,
}

/// Connects to the server, from `target.local` when given, within `timeout`.
pub fn connect(target: &Target, timeout: Duration) -> io::Result<TcpStream> {
    let stream = match (target.local, target.peer) {
        (None, peer) => TcpStream::connect_timeout(&peer, timeout)?,
        (Some(local), SocketAddr::V4(peer)) => {
            let fd: OwnedFd = sock::socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )?;
            sock::bind(
                fd.as_raw_fd(),
                &SockaddrIn::from(SocketAddrV4::new(local, 0)),
            )?;
            // Linux bounds a blocking connect() by the send timeout.
            sock::setsockopt(
                &fd,
                sockopt::SendTimeout,
                &TimeVal::from(libc_timeval(timeout)),
            )?;
            sock::connect(fd.as_raw_fd(), &SockaddrIn::from(peer))?;
            sock::setsockopt(&fd, sockopt::SendTimeout, &TimeVal::new(0, 0))?;
            TcpStream::from(fd)
        }
        (Some(_), SocketAddr::V6(_)) => {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "a local IPv4 source needs an IPv4 peer",
            ));
        }
    };
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

fn libc_timeval(d: Duration) -> nix::libc::timeval {
    nix::libc::timeval {
        tv_sec: d.as_secs() as nix::libc::time_t,
        tv_usec: d.subsec_micros() as nix::libc::suseconds_t,
    }
}

/// Connects, retrying while the server is not yet listening (connection
/// refused), at most `attempts` times with a growing pause (no fixed sleep).
pub fn connect_retrying(target: &Target, attempts: u32) -> io::Result<TcpStream> {
    let mut pause = Duration::from_millis(20);
    let mut last = None;
    for _ in 0..attempts.max(1) {
        match connect(target, Duration::from_secs(5)) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                last = Some(e);
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no connection attempt made")))
}

/// How the latency test runs.
#[derive(Debug, Clone, Copy)]
pub struct LatencyOptions {
    /// Bytes per message.
    pub message_bytes: u32,
    /// Round trips done before measuring.
    pub warmup: u32,
    /// Round trips measured at most.
    pub samples: u32,
    /// Measuring stops after this long even with fewer samples.
    pub max_time: Duration,
}

/// Measures round-trip times (nanoseconds) of small messages.
pub fn latency(target: &Target, opts: &LatencyOptions) -> io::Result<Vec<u64>> {
    let mut s = connect_retrying(target, 10)?;
    s.set_nodelay(true)?;
    s.write_all(&Mode::Echo(opts.message_bytes).hello())?;
    let out = vec![0x5au8; opts.message_bytes as usize];
    let mut back = vec![0u8; opts.message_bytes as usize];
    for _ in 0..opts.warmup {
        s.write_all(&out)?;
        s.read_exact(&mut back)?;
    }
    let mut rtts = Vec::with_capacity(opts.samples as usize);
    let start = Instant::now();
    while rtts.len() < opts.samples as usize && start.elapsed() < opts.max_time {
        let t = Instant::now();
        s.write_all(&out)?;
        s.read_exact(&mut back)?;
        rtts.push(t.elapsed().as_nanos() as u64);
    }
    if back != out {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            "the echo differs from the message",
        ));
    }
    s.shutdown(Shutdown::Write)?;
    Ok(rtts)
}

/// One stream's outcome in the bandwidth test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamResult {
    /// Bytes the server confirmed it received.
    pub bytes: u64,
    /// From the first write to the server's confirmation.
    pub seconds: f64,
}

/// Streams for `duration` over `streams` connections at once; each result
/// counts only bytes the server confirmed.
pub fn bandwidth(
    target: &Target,
    streams: u32,
    duration: Duration,
) -> io::Result<Vec<StreamResult>> {
    let streams = streams.max(1) as usize;
    let mut conns = Vec::with_capacity(streams);
    for _ in 0..streams {
        let mut s = connect_retrying(target, 10)?;
        s.write_all(&Mode::Sink.hello())?;
        conns.push(s);
    }
    let barrier = Arc::new(Barrier::new(streams));
    let handles: Vec<_> = conns
        .into_iter()
        .map(|mut s| {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || -> io::Result<StreamResult> {
                let buf = vec![0xa5u8; WRITE_BYTES];
                barrier.wait();
                let start = Instant::now();
                let mut sent: u64 = 0;
                while start.elapsed() < duration {
                    s.write_all(&buf)?;
                    sent += buf.len() as u64;
                }
                s.shutdown(Shutdown::Write)?;
                let mut count = [0u8; 8];
                s.read_exact(&mut count)?;
                let seconds = start.elapsed().as_secs_f64();
                let bytes = u64::from_be_bytes(count);
                if bytes != sent {
                    return Err(io::Error::new(
                        ErrorKind::InvalidData,
                        format!("the server counted {bytes} bytes, {sent} were sent"),
                    ));
                }
                Ok(StreamResult { bytes, seconds })
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| io::Error::other("a stream thread panicked"))?
        })
        .collect()
}

/// Asks the server to exit, with the run's stop token.
pub fn bye(target: &Target, token: &StopToken) -> io::Result<()> {
    let mut s = connect(target, Duration::from_secs(5))?;
    let mut msg = Mode::Bye.hello().to_vec();
    msg.extend_from_slice(&token.0);
    s.write_all(&msg)?;
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack)?;
    Ok(())
}

/// The raw latency log: a header line, then one round-trip time in ns per line.
pub fn format_latency_log(rtts_ns: &[u64]) -> String {
    let mut out = String::from("# halobox tcp latency: round-trip time in ns per message\n");
    for r in rtts_ns {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    out
}

/// Parses [`format_latency_log`] output.
pub fn parse_latency_log(text: &str) -> Result<Vec<u64>, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.trim()
                .parse::<u64>()
                .map_err(|_| format!("not a round-trip time: {l:?}"))
        })
        .collect()
}

/// The raw bandwidth log: a header line, then `bytes seconds` per stream.
pub fn format_bandwidth_log(streams: &[StreamResult]) -> String {
    let mut out = String::from("# halobox tcp bandwidth: bytes seconds, one line per stream\n");
    for s in streams {
        out.push_str(&format!("{} {:.9}\n", s.bytes, s.seconds));
    }
    out
}

/// Parses [`format_bandwidth_log`] output.
pub fn parse_bandwidth_log(text: &str) -> Result<Vec<StreamResult>, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let bytes = it.next().and_then(|b| b.parse::<u64>().ok());
            let seconds = it.next().and_then(|s| s.parse::<f64>().ok());
            match (bytes, seconds, it.next()) {
                (Some(bytes), Some(seconds), None) if seconds.is_finite() && seconds >= 0.0 => {
                    Ok(StreamResult { bytes, seconds })
                }
                _ => Err(format!("not `bytes seconds`: {l:?}")),
            }
        })
        .collect()
}

/// Total Gb/s of streams that ran at once: all bytes over the longest stream.
pub fn aggregate_gbps(streams: &[StreamResult]) -> f64 {
    let bytes: u64 = streams.iter().map(|s| s.bytes).sum();
    let secs = streams.iter().map(|s| s.seconds).fold(0.0, f64::max);
    crate::units::bytes_to_gbps(bytes, secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trip() {
        for m in [Mode::Echo(64), Mode::Sink, Mode::Bye] {
            assert_eq!(Mode::from_hello(&m.hello()), Some(m));
        }
        assert_eq!(
            Mode::from_hello(&Mode::Echo(MAX_ECHO_BYTES + 1).hello()),
            None
        );
        assert_eq!(Mode::from_hello(&Mode::Echo(0).hello()), None);
        let mut bad = Mode::Sink.hello();
        bad[0] = b'X';
        assert_eq!(Mode::from_hello(&bad), None);
    }

    #[test]
    fn logs_round_trip() {
        let r = vec![1200, 35_000, 7];
        assert_eq!(parse_latency_log(&format_latency_log(&r)).unwrap(), r);
        let s = vec![
            StreamResult {
                bytes: 1_250_000_000,
                seconds: 1.0,
            },
            StreamResult {
                bytes: 1_250_000_000,
                seconds: 2.0,
            },
        ];
        let back = parse_bandwidth_log(&format_bandwidth_log(&s)).unwrap();
        assert_eq!(back, s);
        // 2.5 GB over the longest stream's 2 s = 10 Gb/s
        assert!((aggregate_gbps(&back) - 10.0).abs() < 1e-9);
        assert!(parse_bandwidth_log("12 x\n").is_err());
        assert!(parse_latency_log("-1\n").is_err());
    }

    #[test]
    fn ready_line_round_trip() {
        let t = StopToken::generate().unwrap();
        let line = ready_line("10.0.0.1:5301".parse().unwrap(), &t);
        assert!(line.starts_with(READY_PREFIX));
        assert_eq!(StopToken::from_ready_line(&line), Some(t.clone()));
        assert_eq!(format!("{t:?}"), "StopToken(********)");
        assert!(t.matches(&t.0) && !t.matches(&[0; 32]));
        assert_eq!(StopToken::from_ready_line(READY_PREFIX), None);
    }

    #[test]
    fn loopback_server_and_client() {
        let (tx, rx) = std::sync::mpsc::channel();
        let token = StopToken::generate().unwrap();
        let opts = ServeOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            idle_timeout: Duration::from_secs(20),
            io_timeout: IO_TIMEOUT,
            token: token.clone(),
        };
        let server = thread::spawn(move || serve(&opts, |a| tx.send(a).unwrap()));
        let addr = rx.recv().unwrap();
        let t = Target {
            peer: addr,
            local: Some(Ipv4Addr::LOCALHOST),
        };
        let rtts = latency(
            &t,
            &LatencyOptions {
                message_bytes: 64,
                warmup: 10,
                samples: 200,
                max_time: Duration::from_secs(5),
            },
        )
        .unwrap();
        assert_eq!(rtts.len(), 200);
        let bw = bandwidth(&t, 2, Duration::from_millis(200)).unwrap();
        assert_eq!(bw.len(), 2);
        assert!(bw.iter().all(|s| s.bytes > 0 && s.seconds >= 0.2));
        assert!(bye(&t, &StopToken([7; 32])).is_err());
        bye(&t, &token).unwrap();
        assert_eq!(server.join().unwrap().unwrap(), StopReason::Bye);
    }

    #[test]
    fn idle_server_exits() {
        let opts = ServeOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            idle_timeout: Duration::from_millis(200),
            io_timeout: IO_TIMEOUT,
            token: StopToken::generate().unwrap(),
        };
        assert_eq!(serve(&opts, |_| {}).unwrap(), StopReason::Idle);
    }
}

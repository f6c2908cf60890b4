//! A small, bounded HTTP/1.1 server for `GET /metrics`: at most
//! [`MAX_CONNECTIONS`] connections at once (the next waits in the listen
//! queue), the request head capped at [`MAX_REQUEST_BYTES`] and read within
//! [`HEAD_DEADLINE`] (a client that trickles it is answered 408), writes
//! time out after [`IO_TIMEOUT`], every response closes the connection. It
//! serves nothing else and reads no body.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::dataplane::{self, Selection};
use crate::host::HostFacts;

/// The port `halobox metrics` listens on unless `--listen` says otherwise.
pub const DEFAULT_PORT: u16 = 9837;
/// Largest request head read; a longer one is answered 431.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Write timeout of one connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the whole request head may take to arrive.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// The Content-Type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why no address to listen on could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// `--listen` named every interface.
    #[error(
        "--listen {0} would listen on every interface\n  hint: give the node's data-plane address (`--listen 192.168.100.1:{DEFAULT_PORT}`), or 127.0.0.1 for this host only"
    )]
    Unspecified(SocketAddr),
    /// No `--listen`, and the data plane could not be resolved.
    #[error(
        "no data-plane address to listen on: {0}\n  hint: pass `--listen ADDR:PORT` with this node's data-plane address (`halobox doctor` shows it)"
    )]
    NoDataPlane(String),
}

/// Whether listening on `ip` listens on every interface: `0.0.0.0`, `::`,
/// and the IPv6 forms of `0.0.0.0` (IPv4-mapped `::ffff:0.0.0.0`, which
/// is `::ffff:0:0`; a dual-stack socket bound there takes every IPv4
/// address).
pub fn every_interface(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_unspecified() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_unspecified())
        }
    }
}

/// The address to listen on: `listen` when given (never one on every
/// interface, [`every_interface`]), else the data-plane address on
/// [`DEFAULT_PORT`].
pub fn listen_address(
    facts: &HostFacts,
    listen: Option<SocketAddr>,
) -> Result<SocketAddr, ListenError> {
    if let Some(addr) = listen {
        if every_interface(addr.ip()) {
            return Err(ListenError::Unspecified(addr));
        }
        return Ok(addr);
    }
    match dataplane::select(facts, None) {
        Selection::Chosen(dp) => Ok(SocketAddr::new(IpAddr::V4(dp.ip), DEFAULT_PORT)),
        Selection::Ambiguous { candidates } => Err(ListenError::NoDataPlane(format!(
            "several RDMA interfaces have addresses ({})",
            candidates
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        Selection::NoCandidate | Selection::IpNotFound { .. } => Err(ListenError::NoDataPlane(
            "no RDMA interface has an IPv4 address".into(),
        )),
    }
}

/// The interface that holds `ip` (whose netdev counters a scrape exports).
pub fn interface_for(facts: &HostFacts, ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => facts.network.interface_with_ip(v4).map(|i| i.name.clone()),
        IpAddr::V6(_) => None,
    }
}

/// Answers connections on `listener` until it fails, each in a thread of
/// its own, at most [`MAX_CONNECTIONS`] at once; `scrape` makes each
/// `/metrics` body. A connection that misbehaves is answered or dropped,
/// never fatal.
pub fn serve(listener: &TcpListener, scrape: impl Fn() -> String + Sync) -> std::io::Result<()> {
    let busy = Slots {
        taken: Mutex::new(0),
        freed: Condvar::new(),
    };
    std::thread::scope(|s| {
        loop {
            busy.take();
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) => {
                    busy.give_back();
                    return Err(e);
                }
            };
            let (busy, scrape) = (&busy, &scrape);
            s.spawn(move || {
                if let Err(e) = answer(stream, scrape) {
                    eprintln!("halobox metrics: connection: {e}");
                }
                busy.give_back();
            });
        }
    })
}

/// The connections being served, at most [`MAX_CONNECTIONS`].
struct Slots {
    taken: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    /// Waits for a free slot and takes it.
    fn take(&self) {
        let mut n = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= MAX_CONNECTIONS {
            n = self.freed.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
    }

    fn give_back(&self) {
        let mut n = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
        self.freed.notify_one();
    }
}

/// What to answer to a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics`.
    Metrics,
    /// Another path.
    NotFound,
    /// Another method.
    MethodNotAllowed,
    /// Not an HTTP request line.
    BadRequest,
}

/// Routes a request head (only its first line matters).
pub fn route(head: &[u8]) -> Route {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    if method != "GET" {
        return Route::MethodNotAllowed;
    }
    let path = target.split('?').next().unwrap_or_default();
    if path == "/metrics" {
        Route::Metrics
    } else {
        Route::NotFound
    }
}

/// How reading a request head ended.
enum Head {
    /// The head, whole.
    Complete(Vec<u8>),
    /// Past [`MAX_REQUEST_BYTES`].
    TooLarge,
    /// Not whole within [`HEAD_DEADLINE`].
    TooSlow,
    /// The client closed the connection first.
    Closed,
}

/// Reads a request head, all of it within [`HEAD_DEADLINE`].
fn read_head(stream: &mut TcpStream) -> std::io::Result<Head> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Ok(Head::Complete(head));
        }
        if head.len() >= MAX_REQUEST_BYTES {
            return Ok(Head::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Head::TooSlow);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(Head::Closed),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Head::TooSlow);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn answer(mut stream: TcpStream, scrape: &impl Fn() -> String) -> std::io::Result<()> {
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let (status, extra, body) = match read_head(&mut stream)? {
        Head::Closed => return Ok(()),
        Head::TooLarge => (
            "431 Request Header Fields Too Large",
            "",
            "request head too large\n".to_string(),
        ),
        Head::TooSlow => (
            "408 Request Timeout",
            "",
            format!(
                "the request head took longer than {} s\n",
                HEAD_DEADLINE.as_secs()
            ),
        ),
        Head::Complete(head) => match route(&head) {
            Route::Metrics => ("200 OK", "", scrape()),
            Route::NotFound => (
                "404 Not Found",
                "",
                "halobox metrics serves /metrics\n".into(),
            ),
            Route::MethodNotAllowed => (
                "405 Method Not Allowed",
                "Allow: GET\r\n",
                "only GET /metrics\n".into(),
            ),
            Route::BadRequest => ("400 Bad Request", "", "not an HTTP/1 request\n".into()),
        },
    };
    let content_type = if status.starts_with("200") {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_interface_in_any_form() {
        for every in [
            "0.0.0.0",
            "::",
            "::ffff:0.0.0.0",
            "::ffff:0:0",
            "0:0:0:0:0:ffff:0:0",
        ] {
            assert!(every_interface(every.parse().unwrap()), "{every}");
        }
        for one in [
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "10.0.0.1",
            "fe80::1",
        ] {
            assert!(!every_interface(one.parse().unwrap()), "{one}");
        }
    }

    #[test]
    fn routes() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics
        );
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b"\xff\xfe\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"GET /metrics\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"GET /metrics SPDY/3\r\n\r\n"), Route::BadRequest);
    }
}

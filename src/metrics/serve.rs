//! A small, bounded HTTP/1.1 server for `GET /metrics`: one connection at a
//! time, the request head capped at [`MAX_REQUEST_BYTES`], reads and writes
//! time out after [`IO_TIMEOUT`], every response closes the connection. It
//! serves nothing else and reads no body.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::dataplane::{self, Selection};
use crate::host::HostFacts;

/// The port `halobox metrics` listens on unless `--listen` says otherwise.
pub const DEFAULT_PORT: u16 = 9837;
/// Largest request head read; a longer one is answered 431.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// Read and write timeout of one connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
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

/// Answers connections on `listener` until it fails; `scrape` makes each
/// `/metrics` body. A connection that misbehaves is answered or dropped,
/// never fatal.
pub fn serve(listener: &TcpListener, scrape: impl Fn() -> String) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept()?;
        if let Err(e) = answer(stream, &scrape) {
            eprintln!("halobox metrics: connection: {e}");
        }
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

fn answer(mut stream: TcpStream, scrape: &impl Fn() -> String) -> std::io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            break true;
        }
        if head.len() >= MAX_REQUEST_BYTES {
            break false;
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    };
    let (status, extra, body) = if !complete {
        (
            "431 Request Header Fields Too Large",
            "",
            "request head too large\n".to_string(),
        )
    } else {
        match route(&head) {
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
        }
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

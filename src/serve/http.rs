//! The few HTTP requests `serve` makes to the engine's OpenAI API on the
//! head (`/health`, `/v1/models`, one tiny completion): HTTP/1.1 with
//! `Connection: close` over a plain TCP stream, every step bounded in time,
//! the body capped.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The most of a body that is read.
const BODY_LIMIT: u64 = 1 << 20;

/// An answer: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The body (lossy UTF-8, at most 1 MiB).
    pub body: String,
}

/// `GET path` (with `Authorization: Bearer KEY` when `key` is given).
pub fn get(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    timeout: Duration,
) -> io::Result<Reply> {
    request(addr, "GET", path, None, key, timeout)
}

/// `POST path` with a JSON body.
pub fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &str,
    key: Option<&str>,
    timeout: Duration,
) -> io::Result<Reply> {
    request(addr, "POST", path, Some(body), key, timeout)
}

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    key: Option<&str>,
    timeout: Duration,
) -> io::Result<Reply> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n"
    );
    if let Some(k) = key {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    if let Some(b) = body {
        s.write_all(b.as_bytes())?;
    }
    let mut raw = Vec::new();
    s.take(BODY_LIMIT).read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an HTTP answer"))
}

/// Status and body of a raw HTTP/1.x answer (chunked bodies joined).
fn parse(raw: &[u8]) -> Option<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:")
            && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some(Reply { status, body })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..n.min(rest.len())]);
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_answers() {
        let r = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{}"));
        let r = parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n").unwrap();
        assert_eq!(r.body, "{\"a\":1}");
        assert!(parse(b"SSH-2.0-OpenSSH\r\n").is_none());
    }

    /// A real listener that answers once.
    #[test]
    fn talks_to_a_real_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = c.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
            req
        });
        let r = get(addr, "/health", Some("k"), Duration::from_secs(5)).unwrap();
        assert_eq!(r.status, 200);
        let req = t.join().unwrap();
        assert!(req.starts_with("GET /health HTTP/1.1\r\n"));
        assert!(req.contains("Authorization: Bearer k\r\n"));
    }
}

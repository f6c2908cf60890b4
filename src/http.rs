//! The one plain-HTTP/1.1 client halobox has for engines and exporters
//! (the serving API's `/health`, `/v1/models`, `/slots`, a tiny completion,
//! a node's `/metrics`): one request per connection over hyper.
//! Synchronous callers get bounded requests ([`get`], [`post_json`]): one
//! deadline over the connect, the request and the body, the answer's head
//! at [`HEAD_LIMIT`], the body cut at a cap. Async callers ([`send`],
//! [`read_body`]: `bench serving`'s many streamed completions) get the same
//! request with the head bounded, and set their own deadlines. The API key
//! goes in an `Authorization` header and nowhere else (no error names it),
//! and an error's text is printable. [`get_ours`], [`post_json_ours`] and
//! [`send_ours`] send it only to a listener proven to be this user's (or
//! root's): the connection's far end looked up in this machine's socket
//! table ([`crate::host::sockets`]) before a byte is written.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;

/// The most of an answer's head (status line and headers) that is read.
pub const HEAD_LIMIT: usize = 64 << 10;

/// The words of a [`Why::NotOurs`] whose listener is on another machine
/// (no socket of this machine's table is the connection's far end).
pub const NOT_HERE: &str = "is not a socket on this machine";

/// The most of a body [`get`] and [`post_json`] keep.
pub const BODY_LIMIT: usize = 1 << 20;

/// An answer: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The body (lossy UTF-8, cut at the request's cap).
    pub body: String,
}

/// Why a request got no answer: the address and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// Where the request went.
    pub addr: SocketAddr,
    /// What went wrong there.
    pub why: Why,
}

/// What went wrong (never with the API key in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The connection could not be made (refused, unreachable).
    Connect(String),
    /// The whole request took longer than this.
    Timeout(Duration),
    /// The peer closed or broke the connection before the answer ended.
    Broken(String),
    /// The answer is not HTTP/1.x, or its head is over [`HEAD_LIMIT`].
    NotHttp(String),
    /// The path or the key cannot go in a request.
    BadRequest,
    /// The listener is not proven this user's: nothing was sent (why).
    NotOurs(String),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Connect(e) => write!(f, "{e}"),
            Why::Timeout(t) => write!(f, "no answer within {t:?}"),
            Why::Broken(e) => write!(f, "the connection broke: {e}"),
            Why::NotHttp(e) => write!(f, "not an HTTP answer ({e})"),
            Why::BadRequest => f.write_str(
                "the request cannot be made (the path or the API key holds characters a header cannot)",
            ),
            Why::NotOurs(why) => write!(f, "the API key was not sent: {why}"),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.addr, self.why)
    }
}

impl std::error::Error for HttpError {}

/// `GET path` within `timeout` (with `Authorization: Bearer KEY` when `key`
/// is given); the body cut at [`BODY_LIMIT`].
pub fn get(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    timeout: Duration,
) -> Result<Reply, HttpError> {
    get_up_to(addr, path, key, timeout, BODY_LIMIT)
}

/// [`get`] with the body cut at `max_body` bytes.
pub fn get_up_to(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
    timeout: Duration,
    max_body: usize,
) -> Result<Reply, HttpError> {
    blocking(addr, Method::GET, path, None, key, timeout, max_body, false)
}

/// [`get_up_to`] with the key, sent only when the listener at `addr` is
/// proven this user's or root's ([`Why::NotOurs`] else, and nothing sent).
pub fn get_ours(
    addr: SocketAddr,
    path: &str,
    key: &str,
    timeout: Duration,
    max_body: usize,
) -> Result<Reply, HttpError> {
    blocking(
        addr,
        Method::GET,
        path,
        None,
        Some(key),
        timeout,
        max_body,
        true,
    )
}

/// [`post_json`] with the key, sent only when the listener at `addr` is
/// proven this user's or root's ([`Why::NotOurs`] else, and nothing sent).
pub fn post_json_ours(
    addr: SocketAddr,
    path: &str,
    body: &str,
    key: &str,
    timeout: Duration,
) -> Result<Reply, HttpError> {
    blocking(
        addr,
        Method::POST,
        path,
        Some(body.to_string()),
        Some(key),
        timeout,
        BODY_LIMIT,
        true,
    )
}

/// `POST path` with a JSON body within `timeout`; the answer's body cut at
/// [`BODY_LIMIT`].
pub fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &str,
    key: Option<&str>,
    timeout: Duration,
) -> Result<Reply, HttpError> {
    blocking(
        addr,
        Method::POST,
        path,
        Some(body.to_string()),
        key,
        timeout,
        BODY_LIMIT,
        false,
    )
}

/// Runs one request on a runtime of its own (shut down without waiting, so
/// nothing outlives the deadline); not for a caller already on a tokio
/// runtime (that one uses [`send`]). With `prove`, only to a listener
/// [`ours`].
#[allow(clippy::too_many_arguments)]
fn blocking(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<String>,
    key: Option<&str>,
    timeout: Duration,
    max_body: usize,
    prove: bool,
) -> Result<Reply, HttpError> {
    let fail = |why| HttpError { addr, why };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(Why::Connect(format!("no runtime for the request: {e}"))))?;
    let ask = async {
        let resp = send_to(&addr.to_string(), method, path, body, key, prove).await?;
        let status = resp.status().as_u16();
        let body = read_body(resp, max_body).await?;
        Ok(Reply { status, body })
    };
    let out = rt
        .block_on(async { tokio::time::timeout(timeout, ask).await })
        .unwrap_or(Err(Why::Timeout(timeout)));
    rt.shutdown_background();
    out.map_err(fail)
}

/// Sends one request on a new connection to `authority` (`HOST:PORT`) and
/// returns the answer with its body unread, for async callers (a streamed
/// answer is read frame by frame). A JSON `body` is posted with
/// `Content-Type: application/json`; `key` goes in `Authorization:
/// Bearer`. Unbounded in time: the caller sets the deadline.
pub async fn send(
    authority: &str,
    method: Method,
    path: &str,
    body: Option<String>,
    key: Option<&str>,
) -> Result<Response<Incoming>, Why> {
    send_to(authority, method, path, body, key, false).await
}

/// [`send`] with the key, sent only when the listener at `authority` is
/// proven this user's or root's exactly as [`get_ours`] proves it: on this
/// machine and owned by this user or root, else [`Why::NotOurs`] (another
/// user's socket, or one not on this machine) and nothing written on the
/// connection. For async callers that send the key (`bench serving`'s and
/// `bench soak`'s streamed completions).
pub async fn send_ours(
    authority: &str,
    method: Method,
    path: &str,
    body: Option<String>,
    key: &str,
) -> Result<Response<Incoming>, Why> {
    send_to(authority, method, path, body, Some(key), true).await
}

/// [`send`]; with `prove`, the connection's far end must be [`ours`]
/// before anything is written on it.
async fn send_to(
    authority: &str,
    method: Method,
    path: &str,
    body: Option<String>,
    key: Option<&str>,
    prove: bool,
) -> Result<Response<Incoming>, Why> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("Host", authority)
        .header("Connection", "close");
    if let Some(k) = key {
        req = req.header("Authorization", format!("Bearer {k}"));
    }
    if body.is_some() {
        req = req
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|_| Why::BadRequest)?;
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .map_err(|e| Why::Connect(crate::remote::printable(&e.to_string())))?;
    if prove {
        ours(&stream).await?;
    }
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .max_header_size(HEAD_LIMIT)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| Why::Broken(shown(&e)))?;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(|e| {
        if e.is_parse() || e.is_parse_too_large() {
            Why::NotHttp(shown(&e))
        } else {
            Why::Broken(shown(&e))
        }
    })
}

/// Whether the far end of `stream` is a socket of this user's or root's
/// on this machine (root reads the key's file and the engine's environment
/// anyway): the engine's listener, whose container runs as this user
/// (toolbox, distrobox, rootless podman's root) or as root (rootful
/// podman and docker). The accepted socket shows in the table as the
/// handshake ends, so it is looked for up to 0.3 s.
async fn ours(stream: &tokio::net::TcpStream) -> Result<(), Why> {
    let (Ok(local), Ok(peer)) = (stream.local_addr(), stream.peer_addr()) else {
        return Err(Why::NotOurs("the connection has no addresses".into()));
    };
    let me = nix::unistd::getuid().as_raw();
    for _ in 0..30 {
        match crate::host::sockets::peer_owner(local, peer) {
            Some(uid) if uid == me || uid == 0 => return Ok(()),
            Some(uid) => {
                return Err(Why::NotOurs(format!(
                    "not ours: {peer} is a socket of {}, not of this user (uid {me}) nor root, so it is not the serve's engine",
                    holder(uid)
                )));
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    Err(Why::NotOurs(format!(
        "{peer} {NOT_HERE}: whose it is cannot be proven here (run this on the head)"
    )))
}

/// A socket's owner in words: `uid N (NAME)`, or `uid N` when this
/// machine has no name for it.
fn holder(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("uid {uid} ({})", crate::remote::printable(&u.name)),
        _ => format!("uid {uid}"),
    }
}

/// An answer's body as lossy UTF-8, cut at `max` bytes (the rest is not
/// read).
pub async fn read_body(resp: Response<Incoming>, max: usize) -> Result<String, Why> {
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while out.len() < max {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame.map_err(|e| Why::Broken(shown(&e)))?.into_data() {
            out.extend_from_slice(&data);
        }
    }
    out.truncate(max);
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A hyper error as printable text.
fn shown(e: &hyper::Error) -> String {
    crate::remote::printable(&e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    const KEY: &str = "sekrit-key-42";

    /// A listener on a free local port whose one connection `serve` handles
    /// (after the request was read).
    fn server(serve: impl FnOnce(TcpStream, String) + Send + 'static) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            serve(c, String::from_utf8_lossy(&req).into_owned());
        });
        addr
    }

    fn closed_port() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    #[test]
    fn plain_chunked_and_close_delimited_answers() {
        let (tx, rx) = std::sync::mpsc::channel();
        let addr = server(move |mut c, req| {
            tx.send(req).unwrap();
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                .unwrap();
        });
        let r = get(addr, "/health", Some("k"), Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{}"));
        let req = rx.recv().unwrap();
        assert!(req.starts_with("GET /health HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("Authorization: Bearer k\r\n"), "{req}");
        assert!(req.contains(&format!("Host: {addr}\r\n")), "{req}");

        let addr = server(|mut c, _| {
            c.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n")
                .unwrap();
        });
        let r = get(addr, "/", None, Duration::from_secs(5)).unwrap();
        assert_eq!(r.body, "{\"a\":1}");

        let addr = server(|mut c, _| {
            c.write_all(b"HTTP/1.0 404 Not Found\r\n\r\nno").unwrap();
        });
        let r = get(addr, "/metrics", None, Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "no"));
    }

    #[test]
    fn a_post_carries_its_json() {
        let (tx, rx) = std::sync::mpsc::channel();
        let addr = server(move |mut c, mut req| {
            let mut buf = [0u8; 64];
            while !req.ends_with("{\"a\": 1}") {
                let n = c.read(&mut buf).unwrap();
                req.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
            tx.send(req).unwrap();
            c.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        });
        let r = post_json(
            addr,
            "/v1/completions",
            "{\"a\": 1}",
            None,
            Duration::from_secs(5),
        );
        assert_eq!(r.unwrap().status, 201);
        let req = rx.recv().unwrap();
        assert!(
            req.starts_with("POST /v1/completions HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.contains("Content-Type: application/json\r\n"), "{req}");
        assert!(req.contains("Content-Length: 8\r\n"), "{req}");
        assert!(!req.contains("Authorization"), "{req}");
    }

    #[test]
    fn a_closed_port_says_so_without_the_key() {
        let addr = closed_port();
        let e = get(addr, "/health", Some(KEY), Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e.why, Why::Connect(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.starts_with(&format!("{addr}: ")), "{text}");
        assert!(text.to_lowercase().contains("refused"), "{text}");
        assert!(
            !text.contains(KEY) && !format!("{e:?}").contains(KEY),
            "{e:?}"
        );
    }

    #[test]
    fn a_key_that_cannot_be_a_header_is_refused_unshown() {
        let addr = closed_port();
        let bad = format!("{KEY}\r\nX-Evil: 1");
        let e = get(addr, "/", Some(&bad), Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.why, Why::BadRequest);
        assert!(!e.to_string().contains(KEY) && !format!("{e:?}").contains(KEY));
    }

    #[test]
    fn the_deadline_covers_a_trickle_and_a_silence() {
        let addr = server(|mut c, _| {
            for _ in 0..50 {
                if c.write_all(b"HTTP/1.1 200 OK\r\nX-A: b\r\n").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let t0 = Instant::now();
        let e = get(addr, "/metrics", Some(KEY), Duration::from_millis(500)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert_eq!(e.why, Why::Timeout(Duration::from_millis(500)));
        assert_eq!(e.to_string(), format!("{addr}: no answer within 500ms"));

        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t0 = Instant::now();
        let e = get(addr, "/health", None, Duration::from_millis(300)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(matches!(e.why, Why::Timeout(_)), "{e:?}");
        drop(l);
    }

    #[test]
    fn heads_and_bodies_are_bounded() {
        let addr = server(|mut c, _| {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\n");
            let long = format!("X-Big: {}\r\n", "a".repeat(HEAD_LIMIT));
            let _ = c.write_all(long.as_bytes());
        });
        let e = get(addr, "/", None, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e.why, Why::NotHttp(_)), "{e:?}");

        // An endless body is cut at the cap, and the read stops there.
        let addr = server(|mut c, _| {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\n\r\n");
            let chunk = [b'x'; 8192];
            while c.write_all(&chunk).is_ok() {}
        });
        let r = get_up_to(addr, "/", None, Duration::from_secs(5), 100_000).unwrap();
        assert_eq!((r.status, r.body.len()), (200, 100_000));

        let addr = server(|mut c, _| {
            let _ = c.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\r\n");
        });
        let e = get(addr, "/", None, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e.why, Why::NotHttp(_)), "{e:?}");
    }

    #[test]
    fn a_peer_that_hangs_up_breaks_the_request() {
        let addr = server(|c, _| drop(c));
        let e = get(addr, "/", Some(KEY), Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e.why, Why::Broken(_)), "{e:?}");
        assert!(!e.to_string().contains(KEY));
    }

    /// Our own listener gets the key; a listener of another user's (uid
    /// 65534 through `setpriv`, which records every byte it is sent) gets
    /// nothing at all, and the error says whose it is.
    #[test]
    fn the_key_goes_only_to_our_own_listener() {
        let (tx, rx) = std::sync::mpsc::channel();
        let addr = server(move |mut c, req| {
            tx.send(req).unwrap();
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        });
        let r = get_ours(addr, "/metrics", KEY, Duration::from_secs(5), 100).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        assert!(rx.recv().unwrap().contains(&format!("Bearer {KEY}")));

        if !nix::unistd::getuid().is_root() {
            eprintln!("skipped the squatter: needs root to run one as uid 65534");
            return;
        }
        let squatter = crate::host::sockets::Squatter::start();
        let at = squatter.addr;
        let got = get_ours(at, "/metrics", KEY, Duration::from_secs(5), 100);
        let posted = post_json_ours(at, "/v1/completions", "{}", KEY, Duration::from_secs(5));
        let heard = squatter.heard();
        for e in [got.unwrap_err(), posted.unwrap_err()] {
            assert!(
                matches!(&e.why, Why::NotOurs(w) if w.contains("uid 65534")),
                "{e}"
            );
            assert!(!e.to_string().contains(KEY));
        }
        assert_eq!(
            String::from_utf8_lossy(&heard),
            "||",
            "the squatter was sent more than two closed connections"
        );
    }
}

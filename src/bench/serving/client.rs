//! `bench serving`'s requests to the endpoint through [`crate::http`], one
//! connection per request (as a user's client would open): small JSON
//! requests, and a streamed completion timed chunk by chunk. The key goes
//! in an `Authorization` header and nowhere else, and only on a connection
//! whose listener is proven this user's or root's ([`http::send_ours`], as
//! the serve's own probes send it): another user's listener on the port, or
//! one on another machine, gets no byte ([`Failure::NotOurs`]).

use std::fmt;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Response};

use super::sse::{self, Event, Lines};
use crate::http::{self, Why};

/// The most of a JSON answer that is read.
const BODY_LIMIT: usize = 4 << 20;

/// The API key (its `Debug` never shows it).
#[derive(Clone)]
pub struct Key(pub String);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Nothing answered at the address (refused, unreachable, name unknown).
    Unreachable(String),
    /// The connection broke, or the stream ended before `[DONE]`.
    Broken(String),
    /// Nothing came for this many seconds.
    Timeout(u64),
    /// An HTTP status other than 200, with the server's message.
    Status(u16, String),
    /// The answer is not what an OpenAI server sends.
    Protocol(String),
    /// The server reported an error inside the stream.
    Server(String),
    /// The key was not sent: the listener is not proven this user's or
    /// root's (whose it is, or that it is not on this machine).
    NotOurs(String),
}

impl Failure {
    /// The endpoint is gone or frozen: the run stops.
    pub fn ends_run(&self) -> bool {
        matches!(
            self,
            Failure::Unreachable(_)
                | Failure::Broken(_)
                | Failure::Timeout(_)
                | Failure::NotOurs(_)
        )
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unreachable(e) => write!(f, "nothing answers: {e}"),
            Failure::Broken(e) => write!(f, "the connection broke: {e}"),
            Failure::Timeout(s) => write!(f, "no answer for {s} s"),
            Failure::Status(c, m) => write!(f, "HTTP {c}: {m}"),
            Failure::Protocol(e) => write!(f, "{e}"),
            Failure::Server(e) => write!(f, "the server reported: {e}"),
            Failure::NotOurs(e) => write!(f, "the API key was not sent: {e}"),
        }
    }
}

/// One request on a new connection; with a key, only to a listener
/// proven this user's or root's ([`http::send_ours`]).
async fn send(
    authority: &str,
    method: Method,
    path: &str,
    body: Option<String>,
    key: Option<&Key>,
) -> Result<Response<Incoming>, Failure> {
    let sent = match key {
        Some(k) => http::send_ours(authority, method, path, body, &k.0).await,
        None => http::send(authority, method, path, body, None).await,
    };
    sent.map_err(|why| match why {
        Why::Connect(e) => Failure::Unreachable(format!("{authority}: {e}")),
        Why::Broken(_) => Failure::Broken(format!(
            "{authority} closed the connection without an answer"
        )),
        Why::Timeout(t) => Failure::Timeout(t.as_secs()),
        Why::NotHttp(e) => Failure::Protocol(format!("{authority} does not speak HTTP/1.1: {e}")),
        Why::NotOurs(w) => Failure::NotOurs(w),
        Why::BadRequest => Failure::Protocol(why.to_string()),
    })
}

/// What to do when the key was not sent to `authority` (the text of a
/// [`Failure::NotOurs`]): run on the head when the listener is on another
/// machine, else free the port for the serve.
pub fn not_ours_hint(authority: &str, why: &str) -> String {
    let port = authority.rsplit(':').next().unwrap_or("PORT");
    if why.contains(http::NOT_HERE) {
        "  hint: run this on the serve's head, where its listener can be proven this user's (the key goes to no listener that cannot); `--no-api-key` for a serve started without one".to_string()
    } else {
        format!(
            "  hint: another process holds the serve's port: `ss -ltnp 'sport = :{port}'` shows it; stop it, then start the serve again (`halobox serve`), or benchmark the serve at its own --url"
        )
    }
}

/// The server's message in an error body (`{"error":{"message":…}}`, or
/// `{"detail":…}`, or the start of the body).
fn message(body: &str) -> String {
    let v: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let m = v.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("detail"))
            .or_else(|| v.get("message"))
            .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_string))
    });
    sse::short(&m.unwrap_or_else(|| body.to_string()))
}

async fn collect(resp: Response<Incoming>, limit: usize) -> Result<String, Failure> {
    http::read_body(resp, limit).await.map_err(|why| match why {
        Why::Broken(e) => Failure::Broken(e),
        other => Failure::Broken(other.to_string()),
    })
}

/// A JSON request (`GET` without a body, `POST` with one): the status and
/// the body, within `timeout`.
pub async fn json(
    authority: &str,
    path: &str,
    body: Option<String>,
    key: Option<&Key>,
    timeout: Duration,
) -> Result<(u16, String), Failure> {
    let method = if body.is_some() {
        Method::POST
    } else {
        Method::GET
    };
    let ask = async {
        let resp = send(authority, method, path, body, key).await?;
        let status = resp.status().as_u16();
        Ok((status, collect(resp, BODY_LIMIT).await?))
    };
    tokio::time::timeout(timeout, ask)
        .await
        .unwrap_or(Err(Failure::Timeout(timeout.as_secs())))
}

/// How one streamed completion went, in milliseconds from its start (the
/// connect included, as a user's client would see it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timing {
    /// Time to the first token.
    pub ttft_ms: Option<f64>,
    /// The gaps between tokens.
    pub itl_ms: Vec<f64>,
    /// Time to `[DONE]` (or to the failure).
    pub latency_ms: f64,
    /// Token chunks seen.
    pub chunks: u64,
    /// `usage.completion_tokens`, when the server sent it.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens`, when the server sent it.
    pub prompt_tokens: Option<u64>,
}

/// Posts `body` (a completion request with `"stream": true`) to
/// `/v1/completions` and times its stream; `idle` bounds each wait for
/// bytes. A failure keeps what was timed before it.
pub async fn stream(
    authority: &str,
    body: String,
    key: Option<&Key>,
    idle: Duration,
) -> (Timing, Option<Failure>) {
    let start = Instant::now();
    let mut t = Timing::default();
    let failure = run_stream(authority, body, key, idle, start, &mut t)
        .await
        .err();
    t.latency_ms = ms(start.elapsed());
    (t, failure)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run_stream(
    authority: &str,
    body: String,
    key: Option<&Key>,
    idle: Duration,
    start: Instant,
    t: &mut Timing,
) -> Result<(), Failure> {
    let timeout = Failure::Timeout(idle.as_secs());
    let resp = tokio::time::timeout(
        idle,
        send(authority, Method::POST, "/v1/completions", Some(body), key),
    )
    .await
    .map_err(|_| timeout.clone())??;
    let status = resp.status().as_u16();
    if status != 200 {
        let text = tokio::time::timeout(idle, collect(resp, 64 << 10))
            .await
            .map_err(|_| timeout.clone())??;
        return Err(Failure::Status(status, message(&text)));
    }
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if !kind.starts_with("text/event-stream") {
        return Err(Failure::Protocol(format!(
            "a streamed completion came back as `{}`, not text/event-stream: not an OpenAI streaming server",
            sse::short(&kind)
        )));
    }
    let mut body = resp.into_body();
    let mut lines = Lines::default();
    let mut last = start;
    loop {
        let frame = tokio::time::timeout(idle, body.frame())
            .await
            .map_err(|_| timeout.clone())?;
        let Some(frame) = frame else {
            return Err(Failure::Broken(format!(
                "the stream ended before [DONE], after {} token chunk(s)",
                t.chunks
            )));
        };
        let frame = frame
            .map_err(|e| Failure::Broken(format!("{e}, after {} token chunk(s)", t.chunks)))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let now = Instant::now();
        for payload in lines.push(&data).map_err(Failure::Protocol)? {
            match sse::parse(&payload).map_err(Failure::Protocol)? {
                Event::Done => return Ok(()),
                Event::Error(e) => return Err(Failure::Server(e)),
                Event::Chunk {
                    token,
                    completion_tokens,
                    prompt_tokens,
                } => {
                    if token {
                        match t.ttft_ms {
                            None => t.ttft_ms = Some(ms(now - start)),
                            Some(_) => t.itl_ms.push(ms(now - last)),
                        }
                        last = now;
                        t.chunks += 1;
                    }
                    t.completion_tokens = completion_tokens.or(t.completion_tokens);
                    t.prompt_tokens = prompt_tokens.or(t.prompt_tokens);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_never_shows_in_debug() {
        assert_eq!(format!("{:?}", Key("sekrit".into())), "Key(..)");
    }

    /// A listener of another user's on the port (uid 65534, recording
    /// every byte each connection sends it) gets no byte of a streamed
    /// completion nor of a JSON request that carry the key: the failure
    /// names whose the socket is and ends the run. The same request
    /// without a key reaches it (so it does record what it is sent).
    #[test]
    fn the_key_goes_to_no_listener_of_another_user() {
        if !nix::unistd::getuid().is_root() {
            eprintln!("skipped: needs root to run a listener as uid 65534");
            return;
        }
        const SECRET: &str = "sekrit-key-42";
        let squatter = crate::host::sockets::Squatter::start();
        let at = squatter.addr.to_string();
        let key = Key(SECRET.into());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let t = Duration::from_secs(5);
        let (timing, streamed) = rt.block_on(stream(&at, "{}".into(), Some(&key), t));
        let asked = rt.block_on(json(&at, "/v1/models", None, Some(&key), t));
        let plain = rt.block_on(json(&at, "/v1/models", None, None, t));
        let heard = String::from_utf8_lossy(&squatter.heard()).into_owned();
        assert!(
            heard.starts_with("||GET /v1/models HTTP/1.1"),
            "the squatter heard more than two empty connections and the keyless request: {heard}"
        );
        assert!(!heard.contains(SECRET), "{heard}");
        assert_eq!(timing.chunks, 0);
        for f in [streamed.unwrap(), asked.unwrap_err()] {
            let said = f.to_string();
            assert!(matches!(f, Failure::NotOurs(_)) && f.ends_run(), "{f:?}");
            assert!(
                said.starts_with("the API key was not sent: not ours: ")
                    && said.contains("uid 65534"),
                "{said}"
            );
            assert!(!said.contains(SECRET), "{said}");
        }
        assert!(plain.is_err(), "the squatter answers nothing: {plain:?}");
    }

    #[test]
    fn the_hint_follows_where_the_listener_is() {
        let far = format!(
            "192.0.2.1:8000 {}: whose it is cannot be proven here",
            http::NOT_HERE
        );
        assert!(not_ours_hint("192.0.2.1:8000", &far).contains("run this on the serve's head"));
        let held = "not ours: 127.0.0.1:8000 is a socket of uid 65534 (nobody), not of this user";
        assert!(not_ours_hint("127.0.0.1:8000", held).contains("`ss -ltnp 'sport = :8000'`"));
    }

    #[test]
    fn server_messages() {
        assert_eq!(
            message(r#"{"error":{"message":"Invalid API Key","code":401}}"#),
            "Invalid API Key"
        );
        assert_eq!(message(r#"{"detail":"Not Found"}"#), "Not Found");
        assert_eq!(message("<h1>404</h1>"), "<h1>404</h1>");
    }
}

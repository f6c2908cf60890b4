//! A stand-in engine on a unix socket that records what halobox sends it:
//! every request's method, path and decoded `X-Registry-Auth`. It answers
//! `/_ping` as Docker 20.10 would, pulls and pushes with a short success
//! stream, tags with 201, and everything else with 404.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::Value;

/// One request the stand-in received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The decoded `X-Registry-Auth` header (JSON), when one was sent.
    pub registry_auth: Option<Value>,
}

impl Recorded {
    /// The user name the request carried, if any.
    pub fn username(&self) -> Option<String> {
        self.registry_auth
            .as_ref()
            .and_then(|v| v.get("username"))
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
    }

    /// The password the request carried, if any.
    pub fn password(&self) -> Option<String> {
        self.registry_auth
            .as_ref()
            .and_then(|v| v.get("password"))
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
    }
}

/// A running stand-in engine.
pub struct StandIn {
    /// Its socket.
    pub socket: PathBuf,
    log: Arc<Mutex<Vec<Recorded>>>,
}

impl StandIn {
    /// Listens on `dir/engine.sock`.
    pub fn start(dir: &Path) -> StandIn {
        let socket = dir.join("engine.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::clone(&log);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
        StandIn { socket, log }
    }

    /// `unix://…` for `--engine`.
    pub fn address(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Everything received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap().clone()
    }

    /// Pull (`/images/create`) and push requests received so far.
    pub fn registry_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.contains("/images/create") || r.path.contains("/push"))
            .collect()
    }
}

fn decode_auth(header: &str) -> Option<Value> {
    let h = header.trim();
    let engines = [
        base64::engine::general_purpose::URL_SAFE,
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
    ];
    let bytes = engines.iter().find_map(|e| e.decode(h).ok())?;
    serde_json::from_slice(&bytes).ok()
}

/// Reads one request, records it, answers, and closes the connection.
fn serve(conn: UnixStream, log: &Mutex<Vec<Recorded>>) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut registry_auth = None;
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        match k.trim().to_ascii_lowercase().as_str() {
            "x-registry-auth" => registry_auth = decode_auth(v),
            "content-length" => length = v.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    if chunked {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut skip = vec![0u8; n + 2];
            let _ = reader.read_exact(&mut skip);
            if n == 0 {
                break;
            }
        }
    } else {
        let mut skip = vec![0u8; length];
        let _ = reader.read_exact(&mut skip);
    }
    log.lock().unwrap().push(Recorded {
        method: method.clone(),
        path: path.clone(),
        registry_auth,
    });
    let digest = format!("sha256:{}", "ab".repeat(32));
    let (status, extra, body) = if path.ends_with("/_ping") {
        (
            "200 OK",
            "Api-Version: 1.41\r\nServer: Docker/20.10.24 (linux)\r\n",
            "OK".to_string(),
        )
    } else if path.contains("/images/create") {
        (
            "200 OK",
            "Content-Type: application/json\r\n",
            "{\"status\":\"Pulling from stand-in\"}\n{\"status\":\"Status: Downloaded newer image\"}\n"
                .to_string(),
        )
    } else if method == "POST" && path.contains("/push") {
        (
            "200 OK",
            "Content-Type: application/json\r\n",
            format!(
                "{{\"status\":\"The push refers to repository\"}}\n{{\"status\":\"latest: digest: {digest} size: 528\"}}\n"
            ),
        )
    } else if method == "POST" && path.contains("/tag") {
        ("201 Created", "", String::new())
    } else {
        (
            "404 Not Found",
            "Content-Type: application/json\r\n",
            "{\"message\":\"no such object in the stand-in\"}".to_string(),
        )
    };
    let mut w = conn;
    let _ = write!(
        w,
        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = w.flush();
}

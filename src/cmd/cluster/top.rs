//! `halobox cluster top`: every node's `halobox metrics` (and the head's
//! engine `/metrics`) read every second and drawn as one row per node
//! ([`crate::metrics::top`] makes the rows); `q` or Ctrl-C ends it, and the
//! terminal is put back however it ends.

use std::io::{IsTerminal, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

use crate::bench::serving::key;
use crate::cli::ClusterTopArgs;
use crate::cluster::config;
use crate::error::UsageError;
use crate::metrics::top::{self, Reading};
use crate::serve::state;

/// How long one node's scrape may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(800);

/// The terminal in non-canonical mode without echo or signals (Ctrl-C
/// arrives as a byte), reads waiting at most 1 s, on the alternate screen;
/// put back on drop.
struct Raw(Termios);

impl Raw {
    fn enter() -> anyhow::Result<Raw> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 0;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 10;
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw)?;
        print!("\x1b[?1049h\x1b[?25l");
        let _ = std::io::stdout().flush();
        Ok(Raw(saved))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        print!("\x1b[?25h\x1b[?1049l");
        let _ = std::io::stdout().flush();
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &self.0);
    }
}

/// A node's reading and why its engine's figures are missing, or why it has none.
type NodeRead = Result<(Reading, Option<String>), String>;

/// One node's reading now (the head's with its engine's figures, asked
/// with the serving API's key, which goes only to a listener proven this
/// user's), and why the engine's figures are missing when the key was not
/// sent.
fn read_node(addr: SocketAddr, engine: Option<SocketAddr>, key: Option<&str>) -> NodeRead {
    let body = top::fetch(addr, "/metrics", SCRAPE_TIMEOUT, None).map_err(|e| e.to_string())?;
    let mut r = top::reading(&body);
    let mut why = None;
    if let Some(e) = engine {
        match top::fetch(e, "/metrics", SCRAPE_TIMEOUT, key) {
            Ok(t) => r.engine = Some(top::engine_reading(&t)),
            Err(top::Failed::NotOurs(w)) => why = Some(w),
            Err(top::Failed::Other(_)) => {}
        }
    }
    Ok((r, why))
}

/// Runs `cluster top` until `q` or Ctrl-C.
pub fn run(a: &ClusterTopArgs) -> anyhow::Result<ExitCode> {
    let (path, cfg) = config::open(a.file.cluster.as_deref())?;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(UsageError(
            "`halobox cluster top` needs a terminal: use `halobox cluster metrics --prometheus-config` to scrape the nodes instead".into(),
        )
        .into());
    }
    let nodes: Vec<(String, SocketAddr, Option<SocketAddr>)> = cfg
        .nodes
        .iter()
        .map(|n| {
            let head = n.ip == cfg.head().ip;
            (
                n.label().to_string(),
                SocketAddr::from((n.ip, a.metrics_port)),
                head.then(|| SocketAddr::from((n.ip, a.serve_port))),
            )
        })
        .collect();
    let serve = state::load(&path);
    let from = key::key_from(false, serve.as_ref(), Some(&path), key::is_set);
    let key = key::load_key(&from)?.map(|k| k.0);
    let key = key.as_deref();
    let _raw = Raw::enter()?;
    let mut prev: Vec<Option<(Instant, Reading)>> = vec![None; nodes.len()];
    let mut stdin = std::io::stdin();
    loop {
        let now: Vec<(Instant, NodeRead)> = std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter()
                .map(|(_, addr, engine)| {
                    s.spawn(move || (Instant::now(), read_node(*addr, *engine, key)))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("scrape thread"))
                .collect()
        });
        let mut screen = format!(
            "\x1b[H\x1b[2Jhalobox cluster top: {} node(s), every 1 s; q or Ctrl-C ends\r\n\r\n{}\r\n",
            nodes.len(),
            top::HEADER
        );
        let mut notes = String::new();
        for (i, ((name, _, _), (at, read))) in nodes.iter().zip(&now).enumerate() {
            if let Ok((_, Some(w))) = read {
                notes.push_str(&format!("\r\nengine figures not shown: {w}"));
            }
            let reading = &read.clone().map(|(r, _)| r);
            let (last, dt) = match &prev[i] {
                Some((t, r)) => (Some(r), at.duration_since(*t).as_secs_f64()),
                None => (None, 0.0),
            };
            screen.push_str(&top::row(name, reading, last, dt));
            screen.push_str("\r\n");
            if let Ok(r) = reading {
                prev[i] = Some((*at, r.clone()));
            }
        }
        print!("{screen}{notes}");
        std::io::stdout().flush()?;
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            let mut b = [0u8; 16];
            let n = stdin.read(&mut b)?;
            if b[..n].iter().any(|c| matches!(c, b'q' | b'Q' | 3 | 4)) {
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

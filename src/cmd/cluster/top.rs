//! `halobox cluster top`: every node's `halobox metrics` (and the head's
//! engine `/metrics`) read every second, each node in a thread of its own
//! ([`crate::metrics::top::watch`]), and drawn as one row per node as its
//! readings come; keys are read meanwhile, so `q` or Ctrl-C ends it however
//! slow a node is, and the terminal is put back however it ends.

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
use crate::metrics::top::{self, Reading, Watched};
use crate::serve::state;

/// The terminal in non-canonical mode without echo or signals (Ctrl-C
/// arrives as a byte), reads waiting at most 0.1 s, on the alternate
/// screen; put back on drop.
struct Raw(Termios);

impl Raw {
    fn enter() -> anyhow::Result<Raw> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        raw.control_chars[SpecialCharacterIndices::VMIN as usize] = 0;
        raw.control_chars[SpecialCharacterIndices::VTIME as usize] = 1;
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
    let watched: Vec<Watched> = nodes
        .iter()
        .map(|(_, addr, engine)| Watched {
            addr: *addr,
            engine: *engine,
        })
        .collect();
    let readings = top::watch(&watched, key, Duration::from_secs(1));
    let _raw = Raw::enter()?;
    let mut prev: Vec<Option<(Instant, Reading)>> = vec![None; nodes.len()];
    let mut rows: Vec<String> = nodes.iter().map(|(n, _, _)| top::waiting_row(n)).collect();
    let mut not_ours: Vec<Option<String>> = vec![None; nodes.len()];
    let mut changed = true;
    let mut stdin = std::io::stdin();
    loop {
        while let Ok(s) = readings.try_recv() {
            let i = s.node;
            let (last, dt) = match &prev[i] {
                Some((t, r)) => (Some(r), s.at.duration_since(*t).as_secs_f64()),
                None => (None, 0.0),
            };
            rows[i] = top::row(&nodes[i].0, &s.reading, last, dt);
            not_ours[i] = s.not_ours;
            if let Ok(r) = s.reading {
                prev[i] = Some((s.at, r));
            }
            changed = true;
        }
        if changed {
            let mut screen = format!(
                "\x1b[H\x1b[2Jhalobox cluster top: {} node(s), every 1 s; q or Ctrl-C ends\r\n\r\n{}\r\n",
                nodes.len(),
                top::HEADER
            );
            for row in &rows {
                screen.push_str(row);
                screen.push_str("\r\n");
            }
            for w in not_ours.iter().flatten() {
                screen.push_str(&format!("\r\nengine figures not shown: {w}"));
            }
            print!("{screen}");
            std::io::stdout().flush()?;
            changed = false;
        }
        let mut b = [0u8; 16];
        let n = stdin.read(&mut b)?;
        if b[..n].iter().any(|c| matches!(c, b'q' | b'Q' | 3 | 4)) {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

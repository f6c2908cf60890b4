//! SIGINT and SIGTERM during a refresh: caught instead of killing halobox
//! mid-step. Before the swap a signal stops the run at once (what it made is
//! removed again); across the renames and the retiring of the old container
//! it is held until they are done. Afterwards halobox dies of the same
//! signal ([`reraise`]), so a shell or a supervisor sees what happened.

use futures_util::FutureExt as _;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// SIGINT and SIGTERM, caught for the rest of the process's life.
#[derive(Debug)]
pub struct Caught {
    int: Signal,
    term: Signal,
    got: Option<i32>,
}

impl Caught {
    /// Starts catching SIGINT and SIGTERM.
    pub fn install() -> std::io::Result<Caught> {
        Ok(Caught {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            got: None,
        })
    }

    /// The first signal that arrived so far, without waiting.
    pub fn arrived(&mut self) -> Option<i32> {
        if self.got.is_none() {
            self.got = self.next().now_or_never();
        }
        self.got
    }

    /// Waits for the first signal (at once when one already arrived).
    pub async fn wait(&mut self) -> i32 {
        if let Some(s) = self.got {
            return s;
        }
        let s = self.next().await;
        self.got = Some(s);
        s
    }

    async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => nix::libc::SIGINT,
            _ = self.term.recv() => nix::libc::SIGTERM,
        }
    }
}

/// The name of a caught signal.
pub fn name(signal: i32) -> &'static str {
    match signal {
        nix::libc::SIGINT => "SIGINT",
        nix::libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Dies of `signal` (its default action restored), as if it had not been
/// caught.
pub fn reraise(signal: i32) -> ! {
    use nix::sys::signal::{SigHandler, Signal, raise, signal as set};
    if let Ok(s) = Signal::try_from(signal) {
        // SAFETY: restoring the default disposition installs no handler code.
        let _ = unsafe { set(s, SigHandler::SigDfl) };
        let _ = raise(s);
    }
    std::process::exit(128 + signal)
}

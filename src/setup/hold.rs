//! SIGINT and SIGTERM held while setup makes one change and records it:
//! noted instead of killing halobox between the two, then delivered (the
//! previous handling restored) once the change is recorded.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, raise, sigaction};

static HELD: AtomicI32 = AtomicI32::new(0);

extern "C" fn note(sig: i32) {
    HELD.store(sig, Ordering::SeqCst);
}

/// While alive, SIGINT and SIGTERM wait; dropping it delivers the first
/// that came.
pub struct Held {
    previous: Vec<(Signal, SigAction)>,
}

impl Held {
    /// Starts holding SIGINT and SIGTERM.
    pub fn start() -> nix::Result<Self> {
        let act = SigAction::new(SigHandler::Handler(note), SaFlags::empty(), SigSet::empty());
        let mut previous = Vec::new();
        for s in [Signal::SIGINT, Signal::SIGTERM] {
            // SAFETY: the handler only stores into an atomic.
            previous.push((s, unsafe { sigaction(s, &act) }?));
        }
        Ok(Self { previous })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        for (s, old) in &self.previous {
            // SAFETY: puts back the handling that was there before.
            let _ = unsafe { sigaction(*s, old) };
        }
        let got = HELD.swap(0, Ordering::SeqCst);
        if let Ok(s) = Signal::try_from(got) {
            let _ = raise(s);
        }
    }
}

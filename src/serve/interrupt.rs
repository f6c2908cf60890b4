//! SIGINT and SIGTERM while `serve` watches the engine: noted, not fatal,
//! so halobox stops the engine on every node before it exits.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn note(sig: i32) {
    CAUGHT.store(sig, Ordering::SeqCst);
}

/// Starts noting SIGINT and SIGTERM instead of dying of them.
pub fn catch() -> nix::Result<()> {
    let act = SigAction::new(SigHandler::Handler(note), SaFlags::empty(), SigSet::empty());
    for s in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores into an atomic.
        unsafe { sigaction(s, &act) }?;
    }
    Ok(())
}

/// The signal that arrived, if one did.
pub fn arrived() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

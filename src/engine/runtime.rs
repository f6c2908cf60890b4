//! The async runtime the engine client runs on, for synchronous callers.

/// Runs a future to completion on a single-threaded runtime. The runtime is
/// then shut down without waiting for blocking reads (an interactive
/// `enter` leaves one on the terminal that would otherwise hang the exit).
pub fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(f);
    rt.shutdown_background();
    Ok(out)
}

//! Bounds on every engine call, so a wedged engine socket is an error that
//! names it, never a hang: `/_ping` gets seconds, one API call (inspect,
//! list, create, start, rename, remove, tag) tens of seconds, and streams
//! (pull, push, load, export, build) an inactivity limit: they may run as
//! long as they make progress.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::discover::unix_path;
use super::{Engine, EngineError};

/// How long `/_ping` may take (connecting included).
pub const PING: Duration = Duration::from_secs(5);
/// How long one API call may take.
pub const CALL: Duration = Duration::from_secs(30);
/// How long pull, push, load or export may go without any progress.
pub const STREAM_IDLE: Duration = Duration::from_secs(300);
/// How long a build may go without a line of output (a compile step can be
/// quiet for a long time).
pub const BUILD_IDLE: Duration = Duration::from_secs(3600);

/// The last sign of life of a long request: touched on every progress item
/// (and by an upload as the engine reads it).
#[derive(Debug, Clone)]
pub struct Activity {
    start: Instant,
    last_ms: Arc<AtomicU64>,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    /// A clock that starts now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Records progress now.
    pub fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Time since the last progress.
    fn quiet_for(&self) -> Duration {
        self.start
            .elapsed()
            .saturating_sub(Duration::from_millis(self.last_ms.load(Ordering::Relaxed)))
    }
}

/// Runs `fut` while `activity` shows progress at least every `idle`;
/// `Err(())` when it went quiet for that long.
pub async fn watch<F: Future>(
    fut: F,
    activity: &Activity,
    idle: Duration,
) -> Result<F::Output, ()> {
    tokio::pin!(fut);
    loop {
        let left = idle.saturating_sub(activity.quiet_for());
        if left.is_zero() {
            return Err(());
        }
        tokio::select! {
            out = &mut fut => return Ok(out),
            () = tokio::time::sleep(left) => {}
        }
    }
}

/// The command that checks whether the engine at `address` answers.
fn check_command(address: &str) -> String {
    match unix_path(address) {
        Some(path) => format!("curl --unix-socket {} http://d/_ping", path.display()),
        None => format!(
            "curl {}/_ping",
            address
                .replacen("tcp://", "http://", 1)
                .trim_end_matches('/')
        ),
    }
}

/// The message of a call that ran out of time.
pub fn timeout_message(address: &str, what: &str, secs: u64, idle: bool) -> String {
    let verb = if idle {
        format!("sent nothing for {secs}s")
    } else {
        format!("did not answer within {secs}s")
    };
    format!(
        "the engine at {address} {verb} while {what}\n  hint: the engine is wedged or overloaded: \
         check that it answers (`{}`) and restart its service (`sudo systemctl restart podman.service`, \
         `systemctl --user restart podman.service`, or `sudo systemctl restart docker`)",
        check_command(address)
    )
}

impl Engine {
    /// The error for `what` running out of `limit`.
    pub(crate) fn timed_out(&self, what: &str, limit: Duration, idle: bool) -> EngineError {
        EngineError::Timeout {
            address: self.info.address.clone(),
            what: what.to_string(),
            secs: limit.as_secs(),
            idle,
        }
    }

    /// Runs `fut` within `limit`; its output as it is.
    pub(crate) async fn within<T>(
        &self,
        limit: Duration,
        what: &str,
        fut: impl Future<Output = T>,
    ) -> Result<T, EngineError> {
        tokio::time::timeout(limit, fut)
            .await
            .map_err(|_| self.timed_out(what, limit, false))
    }

    /// One API call within [`CALL`]; an engine error carries `what`.
    pub(crate) async fn call<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, EngineError> {
        self.within(CALL, what, fut)
            .await?
            .map_err(|error| EngineError::Api {
                context: what.to_string(),
                error,
            })
    }

    /// Runs `fut` while `activity` shows progress within `idle`.
    pub(crate) async fn progressing<T>(
        &self,
        what: &str,
        activity: &Activity,
        idle: Duration,
        fut: impl Future<Output = T>,
    ) -> Result<T, EngineError> {
        watch(fut, activity, idle)
            .await
            .map_err(|()| self.timed_out(what, idle, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_socket_and_the_check() {
        let m = timeout_message("unix:///run/x.sock", "listing containers", 30, false);
        assert!(
            m.contains("unix:///run/x.sock did not answer within 30s while listing containers")
        );
        assert!(m.contains("curl --unix-socket /run/x.sock http://d/_ping"));
        let m = timeout_message("tcp://10.0.0.1:2375", "pulling a", 300, true);
        assert!(m.contains("sent nothing for 300s"));
        assert!(m.contains("curl http://10.0.0.1:2375/_ping"));
    }

    #[test]
    fn watch_ends_a_quiet_future_and_lets_a_busy_one_finish() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let a = Activity::new();
            let quiet = watch(std::future::pending::<()>(), &a, Duration::from_millis(50));
            assert!(quiet.await.is_err());
            // Busy for 1.2 s in all, never quiet for more than 0.1 s: a
            // 1 s idle bound lets it finish (a tenfold margin for a busy
            // machine's timer).
            let a = Activity::new();
            let ticker = a.clone();
            let busy = async move {
                for _ in 0..12 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    ticker.touch();
                }
                7
            };
            assert_eq!(watch(busy, &a, Duration::from_secs(1)).await, Ok(7));
        });
    }
}

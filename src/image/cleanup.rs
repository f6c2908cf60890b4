//! Work files that must not outlive an interrupted run: work folders and
//! half-written outputs are registered here, and on SIGINT or SIGTERM they
//! are removed before halobox exits (130 or 143, as a shell reports them).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

static PATHS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static WATCH: Once = Once::new();
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Removes `path` (a folder or a file) on SIGINT/SIGTERM until [`unregister`]ed.
pub fn register(path: &Path) {
    WATCH.call_once(watch);
    lock().push(path.to_path_buf());
}

/// Forgets `path` (it was removed, or kept on purpose).
pub fn unregister(path: &Path) {
    lock().retain(|p| p != path);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PATHS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the handlers now (so a signal right after [`register`] is
/// caught) and waits for them on a thread of its own.
fn watch() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let signals = {
        let _guard = rt.enter();
        signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)))
    };
    let Ok((mut int, mut term)) = signals else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("halobox-cleanup".into())
        .spawn(move || {
            let code = rt.block_on(async {
                tokio::select! {
                    _ = int.recv() => 130,
                    _ = term.recv() => 143,
                }
            });
            SIGNALLED.store(true, Ordering::SeqCst);
            remove_all();
            std::process::exit(code);
        });
    drop(spawned);
}

/// Once a signal has arrived, never returns: the cleanup thread is removing
/// the registered paths and then exits with the signal's code. Called before
/// halobox reports its result, so an error the removal caused in the work
/// itself (a file vanished mid-write) is not reported in the signal's place.
pub fn wait_if_interrupted() {
    if SIGNALLED.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// Removes every registered path. Other threads may still be writing into
/// a work folder, so each removal is retried until the path is gone (a
/// removed folder cannot be written into again).
fn remove_all() {
    let paths = lock().clone();
    let until = Instant::now() + Duration::from_secs(5);
    for p in paths {
        while std::fs::symlink_metadata(&p).is_ok() && Instant::now() < until {
            let gone = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            if gone.is_err() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// A file written under a temporary name in its final folder and renamed
/// into place only by [`OutputFile::commit`]; removed otherwise (dropped,
/// or interrupted).
#[derive(Debug)]
pub struct OutputFile {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl OutputFile {
    /// Reserves a new `.NAME.halobox-RANDOM.tmp` beside `dest`: made here
    /// with `O_EXCL`, so a link planted beside `dest` is never written
    /// through.
    pub fn new(dest: &Path) -> std::io::Result<OutputFile> {
        let name = dest
            .file_name()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{}: not a file name", dest.display()),
                )
            })?
            .to_string_lossy();
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}.halobox-"))
            .suffix(".tmp")
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .tempfile_in(dir)?
            .into_temp_path()
            .keep()
            .map_err(|e| e.error)?;
        register(&tmp);
        Ok(OutputFile {
            tmp,
            dest: dest.to_path_buf(),
            done: false,
        })
    }

    /// Where to write.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the written file to its final name.
    pub fn commit(mut self) -> std::io::Result<PathBuf> {
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "renaming {} to {}: {e}",
                    self.tmp.display(),
                    self.dest.display()
                ),
            )
        })?;
        self.done = true;
        unregister(&self.tmp);
        Ok(self.dest.clone())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
            unregister(&self.tmp);
        }
    }
}

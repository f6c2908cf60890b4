//! `halobox snapshot`: record what detect/doctor read here → (redact) →
//! one `.tar.gz`, written atomically; `--dry-run` lists the files.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

use crate::cli::SnapshotArgs;
use crate::host::redact::{self, Redaction};
use crate::host::snapshot::{self, Tree, WriteError};
use crate::host::{self, GatherOptions};
use crate::signals;

/// Records, redacts when asked, and writes or lists the snapshot.
pub fn run(args: &SnapshotArgs) -> anyhow::Result<ExitCode> {
    snapshot::check_out(&args.out, args.force)?;
    let (_, accessed) = host::gather_recorded(GatherOptions::default());
    let mut tree = snapshot::collect(&accessed);
    if args.redact {
        redact::apply(
            &mut tree,
            &Redaction {
                hostnames: redact::hostnames(),
                addresses: args.redact_addresses,
                key: redact::random_key()?,
            },
        );
    }
    let top = snapshot::top_folder(&args.out);
    if args.plan.dry_run {
        print!("{}", snapshot::listing(&tree, &top, &args.out));
        return Ok(ExitCode::SUCCESS);
    }
    write(&tree, &top, &args.out)?;
    println!(
        "wrote {} ({} files{}); unpack with `tar xzf {}` and read it with `halobox doctor --sysroot {top}`",
        args.out.display(),
        snapshot::files(&tree),
        if args.redact { ", redacted" } else { "" },
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes on a blocking thread while SIGINT/SIGTERM are caught: a signal
/// stops the writer, its temporary file is removed, and halobox then dies
/// of that signal.
fn write(tree: &Tree, top: &str, out: &Path) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tree, top, out_buf) = (tree.clone(), top.to_string(), out.to_path_buf());
    let flag = stop.clone();
    let result = crate::engine::block_on(async move {
        let mut caught = signals::Caught::install().context("catching SIGINT and SIGTERM")?;
        let mut job = tokio::task::spawn_blocking(move || {
            snapshot::write_archive(&tree, &top, &out_buf, &flag)
        });
        tokio::select! {
            done = &mut job => Ok::<_, anyhow::Error>((done?, None)),
            sig = caught.wait() => {
                stop.store(true, Ordering::SeqCst);
                Ok((job.await?, Some(sig)))
            }
        }
    })??;
    match result {
        (_, Some(sig)) => {
            eprintln!(
                "halobox snapshot: {}: {} was not written",
                signals::name(sig),
                out.display()
            );
            signals::reraise(sig)
        }
        (Err(e @ WriteError::Io { .. }), None) => Err(anyhow::Error::new(e).context(format!(
            "hint: check that {} is writable and has space",
            out.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .display()
        ))),
        (Err(e), None) => Err(e.into()),
        (Ok(()), None) => Ok(()),
    }
}

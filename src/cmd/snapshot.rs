//! `halobox snapshot`: record what detect/doctor read here → (redact) →
//! one `.tar.gz`, written atomically; `--dry-run` lists the files.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

use crate::cli::SnapshotArgs;
use crate::error::UsageError;
use crate::host::redact::{self, Redaction};
use crate::host::snapshot::{self, Body, Tree, WriteError};
use crate::host::{self, GatherOptions};
use crate::refresh::signals;

/// Records, redacts when asked, and writes or lists the snapshot.
pub fn run(args: &SnapshotArgs) -> anyhow::Result<ExitCode> {
    check_out(&args.out, args.force)?;
    let (_, accessed) = host::gather_recorded(GatherOptions::default());
    let mut tree = snapshot::collect(&accessed);
    if args.redact {
        redact::apply(
            &mut tree,
            &Redaction {
                hostnames: hostnames(),
                addresses: args.redact_addresses,
                key: random_key()?,
            },
        );
    }
    let top = snapshot::top_folder(&args.out);
    if args.plan.dry_run {
        print!("{}", listing(&tree, &top, &args.out));
        return Ok(ExitCode::SUCCESS);
    }
    write(&tree, &top, &args.out)?;
    println!(
        "wrote {} ({} files{}); unpack with `tar xzf {}` and read it with `halobox doctor --sysroot {top}`",
        args.out.display(),
        files(&tree),
        if args.redact { ", redacted" } else { "" },
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn check_out(out: &Path, force: bool) -> anyhow::Result<()> {
    let name = out.to_string_lossy();
    if !(name.ends_with(".tar.gz") || name.ends_with(".tgz")) {
        return Err(UsageError(format!(
            "{name}: the snapshot is a gzip-compressed tar archive\n  hint: name it with .tar.gz, e.g. `halobox snapshot node1.tar.gz`"
        ))
        .into());
    }
    if out.is_dir() || (out.exists() && !force) {
        return Err(UsageError(format!(
            "{name} already exists\n  hint: choose another name, or `halobox snapshot --force {name}` to replace it"
        ))
        .into());
    }
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        return Err(UsageError(format!(
            "{}: no such directory for {name}\n  hint: mkdir -p {}",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    Ok(())
}

fn files(tree: &Tree) -> usize {
    tree.values()
        .filter(|e| !matches!(e.body, Body::Dir))
        .count()
}

/// One line per file (`top/path  size`), directories left out.
fn listing(tree: &Tree, top: &str, out: &Path) -> String {
    let mut s = String::new();
    for (path, e) in tree {
        match &e.body {
            Body::Dir => {}
            Body::File(b) => s.push_str(&format!("{top}{path}  {} bytes\n", b.len())),
            Body::Link(t) => s.push_str(&format!("{top}{path} -> {}\n", t.display())),
        }
    }
    s.push_str(&format!(
        "would write {} files to {}\n",
        files(tree),
        out.display()
    ));
    s
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

/// This host's name and its short form, for `--redact`.
fn hostnames() -> Vec<String> {
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return Vec::new();
    };
    let name = name.trim().to_string();
    let short = name.split('.').next().unwrap_or_default().to_string();
    let mut names = vec![name];
    if short != names[0] {
        names.push(short);
    }
    names
}

/// The key of this snapshot's mappings (never stored).
fn random_key() -> anyhow::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading /dev/urandom for the redaction key")?;
    Ok(key)
}

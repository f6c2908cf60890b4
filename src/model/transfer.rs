//! The bytes of a sync, node to node over the data plane: halobox's own TCP
//! stream, started over ssh. The source (`node-send`) connects to the first
//! receiver; each receiver (`node-receive`) listens on its data-plane
//! address, passes every byte on to the next receiver while it writes the
//! files it needs, so a chain of N nodes takes about the time of one.
//!
//! A stream opens with the run's token (32 random bytes that travelled
//! only inside ssh, in the job line): a connection that does not present
//! it is dropped unread, so a peer on the LAN cannot inject bytes. Then,
//! per file of the job's `send` list in order: exactly `size` bytes, then
//! the 32-byte sha256 the sender computed while reading them.
//!
//! Every name in a job is checked before anything is touched ([`Job::check`]):
//! the job comes from another node's facts. A receiver takes the repo's
//! receive lock ([`ReceiveLock`]: a second sync into the same cache is
//! refused), removes what killed runs left, and writes each file to a
//! name of its own run (`blobs/BLOB.RUN.halobox-partial`, created new),
//! through the blobs folder held open ([`BlobDir`]: no link followed). Once
//! a file is complete and on disk its bytes are hashed as they are there,
//! and it is renamed to its blob name only when that hash matches the
//! hub's (the blob name, for LFS files) and the sender's; it then records
//! the hash ([`super::record`]). A write that fails removes its file.
//! `refs/REV` is written only when every file of the snapshot is in. A
//! killed sync leaves only partial files, never a wrong blob; the next
//! sync removes them and sends those files again.
//!
//! Both ends print a line every [`TICK`] while they run (`bytes N`,
//! `sent N`), whatever the stream does, so the side that started them can
//! tell a node that stopped from one that waits; and no read or write on
//! the stream waits more than [`STALL`] for progress.

use std::io::{BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache::{self, BlobDir, PARTIAL, ReceiveLock, Repo};
use super::record::{self, Record};

/// Bytes read and written at a time.
const CHUNK: usize = 1 << 20;
/// How long a receiver waits for its sender, and any read or write of the
/// stream may go without progress.
pub const STALL: Duration = Duration::from_secs(60);
/// How long a connection may take to present the token.
const TOKEN_WAIT: Duration = Duration::from_secs(2);
/// Connections whose token is awaited at once.
const CHECKING: usize = 16;
/// How often each end prints its count.
pub const TICK: Duration = Duration::from_millis(200);

/// One file of the snapshot, as the job carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireFile {
    /// Path in the snapshot.
    pub path: String,
    /// Blob name.
    pub blob: String,
    /// Size in bytes.
    pub size: u64,
    /// The sha256 its content must have: the hub's (LFS) or the source's.
    pub sha256: Option<String>,
}

/// What one end of the stream does; one JSON line on its stdin (it holds
/// the token, so it never goes in an argument).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// The run's token, hex.
    pub token: String,
    /// `ORG/NAME`.
    pub id: String,
    /// The ref to point at the commit (none when the revision is a commit).
    pub ref_name: Option<String>,
    /// The snapshot's commit.
    pub commit: String,
    /// Every file of the snapshot.
    pub files: Vec<WireFile>,
    /// Indices into `files` of what the stream carries, in order.
    pub send: Vec<usize>,
    /// Receiver: indices this node writes.
    pub keep: Vec<usize>,
    /// Receiver: the address to listen on (its data-plane address).
    pub listen: Option<IpAddr>,
    /// Where to send to (sender), or pass the stream on to (receiver).
    pub next: Option<SocketAddr>,
    /// The hub cache folder every node uses.
    pub hub: String,
}

impl Job {
    /// Every name and index in the job is one this node may use: the model
    /// id and ref as `ORG/NAME@REV` takes them, a 40-hex commit, snapshot
    /// paths relative with normal parts, blobs one file name of `blobs/`,
    /// hashes 64-hex, indices inside `files`. The error names the field.
    pub fn check(&self) -> Result<(), String> {
        let bad = |field: &str, value: &str, rule: &str| {
            Err(format!(
                "the sync job's {field} is {}: {rule}; nothing was written\n  hint: the job comes from the node that ran `halobox model sync`: run the same halobox there (`halobox cluster install`)",
                cache::shown(value)
            ))
        };
        if !cache::is_model_id(&self.id) {
            return bad("model", &self.id, "not ORG/NAME");
        }
        if let Some(r) = &self.ref_name
            && !cache::is_revision(r)
        {
            return bad("ref", r, "not a branch or tag name");
        }
        if !cache::is_commit(&self.commit) {
            return bad("commit", &self.commit, "a commit is 40 hex digits");
        }
        for f in &self.files {
            if let Some((field, value, rule)) =
                cache::file_fault(&f.path, &f.blob, f.sha256.as_deref())
            {
                return bad(&field, value, rule);
            }
        }
        if let Some(i) = self
            .send
            .iter()
            .chain(&self.keep)
            .find(|&&i| i >= self.files.len())
        {
            return bad("file index", &i.to_string(), "past the end of its files");
        }
        if crate::units::total_bytes(self.files.iter().map(|f| f.size)).is_none() {
            return bad(
                "total size",
                "more than 2^64 bytes",
                "its files' sizes cannot add up to that",
            );
        }
        Ok(())
    }
}

/// A receiver's last line: what it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// Files written and verified.
    pub written: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files whose hash did not match (not installed), with why.
    pub bad: Vec<String>,
}

/// A random token, hex (from the kernel's generator).
pub fn token() -> std::io::Result<String> {
    random_hex(32)
}

fn random_hex(n: usize) -> std::io::Result<String> {
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(hex::encode(b))
}

fn token_bytes(job: &Job) -> Result<[u8; 32], String> {
    let v = hex::decode(&job.token).map_err(|_| "bad token in the job".to_string())?;
    v.try_into().map_err(|_| "bad token in the job".to_string())
}

/// Equal without an early exit (no timing hint about the token).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A timed-out read or write of the stream in words.
fn stalled(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// An error writing to `to`: a stall named as one.
fn send_error(to: SocketAddr, e: &std::io::Error) -> String {
    if stalled(e) {
        format!(
            "sending to {to}: no byte taken for {} s (the node there stopped reading the stream)",
            STALL.as_secs()
        )
    } else {
        format!("sending to {to}: {e}")
    }
}

fn connect(addr: SocketAddr, token: &[u8; 32]) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
        format!("cannot connect to {addr} over the data plane: {e} (a firewall between the nodes?)")
    })?;
    s.set_nodelay(true).ok();
    s.set_write_timeout(Some(STALL)).ok();
    let mut w = &s;
    w.write_all(token).map_err(|e| send_error(addr, &e))?;
    Ok(s)
}

/// Runs `f` while a thread prints `WORD N` on `out` every [`TICK`] (N
/// what `f` stores in the counter), and once more at the end.
fn with_heartbeat<T>(
    word: &str,
    out: &mut (dyn Write + Send),
    f: impl FnOnce(&AtomicU64) -> T,
) -> T {
    let count = AtomicU64::new(0);
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let count = &count;
        s.spawn(move || {
            loop {
                let done = !matches!(
                    stopped.recv_timeout(TICK),
                    Err(mpsc::RecvTimeoutError::Timeout)
                );
                let _ = writeln!(out, "{word} {}", count.load(Ordering::Relaxed))
                    .and_then(|()| out.flush());
                if done {
                    break;
                }
            }
        });
        let r = f(count);
        drop(stop);
        r
    })
}

/// The sender: streams the job's files from this node's cache to `next`,
/// printing `sent N` every [`TICK`].
pub fn send(job: &Job, hub: &Path, out: &mut (dyn Write + Send)) -> Result<u64, String> {
    job.check()?;
    let token = token_bytes(job)?;
    let next = job.next.ok_or("a sender needs an address to send to")?;
    let repo = Repo::new(hub, &job.id);
    let blobs = BlobDir::open(&repo).map_err(|e| format!("{}: {e}", repo.blobs().display()))?;
    with_heartbeat("sent", out, |count| {
        let stream = connect(next, &token)?;
        let mut out = BufWriter::with_capacity(CHUNK, stream);
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0;
        for &i in &job.send {
            let f = &job.files[i];
            let path = blobs.path(&f.blob);
            let mut file = blobs
                .open_file(&f.blob)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let mut h = Sha256::new();
            let mut left = f.size;
            while left > 0 {
                let want = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
                let n = file
                    .read(&mut buf[..want])
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if n == 0 {
                    return Err(format!(
                        "{}: shorter than {} bytes (changed while sending?)",
                        path.display(),
                        f.size
                    ));
                }
                h.update(&buf[..n]);
                out.write_all(&buf[..n]).map_err(|e| send_error(next, &e))?;
                left -= n as u64;
                total += n as u64;
                count.store(total, Ordering::Relaxed);
            }
            out.write_all(&h.finalize())
                .map_err(|e| send_error(next, &e))?;
        }
        out.flush().map_err(|e| send_error(next, &e))?;
        Ok(total)
    })
}

/// Accepts connections on `l` until one presents `token`, within [`STALL`].
/// Each connection is checked in a thread of its own (at most
/// [`CHECKING`] at once), given at most [`TOKEN_WAIT`]; one that does not
/// present the token is dropped, and idle ones do not hold the sender back.
fn accept(l: &TcpListener, token: &[u8; 32]) -> Result<TcpStream, String> {
    let deadline = Instant::now() + STALL;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let (found, arrived) = mpsc::channel::<TcpStream>();
    let checking = Arc::new(AtomicUsize::new(0));
    loop {
        if let Ok(s) = arrived.try_recv() {
            s.set_read_timeout(Some(STALL)).ok();
            return Ok(s);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no sender connected within {} s", STALL.as_secs()));
        }
        if checking.load(Ordering::Acquire) >= CHECKING {
            if let Ok(s) = arrived.recv_timeout(Duration::from_millis(20)) {
                s.set_read_timeout(Some(STALL)).ok();
                return Ok(s);
            }
            continue;
        }
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                let wait = TOKEN_WAIT.min(left).max(Duration::from_millis(10));
                s.set_read_timeout(Some(wait)).ok();
                checking.fetch_add(1, Ordering::AcqRel);
                let (found, checking, token) = (found.clone(), Arc::clone(&checking), *token);
                std::thread::spawn(move || {
                    let mut got = [0u8; 32];
                    if (&s).read_exact(&mut got).is_ok() && same(&got, &token) {
                        let _ = found.send(s);
                    }
                    checking.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Ok(s) = arrived.recv_timeout(Duration::from_millis(20)) {
                    s.set_read_timeout(Some(STALL)).ok();
                    return Ok(s);
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// What the writer thread gets.
enum Piece {
    Start(usize),
    Bytes(Vec<u8>),
    End([u8; 32]),
}

/// The name file `blob` is written under in run `run`.
fn partial(blob: &str, run: &str) -> String {
    format!("{blob}.{run}{PARTIAL}")
}

/// The receiver: takes the repo's receive lock, listens (printing
/// `listening PORT`), takes the stream, passes it on, writes and verifies
/// what it keeps, links the snapshot, and writes the ref once every file
/// is in. Prints `bytes N` every [`TICK`] once it listens.
pub fn receive(job: &Job, hub: &Path, out: &mut (dyn Write + Send)) -> Result<Received, String> {
    job.check()?;
    let token = token_bytes(job)?;
    let ip = job
        .listen
        .ok_or("a receiver needs an address to listen on")?;
    let repo = Repo::new(hub, &job.id);
    let _lock = ReceiveLock::take(hub, &job.id)?;
    let blobs = std::fs::create_dir_all(repo.blobs())
        .and_then(|()| BlobDir::open(&repo))
        .map_err(|e| format!("{}: {e}", repo.blobs().display()))?;
    blobs.sweep_partials().map_err(|e| {
        format!(
            "removing what an earlier sync left in {}: {e}",
            repo.blobs().display()
        )
    })?;
    let run = format!(
        "{}-{}",
        std::process::id(),
        random_hex(4).map_err(|e| e.to_string())?
    );
    let l = TcpListener::bind((ip, 0)).map_err(|e| format!("cannot listen on {ip}: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    writeln!(out, "listening {port}")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    let mut received = with_heartbeat("bytes", out, |count| {
        stream_in(job, hub, &repo, &blobs, &run, &token, l, count)
    })?;
    // The ref last, and only when every file of the snapshot is there.
    for f in &job.files {
        if blobs.regular(&f.blob).map(|(_, _, size)| size) != Some(f.size)
            && !received
                .bad
                .iter()
                .any(|b| b.starts_with(&format!("{}: ", f.path)))
        {
            received.bad.push(format!(
                "{}: its blob {} is not in {} (removed while syncing?)",
                f.path,
                f.blob,
                repo.blobs().display()
            ));
        }
    }
    if let Some(r) = &job.ref_name
        && received.bad.is_empty()
    {
        repo.set_ref(r, &job.commit)
            .map_err(|e| format!("refs/{r}: {e}"))?;
    }
    Ok(received)
}

/// The stream of one receiver, from `l`'s first connection with the token.
#[allow(clippy::too_many_arguments)]
fn stream_in(
    job: &Job,
    hub: &Path,
    repo: &Repo,
    blobs: &BlobDir,
    run: &str,
    token: &[u8; 32],
    l: TcpListener,
    count: &AtomicU64,
) -> Result<Received, String> {
    let mut next = match job.next {
        Some(a) => Some((a, BufWriter::with_capacity(CHUNK, connect(a, token)?))),
        None => None,
    };
    // Every file of the snapshot is linked before any byte arrives: a link
    // whose blob is not there yet dangles, so until the last file is
    // verified and renamed into place the copy reads as incomplete (`model
    // ls`, `serve`), and a killed sync leaves it so. The ref comes last.
    for f in &job.files {
        repo.link(&job.commit, &f.path, &f.blob)
            .map_err(|e| format!("linking {}: {e}", f.path))?;
    }
    let mut src = accept(&l, token)?;
    drop(l);
    let from = src
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "the node before".into());
    let keep: Vec<bool> = (0..job.files.len())
        .map(|i| job.keep.contains(&i))
        .collect();
    let (tx, rx) = mpsc::sync_channel::<Piece>(16);
    let (done_tx, done_rx) = mpsc::channel::<Written>();
    std::thread::scope(|s| {
        let writer = s.spawn(move || write_files(job, blobs, run, rx, done_tx));
        let installer = s.spawn(move || install(job, blobs, hub, run, done_rx));
        let mut buf = vec![0u8; CHUNK];
        let mut got: u64 = 0;
        let mut failed = None;
        // Once this node's own writing failed, the stream still goes on to
        // the next node.
        let mut writing = true;
        let give = |p: Piece, writing: &mut bool| {
            if *writing && tx.send(p).is_err() {
                *writing = false;
            }
        };
        'files: for &i in &job.send {
            let f = &job.files[i];
            if keep[i] {
                give(Piece::Start(i), &mut writing);
            }
            let mut left = f.size;
            while left > 0 {
                let want = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
                let n = match src.read(&mut buf[..want]) {
                    Ok(0) => {
                        failed = Some(format!("{from} closed the stream early"));
                        break 'files;
                    }
                    Ok(n) => n,
                    Err(e) => {
                        failed = Some(read_error(&from, &e));
                        break 'files;
                    }
                };
                if let Some((a, w)) = next.as_mut()
                    && let Err(e) = w.write_all(&buf[..n])
                {
                    failed = Some(format!("passing the stream on: {}", send_error(*a, &e)));
                    break 'files;
                }
                if keep[i] {
                    give(Piece::Bytes(buf[..n].to_vec()), &mut writing);
                }
                left -= n as u64;
                got += n as u64;
                count.store(got, Ordering::Relaxed);
            }
            let mut sha = [0u8; 32];
            if let Err(e) = src.read_exact(&mut sha) {
                failed = Some(read_error(&from, &e));
                break;
            }
            if let Some((a, w)) = next.as_mut()
                && let Err(e) = w.write_all(&sha)
            {
                failed = Some(format!("passing the stream on: {}", send_error(*a, &e)));
                break;
            }
            if keep[i] {
                give(Piece::End(sha), &mut writing);
            }
        }
        if let Some((a, w)) = next.as_mut()
            && failed.is_none()
            && let Err(e) = w.flush()
        {
            failed = Some(format!("passing the stream on: {}", send_error(*a, &e)));
        }
        drop(tx);
        let wrote = writer
            .join()
            .map_err(|_| "the writer thread panicked".to_string())?;
        let installed = installer
            .join()
            .map_err(|_| "the installer thread panicked".to_string())?;
        wrote?;
        let received = installed?;
        match failed {
            Some(why) => Err(why),
            None => Ok(received),
        }
    })
}

fn read_error(from: &str, e: &std::io::Error) -> String {
    if stalled(e) {
        format!(
            "no byte from {from} for {} s (the node before this one stopped sending)",
            STALL.as_secs()
        )
    } else {
        format!("reading the stream from {from}: {e}")
    }
}

/// A write error in words (a full disk named as one).
fn write_error(path: &Path, e: &std::io::Error) -> String {
    let full = e.raw_os_error() == Some(nix::libc::ENOSPC);
    format!(
        "writing {}: {e}{}",
        path.display(),
        if full {
            " (the disk is full there; the file was removed)"
        } else {
            " (the file was removed)"
        }
    )
}

/// A file written in full, for [`install`]: its index, the open file and
/// the hash the sender computed.
struct Written(usize, std::fs::File, [u8; 32]);

/// Writes each kept file under its run's own name; hands each complete one
/// to the installer, so the stream never waits for the disk to flush a
/// file (a chain would stall on every node's flush). A file whose write
/// failed, or that the stream left unfinished, is removed.
fn write_files(
    job: &Job,
    blobs: &BlobDir,
    run: &str,
    rx: mpsc::Receiver<Piece>,
    done: mpsc::Sender<Written>,
) -> Result<(), String> {
    let mut cur: Option<(usize, BufWriter<std::fs::File>)> = None;
    let mut failed = None;
    for piece in rx {
        match piece {
            Piece::Start(i) => {
                let name = partial(&job.files[i].blob, run);
                match blobs.create_new(&name) {
                    Ok(f) => cur = Some((i, BufWriter::with_capacity(CHUNK, f))),
                    Err(e) => {
                        failed = Some(write_error(&blobs.path(&name), &e));
                        break;
                    }
                }
            }
            Piece::Bytes(b) => {
                if let Some((i, w)) = cur.as_mut()
                    && let Err(e) = w.write_all(&b)
                {
                    failed = Some(write_error(
                        &blobs.path(&partial(&job.files[*i].blob, run)),
                        &e,
                    ));
                    break;
                }
            }
            Piece::End(sender) => {
                let Some((i, w)) = cur.take() else { continue };
                match w.into_inner() {
                    Ok(file) => {
                        let _ = done.send(Written(i, file, sender));
                    }
                    Err(e) => {
                        let name = partial(&job.files[i].blob, run);
                        let (why, w) = e.into_parts();
                        drop(w);
                        let _ = blobs.remove(&name);
                        failed = Some(write_error(&blobs.path(&name), &why));
                        break;
                    }
                }
            }
        }
    }
    if let Some((i, w)) = cur.take() {
        // Unfinished: its bytes are no use to any later run.
        let (file, _) = w.into_parts();
        drop(file);
        let _ = blobs.remove(&partial(&job.files[i].blob, run));
    }
    match failed {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// sha256 of `file` as it is on disk, read from its start.
fn hash_on_disk(file: &std::fs::File) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(hex::encode(h.finalize()))
}

/// Makes each written file durable, hashes it as it is on disk, then
/// installs it under its blob name when that hash matches the one it must
/// have and the sender's (else removes it and reports it), and records
/// its hash. After an error the rest are removed, not installed.
fn install(
    job: &Job,
    blobs: &BlobDir,
    hub: &Path,
    run: &str,
    done: mpsc::Receiver<Written>,
) -> Result<Received, String> {
    let rec_path = record::path(hub, &cache::folder_of(&job.id));
    let mut rec = Record::load(&rec_path);
    let mut r = Received::default();
    let mut failed = None;
    for Written(i, file, sender) in done {
        let f = &job.files[i];
        let name = partial(&f.blob, run);
        if failed.is_some() {
            drop(file);
            let _ = blobs.remove(&name);
            continue;
        }
        match install_one(f, blobs, &name, file, sender) {
            Ok(Ok(sha)) => {
                if let Err(e) = rec
                    .note(&f.blob, &blobs.path(&f.blob), &sha)
                    .and_then(|()| rec.save(&rec_path))
                {
                    failed = Some(format!("{}: {e}", rec_path.display()));
                    continue;
                }
                r.written += 1;
                r.bytes += f.size;
            }
            Ok(Err(bad)) => r.bad.push(bad),
            Err(why) => failed = Some(why),
        }
    }
    match failed {
        Some(why) => Err(why),
        None => Ok(r),
    }
}

/// One file of [`install`]: `Ok(Ok(sha256))` installed, `Ok(Err(why))`
/// its content is wrong (removed), `Err` it could not be finished
/// (removed).
fn install_one(
    f: &WireFile,
    blobs: &BlobDir,
    name: &str,
    file: std::fs::File,
    sender: [u8; 32],
) -> Result<Result<String, String>, String> {
    let path = blobs.path(name);
    let checked = file
        .sync_data()
        .and_then(|()| Ok((hash_on_disk(&file)?, file.metadata()?)));
    let (mine, meta) = match checked {
        Ok(v) => v,
        Err(e) => {
            drop(file);
            let _ = blobs.remove(name);
            return Err(write_error(&path, &e));
        }
    };
    drop(file);
    let sender = hex::encode(sender);
    let want = f.sha256.clone().unwrap_or_else(|| sender.clone());
    if !mine.eq_ignore_ascii_case(&want) || mine != sender {
        let _ = blobs.remove(name);
        return Ok(Err(format!(
            "{}: arrived with sha256 {mine}, expected {want} (the source's copy hashed to {sender})",
            f.path
        )));
    }
    blobs
        .rename(name, &f.blob)
        .map_err(|e| format!("{} -> {}: {e}", path.display(), f.blob))?;
    // What now has the blob's name is the very file hashed.
    if blobs.regular(&f.blob) != Some((meta.dev(), meta.ino(), meta.len())) {
        return Err(format!(
            "{}: replaced while it was installed (another process writes into this cache)",
            blobs.path(&f.blob).display()
        ));
    }
    Ok(Ok(mine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_compared_in_full() {
        let a = token().unwrap();
        assert_eq!(a.len(), 64);
        assert_ne!(a, token().unwrap());
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"ab", b"abc"));
    }

    fn job() -> Job {
        Job {
            token: "ab".repeat(32),
            id: "a/b".into(),
            ref_name: Some("main".into()),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            files: vec![WireFile {
                path: "config.json".into(),
                blob: "c0ffee".into(),
                size: 3,
                sha256: None,
            }],
            send: vec![0],
            keep: vec![0],
            listen: None,
            next: None,
            hub: "/h".into(),
        }
    }

    #[test]
    fn a_job_names_only_files_inside_the_cache() {
        job().check().unwrap();
        type Spoil = fn(&mut Job);
        let cases: [(&str, Spoil); 7] = [
            ("blob for config.json is \"../../x\"", |j| {
                j.files[0].blob = "../../x".into()
            }),
            (
                "blob for config.json is \"/root/.ssh/authorized_keys\"",
                |j| j.files[0].blob = "/root/.ssh/authorized_keys".into(),
            ),
            ("commit is \"../../x\"", |j| j.commit = "../../x".into()),
            ("ref is \"../x\"", |j| j.ref_name = Some("../x".into())),
            ("path is \"../x\"", |j| j.files[0].path = "../x".into()),
            ("sha256 of config.json", |j| {
                j.files[0].sha256 = Some("x".into())
            }),
            ("file index is \"1\"", |j| j.keep = vec![1]),
        ];
        for (want, spoil) in cases {
            let mut j = job();
            spoil(&mut j);
            let e = j.check().unwrap_err();
            assert!(e.contains(want) && e.contains("nothing was written"), "{e}");
        }
    }

    #[test]
    fn a_receiver_refuses_a_bad_job_before_it_touches_anything() {
        let d = tempfile::tempdir().unwrap();
        let mut j = job();
        j.files[0].blob = "../../../x".into();
        j.listen = Some("127.0.0.1".parse().unwrap());
        let mut out = Vec::new();
        let e = receive(&j, d.path(), &mut out).unwrap_err();
        assert!(e.contains("blob for config.json"), "{e}");
        assert!(out.is_empty());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}

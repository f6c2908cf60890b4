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
//! the 32-byte sha256 the sender computed while reading them. A receiver
//! writes a file to `blobs/BLOB.halobox-partial`, hashes it as it arrives,
//! and renames it to its blob name only when the hash matches the hub's
//! (the blob name, for LFS files) and the sender's; it then links the
//! snapshot and records the hash ([`super::record`]). A killed sync leaves
//! only partial files, never a wrong blob: the next sync sends those files
//! again.

use std::io::{BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache::Repo;
use super::record::{self, Record};

/// Bytes read and written at a time.
const CHUNK: usize = 1 << 20;
/// How long a receiver waits for its sender, and any read may stall.
const STALL: Duration = Duration::from_secs(60);
/// How often a receiver prints its progress.
const TICK: Duration = Duration::from_millis(200);

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
    let mut b = [0u8; 32];
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

fn connect(addr: SocketAddr, token: &[u8; 32]) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
        format!("cannot connect to {addr} over the data plane: {e} (a firewall between the nodes?)")
    })?;
    s.set_nodelay(true).ok();
    let mut w = &s;
    w.write_all(token).map_err(|e| format!("{addr}: {e}"))?;
    Ok(s)
}

/// The sender: streams the job's files from this node's cache to `next`.
pub fn send(job: &Job, hub: &Path) -> Result<u64, String> {
    let token = token_bytes(job)?;
    let next = job.next.ok_or("a sender needs an address to send to")?;
    let repo = Repo::new(hub, &job.id);
    let stream = connect(next, &token)?;
    let mut out = BufWriter::with_capacity(CHUNK, stream);
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    for &i in &job.send {
        let f = &job.files[i];
        let path = repo.blob(&f.blob);
        let mut file =
            std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
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
            out.write_all(&buf[..n])
                .map_err(|e| format!("sending to {next}: {e}"))?;
            left -= n as u64;
            total += n as u64;
        }
        out.write_all(&h.finalize())
            .map_err(|e| format!("sending to {next}: {e}"))?;
    }
    out.flush().map_err(|e| format!("sending to {next}: {e}"))?;
    Ok(total)
}

/// Accepts connections on `l` until one presents `token` (others are
/// dropped), within [`STALL`].
fn accept(l: &TcpListener, token: &[u8; 32]) -> Result<TcpStream, String> {
    let deadline = Instant::now() + STALL;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                s.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut got = [0u8; 32];
                if (&s).read_exact(&mut got).is_ok() && same(&got, token) {
                    s.set_read_timeout(Some(STALL)).ok();
                    return Ok(s);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(format!("no sender connected within {} s", STALL.as_secs()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// What the writer thread gets.
enum Piece {
    Start(usize),
    Bytes(Vec<u8>),
    End(usize, [u8; 32]),
}

/// The receiver: listens (printing `listening PORT`), takes the stream,
/// passes it on, writes and verifies what it keeps, links the snapshot.
/// Prints `bytes N` as the stream comes in.
pub fn receive(job: &Job, hub: &Path, out: &mut dyn Write) -> Result<Received, String> {
    let token = token_bytes(job)?;
    let ip = job
        .listen
        .ok_or("a receiver needs an address to listen on")?;
    let repo = Repo::new(hub, &job.id);
    std::fs::create_dir_all(repo.blobs())
        .map_err(|e| format!("{}: {e}", repo.blobs().display()))?;
    let l = TcpListener::bind((ip, 0)).map_err(|e| format!("cannot listen on {ip}: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    writeln!(out, "listening {port}")
        .and_then(|()| out.flush())
        .map_err(|e| e.to_string())?;
    let mut next = match job.next {
        Some(a) => Some(BufWriter::with_capacity(CHUNK, connect(a, &token)?)),
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
    let mut src = accept(&l, &token)?;
    drop(l);
    let (tx, rx) = mpsc::sync_channel::<Piece>(16);
    let keep: Vec<bool> = (0..job.files.len())
        .map(|i| job.keep.contains(&i))
        .collect();
    let writer = {
        let job = job.clone();
        let repo = repo.clone();
        let hub = hub.to_path_buf();
        std::thread::spawn(move || write_files(&job, &repo, &hub, &rx))
    };
    let mut buf = vec![0u8; CHUNK];
    let mut got: u64 = 0;
    let mut tick = Instant::now();
    let mut failed = None;
    'files: for &i in &job.send {
        let f = &job.files[i];
        if keep[i] && tx.send(Piece::Start(i)).is_err() {
            break;
        }
        let mut left = f.size;
        while left > 0 {
            let want = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
            let n = match src.read(&mut buf[..want]) {
                Ok(0) => {
                    failed = Some("the sender closed the stream early".to_string());
                    break 'files;
                }
                Ok(n) => n,
                Err(e) => {
                    failed = Some(format!("reading the stream: {e}"));
                    break 'files;
                }
            };
            if let Some(w) = next.as_mut()
                && let Err(e) = w.write_all(&buf[..n])
            {
                failed = Some(format!(
                    "passing the stream on to {}: {e}",
                    job.next.map(|a| a.to_string()).unwrap_or_default()
                ));
                break 'files;
            }
            if keep[i] && tx.send(Piece::Bytes(buf[..n].to_vec())).is_err() {
                break 'files;
            }
            left -= n as u64;
            got += n as u64;
            if tick.elapsed() >= TICK {
                let _ = writeln!(out, "bytes {got}").and_then(|()| out.flush());
                tick = Instant::now();
            }
        }
        let mut sha = [0u8; 32];
        if let Err(e) = src.read_exact(&mut sha) {
            failed = Some(format!("reading the stream: {e}"));
            break;
        }
        if let Some(w) = next.as_mut()
            && let Err(e) = w.write_all(&sha)
        {
            failed = Some(format!("passing the stream on: {e}"));
            break;
        }
        if keep[i] && tx.send(Piece::End(i, sha)).is_err() {
            break;
        }
    }
    if let Some(w) = next.as_mut()
        && failed.is_none()
        && let Err(e) = w.flush()
    {
        failed = Some(format!("passing the stream on: {e}"));
    }
    drop(tx);
    let _ = writeln!(out, "bytes {got}").and_then(|()| out.flush());
    let result = writer
        .join()
        .map_err(|_| "the writer thread panicked".to_string())?;
    let received = result?;
    if let Some(why) = failed {
        return Err(why);
    }
    if let Some(r) = &job.ref_name {
        repo.set_ref(r, &job.commit)
            .map_err(|e| format!("refs/{r}: {e}"))?;
    }
    Ok(received)
}

fn partial(repo: &Repo, blob: &str) -> std::path::PathBuf {
    repo.blobs().join(format!("{blob}.halobox-partial"))
}

/// A file written in full, for [`install`]: its index, the open file,
/// its hash as it arrived, and the hash the sender computed.
struct Written(usize, std::fs::File, [u8; 32], [u8; 32]);

/// Writes and hashes each kept file; hands each complete one to a thread
/// that makes it durable and installs it, so the stream never waits for
/// the disk to flush a file (a chain would stall on every node's flush).
fn write_files(
    job: &Job,
    repo: &Repo,
    hub: &Path,
    rx: &mpsc::Receiver<Piece>,
) -> Result<Received, String> {
    let (done_tx, done_rx) = mpsc::channel::<Written>();
    let installer = {
        let (job, repo, hub) = (job.clone(), repo.clone(), hub.to_path_buf());
        std::thread::spawn(move || install(&job, &repo, &hub, &done_rx))
    };
    let mut cur: Option<(BufWriter<std::fs::File>, Sha256)> = None;
    let mut failed = None;
    for piece in rx {
        match piece {
            Piece::Start(i) => {
                let p = partial(repo, &job.files[i].blob);
                match std::fs::File::create(&p) {
                    Ok(f) => cur = Some((BufWriter::with_capacity(CHUNK, f), Sha256::new())),
                    Err(e) => {
                        failed = Some(format!("{}: {e}", p.display()));
                        break;
                    }
                }
            }
            Piece::Bytes(b) => {
                if let Some((w, h)) = cur.as_mut() {
                    h.update(&b);
                    if let Err(e) = w.write_all(&b) {
                        failed = Some(format!("writing: {e} (disk full?)"));
                        break;
                    }
                }
            }
            Piece::End(i, sender) => {
                let Some((w, h)) = cur.take() else { continue };
                match w.into_inner() {
                    Ok(file) => {
                        let _ = done_tx.send(Written(i, file, h.finalize().into(), sender));
                    }
                    Err(e) => {
                        failed = Some(format!("writing: {e}"));
                        break;
                    }
                }
            }
        }
    }
    drop(done_tx);
    let installed = installer
        .join()
        .map_err(|_| "the installer thread panicked".to_string())?;
    match failed {
        Some(why) => Err(why),
        None => installed,
    }
}

/// Makes each written file durable, then installs it under its blob name
/// when both hashes match the one it must have (else removes it), and
/// records its hash.
fn install(
    job: &Job,
    repo: &Repo,
    hub: &Path,
    done: &mpsc::Receiver<Written>,
) -> Result<Received, String> {
    let rec_path = record::path(hub, &super::cache::folder_of(&job.id));
    let mut rec = Record::load(&rec_path);
    let mut r = Received::default();
    for Written(i, file, mine, sender) in done {
        let f = &job.files[i];
        let p = partial(repo, &f.blob);
        file.sync_data()
            .map_err(|e| format!("{}: {e}", p.display()))?;
        drop(file);
        let mine = hex::encode(mine);
        let want = f.sha256.clone().unwrap_or_else(|| hex::encode(sender));
        if mine.eq_ignore_ascii_case(&want) && mine == hex::encode(sender) {
            let dest = repo.blob(&f.blob);
            std::fs::rename(&p, &dest).map_err(|e| format!("{}: {e}", dest.display()))?;
            rec.note(&f.blob, &dest, &mine).map_err(|e| e.to_string())?;
            rec.save(&rec_path)
                .map_err(|e| format!("{}: {e}", rec_path.display()))?;
            r.written += 1;
            r.bytes += f.size;
        } else {
            let _ = std::fs::remove_file(&p);
            r.bad.push(format!(
                "{}: arrived with sha256 {mine}, expected {want} (the source's copy hashed to {})",
                f.path,
                hex::encode(sender)
            ));
        }
    }
    Ok(r)
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
}

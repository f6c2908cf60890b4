//! `halobox model sync|ls|rm` and `serve`'s model check end to end on three
//! test nodes (scripts/netns/nodes.sh): each node has its own /root, so its
//! own Hugging Face cache (/root/.cache/huggingface/hub); a model of random
//! safetensors shards plus config is laid out in node a's cache at test
//! time, as the hub lays it out (blobs named by sha256, snapshot links,
//! refs/main). Needs root, iproute2, tc and openssh-server; a missing piece
//! fails. Traffic stays inside the namespaces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

mod common;
use common::netns::{self, sigkill};
use common::text;

const MODEL: &str = "halobox-test/tiny";
const FOLDER: &str = "models--halobox-test--tiny";
const COMMIT: &str = "1111111111222222222233333333334444444444";
/// Shards of this many bytes each.
const SHARD: usize = 64 << 20;
const SHARDS: usize = 3;

struct Nodes {
    nodes: netns::Nodes,
    file: PathBuf,
}

impl Nodes {
    fn up() -> Nodes {
        let nodes = netns::Nodes::up(&["9000", "9000", "9000"]);
        let mut t = format!(
            "halobox = \"{}\"\nssh_options = {}\n",
            env!("CARGO_BIN_EXE_halobox"),
            serde_json::to_string(&nodes.ssh_options()).unwrap()
        );
        for (i, x) in ['a', 'b', 'c'].into_iter().enumerate() {
            t.push_str(&format!(
                "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"host\"\n",
                ip = nodes.ip(i as u32 + 1)
            ));
        }
        let file = nodes.path("cluster.toml");
        std::fs::write(&file, t).unwrap();
        Nodes { nodes, file }
    }

    /// Node `x`'s model folder, as this machine sees it.
    fn repo(&self, x: char) -> PathBuf {
        self.nodes
            .path(&format!("node_{x}/root/.cache/huggingface/hub/{FOLDER}"))
    }

    fn spawn(&self, args: &[&str]) -> Command {
        // `--cluster FILE` before a `--` (what follows it is vLLM's).
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let mut all: Vec<&str> = args[..at].to_vec();
        all.extend(["--cluster", self.file.to_str().unwrap()]);
        all.extend(&args[at..]);
        let mut c = self.nodes.spawn_halobox('a', &all);
        c.env_remove("HF_HOME").env_remove("HF_HUB_CACHE");
        c
    }

    fn halobox(&self, args: &[&str]) -> Output {
        self.spawn(args).output().expect("run halobox")
    }

    /// Limits what flows toward node `x` to `rate` (tc on the bridge port),
    /// or lifts the limit.
    fn throttle(&self, x: char, rate: Option<&str>) {
        let sw = format!("hb-{}-sw", self.nodes.tag);
        let port = format!("p-{x}");
        let mut args = vec!["netns", "exec", &sw, "tc", "qdisc"];
        match rate {
            Some(r) => args.extend([
                "replace", "dev", &port, "root", "tbf", "rate", r, "burst", "256kb", "latency",
                "400ms",
            ]),
            None => args.extend(["del", "dev", &port, "root"]),
        }
        let out = Command::new("ip").args(&args).output().unwrap();
        assert!(out.status.success(), "tc: {}", text(&out));
    }
}

/// Fast, reproducible filler (xorshift), `n` bytes from `seed`.
fn filler(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// The model in `repo` as the hub cache lays it out: LFS shards named by
/// their sha256, config.json by a git blob id; the shard paths.
fn make_model(repo: &Path) -> Vec<String> {
    let blobs = repo.join("blobs");
    let snap = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    let config = br#"{"architectures":["LlamaForCausalLM"],"hidden_size":64}"#;
    let cfg_blob = "0123456789abcdef0123456789abcdef01234567";
    std::fs::write(blobs.join(cfg_blob), config).unwrap();
    std::os::unix::fs::symlink(format!("../../blobs/{cfg_blob}"), snap.join("config.json"))
        .unwrap();
    let mut shards = vec![];
    for i in 1..=SHARDS {
        let data = filler(SHARD, i as u64 * 7919);
        let blob = sha(&data);
        std::fs::write(blobs.join(&blob), &data).unwrap();
        let name = format!("model-0000{i}-of-0000{SHARDS}.safetensors");
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snap.join(&name)).unwrap();
        shards.push(name);
    }
    shards
}

/// The snapshot of `repo`: path -> sha256 of the content (None: missing).
fn contents(repo: &Path) -> Vec<(String, Option<String>)> {
    let snap = repo.join("snapshots").join(COMMIT);
    let mut names: Vec<String> = std::fs::read_dir(&snap)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let c = std::fs::read(snap.join(&n)).ok().map(|b| sha(&b));
            (n, c)
        })
        .collect()
}

/// Every LFS blob present on node `repo` hashes to its name (no wrong
/// bytes were ever installed).
fn blobs_sound(repo: &Path) {
    for e in std::fs::read_dir(repo.join("blobs")).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.len() == 64 {
            assert_eq!(
                sha(&std::fs::read(e.path()).unwrap()),
                n,
                "{}",
                e.path().display()
            );
        }
    }
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn sync_resume_noop_repair_and_serve_refusal_on_three_nodes() {
    let n = Nodes::up();
    let shards = make_model(&n.repo('a'));
    let want = contents(&n.repo('a'));

    // The plan, changing nothing.
    let o = n.halobox(&["model", "sync", MODEL, "--dry-run"]);
    let s = stdout(&o);
    assert!(
        s.contains("node b: 4 file(s), 192.0 MiB") || s.contains("node b: 4 file(s), 192 MiB"),
        "{s}"
    );
    assert!(s.contains("chain: node a -> node b -> node c"), "{s}");
    assert!(!n.repo('b').exists() && !n.repo('c').exists());

    // serve refuses while the nodes lack the model, naming them.
    let o = n.halobox(&["serve", MODEL, "--dry-run"]);
    assert!(!o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("node b does not hold it; node c does not hold it")
            && e.contains(&format!("halobox model sync {MODEL}")),
        "{e}"
    );

    // A sync killed halfway (the stream slowed toward b) leaves no node
    // holding it complete, only verified blobs, nothing running.
    n.throttle('b', Some("160mbit"));
    let mut child = n
        .spawn(&["model", "sync", MODEL])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let first_done = loop {
        let done = std::fs::read_dir(n.repo('b').join("blobs"))
            .map(|rd| rd.flatten().any(|e| e.file_name().len() == 64))
            .unwrap_or(false);
        if done || Instant::now() > deadline {
            break done;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    sigkill(&mut child);
    assert!(first_done, "no shard arrived on node b within 60 s");
    n.throttle('b', None);
    for x in ['b', 'c'] {
        assert!(
            n.nodes.leftovers(x, Duration::from_secs(15)).is_empty(),
            "node {x}: {:?}",
            n.nodes.processes_now(x)
        );
        if n.repo(x).exists() {
            blobs_sound(&n.repo(x));
        }
        assert_ne!(contents(&n.repo(x)), want, "node {x} complete after a kill");
    }
    let o = n.halobox(&["model", "ls", "--json"]);
    let ls: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for node in ls.as_array().unwrap().iter().skip(1) {
        for m in node["holdings"]["models"].as_array().unwrap() {
            assert_eq!(m["complete"], false, "{node}");
        }
    }

    // Resumed: only what is still missing moves; every node then holds it.
    let o = n.halobox(&["model", "sync", MODEL]);
    let s = stdout(&o);
    let b_line = s
        .lines()
        .find(|l| l.starts_with("  node b: "))
        .unwrap_or("");
    assert!(
        !b_line.contains("4 file(s)"),
        "the resumed sync sent node b everything again:\n{s}"
    );
    assert!(s.contains("VERIFIED"), "{s}");
    for x in ['b', 'c'] {
        assert_eq!(contents(&n.repo(x)), want, "node {x}\n{s}");
    }

    // Again: nothing moves, and it says so.
    let o = n.halobox(&["model", "sync", MODEL]);
    let s = stdout(&o);
    assert!(s.contains("moved 0 B: every node already holds"), "{s}");
    assert!(
        s.contains("node c: complete and verified, nothing to send"),
        "{s}"
    );

    // A shard damaged on c (same size) and one cut short on b are found
    // and sent again.
    let victim = n.repo('c').join("snapshots").join(COMMIT).join(&shards[1]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[SHARD / 2] ^= 0xff;
    std::fs::write(std::fs::canonicalize(&victim).unwrap(), &bytes).unwrap();
    let short =
        std::fs::canonicalize(n.repo('b').join("snapshots").join(COMMIT).join(&shards[2])).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&short)
        .unwrap()
        .set_len(1000)
        .unwrap();
    let o = n.halobox(&["model", "sync", MODEL]);
    let s = stdout(&o);
    assert!(
        s.contains(&format!("{} (content differs (sha256))", shards[1])),
        "{s}"
    );
    assert!(
        s.contains(&format!("{} (1000 instead of {SHARD} bytes)", shards[2])),
        "{s}"
    );
    for x in ['b', 'c'] {
        assert_eq!(contents(&n.repo(x)), want, "node {x}\n{s}");
    }

    // serve's check passes now, and refuses once b lacks a shard.
    let o = n.halobox(&["serve", MODEL, "--dry-run"]);
    let s = stdout(&o);
    assert!(
        s.contains(&format!(
            "# model: every node holds {MODEL}@main (commit 111111111122) complete: 4 files"
        )),
        "{s}"
    );
    // The revision vLLM is told to load is the one checked.
    let o = n.halobox(&["serve", MODEL, "--dry-run", "--", "--revision", COMMIT]);
    let s = stdout(&o);
    assert!(
        s.contains(&format!("every node holds {MODEL}@{COMMIT}")),
        "{s}"
    );
    let o = n.halobox(&["serve", MODEL, "--dry-run", "--", "--revision", "v9"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("v9"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(
        std::fs::canonicalize(n.repo('b').join("snapshots").join(COMMIT).join(&shards[0])).unwrap(),
    )
    .unwrap();
    let o = n.halobox(&["serve", MODEL, "--dry-run"]);
    assert!(!o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains(&format!("node b lacks {}", shards[0])), "{e}");

    // ls, then rm: planned, refused without a terminal or --yes, done.
    let o = n.halobox(&["model", "ls"]);
    let s = stdout(&o);
    assert!(s.contains("free:"), "{s}");
    let flags = |x: &str| -> Vec<String> {
        let line = s
            .lines()
            .find(|l| l.starts_with(x) && l.contains(MODEL))
            .unwrap_or("");
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        words[words.len().saturating_sub(2)..].to_vec()
    };
    assert_eq!(flags("c "), ["yes", "yes"], "complete, verified on c:\n{s}");
    assert_eq!(flags("b "), ["no", "no"], "complete, verified on b:\n{s}");
    // One revision removed: a second one on a and c shares shard 1 with
    // main and has a file of its own; `rm MODEL@v2` takes its snapshot, its
    // ref and its own blob, and leaves main whole.
    let commit2 = "5555555555666666666677777777778888888888";
    let own = filler(1 << 20, 4242);
    let own_blob = sha(&own);
    let shared_blob =
        std::fs::read_link(n.repo('c').join("snapshots").join(COMMIT).join(&shards[0]))
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
    for x in ['a', 'c'] {
        let repo = n.repo(x);
        let snap = repo.join("snapshots").join(commit2);
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(repo.join("blobs").join(&own_blob), &own).unwrap();
        std::os::unix::fs::symlink(format!("../../blobs/{shared_blob}"), snap.join(&shards[0]))
            .unwrap();
        std::os::unix::fs::symlink(
            format!("../../blobs/{own_blob}"),
            snap.join("extra.safetensors"),
        )
        .unwrap();
        std::fs::write(repo.join("refs/v2"), commit2).unwrap();
    }
    let before_c = contents(&n.repo('c'));
    let o = n.halobox(&["model", "rm", &format!("{MODEL}@v2"), "--dry-run"]);
    let s = stdout(&o);
    assert!(
        s.contains(&format!(
            "node c: /root/.cache/huggingface/hub/{FOLDER} at {commit2}"
        )),
        "{s}"
    );
    assert!(s.contains("node b: not there"), "{s}");
    assert!(n.repo('c').join("snapshots").join(commit2).exists());
    let o = n.halobox(&["model", "rm", &format!("{MODEL}@v2"), "--yes"]);
    let s = stdout(&o);
    assert!(s.contains("node c: removed, 1 MiB freed"), "{s}");
    for x in ['a', 'c'] {
        let repo = n.repo(x);
        assert!(!repo.join("snapshots").join(commit2).exists(), "node {x}");
        assert!(!repo.join("refs/v2").exists(), "node {x}");
        assert!(!repo.join("blobs").join(&own_blob).exists(), "node {x}");
        assert!(repo.join("blobs").join(&shared_blob).exists(), "node {x}");
    }
    assert_eq!(contents(&n.repo('c')), before_c, "main on c is whole");

    let o = n.halobox(&["model", "rm", MODEL, "--dry-run"]);
    let s = stdout(&o);
    assert!(
        s.contains("node c: /root/.cache/huggingface/hub/models--halobox-test--tiny"),
        "{s}"
    );
    assert!(n.repo('c').exists());
    let o = n.halobox(&["model", "rm", MODEL]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--yes"),
        "{}",
        text(&o)
    );
    let o = n.halobox(&["model", "rm", MODEL, "--yes"]);
    stdout(&o);
    for x in ['a', 'b', 'c'] {
        assert!(!n.repo(x).exists(), "node {x}");
    }
}

#[test]
fn unknown_models_and_unreachable_nodes_are_named() {
    let n = Nodes::up();
    let o = n.halobox(&["model", "sync", MODEL, "--dry-run"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains(&format!("node a has no {MODEL}")) && e.contains("halobox model pull"),
        "{e}"
    );
    make_model(&n.repo('a'));
    let o = n.halobox(&["model", "sync", &format!("{MODEL}@v9"), "--dry-run"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("no revision \"v9\"")
            && e.contains("main (111111111122)"),
        "{e}"
    );
    n.nodes.kill_sshd('c');
    let o = n.halobox(&["model", "sync", MODEL, "--dry-run"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("node c (root@")
            && e.contains("cannot reach it over ssh"),
        "{e}"
    );
}

//! `halobox model sync|ls|rm` and `serve`'s model check end to end on three
//! test nodes (scripts/netns/nodes.sh): each node has its own /root, so its
//! own Hugging Face cache (/root/.cache/huggingface/hub); a model of random
//! safetensors shards plus config is laid out in node a's cache at test
//! time, as the hub lays it out (blobs named by sha256, snapshot links,
//! refs/main). Needs root, iproute2, tc and openssh-server; a missing piece
//! fails. Traffic stays inside the namespaces. One test drives the stream's
//! two ends (`node-receive`, `node-send`) on loopback, without the nodes.

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

    /// `halobox ARGS --cluster FILE` on node a.
    fn halobox_with(&self, file: &Path, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend(["--cluster", file.to_str().unwrap()]);
        let mut c = self.nodes.spawn_halobox('a', &all);
        c.env_remove("HF_HOME").env_remove("HF_HUB_CACHE");
        c.output().expect("run halobox")
    }

    /// Node `x`'s /root as this machine sees it (through its PID 1, so
    /// what is mounted there on the node shows).
    fn root(&self, x: char) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root/root", self.nodes.pid(x)))
    }

    /// Partial files in node `x`'s blobs.
    fn partials(&self, x: char) -> Vec<String> {
        std::fs::read_dir(
            self.root(x)
                .join(".cache/huggingface/hub")
                .join(FOLDER)
                .join("blobs"),
        )
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".halobox-partial"))
                .collect()
        })
        .unwrap_or_default()
    }

    /// Waits (up to 60 s) until node `x` writes a partial file.
    fn wait_for_partial(&self, x: char) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.partials(x).is_empty() {
            assert!(
                Instant::now() < deadline,
                "node {x} wrote no partial file within 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The pid (as this machine sees it) of the `halobox model node-receive`
    /// running on node `x`.
    fn receiver_pid(&self, x: char) -> Option<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.nodes.ns(x)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .find(|p| {
                let c = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                args.first() == Some(&env!("CARGO_BIN_EXE_halobox").as_bytes())
                    && args.contains(&&b"node-receive"[..])
            })
            .and_then(|p| p.parse().ok())
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
    make_model_of(repo, SHARD)
}

/// The bytes of the model's config.json, and its blob name.
const CONFIG: &[u8] = br#"{"architectures":["LlamaForCausalLM"],"hidden_size":64}"#;
const CONFIG_BLOB: &str = "0123456789abcdef0123456789abcdef01234567";

/// [`make_model`] with shards of `shard` bytes.
fn make_model_of(repo: &Path, shard: usize) -> Vec<String> {
    let blobs = repo.join("blobs");
    let snap = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    let config = CONFIG;
    let cfg_blob = CONFIG_BLOB;
    std::fs::write(blobs.join(cfg_blob), config).unwrap();
    std::os::unix::fs::symlink(format!("../../blobs/{cfg_blob}"), snap.join("config.json"))
        .unwrap();
    let mut shards = vec![];
    for i in 1..=SHARDS {
        let data = filler(shard, i as u64 * 7919);
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

/// `argv` on node `x` with `input` on its stdin; its stdout lines as they
/// come, and the process.
fn on_node_with_input(
    n: &Nodes,
    x: char,
    argv: &[&str],
    input: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, Write};
    let mut child = n
        .nodes
        .on_node(x, argv)
        .env_remove("HF_HOME")
        .env_remove("HF_HUB_CACHE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{input}\n").as_bytes()).unwrap();
    drop(stdin);
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// The job line `model sync` hands a node for config.json alone, its blob
/// named `blob`.
fn config_job(n: &Nodes, blob: &str, listen: Option<u32>, next: Option<String>) -> String {
    serde_json::json!({
        "token": "ab".repeat(32),
        "id": MODEL,
        "ref_name": "main",
        "commit": COMMIT,
        "files": [{"path": "config.json", "blob": blob, "size": CONFIG.len(), "sha256": sha(CONFIG)}],
        "send": [0],
        "keep": if listen.is_some() { vec![0] } else { vec![] },
        "listen": listen.map(|i| n.nodes.ip(i)),
        "next": next,
        "hub": "/root/.cache/huggingface/hub",
    })
    .to_string()
}

/// A source node whose halobox lies about a blob's name (an absolute
/// path, then a `../` one) gets nothing written outside the other nodes'
/// caches: the plan refuses it, naming the node and the field; and
/// `node-receive` / `node-send` driven directly refuse such names too.
#[test]
fn a_hostile_source_cannot_name_files_outside_the_cache() {
    let n = Nodes::up();
    make_model_of(&n.repo('a'), 1 << 20);
    // Each node runs /root/hb (its own /root): node a's lies in its facts.
    let real = env!("CARGO_BIN_EXE_halobox");
    for x in ['b', 'c'] {
        let root = n.nodes.path(&format!("node_{x}/root"));
        std::fs::create_dir_all(root.join(".ssh")).unwrap();
        netns::write_script(&root, "hb", &format!("exec {real} \"$@\""));
    }
    let a_root = n.nodes.path("node_a/root");
    std::fs::create_dir_all(a_root.join(".ssh")).unwrap();
    let file = n.nodes.path("hostile.toml");
    std::fs::write(
        &file,
        std::fs::read_to_string(&n.file).unwrap().replacen(
            &format!("halobox = \"{real}\""),
            "halobox = \"/root/hb\"",
            1,
        ),
    )
    .unwrap();
    for (bad, there) in [
        ("/root/.ssh/authorized_keys", ".ssh/authorized_keys"),
        ("../../../escaped", ".cache/huggingface/escaped"),
    ] {
        // What node a's sender would read under that name holds config.json's bytes.
        std::fs::write(a_root.join(there), CONFIG).unwrap();
        netns::write_script(
            &a_root,
            "hb",
            &format!(
                "if [ \"$2\" = node-facts ]; then {real} \"$@\" | sed 's|\"blob\":\"{CONFIG_BLOB}\"|\"blob\":\"{bad}\"|'; exit 0; fi\nexec {real} \"$@\""
            ),
        );
        let o = n.halobox_with(&file, &["model", "sync", MODEL]);
        let e = String::from_utf8_lossy(&o.stderr);
        for x in ['b', 'c'] {
            let p = n.nodes.path(&format!("node_{x}/root")).join(there);
            assert!(
                !p.exists(),
                "node {x}: {} written\n{}",
                p.display(),
                text(&o)
            );
        }
        assert!(!o.status.success(), "{}", text(&o));
        assert!(
            e.contains("node a reported blob for config.json")
                && e.contains(&format!("{bad:?}"))
                && e.contains("nothing was sent"),
            "{}",
            text(&o)
        );
    }

    // node-receive on b, driven directly with a `../` blob: refused before
    // it listens. (Were it to listen, node a's sender streams the bytes.)
    let job = config_job(&n, "../../../escaped", Some(2), None);
    let (recv, lines) = on_node_with_input(&n, 'b', &[real, "model", "node-receive"], &job);
    let mut listened = None;
    while let Ok(l) = lines.recv_timeout(Duration::from_secs(30)) {
        if let Some(p) = l.strip_prefix("listening ") {
            listened = Some(p.trim().to_string());
            break;
        }
    }
    if let Some(port) = &listened {
        let job = config_job(
            &n,
            "../../../escaped",
            None,
            Some(format!("{}:{port}", n.nodes.ip(2))),
        );
        let (mut send, _) = on_node_with_input(&n, 'a', &[real, "model", "node-send"], &job);
        send.wait().unwrap();
    }
    let o = recv.wait_with_output().unwrap();
    let escaped = n.nodes.path("node_b/root/.cache/huggingface/escaped");
    assert!(
        !escaped.exists(),
        "node-receive wrote {}",
        escaped.display()
    );
    assert!(
        listened.is_none(),
        "node-receive listened for a job naming ../../../escaped"
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("the sync job's blob for config.json is \"../../../escaped\""),
        "{e}"
    );

    // node-send on a refuses an absolute blob: it reads nothing to send.
    let job = config_job(
        &n,
        "/root/.ssh/authorized_keys",
        None,
        Some(format!("{}:9", n.nodes.ip(2))),
    );
    let (send, _) = on_node_with_input(&n, 'a', &[real, "model", "node-send"], &job);
    let o = send.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains("the sync job's blob for config.json is \"/root/.ssh/authorized_keys\""),
        "{e}"
    );
}

/// Two syncs into the same nodes at once: the second is refused by the
/// nodes' receive lock, naming it; the first installs every file whole.
#[test]
fn a_second_sync_into_a_receiving_node_is_refused() {
    let n = Nodes::up();
    make_model(&n.repo('a'));
    let want = contents(&n.repo('a'));
    n.throttle('b', Some("80mbit"));
    let first = n
        .spawn(&["model", "sync", MODEL])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    n.wait_for_partial('b');
    let o = n.halobox(&["model", "sync", MODEL]);
    let first = first.wait_with_output().unwrap();
    n.throttle('b', None);
    assert!(!o.status.success(), "the second sync ran:\n{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("another `halobox model sync` is receiving halobox-test/tiny")
            && (e.contains("node b (") || e.contains("node c (")),
        "{}",
        text(&o)
    );
    assert!(first.status.success(), "{}", text(&first));
    for x in ['b', 'c'] {
        blobs_sound(&n.repo(x));
        assert_eq!(contents(&n.repo(x)), want, "node {x}");
        assert!(n.partials(x).is_empty(), "node {x}: {:?}", n.partials(x));
    }
}

/// A receiver stopped with SIGSTOP mid-stream: the sync fails in bounded
/// time, naming the node that stopped.
#[test]
fn a_stopped_receiver_fails_the_sync_naming_its_node() {
    let n = Nodes::up();
    make_model(&n.repo('a'));
    n.throttle('b', Some("40mbit"));
    let mut child = n
        .spawn(&["model", "sync", MODEL])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    n.wait_for_partial('b');
    let pid = n.receiver_pid('b').expect("node b's receiver");
    let signal = |sig: &str| {
        let _ = Command::new("kill")
            .args([sig, &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    };
    signal("-STOP");
    // A guard against a hang only: no figure of time is asserted.
    let guard = Instant::now() + Duration::from_secs(300);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > guard {
            signal("-CONT");
            sigkill(&mut child);
            panic!("model sync still ran 300 s after node b's receiver was stopped");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = child.wait_with_output().unwrap();
    signal("-CONT");
    n.throttle('b', None);
    assert!(!o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("node b (its receiver) stopped answering"),
        "{}",
        text(&o)
    );
    for x in ['b', 'c'] {
        assert!(
            n.nodes.leftovers(x, Duration::from_secs(20)).is_empty(),
            "node {x}: {:?}",
            n.nodes.processes_now(x)
        );
    }
}

/// Every shard damaged on the source (same sizes: its facts trust LFS
/// names): nothing is installed on the others, and no ref names the
/// commit there.
#[test]
fn no_ref_is_written_when_files_fail_verification() {
    let n = Nodes::up();
    let shards = make_model_of(&n.repo('a'), 1 << 20);
    for s in &shards {
        let p = std::fs::canonicalize(n.repo('a').join("snapshots").join(COMMIT).join(s)).unwrap();
        let mut b = std::fs::read(&p).unwrap();
        b[100] ^= 0xff;
        std::fs::write(&p, b).unwrap();
    }
    let o = n.halobox(&["model", "sync", MODEL]);
    assert!(!o.status.success(), "{}", text(&o));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("no: 3 file(s) bad"), "{}", text(&o));
    for x in ['b', 'c'] {
        assert!(
            !n.repo(x).join("refs/main").exists(),
            "node {x} has refs/main\n{}",
            text(&o)
        );
        blobs_sound(&n.repo(x));
    }
}

/// Node b's disk fills up while it writes: the sync fails naming it and
/// the full disk, b keeps no partial file and no ref, and c (after b in
/// the chain) still gets the whole model.
#[test]
fn a_full_disk_leaves_no_partial_file() {
    let n = Nodes::up();
    make_model_of(&n.repo('a'), 8 << 20);
    let want = contents(&n.repo('a'));
    // b's hub on a 300 MiB tmpfs of its own: room for the plan (24 MiB and
    // the 256 MiB margin), filled once b writes.
    std::fs::create_dir_all(n.nodes.path("node_b/root/.cache/huggingface/hub")).unwrap();
    let pid = n.nodes.pid('b').to_string();
    let nsenter = |argv: &[&str]| {
        Command::new("nsenter")
            .args(["-t", &pid, "-m", "--"])
            .args(argv)
            .output()
            .unwrap()
    };
    let o = nsenter(&[
        "mount",
        "-t",
        "tmpfs",
        "-o",
        "size=300m",
        "tmpfs",
        "/root/.cache/huggingface/hub",
    ]);
    assert!(o.status.success(), "mount: {}", text(&o));
    n.throttle('b', Some("16mbit"));
    let child = n
        .spawn(&["model", "sync", MODEL])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    n.wait_for_partial('b');
    nsenter(&[
        "dd",
        "if=/dev/zero",
        "of=/root/.cache/huggingface/hub/filler",
        "bs=1M",
    ]);
    let o = child.wait_with_output().unwrap();
    n.throttle('b', None);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(n.partials('b').is_empty(), "node b: {:?}", n.partials('b'));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("node b (") && e.contains("the disk is full there"),
        "{}",
        text(&o)
    );
    let b_repo = n.root('b').join(".cache/huggingface/hub").join(FOLDER);
    assert!(!b_repo.join("refs/main").exists(), "node b has refs/main");
    assert_eq!(contents(&n.repo('c')), want, "node c\n{}", text(&o));
}

/// The job `node-receive` (`listen` set) or `node-send` (`next` set) gets
/// for every file of the model in `repo`, with its hub `hub`.
fn local_job(repo: &Path, hub: &Path, listen: bool, next: Option<String>) -> String {
    let snap = repo.join("snapshots").join(COMMIT);
    let mut files = vec![];
    let mut names: Vec<String> = std::fs::read_dir(&snap)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in names {
        let link = std::fs::read_link(snap.join(&n)).unwrap();
        let blob = link.file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(snap.join(&n)).unwrap();
        files.push(serde_json::json!({
            "path": n, "blob": blob, "size": data.len(), "sha256": sha(&data),
        }));
    }
    let all: Vec<usize> = (0..files.len()).collect();
    serde_json::json!({
        "token": "cd".repeat(32),
        "id": MODEL,
        "ref_name": "main",
        "commit": COMMIT,
        "files": files,
        "send": all,
        "keep": if listen { all.clone() } else { vec![] },
        "listen": listen.then_some("127.0.0.1"),
        "next": next,
        "hub": hub,
    })
    .to_string()
}

/// `halobox model ARG` on this machine with `HF_HUB_CACHE=hub` and `job`
/// on its stdin; its stdout lines as they come.
fn local_node(
    arg: &str,
    hub: &Path,
    job: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, Write};
    let mut child = Command::new(env!("CARGO_BIN_EXE_halobox"))
        .args(["model", arg])
        .env_remove("HF_HOME")
        .env("HF_HUB_CACHE", hub)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{job}\n").as_bytes()).unwrap();
    drop(stdin);
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Connections that never present the token (40 of them, opened before
/// the sender's) do not keep a receiver from its sender: the real
/// `node-receive` and `node-send` on loopback still move every byte. No
/// test nodes needed.
#[test]
fn idle_connections_do_not_hold_a_receiver_from_its_sender() {
    let dir = tempfile::tempdir().unwrap();
    let (hub_a, hub_b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&hub_b).unwrap();
    let repo_a = hub_a.join(FOLDER);
    make_model_of(&repo_a, 1 << 20);
    let (mut recv, lines) = local_node(
        "node-receive",
        &hub_b,
        &local_job(&repo_a, &hub_b, true, None),
    );
    let port = loop {
        let l = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("node-receive did not listen within 30 s");
        if let Some(p) = l.strip_prefix("listening ") {
            break p.trim().to_string();
        }
    };
    let idle: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap())
        .collect();
    let (mut send, _sent) = local_node(
        "node-send",
        &hub_a,
        &local_job(&repo_a, &hub_a, false, Some(format!("127.0.0.1:{port}"))),
    );
    let deadline = Instant::now() + Duration::from_secs(45);
    while recv.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = recv.kill();
            let _ = send.kill();
            let _ = send.wait();
            let o = recv.wait_with_output().unwrap();
            panic!(
                "the receiver did not finish within 45 s behind 40 idle connections\n{}",
                text(&o)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(idle);
    let o = recv.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let s = send.wait_with_output().unwrap();
    assert!(s.status.success(), "{}", text(&s));
    let repo_b = hub_b.join(FOLDER);
    let want = contents(&repo_a);
    assert_eq!(want.len(), SHARDS + 1);
    assert_eq!(contents(&repo_b), want);
    blobs_sound(&repo_b);
    assert_eq!(
        std::fs::read_to_string(repo_b.join("refs/main")).unwrap(),
        COMMIT
    );
}

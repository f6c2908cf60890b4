//! `halobox image sync`, live, on three test nodes that behave like
//! machines (scripts/netns/nodes.sh with a podman engine per node and real
//! sshd; images from scripts/netns/fleet-image.sh in the nodes' registry),
//! one cluster shared by the cases in order: a 3-node chain moves the
//! registry image (two layers) and every node ends with the registry's
//! digest, each link carrying at most 1.05x its compressed size by
//! halobox's own counters; a second run moves nothing; --dry-run names
//! the blobs each node would receive and imports nothing; a layer damaged in
//! the head's store (its bytes changed behind halobox's back) is refused
//! where it arrives, named, and no node gets the image; then the next
//! image, sharing all but one layer (its config and manifest came with the
//! refused run), sends that one layer only; `cluster refresh` (moving the image the same way
//! by default) swaps every node onto v2 with the registry unreachable from
//! b and c; a `localhost/` image built on the head with a large
//! layer, its receiver killed half-way on node c, leaves c without it, and
//! a rerun completes with the head's image id everywhere, and one more
//! run, every node holding that id, moves nothing and exports nothing (the
//! head's image store is not written). Needs root, the
//! engines of scripts/engines/start.sh, skopeo and tc; a missing piece
//! fails.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::netns::{Nodes, sigkill};

use common::{ok, text};

const HALOBOX: &str = env!("CARGO_BIN_EXE_halobox");
const NODES: [char; 3] = ['a', 'b', 'c'];
const STORE: &str = "/root/.local/share/halobox/images/models--halobox--image-blobs";

struct Cluster {
    nodes: Nodes,
    v1: String,
    v2: String,
}

impl Cluster {
    fn up() -> Cluster {
        let nodes = Nodes::up_with_engine(&["9000", "9000", "9000"], "podman");
        for x in NODES {
            ok(&nodes
                .on_node(x, &["mkdir", "-p", "-m", "700", "/run/user/0"])
                .output()
                .unwrap());
        }
        let refs = nodes.make_images("fleet-image.sh", HALOBOX);
        assert_eq!(refs.len(), 2, "{refs:?}");
        let c = Cluster {
            nodes,
            v1: refs[0].clone(),
            v2: refs[1].clone(),
        };
        c.config();
        c
    }

    fn config(&self) -> std::path::PathBuf {
        let mut t = format!(
            "halobox = \"{HALOBOX}\"\nssh_options = {}\n",
            serde_json::to_string(&self.nodes.ssh_options()).unwrap(),
        );
        for (i, x) in NODES.iter().enumerate() {
            t.push_str(&format!(
                "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"podman\"\n",
                ip = self.nodes.ip(u32::try_from(i).unwrap() + 1)
            ));
        }
        let p = self.nodes.path("cluster.toml");
        std::fs::write(&p, t).unwrap();
        p
    }

    /// `halobox image sync IMAGE --json --cluster FILE MORE`, run on node a,
    /// not waited for.
    fn spawn_sync(&self, image: &str, more: &[&str]) -> Command {
        let f = self.config().display().to_string();
        let mut argv = vec![HALOBOX, "image", "sync", image, "--json", "--cluster", &f];
        argv.extend_from_slice(more);
        self.nodes.on_node('a', &argv)
    }

    /// `image sync` of `image` started, its output piped.
    fn start_sync(&self, image: &str) -> Child {
        self.spawn_sync(image, &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn sync(&self, image: &str, more: &[&str]) -> Output {
        self.spawn_sync(image, more).output().unwrap()
    }

    /// Node `x`'s `podman image inspect` of `image`: (its repo digests, as
    /// podman prints them, and its id), or none.
    fn held(&self, x: char, image: &str) -> Option<(String, String)> {
        let out = self
            .nodes
            .on_node(
                x,
                &[
                    "podman",
                    "image",
                    "inspect",
                    "--format",
                    "{{.Id}} {{.RepoDigests}}",
                    image,
                ],
            )
            .output()
            .unwrap();
        if !out.status.success() {
            return None;
        }
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let (id, d) = s.split_once(' ')?;
        Some((d.to_string(), format!("sha256:{id}")))
    }

    /// Whether a process whose arguments match `pattern` (`pgrep -f`) runs
    /// on node `x`.
    fn running(&self, x: char, pattern: &str) -> bool {
        !self
            .nodes
            .on_node(x, &["pgrep", "-f", pattern])
            .output()
            .unwrap()
            .stdout
            .is_empty()
    }

    /// What node `x`'s podman lists (every name, digest and ID), and what
    /// it says when asked: for a failure's message.
    fn images(&self, x: char) -> String {
        let out = self
            .nodes
            .on_node(
                x,
                &[
                    "podman",
                    "images",
                    "--all",
                    "--digests",
                    "--format",
                    "{{.Repository}}:{{.Tag}} {{.Digest}} {{.ID}}",
                ],
            )
            .output()
            .unwrap();
        format!(
            "podman images on node {x} ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// Limits what flows toward node `x` to `rate` (tc on the bridge
    /// port), or lifts the limit.
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

    /// The pid (as this machine sees it) of `halobox image node-receive`
    /// on node `x`.
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
                args.first() == Some(&HALOBOX.as_bytes())
                    && args.contains(&&b"image"[..])
                    && args.contains(&&b"node-receive"[..])
            })
            .and_then(|p| p.parse().ok())
    }

    /// No node's engine keeps a prefix staged by an import beside the
    /// stream (`localhost/halobox-staging:…`).
    fn no_staging_left(&self) {
        for x in NODES {
            let left = self.sh(
                x,
                "podman images --format '{{.Repository}}:{{.Tag}}' | grep -c halobox-staging || true",
            );
            assert_eq!(
                left.trim(),
                "0",
                "node {x} keeps staged prefixes: {}",
                self.sh(x, "podman images --all")
            );
        }
    }

    /// Runs `sh -c SCRIPT` on node `x`; its stdout.
    fn sh(&self, x: char, script: &str) -> String {
        ok(&self
            .nodes
            .on_node(x, &["sh", "-c", script])
            .output()
            .unwrap())
    }
}

/// Waits (for at most two minutes) until `seen` while the sync `child`
/// still runs, and hands it back; else kills it and fails with `missing`
/// and its output.
fn while_it_runs(mut child: Child, missing: &str, mut seen: impl FnMut() -> bool) -> Child {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !seen() {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            sigkill(&mut child);
            panic!("{missing}: {}", text(&child.wait_with_output().unwrap()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The halobox processes (as this machine sees them) whose arguments
/// contain `args` (NUL-separated, as /proc/PID/cmdline holds them).
fn halobox_pids(args: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "halobox")
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(args))
        })
        .collect()
}

/// The one item left.
trait ExactlyOne: Iterator + Sized {
    fn exactly_one(mut self) -> Self::Item {
        let first = self.next().expect("one item, found none");
        assert!(self.next().is_none(), "one item, found more");
        first
    }
}
impl<I: Iterator> ExactlyOne for I {}

/// The last JSON line of `out`'s stdout.
fn report(out: &Output) -> Value {
    let s = String::from_utf8_lossy(&out.stdout);
    let line = s
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report: {}", text(out)));
    serde_json::from_str(line).unwrap()
}

fn node(r: &Value, x: char) -> &Value {
    r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["label"] == format!("node {x}"))
        .unwrap()
}

fn plan_node(r: &Value, x: char) -> &Value {
    r["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["label"] == format!("node {x}"))
        .unwrap()
}

#[test]
fn the_image_travels_once_keeps_its_digest_and_survives_faults() {
    let c = Cluster::up();

    // The chain: every node ends with the registry's digest; each link
    // carried the image once.
    let out = c.sync(&c.v1, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let r = report(&out);
    let digest = r["plan"]["digest"].as_str().unwrap().to_string();
    let size = r["plan"]["size"].as_u64().unwrap();
    let registry = ok(&Command::new("ip")
        .args([
            "netns",
            "exec",
            &c.nodes.ns('a'),
            "skopeo",
            "inspect",
            "--tls-verify=false",
        ])
        .args(["--format", "{{.Digest}}", &format!("docker://{}", c.v1)])
        .output()
        .unwrap());
    assert_eq!(digest, registry.trim(), "the registry's digest");
    for x in NODES {
        let (d, _) = c
            .held(x, &c.v1)
            .unwrap_or_else(|| panic!("node {x} has no v1"));
        assert!(d.contains(&digest), "node {x}: {d}");
    }
    c.no_staging_left();
    for x in ['b', 'c'] {
        let carried = node(&r, x)["carried"].as_u64().unwrap();
        assert!(carried > 0, "node {x} carried nothing: {r}");
        assert!(
            carried as f64 <= size as f64 * 1.05,
            "node {x}'s link carried {carried} bytes for a {size}-byte image"
        );
    }

    // Every node holds it: nothing moves.
    let out = c.sync(&c.v1, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let r = report(&out);
    assert_eq!(r["stream"], 0, "{r}");
    for x in NODES {
        assert_eq!(plan_node(&r, x)["import"], false, "{r}");
    }

    // --dry-run: per node, the blobs that would move; nothing imported.
    let out = c.sync(&c.v2, &["--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let r = report(&out);
    for x in ['b', 'c'] {
        let n = plan_node(&r, x);
        assert_eq!(n["blobs"].as_array().unwrap().len(), 3, "{r}");
        assert!(n["bytes"].as_u64().unwrap() > 0, "{r}");
        assert!(c.held(x, &c.v2).is_none(), "node {x} imported in a dry run");
    }

    // v2's own layer damaged in the head's store after it was recorded
    // (same size, same time): the receivers refuse it and name it, and
    // keep what they had.
    let ex = ok(&c
        .nodes
        .on_node('a', &[HALOBOX, "image", "node-export", &c.v2])
        .output()
        .unwrap());
    let ex: Value = serde_json::from_str(ex.lines().last().unwrap()).unwrap();
    let v1_blobs = c.sh('b', &format!("ls {STORE}/blobs"));
    let layer = ex["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let b = f["blob"].as_str().unwrap();
            f["path"] != "manifest.json"
                && !ex["id"].as_str().unwrap().ends_with(b)
                && !v1_blobs.contains(b)
        })
        .exactly_one()["blob"]
        .as_str()
        .unwrap()
        .to_string();
    let blob = format!("{STORE}/blobs/{layer}");
    c.sh(
        'a',
        &format!(
            "t=$(stat -c %y {blob}); printf '\\377' | dd of={blob} bs=1 seek=100 conv=notrunc 2>/dev/null; touch -d \"$t\" {blob}"
        ),
    );
    let out = c.sync(&c.v2, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("node b") && all.contains(&layer) && all.contains("sha256"),
        "{all}"
    );
    for x in ['b', 'c'] {
        assert!(c.held(x, &c.v2).is_none(), "node {x} imported a damaged v2");
        let v1 = c.held(x, &c.v1);
        assert!(
            v1.as_ref().is_some_and(|(d, _)| d.contains(&digest)),
            "node {x} lost v1 ({v1:?}): {}",
            c.images(x)
        );
        let partials = c.sh(
            x,
            &format!("ls {STORE}/blobs | grep -c halobox-partial || true"),
        );
        assert_eq!(partials.trim(), "0", "node {x}");
    }

    // The head's copy put right, v2 shares all but one layer with v1, and
    // the run before left its config and manifest: that layer moves, nothing
    // else.
    c.sh('a', &format!("rm {blob}"));
    let out = c.sync(&c.v2, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let r = report(&out);
    let v2_digest = r["plan"]["digest"].as_str().unwrap().to_string();
    for x in ['b', 'c'] {
        let blobs: Vec<&str> = plan_node(&r, x)["blobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_str().unwrap())
            .collect();
        assert_eq!(blobs, [layer.as_str()], "node {x}");
        assert!(c.held(x, &c.v2).unwrap().0.contains(&v2_digest), "node {x}");
    }
    // What the stopped imports of the damaged run staged is gone too.
    c.no_staging_left();

    // `cluster refresh` moves the image the same way by default: with the
    // registry unreachable from b and c, every node still swaps onto v2's
    // digest (each node stages it from its own engine, never pulling).
    let reg_ip = c.nodes.registry().split(':').next().unwrap().to_string();
    let route = |x: char, op: &str| {
        ok(&Command::new("ip")
            .args(["-n", &c.nodes.ns(x), "route", op, "unreachable", &reg_ip])
            .output()
            .unwrap());
    };
    route('b', "add");
    route('c', "add");
    let f = c.config().display().to_string();
    let out = c
        .nodes
        .on_node(
            'a',
            &[
                HALOBOX,
                "cluster",
                "refresh",
                "--image",
                &c.v2,
                "--memlock",
                "8M",
                "--yes",
                "--json",
                "--cluster",
                &f,
            ],
        )
        .output()
        .unwrap();
    route('b', "del");
    route('c', "del");
    assert!(out.status.success(), "{}", text(&out));
    for x in NODES {
        let label = c.sh(
            x,
            "podman container inspect vllm --format '{{index .Config.Labels \"dev.halobox.image-digest\"}}'",
        );
        assert_eq!(label.trim(), v2_digest, "node {x}'s container");
    }

    // A localhost/ image of the head's own engine with a large layer; the
    // receiver on c killed half-way leaves c without it, a rerun completes
    // with the head's image id everywhere.
    let big = c.nodes.path("big.bin");
    ok(&Command::new("sh")
        .args([
            "-c",
            &format!("head -c 48000000 /dev/urandom > {}", big.display()),
        ])
        .output()
        .unwrap());
    let local = "localhost/img43-big:1";
    ok(&c
        .nodes
        .on_node(
            'a',
            &[
                HALOBOX,
                "image",
                "add-layer",
                &c.v2,
                "--engine",
                "unix:///run/podman/podman.sock",
                "--add",
                &format!("{}:/big.bin", big.display()),
                "--tag",
                local,
                "--load",
            ],
        )
        .output()
        .unwrap());
    let (_, head_id) = c.held('a', local).expect("the head's localhost image");
    c.throttle('c', Some("40mbit"));
    let child = while_it_runs(c.start_sync(local), "node c wrote no partial file", || {
        c.sh(
            'c',
            &format!("ls {STORE}/blobs 2>/dev/null | grep -c halobox-partial || true"),
        )
        .trim()
            != "0"
    });
    std::thread::sleep(Duration::from_secs(1));
    let pid = c.receiver_pid('c').expect("the receiver on node c");
    ok(&Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .output()
        .unwrap());
    let killed = child.wait_with_output().unwrap();
    c.throttle('c', None);
    assert!(!killed.status.success(), "{}", text(&killed));
    assert!(text(&killed).contains("node c"), "{}", text(&killed));
    assert!(
        c.held('c', local).is_none(),
        "node c imported after its receiver died"
    );
    // A run interrupted (SIGINT) while c imports a staged prefix into its
    // podman storage: the import finishes (skopeo runs apart from the
    // run's process group), the stager ends before its next prefix and
    // takes its staging name, and c's storage stays readable (an image cut
    // off before its manifest breaks `podman images` for every image).
    c.throttle('c', Some("40mbit"));
    let child = while_it_runs(
        c.start_sync(local),
        "node c imported no staged prefix",
        || {
            c.running(
                'c',
                "^skopeo copy -q dir:.* containers-storage:localhost/halobox-staging",
            )
        },
    );
    for pid in halobox_pids("image\0sync\0") {
        ok(&Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .output()
            .unwrap());
    }
    let stopped = child.wait_with_output().unwrap();
    c.throttle('c', None);
    assert!(!stopped.status.success(), "{}", text(&stopped));
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.running('c', "^skopeo |image node-stage") {
        assert!(
            Instant::now() < deadline,
            "node c still imports a minute after the run stopped: {}",
            c.sh('c', "ps -eo pid,pgid,stat,args")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed = c
        .nodes
        .on_node('c', &["podman", "images"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", c.images('c'));
    assert!(
        c.held('c', &c.v2).is_some(),
        "node c lost v2: {}",
        c.images('c')
    );
    assert!(
        c.held('c', local).is_none(),
        "node c imported an unfinished stream"
    );
    c.no_staging_left();

    // The rerun: c's store holds every layer but the big one (last in the
    // stream), so c imports those first layers (a staged prefix) while the
    // big one still streams over its held link; the staging names are
    // removed afterwards.
    c.throttle('c', Some("80mbit"));
    let out = c.sync(local, &[]);
    c.throttle('c', None);
    assert!(out.status.success(), "{}", text(&out));
    for x in NODES {
        let (_, id) = c
            .held(x, local)
            .unwrap_or_else(|| panic!("node {x} has no {local}"));
        assert_eq!(id, head_id, "node {x}'s image id");
    }
    let r = report(&out);
    assert!(
        node(&r, 'c')["staged"].as_u64().unwrap() >= 1,
        "node c imported no layer before the last arrived: {r}"
    );
    c.no_staging_left();
    // The first layers are v2's whole image: staging them named v2's
    // image, and removing the staging name left v2 where it was.
    for x in ['b', 'c'] {
        assert!(c.held(x, &c.v2).is_some(), "node {x} lost v2");
    }

    // Every node holds the head's image id: a second sync asks every
    // node's engine first and moves nothing, and the head exports nothing
    // (no copy out of its storage: its image store is not written at all).
    let images = STORE.rsplit_once('/').unwrap().0;
    let marker = "/root/.local/share/halobox/noop-marker";
    c.sh('a', &format!("touch {marker}; sleep 0.1"));
    let out = c.sync(local, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let written = c.sh('a', &format!("find {images} -newer {marker}"));
    assert_eq!(
        written.trim(),
        "",
        "the head's image store was written by a sync that had nothing to move"
    );
    let r = report(&out);
    assert_eq!(r["plan"]["exported"], false, "{r}");
    assert_eq!(r["plan"]["id"], head_id.as_str(), "{r}");
    assert_eq!(r["stream"], 0, "{r}");
    for x in NODES {
        let p = plan_node(&r, x);
        assert_eq!(p["import"], false, "{r}");
        assert_eq!(p["bytes"], 0, "{r}");
        assert_eq!(p["blobs"].as_array().unwrap().len(), 0, "{r}");
        assert_eq!(node(&r, x)["carried"], 0, "{r}");
        assert_eq!(node(&r, x)["moved"], 0, "{r}");
        assert_eq!(node(&r, x)["id"], head_id.as_str(), "{r}");
    }
}

/// Docker nodes: the registry image reaches every node's docker over the
/// chain, loaded with `docker-daemon:`, with the head's image id (docker
/// keeps no registry digest for a loaded image); a second run moves
/// nothing.
#[test]
fn docker_nodes_get_the_image_with_the_heads_image_id() {
    let nodes = Nodes::up_with_engine(&["9000", "9000", "9000"], "docker");
    let refs = nodes.make_images("fleet-image.sh", HALOBOX);
    let v1 = refs[0].clone();
    let mut t = format!(
        "halobox = \"{HALOBOX}\"\nssh_options = {}\n",
        serde_json::to_string(&nodes.ssh_options()).unwrap(),
    );
    for (i, x) in NODES.iter().enumerate() {
        t.push_str(&format!(
            "\n[[node]]\nname = \"{x}\"\nssh = \"root@{ip}\"\nip = \"{ip}\"\nbackend = \"docker\"\n",
            ip = nodes.ip(u32::try_from(i).unwrap() + 1)
        ));
    }
    let file = nodes.path("cluster.toml");
    std::fs::write(&file, t).unwrap();
    let f = file.display().to_string();
    let sync = || {
        nodes
            .on_node(
                'a',
                &[HALOBOX, "image", "sync", &v1, "--json", "--cluster", &f],
            )
            .output()
            .unwrap()
    };
    let out = sync();
    assert!(out.status.success(), "{}", text(&out));
    let r = report(&out);
    let id = r["plan"]["id"].as_str().unwrap().to_string();
    for x in NODES {
        let got = ok(&nodes
            .on_node(
                x,
                &["docker", "image", "inspect", "--format", "{{.Id}}", &v1],
            )
            .output()
            .unwrap());
        assert_eq!(got.trim(), id, "node {x}");
    }
    let out = sync();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(report(&out)["stream"], 0);
}

//! The README's walkthrough ("From bare nodes to a served model") stays
//! true: the same sequence runs here and every output line the README shows
//! under a `<!-- walkthrough: NAME -->` marker must have the shape of a line
//! the real run printed (values such as addresses, paths, digests, times and
//! counts, and the names of backends and transports, are masked; a doctor
//! line keeps its status column, check id and layout). `doctor`, `refresh`,
//! `cluster init`, `cluster up` and `cluster status` run on two test nodes
//! with a podman each (scripts/netns/nodes.sh; the node image from
//! scripts/netns/node-image.sh); `setup --dry-run` runs on the snapshot of a
//! node that needs fixes (tests/fixtures/hosts/broken-e810), since the test
//! nodes have no GPU to tune. The `serve` block needs vLLM and comes from
//! tests/serve_e2e.rs, which checks serving end to end. Needs root, the
//! engines of scripts/engines/start.sh and the Ray venv; a missing piece
//! fails.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

mod common;
use common::netns::Nodes;
use common::{ok, text};

const HALOBOX: &str = env!("CARGO_BIN_EXE_halobox");
const RAY: &str = "/opt/halobox-ray/bin/ray";

/// The README's shown output, by marker name, in order.
fn readme_blocks() -> BTreeMap<String, Vec<String>> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut blocks = BTreeMap::new();
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("<!-- walkthrough: ") {
        rest = &rest[at + "<!-- walkthrough: ".len()..];
        let (name, after) = rest
            .split_once(" -->\n")
            .expect("a marker ends with ` -->`");
        let body = after.strip_prefix("```text\n").unwrap_or_else(|| {
            panic!("README: the walkthrough marker {name} is not followed by a ```text block")
        });
        let (block, after) = body.split_once("```\n").expect("the block ends");
        let lines: Vec<String> = block
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        assert!(
            !lines.is_empty(),
            "README: walkthrough block {name} is empty"
        );
        assert!(
            blocks.insert(name.to_string(), lines).is_none(),
            "README: two walkthrough blocks named {name}"
        );
        rest = after;
    }
    blocks
}

/// A line with its values masked: what must stay the same between the
/// README's example and a run on other machines.
fn shape(line: &str) -> String {
    const STATUS: [&str; 5] = ["PASS", "WARN", "FAIL", "SKIP", "INFO"];
    const BACKEND: [&str; 5] = ["toolbox", "podman", "docker", "distrobox", "host"];
    const TRANSPORT: [&str; 4] = ["roce", "ib", "ethernet", "auto"];
    // A doctor check line: status, id and the columns they start at.
    if let Some(status) = STATUS.iter().find(|s| line.starts_with(&format!("{s}  "))) {
        let id_col = line[status.len()..].find(|c: char| c != ' ').unwrap() + status.len();
        let id = line[id_col..].split(' ').next().unwrap();
        let text_col = line[id_col + id.len()..]
            .find(|c: char| c != ' ')
            .map(|c| c + id_col + id.len());
        return format!("<status> {id} at {id_col}, text at {text_col:?}");
    }
    // doctor's summary: the counts, not the verdict.
    if let Some(at) = line.find(" skipped: ")
        && line.contains(" passed, ")
    {
        return shape(&line[..at + " skipped:".len()]);
    }
    let indent = line.len() - line.trim_start().len();
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| {
            let core = w.trim_matches(|c: char| "(),;".contains(c));
            let masked = if STATUS.contains(&core) {
                "<status>"
            } else if BACKEND.contains(&core) {
                "<backend>"
            } else if TRANSPORT.contains(&core) {
                "<transport>"
            } else if core.chars().any(|c| c.is_ascii_digit() || "/@".contains(c))
                || core.trim_end_matches(':').contains(':')
            {
                "<value>"
            } else {
                return w.to_string();
            };
            w.replace(core, masked)
        })
        .collect();
    format!("{}{}", " ".repeat(indent), words.join(" "))
}

/// Every README line of block `name` has the shape of a line in `real`.
fn same_shape(blocks: &BTreeMap<String, Vec<String>>, name: &str, real: &str) {
    let shapes: Vec<String> = real.lines().map(shape).collect();
    let missing: Vec<String> = blocks[name]
        .iter()
        .filter(|l| !shapes.contains(&shape(l)))
        .map(|l| format!("{l}\n      shape: {}", shape(l)))
        .collect();
    assert!(
        missing.is_empty(),
        "README walkthrough block `{name}`: no line of the real run has the shape of\n    {}\nthe real run printed:\n{real}\n(update the README from this output)",
        missing.join("\n    ")
    );
}

/// stdout and stderr of a run, one after the other.
fn both(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `halobox ARGS` on node `x` as the walkthrough runs it.
fn on(nodes: &Nodes, x: char, args: &[&str]) -> Output {
    let mut argv = vec![HALOBOX];
    argv.extend_from_slice(args);
    std::fs::create_dir_all(nodes.path("tmp")).unwrap();
    nodes
        .on_node(x, &argv)
        .env("HF_HOME", nodes.path("hf"))
        .env("TMPDIR", nodes.path("tmp"))
        .output()
        .expect("run halobox on a node")
}

#[test]
fn the_shape_of_each_line_has_a_rule() {
    assert_eq!(
        shape("==> pulling ghcr.io/halobox/vllm-therock-gfx1151:latest"),
        shape("==> pulling 10.77.3.254:5000/halobox/node:ray-2.60.0-base4")
    );
    assert_eq!(
        shape("==> creating vllm-halobox-new (toolbox backend)"),
        shape("==> creating vllm-halobox-new (podman backend)")
    );
    assert_ne!(
        shape("==> creating vllm-halobox-new (toolbox backend)"),
        shape("==> creating vllm-halobox-old (toolbox backend)")
    );
    assert_eq!(
        shape("PASS  gpu.present             gfx1151 GPU at KFD node 1"),
        shape("FAIL  gpu.present             no AMD GPU: /sys/class/kfd is absent")
    );
    assert_ne!(
        shape("PASS  gpu.present             gfx1151"),
        shape("PASS  gpu.present   gfx1151")
    );
    assert_eq!(
        shape("23 passed, 1 warned, 0 failed, 1 skipped: usable; the WARNs cost"),
        shape("5 passed, 3 warned, 1 failed, 16 skipped: not ready: fix every FAIL above")
    );
}

#[test]
fn readme_walkthrough_matches_a_real_run() {
    let blocks = readme_blocks();
    assert_eq!(
        blocks.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "doctor", "init", "refresh", "serve", "setup", "status", "up"
        ],
        "README: the walkthrough blocks"
    );
    let setup = ok(&std::process::Command::new(HALOBOX)
        .args(["setup", "--dry-run", "--sysroot"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/broken-e810"))
        .output()
        .unwrap());
    same_shape(&blocks, "setup", &setup);

    let nodes = Nodes::up_with_engine(&["9000", "9000"], "podman");
    let image = nodes
        .make_images("node-image.sh", HALOBOX)
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(image.starts_with(&nodes.registry()), "node image: {image}");
    for x in ['a', 'b'] {
        let doctor = on(&nodes, x, &["doctor"]);
        same_shape(&blocks, "doctor", &String::from_utf8_lossy(&doctor.stdout));
        let refresh = on(
            &nodes,
            x,
            &[
                "refresh",
                "--backend",
                "podman",
                "--image",
                &image,
                "--memlock",
                "8M",
                "--yes",
            ],
        );
        assert!(refresh.status.success(), "{}", text(&refresh));
        same_shape(&blocks, "refresh", &both(&refresh));
    }

    let file = nodes.path("cluster.toml");
    let file_arg = file.display().to_string();
    let (ip1, ip2) = (nodes.ip(1), nodes.ip(2));
    let init = on(
        &nodes,
        'a',
        &[
            "cluster",
            "init",
            "--node",
            &format!("root@{ip1},{ip1}"),
            "--node",
            &format!("root@{ip2},{ip2}"),
            "--backend",
            "podman",
            "--cpus",
            "1",
            "--cluster",
            &file_arg,
        ],
    );
    same_shape(&blocks, "init", &ok(&init));
    // What the test nodes need beyond the README's: Ray's venv and this
    // halobox by path, their ssh keys, a small object store.
    let written = std::fs::read_to_string(&file).unwrap();
    let test_only = format!(
        "ray = \"{RAY}\"\nhalobox = \"{HALOBOX}\"\nray_args = [\"--object-store-memory=80000000\"]\n\
         ray_head_args = [\"--include-dashboard=false\"]\nssh_options = {}\n",
        serde_json::to_string(&nodes.ssh_options()).unwrap()
    );
    let edited = written
        .replace("ray = \"ray\"\n", "")
        .replace("halobox = \"halobox\"\n", &test_only);
    assert_ne!(edited, written, "cluster init wrote no `halobox =` line");
    std::fs::write(&file, edited).unwrap();

    let up = on(&nodes, 'a', &["cluster", "up", "--cluster", &file_arg]);
    let down = || on(&nodes, 'a', &["cluster", "down", "--cluster", &file_arg]);
    if !up.status.success() {
        down();
        panic!("cluster up failed: {}", text(&up));
    }
    let status = on(&nodes, 'a', &["cluster", "status", "--cluster", &file_arg]);
    let down_out = down();
    same_shape(&blocks, "up", &both(&up));
    same_shape(&blocks, "status", &ok(&status));
    assert!(down_out.status.success(), "{}", text(&down_out));
}

//! `halobox cluster tui` in a real terminal (tmux): the menu shows, its
//! entries run the same operations as the flags, serve asks what the guides'
//! launcher asks (model, tensor parallel size, context length, eager, erase
//! the compile cache) and shows the plan, errors keep the menu alive, and
//! quit leaves with status 0. Its ssh targets are loopback addresses
//! where nothing listens, so nothing leaves this machine. `cluster top`
//! against a node (on this machine's own address) whose `/metrics` trickles in: the screen is live while
//! the scrape runs, the node is shown as not answering once its deadline
//! passes, and `q` ends it while a scrape is under way.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::tmux::Tmux;

/// A `/metrics` on `ip` (an address of this machine) that answers a byte
/// every 100 ms, forever; its port, and a message for each connection it
/// takes.
fn trickling_node(ip: &str) -> (u16, mpsc::Receiver<()>) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for mut s in l.incoming().map_while(Result::ok) {
            if tx.send(()).is_err() {
                return;
            }
            std::thread::spawn(move || {
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head);
                let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n# slow\n";
                for b in answer.iter().chain(std::iter::repeat(&b'#')) {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    (port, rx)
}

#[test]
fn top_stays_live_while_a_node_trickles_and_q_ends_it() {
    // A node's address cannot be loopback: one of this machine's (the
    // scrapes stay on it).
    let ip = common::local_ipv4();
    let (port, scrapes) = trickling_node(&ip);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        format!("[[node]]\nname = \"slow\"\nssh = \"root@127.0.0.9\"\nip = \"{ip}\"\nbackend = \"host\"\n"),
    )
    .unwrap();
    let command = format!(
        "{} cluster top --cluster {} --metrics-port {port} --serve-port 9; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_halobox"),
        file.display()
    );
    let tmux = Tmux::start("halobox-top", &command);
    // Drawn while the first scrape still trickles in.
    scrapes
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("cluster top never scraped the node:\n{}", tmux.screen()));
    tmux.wait_for("slow         asking...");
    // Past its deadline the node is shown as not answering, and why.
    let s = tmux.wait_for("not answering");
    assert!(
        s.lines()
            .any(|l| l.starts_with("slow ") && l.contains("no answer within")),
        "{s}"
    );
    // The next scrape is under way (it trickles for seconds): `q` ends it now.
    while scrapes.try_recv().is_ok() {}
    scrapes
        .recv_timeout(Duration::from_secs(30))
        .expect("cluster top did not scrape the node again");
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let s = tmux.screen();
        if s.contains("EXIT=0") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "q did not end cluster top within 2 s while a scrape trickled in:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn menu_shows_the_config_survives_errors_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        "transport = \"auto\"\nray_port = 6379\n\n\
         [[node]]\nssh = \"root@127.0.0.9\"\nip = \"10.9.0.1\"\ncontainer = \"vllm\"\nbackend = \"host\"\n\n\
         [[node]]\nssh = \"root@127.0.0.10\"\nip = \"10.9.0.2\"\ncontainer = \"vllm\"\nbackend = \"host\"\n",
    )
    .unwrap();
    let command = format!(
        "{} cluster tui --cluster {}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_halobox"),
        file.display()
    );
    let tmux = Tmux::start("halobox-tui", &command);
    tmux.wait_for("show cluster.toml");

    // "show cluster.toml" is the sixth entry.
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "Enter"]);
    tmux.wait_for("ip = \"10.9.0.2\"");

    // status: the head cannot be reached; the error names it and the menu comes back.
    tmux.wait_for("halobox cluster");
    tmux.keys(&["Enter"]);
    tmux.wait_for_new(&["error", "127.0.0.9"]);

    // serve (fourth entry) asks what the guides' launcher asks, then shows
    // the plan; this machine is not the head, so the plan says so.
    tmux.wait_for("serve a model");
    tmux.keys(&["Down", "Down", "Down", "Enter"]);
    tmux.wait_for("model");
    tmux.type_line("Qwen/Qwen3-0.6B");
    tmux.wait_for("tensor parallel size (1..2");
    // Out of range: refused with the reason, asked again.
    tmux.type_line("3");
    tmux.wait_for("use 1..2: the cluster has 2 node(s)");
    tmux.keys(&["BSpace", "BSpace"]);
    tmux.type_line("1");
    tmux.wait_for("context length");
    tmux.type_line("4096");
    tmux.wait_for("force eager mode");
    tmux.keys(&["n"]);
    tmux.wait_for("erase vLLM's compile cache");
    tmux.keys(&["y"]);
    let s = tmux.wait_for("start it?");
    let plan = s
        .lines()
        .find(|l| l.starts_with("vllm serve"))
        .unwrap_or_else(|| panic!("no plan:\n{s}"));
    assert_eq!(
        plan,
        "vllm serve Qwen/Qwen3-0.6B --tensor-parallel-size 1 --distributed-executor-backend ray --gpu-memory-utilization 0.9 --host 10.9.0.1 --port 8000 --max-model-len 4096 --middleware halobox_require_key.RequireKey"
    );
    assert!(
        s.contains("# first, in the head's container: rm -rf --")
            && s.contains("torch_compile_cache"),
        "{s}"
    );
    assert!(
        s.contains("does not hold the head's address 10.9.0.1"),
        "{s}"
    );
    assert!(
        s.contains("CUDA-graph capture (--no-eager) can deadlock"),
        "{s}"
    );
    // Not started: the menu comes back.
    tmux.keys(&["n"]);
    tmux.wait_for("halobox cluster");

    // doctor every node (seventh entry): both nodes are unreachable, which
    // the table names as a FAIL; the menu comes back.
    tmux.keys(&["Down", "Down", "Down", "Down", "Down", "Down", "Enter"]);
    let s = tmux.wait_for("fleet.reached");
    assert!(s.contains("FAIL"), "{s}");
    tmux.wait_for("halobox cluster");

    // refresh every node, dry run (ninth entry): the plan; host-backend
    // nodes have no container, so both are skipped with why.
    tmux.keys(&[
        "Down", "Down", "Down", "Down", "Down", "Down", "Down", "Down", "Enter",
    ]);
    let s = tmux.wait_for("no container to refresh");
    assert!(
        s.contains("node root@127.0.0.10: its Ray runs on the host"),
        "{s}"
    );
    tmux.wait_for("halobox cluster");

    // quit is the last entry.
    tmux.keys(&["Up", "Enter"]);
    tmux.wait_for("EXIT=0");
}

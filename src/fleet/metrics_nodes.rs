//! `halobox metrics` on every node, as `cluster up` starts it and `cluster
//! down` stops it: on each node's host (not in its container), detached,
//! bound to the node's data-plane address, its pid and log in
//! [`DIR`] on the node, named by that address (`metrics-IP.pid`, `.log`:
//! nodes that share a `/tmp`, as test nodes on one machine do, keep apart). On the host it reads the host's sysfs and the
//! data-plane netdev, can say that the container stopped (it does not stop
//! with it), and keeps running across `cluster refresh`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::cluster::config::{ClusterConfig, NodeConfig};
use crate::cluster::run::{each_node, remote_node};
use crate::metrics::serve::DEFAULT_PORT;
use crate::serve::program::{ALIVE_FN, PID_FNS, RECORD_FN};

/// Where the programs keep the exporter's pid and log (on the node's host;
/// a shell expression): `${XDG_STATE_HOME:-$HOME/.local/state}
/// /halobox/metrics`, where no other user can make it first; the folder an
/// older halobox used in `/tmp` only while the new one does not exist and
/// it is the user's own, as [`crate::serve::program::DIR`].
pub const DIR: &str = "$(n=\"${XDG_STATE_HOME:-$HOME/.local/state}/halobox/metrics\"; o=\"${TMPDIR:-/tmp}/halobox-metrics-$(id -u)\"; \
     if [ -z \"$XDG_STATE_HOME$HOME\" ] || { [ ! -e \"$n\" ] && [ ! -L \"$n\" ] && [ -d \"$o\" ] && [ ! -L \"$o\" ] && [ -O \"$o\" ]; }; \
     then printf %s \"$o\"; else printf %s \"$n\"; fi)";
/// The serve's API port `cluster up` tells the head's exporter to probe
/// (`halobox serve --port`'s default); a serve record on the head names
/// the real one.
pub const SERVE_PORT: u16 = 8000;
/// How long one node's start or stop may take over ssh.
const NODE_TIMEOUT: Duration = Duration::from_secs(60);

/// Stops the exporter halobox started here for address `$ip`, if one runs
/// (SIGTERM, 5 s, then SIGKILL); sets `word` to `stopped` or leaves it.
const STOP_FN: &str = "stopit() { if readpid \"$d/metrics-$ip.pid\" && alive \"$pid\" && same; then word=stopped; kill -TERM \"$pid\" 2>/dev/null; \
     i=0; while alive \"$pid\" && same && [ \"$i\" -lt 25 ]; do sleep 0.2; i=$((i + 1)); done; \
     if alive \"$pid\" && same; then kill -KILL \"$pid\" 2>/dev/null; sleep 0.3; fi; fi; rm -f \"$d/metrics-$ip.pid\"; }";

/// Starts `halobox metrics` detached: `$1` the address and `$2` the port
/// it listens on, then its argv. One that halobox started before is stopped first (its flags
/// may be old). Exits 99 when the port is taken or it does not listen
/// within 10 s (its log on stderr); prints `halobox-metrics-pid PID`.
pub fn start_program() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; {RECORD_FN}; {STOP_FN}; d=\"{DIR}\"; mkdir -p -m 0700 \"$d\" || exit 95; owndir; \
         ip=$1; port=$2; shift 2; case \"$ip\" in ''|*[!0-9.]*) echo \"halobox: $ip is not an IPv4 address\" >&2; exit 2 ;; esac; word=; stopit; \
         hex=$(printf '%04X' \"$port\"); \
         listening() {{ awk -v p=\":$hex\" '$4 == \"0A\" && substr($2, length($2) - 4) == p {{ f = 1 }} END {{ exit !f }}' /proc/net/tcp; }}; \
         if listening; then echo \"halobox: port $port is already taken in this node's network\" >&2; exit 99; fi; \
         log=\"$d/metrics-$ip.log\"; : >\"$log\"; \
         setsid sh -c 'trap \"\" PIPE; exec \"$@\"' halobox-metrics \"$@\" </dev/null >>\"$log\" 2>&1 & \
         pid=$!; record \"$d/metrics-$ip.pid\"; i=0; \
         while [ \"$i\" -lt 50 ]; do \
         if ! alive \"$pid\"; then rm -f \"$d/metrics-$ip.pid\"; echo \"halobox: halobox metrics ended at once:\" >&2; tail -n 5 \"$log\" >&2; exit 99; fi; \
         if listening; then echo \"halobox-metrics-pid $pid\"; exit 0; fi; \
         sleep 0.2; i=$((i + 1)); done; \
         echo \"halobox: halobox metrics does not listen on port $port after 10 s:\" >&2; tail -n 5 \"$log\" >&2; exit 99"
    )
}

/// Stops the exporter halobox started for address `$1`, if any; prints
/// `stopped PID` or `none`.
pub fn stop_program() -> String {
    format!(
        "{ALIVE_FN}; {PID_FNS}; {STOP_FN}; d=\"{DIR}\"; ip=$1; \
         if [ ! -e \"$d\" ] && [ ! -L \"$d\" ]; then echo none; exit 0; fi; owndir; \
         word=none; stopit; if [ \"$word\" = stopped ]; then echo \"stopped $pid\"; else echo none; fi"
    )
}

fn argv(program: String, args: &[String]) -> Vec<String> {
    let mut a = vec![
        "sh".to_string(),
        "-c".into(),
        program,
        "halobox-metrics".into(),
    ];
    a.extend(args.iter().cloned());
    a
}

/// The address `node`'s exporter listens on.
pub fn listen(node: &NodeConfig) -> SocketAddr {
    SocketAddr::from((node.ip, DEFAULT_PORT))
}

/// `halobox metrics` as `cluster up` runs it on `node` (`config`: the
/// cluster file, whose serve record the head's exporter reads).
pub fn metrics_argv(cfg: &ClusterConfig, node: &NodeConfig, config: &Path) -> Vec<String> {
    let mut a = vec![
        cfg.halobox.clone(),
        "metrics".into(),
        "--listen".into(),
        listen(node).to_string(),
        "--node".into(),
        node.label().to_string(),
        "--ray".into(),
    ];
    if node.backend.is_container() {
        a.extend([
            "--container".into(),
            node.container.clone(),
            "--backend".into(),
            node.backend.to_string(),
        ]);
    }
    if node.ip == cfg.head().ip {
        a.extend([
            "--serve-endpoint".into(),
            SocketAddr::from((node.ip, SERVE_PORT)).to_string(),
            "--serve-record".into(),
            config.display().to_string(),
        ]);
    }
    a
}

/// The start program on `node`'s host (argv there).
pub fn start_command(cfg: &ClusterConfig, node: &NodeConfig, config: &Path) -> Vec<String> {
    let mut args = vec![node.ip.to_string(), DEFAULT_PORT.to_string()];
    args.extend(metrics_argv(cfg, node, config));
    argv(start_program(), &args)
}

/// The stop program on `node`'s host (argv there).
pub fn stop_command(node: &NodeConfig) -> Vec<String> {
    argv(stop_program(), &[node.ip.to_string()])
}

/// Starts the exporter on every node at once: per node, the line to print
/// or why it did not start.
pub fn up(cfg: &ClusterConfig, config: &Path) -> Vec<(String, Result<String, String>)> {
    each_node(&cfg.nodes, |node| {
        let n = remote_node(cfg, node);
        let at = format!("node {} ({})", node.label(), node.ip);
        let said = match n.run(&start_command(cfg, node, config), NODE_TIMEOUT) {
            Err(e) => Err(e.to_string()),
            Ok(done) if done.status.and_then(|s| s.code()) == Some(0) => Ok(format!(
                "{at}: halobox metrics on http://{}/metrics (pid {})",
                listen(node),
                done.stdout
                    .lines()
                    .find_map(|l| l.strip_prefix("halobox-metrics-pid "))
                    .unwrap_or("?")
            )),
            Ok(done) if done.status.and_then(|s| s.code()) == Some(99) => Err(format!(
                "{at}: halobox metrics could not listen on {}: {}",
                listen(node),
                crate::remote::tail(&done.output, 5)
            )),
            Ok(done) => Err(n.error("`halobox metrics`'s start", &done).to_string()),
        };
        (node.label().to_string(), said)
    })
}

/// Stops the exporter on every node at once: per node, `stopped PID`,
/// `none`, or why it could not be asked.
pub fn down(cfg: &ClusterConfig) -> Vec<(String, Result<String, String>)> {
    each_node(&cfg.nodes, |node| {
        let said = remote_node(cfg, node)
            .run_ok(
                "`halobox metrics`'s stop",
                &stop_command(node),
                NODE_TIMEOUT,
            )
            .map(|done| done.stdout.trim().to_string())
            .map_err(|e| e.to_string());
        (node.label().to_string(), said)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClusterConfig {
        crate::cluster::config::parse(
            "[[node]]\nname = \"a\"\nssh = \"root@10.0.0.1\"\nip = \"10.0.0.1\"\nbackend = \"host\"\n\
             [[node]]\nname = \"b\"\nssh = \"root@10.0.0.2\"\nip = \"10.0.0.2\"\nbackend = \"podman\"\ncontainer = \"hb\"\n",
        )
        .unwrap()
    }

    #[test]
    fn head_probes_the_serve_and_a_container_node_names_its_container() {
        let c = cfg();
        let head = metrics_argv(&c, &c.nodes[0], Path::new("/c/cluster.toml"));
        assert_eq!(
            head,
            [
                "halobox",
                "metrics",
                "--listen",
                "10.0.0.1:9837",
                "--node",
                "a",
                "--ray",
                "--serve-endpoint",
                "10.0.0.1:8000",
                "--serve-record",
                "/c/cluster.toml"
            ]
        );
        let worker = metrics_argv(&c, &c.nodes[1], Path::new("/c/cluster.toml"));
        assert_eq!(
            worker[3..],
            [
                "10.0.0.2:9837",
                "--node",
                "b",
                "--ray",
                "--container",
                "hb",
                "--backend",
                "podman"
            ]
        );
        let start = start_command(&c, &c.nodes[1], Path::new("/c/cluster.toml"));
        assert_eq!(start[..2], ["sh", "-c"]);
        assert_eq!(
            start[3..7],
            ["halobox-metrics", "10.0.0.2", "9837", "halobox"]
        );
    }

    /// The programs run for real: a stand-in that listens is started,
    /// found, replaced by a second start, and stopped; a stop finds none.
    /// Another user's folder at the old name in `$TMPDIR` (made there
    /// first) blocks nothing: the pid and log go to the user's state folder.
    #[test]
    fn start_and_stop_programs() {
        let tmp = tempfile::tempdir().unwrap();
        let uid = nix::unistd::getuid().as_raw();
        let planted = tmp.path().join(format!("halobox-metrics-{uid}"));
        std::fs::create_dir(&planted).unwrap();
        if uid == 0 {
            std::os::unix::fs::chown(&planted, Some(4242), Some(4242)).unwrap();
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let run = |program: String, args: &[&str]| {
            let out = crate::proc::command("sh")
                .arg("-c")
                .arg(program)
                .arg("halobox-metrics")
                .args(args)
                .env("TMPDIR", tmp.path())
                .env("HOME", tmp.path())
                .env_remove("XDG_STATE_HOME")
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        let listener = format!(
            "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1',{port}))\ns.listen()\ntime.sleep(60)"
        );
        let p = port.to_string();
        let args = ["127.0.0.1", p.as_str(), "python3", "-c", listener.as_str()];
        let (code, out, err) = run(start_program(), &args);
        assert_eq!(code, Some(0), "{out}\n{err}");
        let first: u32 = out
            .strip_prefix("halobox-metrics-pid ")
            .unwrap()
            .parse()
            .unwrap();
        let (code, out, err) = run(start_program(), &args);
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert!(
            !std::path::Path::new(&format!("/proc/{first}")).exists() || {
                let stat =
                    std::fs::read_to_string(format!("/proc/{first}/stat")).unwrap_or_default();
                stat.contains(") Z")
            }
        );
        // Another address's exporter is not this one.
        let (_, out, _) = run(stop_program(), &["127.0.0.2"]);
        assert_eq!(out, "none");
        let state = tmp.path().join(".local/state/halobox/metrics");
        assert!(state.join("metrics-127.0.0.1.pid").is_file());
        let (_, out, _) = run(stop_program(), &["127.0.0.1"]);
        assert!(out.starts_with("stopped "), "{out}");
        let (_, out, _) = run(stop_program(), &["127.0.0.1"]);
        assert_eq!(out, "none");
        assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);
    }
}

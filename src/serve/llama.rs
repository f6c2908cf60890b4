//! `halobox serve` with engine `llama.cpp` (cluster.toml `engine =
//! "llama.cpp"`): `llama-server` in the head's container with `--rpc`
//! listing every other node's RPC server (started by `cluster up`), `-ngl
//! 99`, `--tensor-split` from the memory each RPC server reports (the
//! host's RAM), and `-lv 4` (its KV cache's size is a trace line, which
//! [`super::kv_check`] reads) unless the arguments after `--` set the verbosity. llama.cpp's MPI backend was removed upstream (PR #7395);
//! RPC is its multi-node path.
//!
//! Before it starts: a `HELLO` to every RPC server (one that is down, held
//! by another head, or speaks another protocol is named), then, in the same
//! exec that starts it, the GGUF file in the head's container (its magic
//! bytes) and `llama-server` there ([`start_check`]).
//! While it serves: a tiny completion that must finish within
//! [`PROBE_TIMEOUT`] (a frozen node hangs llama-server while `/health` stays
//! 200); on a failure, each node's RPC server is looked at to name it.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::engine::Head;
use super::{program, rpc};
use crate::cluster::config::ClusterConfig;
use crate::error::UsageError;
use crate::serve::rpc_servers as cluster_rpc;

/// How long the tiny completion that proves every node answers may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a try of an RPC server's port may take (one that does not
/// answer in time is left to the probe: only a refusal counts).
const PORT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long one RPC server gets to answer `HELLO`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What `serve` was asked for, with engine `llama.cpp`.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaRequest {
    /// The GGUF file, as a path in the head's container.
    pub model: String,
    /// The API's bind address (`None`: every interface; `serve` gives the head's data-plane address unless `--host`).
    pub host: Option<IpAddr>,
    /// The API port.
    pub port: u16,
    /// Context size (`-c`; `--max-model-len`).
    pub ctx: Option<u32>,
    /// Extra `llama-server` arguments.
    pub extra: Vec<String>,
}

/// Flags halobox sets itself (or that would put a secret in an argument).
const OWN_FLAGS: [(&str, &str); 10] = [
    ("--rpc", "halobox lists every node's RPC server"),
    ("-ngl", "halobox offloads every layer (-ngl 99)"),
    ("--n-gpu-layers", "halobox offloads every layer (-ngl 99)"),
    ("-ts", "halobox splits by each node's memory"),
    ("--tensor-split", "halobox splits by each node's memory"),
    ("--host", "give it as `halobox serve … --host ADDR`"),
    ("--port", "give it as `halobox serve … --port P`"),
    ("-m", "the model is MODEL"),
    ("--model", "the model is MODEL"),
    (
        "--api-key",
        "it would put the key in the process arguments: export LLAMA_API_KEY instead",
    ),
];

/// `llama-server`'s argv on the head; `split` is each device's share
/// (RPC servers first, in node order, as llama.cpp orders its devices).
pub fn command(
    cfg: &ClusterConfig,
    req: &LlamaRequest,
    split: &[u64],
) -> Result<Vec<String>, String> {
    if !super::preflight::is_path(&req.model) {
        return Err(format!(
            "{}: llama.cpp serves a GGUF file: give its path in the head's container (/models/NAME.gguf)",
            req.model
        ));
    }
    for a in &req.extra {
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        if let Some((f, why)) = OWN_FLAGS.iter().find(|(f, _)| *f == flag) {
            return Err(format!("{f} after `--`: {why}"));
        }
    }
    let mut c = vec![
        cfg.llama_server.clone(),
        "-m".into(),
        req.model.clone(),
        "--alias".into(),
        req.model.clone(),
        "--host".into(),
        req.host.map_or("0.0.0.0".into(), |h| h.to_string()),
        "--port".into(),
        req.port.to_string(),
        "-ngl".into(),
        "99".into(),
    ];
    let workers = cluster_rpc::workers(cfg);
    if !workers.is_empty() {
        c.push("--rpc".into());
        c.push(
            workers
                .iter()
                .map(|n| cluster_rpc::endpoint(cfg, n))
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    if split.len() > 1 {
        c.push("--tensor-split".into());
        c.push(
            split
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    if let Some(n) = req.ctx {
        c.push("-c".into());
        c.push(n.to_string());
    }
    let verbosity = ["-lv", "--verbosity", "--log-verbosity", "-v", "--verbose"];
    if !req
        .extra
        .iter()
        .any(|a| verbosity.contains(&a.split_once('=').map_or(a.as_str(), |(f, _)| f)))
    {
        // Its KV cache's size and n_ctx are trace lines (level 4): the
        // check against plan's count reads them (super::kv_check).
        c.extend(["-lv".to_string(), "4".to_string()]);
    }
    c.extend(req.extra.iter().cloned());
    Ok(c)
}

/// The shares in MiB: each RPC server's memory, then the head's (used when
/// its llama-server has a GPU of its own; llama.cpp ignores a share past its
/// last device).
pub fn split(workers: &[u64], head: Option<u64>) -> Vec<u64> {
    let mib = |b: u64| (b >> 20).max(1);
    let mut v: Vec<u64> = workers.iter().map(|b| mib(*b)).collect();
    if let Some(h) = head {
        v.push(mib(h));
    }
    v
}

/// Every other node's RPC server answers `HELLO` in one protocol version:
/// the memory each reports (bytes, node order), or the error naming the
/// first node that does not, and the fix.
pub fn check_workers(cfg: &ClusterConfig) -> anyhow::Result<Vec<u64>> {
    let workers = cluster_rpc::workers(cfg);
    let answers = crate::cluster::run::each_node(workers, |n| {
        rpc::hello_then_memory(SocketAddr::from((n.ip, cfg.rpc_port)), HELLO_TIMEOUT)
    });
    let mut mem = Vec::new();
    let mut first: Option<(String, String)> = None;
    for (n, (h, m)) in workers.iter().zip(answers) {
        let at = format!(
            "node {} ({}): the RPC server on {}",
            n.label(),
            n.ip,
            cluster_rpc::endpoint(cfg, n)
        );
        let fail = |why: String, hint: &str| -> anyhow::Error {
            UsageError(format!("{at} {why}\n  hint: {hint}")).into()
        };
        match h {
            rpc::Hello::Version(a, b, c) if a == rpc::PROTO_MAJOR => {
                let v = format!("{a}.{b}.{c}");
                match &first {
                    Some((node, fv)) if *fv != v => {
                        return Err(fail(
                            format!("speaks RPC protocol {v}, the one on {node} {fv}"),
                            "refresh every node to the same llama.cpp image (`halobox refresh --image …`), then `halobox cluster up`",
                        ));
                    }
                    None => first = Some((n.label().to_string(), v)),
                    _ => {}
                }
                mem.push(m.unwrap_or(0));
            }
            rpc::Hello::Version(a, b, c) => {
                return Err(fail(
                    format!(
                        "speaks RPC protocol {a}.{b}.{c}, halobox speaks {}.x",
                        rpc::PROTO_MAJOR
                    ),
                    "refresh every node to the same llama.cpp image (`halobox refresh --image …`), then `halobox cluster up`",
                ));
            }
            rpc::Hello::Other(why) => {
                return Err(fail(
                    format!("speaks another RPC protocol ({why})"),
                    "refresh every node to the same llama.cpp image (`halobox refresh --image …`), then `halobox cluster up`",
                ));
            }
            rpc::Hello::Refused => {
                return Err(fail(
                    "does not answer (nothing listens there)".into(),
                    "`halobox cluster up` starts it; `halobox cluster status` shows every node's",
                ));
            }
            rpc::Hello::Silent => {
                return Err(fail(
                    format!(
                        "takes the connection but does not answer within {} s: another llama-server holds it (an RPC server serves one head at a time), or the node is frozen",
                        HELLO_TIMEOUT.as_secs()
                    ),
                    "`halobox serve status` shows a serve of this cluster; stop the other head's llama-server, or `halobox cluster down` and `up`",
                ));
            }
            rpc::Hello::Failed(e) => {
                return Err(fail(
                    format!("cannot be reached: {e}"),
                    "check the data-plane link from the head (`ping`), then `halobox cluster status`",
                ));
            }
        }
    }
    Ok(mem)
}

/// The check the start program runs in the head's container before
/// `llama-server` starts ([`program::start`]): `server` is a command there
/// and `model` a readable GGUF file (its magic bytes). It costs no exec of
/// its own; [`refusal`] says what a refusal means.
pub fn start_check(server: &str, model: &str) -> String {
    let no = |word: &str| {
        format!(
            "{{ echo \"halobox-check {word}\"; exit {}; }}",
            program::CHECK_REFUSED
        )
    };
    format!(
        "hb_s={}; hb_m={}; \
         command -v \"$hb_s\" >/dev/null 2>&1 || {}; \
         [ -e \"$hb_m\" ] || {}; \
         {{ [ -f \"$hb_m\" ] && [ -r \"$hb_m\" ]; }} || {}; \
         hb_g=$(head -c 4 \"$hb_m\" | od -An -c | tr -d ' \\n'); \
         [ \"$hb_g\" = GGUF ] || {}",
        crate::shell::quote(server),
        crate::shell::quote(model),
        no("no-server"),
        no("missing"),
        no("not-a-file"),
        no("not-gguf $hb_g"),
    )
}

/// What a refusal of [`start_check`] (its `word`) means, and the fix.
pub fn refusal(cfg: &ClusterConfig, model: &str, word: &str) -> String {
    let head = Head::of(cfg);
    let at = format!(
        "in container {} on the head ({})",
        head.container, head.label
    );
    match word.split_once(' ').unwrap_or((word, "")) {
        ("no-server", _) => format!(
            "there is no `{}` {at}\n  hint: refresh the head with a llama.cpp image (`halobox refresh --image …`), or set `llama_server` in cluster.toml to its path",
            cfg.llama_server
        ),
        ("missing", _) => format!(
            "{model}: no such file {at}\n  hint: put the GGUF file where the container sees it (`halobox refresh --volume DIR:/models:ro`) and give that path"
        ),
        ("not-a-file", _) => format!(
            "{model}: not a readable file {at}\n  hint: give the path of one .gguf file (for a split model, its first part): `halobox serve /models/MODEL-00001-of-00002.gguf`"
        ),
        (_, magic) => format!(
            "{model}: not a GGUF file {at} (it starts with {magic:?}, not \"GGUF\")\n  hint: llama.cpp serves GGUF; convert the model with `python3 convert_hf_to_gguf.py MODEL_DIR` (llama.cpp's), or serve a Hugging Face folder with engine = \"vllm\""
        ),
    }
}

/// Whether a 1-token completion finishes within [`PROBE_TIMEOUT`]; `Err`
/// (why) when the key was not sent: the port's listener is not proven
/// this user's ([`super::api_key::post_json`]).
pub fn answers(api: SocketAddr, key: Option<&str>) -> Result<bool, String> {
    let body = r#"{"prompt": "a", "n_predict": 1, "temperature": 0, "cache_prompt": false}"#;
    match super::api_key::post_json(api, "/completion", body, key, PROBE_TIMEOUT) {
        Ok(r) => Ok(r.status == 200),
        Err(e) => super::api_key::not_ours(&e).map_or(Ok(false), Err),
    }
}

/// The first worker whose RPC port refuses a TCP connection: its node is
/// up but no RPC server listens there (killed, crashed). A connection that
/// is taken is closed at once, unused; the server takes it, after its
/// current client, as a client that left.
pub fn refused(cfg: &ClusterConfig) -> Option<&crate::cluster::config::NodeConfig> {
    cluster_rpc::workers(cfg)
        .iter()
        .find(|n| port_refused(SocketAddr::from((n.ip, cfg.rpc_port))))
}

/// Whether a TCP connection to `addr` is refused (tried for up to
/// half a second; one that is taken is closed at once, unused).
pub fn port_refused(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, PORT_TIMEOUT)
        .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// The node whose RPC server is gone, frozen or unreachable (each node's
/// state asked over ssh), with the last lines of its log; else one that does
/// not take connections.
pub fn blame(cfg: &ClusterConfig) -> Option<String> {
    let workers = cluster_rpc::workers(cfg);
    let states = crate::cluster::run::each_node(workers, |n| cluster_rpc::state_of(cfg, n, 3));
    for (n, (word, pid, log)) in workers.iter().zip(&states) {
        let at = format!("node {} ({})", n.label(), n.ip);
        let why = match word.as_str() {
            "running" => continue,
            "frozen" => format!(
                "its RPC server (pid {pid}) is stopped (frozen, e.g. by SIGSTOP) and does not answer"
            ),
            "exited" => format!("its RPC server (pid {pid}) died"),
            "none" => "no RPC server runs there".to_string(),
            _ => format!("it cannot be reached: {pid}"),
        };
        let log = if log.trim().is_empty() {
            String::new()
        } else {
            format!(
                " (its last lines: {})",
                log.lines().map(str::trim).collect::<Vec<_>>().join(" | ")
            )
        };
        return Some(format!("{at}: {why}{log}"));
    }
    workers.iter().find_map(|n| {
        matches!(
            rpc::hello(
                SocketAddr::from((n.ip, cfg.rpc_port)),
                Duration::from_secs(2)
            ),
            rpc::Hello::Refused | rpc::Hello::Failed(_)
        )
        .then(|| {
            format!(
                "node {} ({}): its RPC server does not take connections",
                n.label(),
                n.ip
            )
        })
    })
}

/// The `--dry-run` text.
pub fn render(cfg: &ClusterConfig, argv: &[String], start: &[String]) -> String {
    let mut s = crate::shell::line(argv);
    s.push('\n');
    s.push_str(&format!("# runs as: {}\n", crate::shell::line(start)));
    s.push_str(&format!(
        "# the RPC servers (started by `halobox cluster up`): {}\n",
        if cluster_rpc::workers(cfg).is_empty() {
            "none (one node)".to_string()
        } else {
            cluster_rpc::workers(cfg)
                .iter()
                .map(|n| format!("{} on {}", n.label(), cluster_rpc::endpoint(cfg, n)))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    s.push_str(&format!(
        "# --tensor-split: the memory each RPC server reports (asked at start; the host's RAM), then the head's; log: {}\n",
        program::LOG
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The supervisors' 1-token probe sends nothing to a squatter on the
    /// API port (a listener of uid 65534: the engine died, another user
    /// took the port): it says whose the port is instead.
    #[test]
    fn the_probe_sends_no_key_to_a_squatter() {
        if !nix::unistd::getuid().is_root() {
            eprintln!("skipped: needs root to run a listener as uid 65534");
            return;
        }
        let squatter = crate::host::sockets::Squatter::start();
        let why = answers(squatter.addr, Some("sekrit-key")).unwrap_err();
        assert!(
            why.contains("not ours") && why.contains("uid 65534"),
            "{why}"
        );
        assert!(!why.contains("sekrit-key"), "{why}");
        assert_eq!(String::from_utf8_lossy(&squatter.heard()), "|");
    }

    /// The start check against real files: a GGUF, another file, none; its
    /// refusals as [`refusal`] says them.
    #[test]
    fn the_start_check_reads_the_magic_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let g = dir.path().join("m.gguf");
        std::fs::write(&g, b"GGUF\x03\x00\x00\x00rest").unwrap();
        let s = dir.path().join("it's.safetensors");
        std::fs::write(&s, b"{\"x\": 1}").unwrap();
        let run = |model: &std::path::Path, server: &str| {
            let out = crate::proc::command("sh")
                .args(["-c", &start_check(server, &model.display().to_string())])
                .output()
                .unwrap();
            let word = String::from_utf8_lossy(&out.stdout)
                .trim()
                .strip_prefix("halobox-check ")
                .map(str::to_string);
            match out.status.code() {
                Some(0) => None,
                Some(program::CHECK_REFUSED) => Some(word.unwrap()),
                c => panic!("exit {c:?}"),
            }
        };
        assert_eq!(run(&g, "sh"), None);
        assert_eq!(run(&s, "sh"), Some("not-gguf {\"x\"".into()));
        assert_eq!(run(&dir.path().join("none"), "sh"), Some("missing".into()));
        assert_eq!(run(dir.path(), "sh"), Some("not-a-file".into()));
        assert_eq!(run(&g, "no-such-llama-server"), Some("no-server".into()));
        let cfg = crate::cluster::config::parse(
            "engine = \"llama.cpp\"\n[[node]]\nssh = \"a\"\nip = \"10.0.0.1\"\n",
        )
        .unwrap();
        for (word, says) in [
            ("missing", "m.gguf: no such file in container"),
            ("not-a-file", "m.gguf: not a readable file"),
            ("not-gguf {\"x\"", "m.gguf: not a GGUF file in container"),
            ("no-server", "there is no `llama-server`"),
        ] {
            let m = refusal(&cfg, "m.gguf", word);
            assert!(m.contains(says) && m.contains("\n  hint: "), "{m}");
        }
    }
}

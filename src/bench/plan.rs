//! The benchmark plan: which legs run on which path, with the exact remote
//! and local commands. Pure: built from options and the two ends' contexts,
//! printed by `--dry-run`, executed by [`super::run`].

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::probe::NodeContext;
use crate::container::inside::Inside;

/// Whether to run the RDMA leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RdmaMode {
    /// When both ends have an RDMA endpoint with a RoCE v2 GID and perftest.
    Auto,
    /// Always (a failure is diagnosed).
    On,
    /// Never.
    Off,
}

/// The links `bench run --link` measures alone ([`super::usb4`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// The USB4/Thunderbolt cable (thunderbolt-net, TCP).
    Usb4,
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::Usb4 => "usb4",
        })
    }
}

/// One path: a local address and the peer's address it talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathSpec {
    /// This node's address on the path.
    pub local_ip: Ipv4Addr,
    /// The peer's address on the path.
    pub peer_ip: Ipv4Addr,
}

/// Everything `bench run` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchOptions {
    /// ssh destination of the peer.
    pub peer: String,
    /// Where the peer came from, when the cluster file chose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_from: Option<String>,
    /// halobox on the peer.
    pub peer_halobox: String,
    /// Extra `ssh -o` options.
    pub ssh_options: Vec<String>,
    /// The paths to measure.
    pub paths: Vec<PathSpec>,
    /// RDMA leg choice.
    pub rdma: RdmaMode,
    /// Seconds per bandwidth test (and the latency test's time bound).
    pub duration_s: u32,
    /// Streams (TCP) and queue pairs (RDMA) of the parallel bandwidth tests.
    pub streams: u32,
    /// halobox server port on the peer.
    pub port: u16,
    /// Latency samples (TCP round trips, perftest iterations).
    pub latency_samples: u32,
    /// Also sweep RDMA message sizes (`ib_write_bw -a`).
    #[serde(default)]
    pub sweep: bool,
    /// This node's container its end runs in (`None`: on the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_in: Option<Inside>,
    /// The peer's container its end runs in (`None`: on the peer's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_container: Option<String>,
    /// `--link`: the one link measured (its addresses on both ends, no RDMA leg).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    /// Why this node's end runs on the host although a container was
    /// tried (`no container vllm here`); said in the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_why: Option<String>,
}

impl BenchOptions {
    /// Where each end runs, for the report.
    pub fn ran_in(&self) -> String {
        format!(
            "this node: {}; peer: {}",
            match (&self.local_in, &self.host_why) {
                (Some(i), _) => i.describe(),
                (None, Some(why)) => format!("host ({why})"),
                (None, None) => "host".to_string(),
            },
            self.peer_container
                .as_ref()
                .map_or("host".to_string(), |n| format!("container {n}"))
        )
    }
}

/// `cmd` (argv on the peer; its first word the peer's halobox or a tool) as
/// the peer runs it: through `halobox bench exec` in its container when its
/// end runs there.
pub fn on_peer(opts: &BenchOptions, cmd: Vec<String>) -> Vec<String> {
    let Some(name) = &opts.peer_container else {
        return cmd;
    };
    let mut a = vec![
        opts.peer_halobox.clone(),
        "bench".into(),
        "exec".into(),
        "--container".into(),
        name.clone(),
        "--".into(),
    ];
    let mut cmd = cmd;
    if cmd.first() == Some(&opts.peer_halobox) {
        cmd[0] = "halobox".into();
    }
    a.extend(cmd);
    a
}

/// `cmd` (argv here) as this node runs it: in its container when its end
/// runs there.
pub fn here(opts: &BenchOptions, cmd: Vec<String>) -> Vec<String> {
    match &opts.local_in {
        Some(i) => i.argv(&cmd),
        None => cmd,
    }
}

/// What a leg measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LegKind {
    /// halobox TCP round trips.
    TcpLatency,
    /// halobox TCP bandwidth.
    TcpBandwidth,
    /// iperf3 TCP bandwidth (cross-check).
    Iperf3,
    /// `ib_write_lat`.
    RdmaLatency,
    /// `ib_write_bw`.
    RdmaBandwidth,
    /// `ib_write_bw -a`: every message size, one row each.
    RdmaSweep,
}

/// One measurement on one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leg {
    /// File stem of its raw log (`p0-tcp-bw-4`).
    pub id: String,
    /// What it measures.
    pub kind: LegKind,
    /// Streams or queue pairs.
    pub streams: u32,
    /// The server command on the peer (argv), when the leg starts its own.
    pub server: Option<Vec<String>>,
    /// The client command here (argv), or a description of the built-in client.
    pub client: Vec<String>,
    /// Why the leg does not run.
    pub skip: Option<String>,
}

/// Legs of one path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathPlan {
    /// `p0`, `p1`, …
    pub id: String,
    /// The addresses.
    pub spec: PathSpec,
    /// halobox's server on the peer, shared by the TCP legs.
    pub tcp_server: Vec<String>,
    /// The legs in order.
    pub legs: Vec<Leg>,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Per path.
    pub paths: Vec<PathPlan>,
}

/// iperf3's server port on the peer.
pub const IPERF3_PORT: u16 = 5201;
/// perftest's first TCP port (one per perftest leg: 18515, 18516, …).
pub const PERFTEST_PORT: u16 = 18515;
/// RDMA message size of the bandwidth test.
pub const RDMA_BW_BYTES: u32 = 65536;
/// Bytes per TCP latency message.
pub const TCP_LATENCY_BYTES: u32 = 64;
/// Seconds the halobox server waits for a connection before exiting.
pub const SERVE_IDLE_S: u32 = 60;
/// The first word of a client that is halobox's own, run in this process.
pub const BUILT_IN: &str = "(built in)";

/// The peer as the remote runner reaches it.
pub fn peer(opts: &BenchOptions) -> crate::remote::Node {
    crate::remote::Node::new(
        &opts.peer,
        &opts.ssh_options,
        format!("the peer {}", opts.peer),
        format!(
            "install halobox (and the tool) there, or pass halobox's path with --peer-halobox PATH (now {})",
            opts.peer_halobox
        ),
    )
}

/// The probe of the peer's end of `path` (argv on the peer).
pub fn probe_command(opts: &BenchOptions, path: &PathSpec) -> Vec<String> {
    on_peer(
        opts,
        vec![
            opts.peer_halobox.clone(),
            "bench".into(),
            "probe".into(),
            "--ip".into(),
            path.peer_ip.to_string(),
        ],
    )
}

/// halobox's TCP client as a command in this node's container (its end
/// runs there): `--latency SAMPLES` or `--streams N`.
fn tcp_client(opts: &BenchOptions, spec: &PathSpec, kind: LegKind, n: u32) -> Vec<String> {
    let mut c = vec![
        s("halobox"),
        s("bench"),
        s("client"),
        s("--to"),
        format!("{}:{}", spec.peer_ip, opts.port),
        s("--from"),
        s(spec.local_ip),
        s("--duration"),
        s(opts.duration_s),
    ];
    if kind == LegKind::TcpLatency {
        c.extend([s("--latency"), s(opts.latency_samples)]);
    } else {
        c.extend([s("--streams"), s(n)]);
    }
    here(opts, c)
}

/// Builds the plan. `ends[i]` is path i's local context and the peer's
/// (`None` in a dry run, where the peer is not asked: its values show as
/// `<peer …>` placeholders).
pub fn build(opts: &BenchOptions, ends: &[(NodeContext, Option<NodeContext>)]) -> Plan {
    let paths = opts
        .paths
        .iter()
        .zip(ends)
        .enumerate()
        .map(|(i, (spec, (local, peer)))| path_plan(opts, i, spec, local, peer.as_ref()))
        .collect();
    Plan { paths }
}

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// Path `i`'s plan: its TCP server on the peer and its legs (TCP,
/// iperf3, RDMA).
fn path_plan(
    opts: &BenchOptions,
    i: usize,
    spec: &PathSpec,
    local: &NodeContext,
    peer: Option<&NodeContext>,
) -> PathPlan {
    let path = OnePath {
        opts,
        id: format!("p{i}"),
        spec,
        local,
        peer,
        streams: if opts.streams > 1 {
            vec![1, opts.streams]
        } else {
            vec![1]
        },
    };
    let tcp_server = on_peer(
        opts,
        vec![
            opts.peer_halobox.clone(),
            s("bench"),
            s("serve"),
            s("--bind"),
            s(spec.peer_ip),
            s("--port"),
            s(opts.port),
            s("--idle-timeout"),
            s(SERVE_IDLE_S),
        ],
    );
    let mut legs = path.tcp_legs();
    legs.extend(path.iperf3_legs());
    legs.extend(path.rdma_legs());
    PathPlan {
        id: path.id,
        spec: *spec,
        tcp_server,
        legs,
    }
}

/// One path as its legs are planned: the options, its id, addresses and
/// two ends, and the stream counts each bandwidth leg runs at.
struct OnePath<'a> {
    /// What `bench run` was asked.
    opts: &'a BenchOptions,
    /// `p0`, `p1`, …
    id: String,
    /// The addresses.
    spec: &'a PathSpec,
    /// This node's end.
    local: &'a NodeContext,
    /// The peer's end (`None` in a dry run).
    peer: Option<&'a NodeContext>,
    /// 1, and `--streams` when more.
    streams: Vec<u32>,
}

impl OnePath<'_> {
    /// The TCP latency leg, then a bandwidth leg for each stream count:
    /// halobox's own client, built in or in this node's container.
    fn tcp_legs(&self) -> Vec<Leg> {
        let (opts, spec) = (self.opts, self.spec);
        let (peer_ip, local_ip) = (spec.peer_ip, spec.local_ip);
        let built_in = |kind: LegKind, n: u32, what: String| {
            if opts.local_in.is_some() {
                tcp_client(opts, spec, kind, n)
            } else {
                vec![s(BUILT_IN), what]
            }
        };
        let mut legs = vec![Leg {
            id: format!("{}-tcp-latency", self.id),
            kind: LegKind::TcpLatency,
            streams: 1,
            server: None,
            client: built_in(
                LegKind::TcpLatency,
                1,
                format!(
                    "{} round trips of {TCP_LATENCY_BYTES} B to {peer_ip}:{} from {local_ip} (at most {} s)",
                    opts.latency_samples, opts.port, opts.duration_s
                ),
            ),
            skip: None,
        }];
        for &n in &self.streams {
            legs.push(Leg {
                id: format!("{}-tcp-bw-{n}", self.id),
                kind: LegKind::TcpBandwidth,
                streams: n,
                server: None,
                client: built_in(
                    LegKind::TcpBandwidth,
                    n,
                    format!(
                        "{n} stream(s) to {peer_ip}:{} from {local_ip} for {} s",
                        opts.port, opts.duration_s
                    ),
                ),
                skip: None,
            });
        }
        legs
    }

    /// An iperf3 leg for each stream count, skipped where an end lacks
    /// iperf3.
    fn iperf3_legs(&self) -> Vec<Leg> {
        let opts = self.opts;
        let (peer_ip, local_ip) = (s(self.spec.peer_ip), s(self.spec.local_ip));
        let skip = if !self.local.iperf3 {
            Some("iperf3 is not installed on this node".to_string())
        } else if self.peer.is_some_and(|p| !p.iperf3) {
            Some("iperf3 is not installed on the peer".to_string())
        } else {
            None
        };
        let server = on_peer(
            opts,
            vec![
                s("iperf3"),
                s("-s"),
                s("-1"),
                s("--forceflush"),
                s("-B"),
                peer_ip.clone(),
                s("-p"),
                s(IPERF3_PORT),
            ],
        );
        let client = |n: u32| {
            let argv = vec![
                s("iperf3"),
                s("-c"),
                peer_ip.clone(),
                s("-B"),
                local_ip.clone(),
                s("-p"),
                s(IPERF3_PORT),
                s("-t"),
                s(opts.duration_s),
                s("-P"),
                s(n),
                s("--json"),
            ];
            here(opts, argv)
        };
        self.streams
            .iter()
            .map(|&n| Leg {
                id: format!("{}-iperf3-{n}", self.id),
                kind: LegKind::Iperf3,
                streams: n,
                server: Some(server.clone()),
                client: client(n),
                skip: skip.clone(),
            })
            .collect()
    }

    /// The perftest legs: latency, bandwidth for each stream count, and
    /// the sweep when asked; each on its own port from [`PERFTEST_PORT`].
    fn rdma_legs(&self) -> Vec<Leg> {
        let skip = match self.opts.link {
            Some(link) => Some(format!(
                "--link {link}: no RDMA over thunderbolt-net (a USB4 RDMA provider is RCCL's net plugin: `halobox bench collective`)"
            )),
            None => rdma_skip(self.opts.rdma, self.local, self.peer),
        };
        let mut kinds = vec![(LegKind::RdmaLatency, 1)];
        kinds.extend(self.streams.iter().map(|&n| (LegKind::RdmaBandwidth, n)));
        if self.opts.sweep {
            kinds.push((LegKind::RdmaSweep, 1));
        }
        kinds
            .into_iter()
            .zip(PERFTEST_PORT..)
            .map(|((kind, n), port)| self.rdma_leg(kind, n, port, skip.clone()))
            .collect()
    }

    /// One perftest leg of `kind` at `n` queue pairs on `port`: the server
    /// on the peer, the client here.
    fn rdma_leg(&self, kind: LegKind, n: u32, port: u16, skip: Option<String>) -> Leg {
        let tool = if kind == LegKind::RdmaLatency {
            "ib_write_lat"
        } else {
            "ib_write_bw"
        };
        let common = self.perftest_args(kind, n, port);
        let mut server = vec![s(tool)];
        server.extend(perftest_endpoint(self.peer, "peer"));
        server.extend(common.iter().cloned());
        let mut client = vec![s(tool)];
        client.extend(perftest_endpoint(Some(self.local), "local"));
        client.extend(common);
        client.push(s(self.spec.peer_ip));
        let suffix = if kind == LegKind::RdmaLatency {
            String::new()
        } else if kind == LegKind::RdmaSweep {
            "-sweep".to_string()
        } else {
            format!("-{n}")
        };
        Leg {
            id: format!("{}-{tool}{suffix}", self.id),
            kind,
            streams: n,
            server: Some(on_peer(self.opts, server)),
            client: here(self.opts, client),
            skip,
        }
    }

    /// The perftest arguments both ends share: the port, the path MTU both
    /// ends allow (at most 4096), and what `kind` measures.
    fn perftest_args(&self, kind: LegKind, n: u32, port: u16) -> Vec<String> {
        let opts = self.opts;
        let mtu = match (self.local.roce_mtu, self.peer.map(|p| p.roce_mtu)) {
            (Some(l), Some(Some(p))) => Some(l.min(p)),
            (Some(l), None) => Some(l),
            _ => None,
        };
        let mut common: Vec<String> = vec![s("-F"), s("-p"), s(port)];
        if let Some(m) = mtu {
            common.extend([s("-m"), s(m.min(4096))]);
        }
        if kind == LegKind::RdmaLatency {
            common.extend([s("-n"), s(opts.latency_samples)]);
        } else if kind == LegKind::RdmaSweep {
            common.extend([s("--report_gbits"), s("-a"), s("-q"), s(1)]);
        } else {
            common.extend([
                s("--report_gbits"),
                s("-s"),
                s(RDMA_BW_BYTES),
                s("-q"),
                s(n),
                s("-D"),
                s(opts.duration_s),
            ]);
        }
        common
    }
}

/// A perftest end's device, port and GID index (`<who …>` placeholders
/// when its context is unknown; none when it has no RDMA endpoint).
fn perftest_endpoint(ctx: Option<&NodeContext>, who: &str) -> Vec<String> {
    match ctx {
        None => vec![
            s("-d"),
            format!("<{who} device>"),
            s("-i"),
            format!("<{who} port>"),
            s("-x"),
            format!("<{who} gid index>"),
        ],
        Some(c) => match &c.rdma {
            None => vec![],
            Some(r) => {
                let mut v = vec![s("-d"), r.device.clone(), s("-i"), s(r.port)];
                if let Some(g) = r.gid_index {
                    v.extend([s("-x"), s(g)]);
                }
                v
            }
        },
    }
}

/// Why the RDMA leg does not run, or `None` when it does.
pub fn rdma_skip(
    mode: RdmaMode,
    local: &NodeContext,
    peer: Option<&NodeContext>,
) -> Option<String> {
    match mode {
        RdmaMode::Off => return Some("RDMA leg turned off (--no-rdma)".into()),
        RdmaMode::On => return None,
        RdmaMode::Auto => {}
    }
    let end = |c: &NodeContext, who: &str| -> Option<String> {
        let iface = c.interface.as_deref().unwrap_or("?");
        match &c.rdma {
            None if c.interface.is_none() => Some(format!("no interface on {who} holds {}", c.ip)),
            None if c.rdma_devices == 0 => Some(format!("no RDMA device on {who}")),
            None => Some(format!(
                "{iface} on {who} has no RDMA device ({} RDMA device(s) serve other interfaces)",
                c.rdma_devices
            )),
            Some(r) if !r.port_up => Some(format!(
                "RDMA port {}/{} on {who} is not ACTIVE",
                r.device, r.port
            )),
            Some(r) if r.gid_index.is_none() => Some(format!(
                "no RoCE v2 GID for {} on {}/{} on {who} (run `halobox doctor --ip {}` there)",
                c.ip, r.device, r.port, c.ip
            )),
            Some(_) if !c.perftest => Some(format!("perftest is not installed on {who}")),
            Some(_) => None,
        }
    };
    end(local, "this node").or_else(|| peer.and_then(|p| end(p, "the peer")))
}

/// The plan as text: per path, each step with its exact commands.
pub fn render(opts: &BenchOptions, plan: &Plan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let peer = peer(opts);
    if let Some(from) = &opts.peer_from {
        let _ = writeln!(out, "peer {}: {from}", opts.peer);
    }
    let _ = writeln!(out, "runs in: {}", opts.ran_in());
    if let Some(link) = opts.link {
        let _ = writeln!(
            out,
            "link {link}: the thunderbolt-net addresses of both ends, TCP legs only (no RDMA over thunderbolt-net)"
        );
    }
    for p in &plan.paths {
        let _ = writeln!(
            out,
            "path {}: {} → {} (peer {})",
            p.id, p.spec.local_ip, p.spec.peer_ip, opts.peer
        );
        let _ = writeln!(
            out,
            "  probe the peer:\n    {}",
            crate::shell::line(&peer.argv(&probe_command(opts, &p.spec)))
        );
        let _ = writeln!(
            out,
            "  halobox server on the peer (TCP legs):\n    {}",
            crate::shell::line(&peer.argv(&p.tcp_server))
        );
        for leg in &p.legs {
            let _ = writeln!(
                out,
                "  {} ({} x{}):",
                leg.id,
                kind_name(leg.kind),
                leg.streams
            );
            if let Some(reason) = &leg.skip {
                let _ = writeln!(out, "    SKIPPED: {reason}");
                continue;
            }
            if let Some(server) = &leg.server {
                let _ = writeln!(out, "    peer:  {}", crate::shell::line(&peer.argv(server)));
            }
            let client = if leg.client.first().is_some_and(|c| c == BUILT_IN) {
                leg.client.join(" ")
            } else {
                crate::shell::line(&leg.client)
            };
            let _ = writeln!(out, "    local: {client}");
        }
    }
    out
}

fn kind_name(kind: LegKind) -> &'static str {
    match kind {
        LegKind::TcpLatency => "TCP latency, halobox",
        LegKind::TcpBandwidth => "TCP bandwidth, halobox",
        LegKind::Iperf3 => "TCP bandwidth, iperf3",
        LegKind::RdmaLatency => "RDMA write latency",
        LegKind::RdmaBandwidth => "RDMA write bandwidth",
        LegKind::RdmaSweep => "RDMA write bandwidth, every message size",
    }
}

//! `cluster bench`, the pure part: which pairs, the `bench run` each pair's
//! first node runs (its saved folder sent back as a tar), what each pair
//! measured, the latency and bandwidth matrices, and the links to look at
//! (the slowest, and any below [`SLOW_PERCENT`] of the others) with the
//! likely cause: MTU, PCIe, RDMA counters, or the failed leg's diagnosis.

use serde::Serialize;

use crate::bench::results::{Results, Row, RunRecord};
use crate::cluster::config::{ClusterConfig, NodeBackend, NodeConfig};

/// A pair slower than this share of the median of the others is flagged.
pub const SLOW_PERCENT: f64 = 80.0;

/// Which pairs `cluster bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pairs {
    /// Every pair of nodes.
    All,
    /// The head with every other node.
    Head,
}

/// The pairs of `n` nodes (indices, first < second), in node order.
pub fn pairs(n: usize, which: Pairs) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if which == Pairs::All || i == 0 {
                out.push((i, j));
            }
        }
    }
    out
}

/// What every pair's `bench run` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairOptions {
    /// Seconds per bandwidth test.
    pub duration: u32,
    /// `--rdma` (true), `--no-rdma` (false), or neither.
    pub rdma: Option<bool>,
}

/// The script a pair's first node runs: `bench run` saving into a
/// temporary folder, its exit code and last error lines, then the folder
/// as a gzip'd tar in base64 (`@@tar` … `@@end`), then the folder removed.
const PAIR: &str = r#"h=$1; shift
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
"$h" bench run --save "$d/run" --json "$@" >/dev/null 2>"$d/err"; rc=$?
echo "@@bench-exit $rc"; echo "@@stderr"; tail -n 6 "$d/err"
if [ -f "$d/run/run.json" ]; then echo "@@tar"; tar -C "$d/run" -czf - . | base64; fi
echo "@@end""#;

/// `bench run` on `from` against `to` (argv on `from`).
pub fn pair_command(
    cfg: &ClusterConfig,
    from: &NodeConfig,
    to: &NodeConfig,
    o: &PairOptions,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        PAIR.into(),
        "halobox-cluster-bench".into(),
        cfg.halobox.clone(),
        format!("--peer={}", to.ssh),
        format!("--peer-ip={}", to.ip),
        format!("--iface-ip={}", from.ip),
        format!("--peer-halobox={}", cfg.halobox),
        format!("--duration={}", o.duration),
    ];
    a.extend(cfg.ssh_options.iter().map(|s| format!("--ssh-option={s}")));
    match from.backend {
        NodeBackend::Host => a.push("--on=host".into()),
        _ => a.push(format!("--container={}", from.container)),
    }
    match o.rdma {
        Some(true) => a.push("--rdma".into()),
        Some(false) => a.push("--no-rdma".into()),
        None => {}
    }
    a
}

/// What a pair's script printed, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairOutput {
    /// `bench run`'s exit code.
    pub exit: Option<i32>,
    /// Its last lines on stderr.
    pub stderr: String,
    /// The saved folder, a gzip'd tar (none when nothing was saved).
    pub tar_gz: Option<Vec<u8>>,
}

/// Reads what the pair's script printed.
pub fn parse_pair(stdout: &str) -> Result<PairOutput, String> {
    use base64::Engine;
    let exit = stdout
        .lines()
        .find_map(|l| l.strip_prefix("@@bench-exit "))
        .and_then(|c| c.trim().parse().ok());
    let section = |name: &str| -> Option<Vec<&str>> {
        let mut it = stdout.lines().skip_while(move |l| l.trim_end() != name);
        it.next()?;
        Some(it.take_while(|l| !l.starts_with("@@")).collect())
    };
    let stderr = section("@@stderr").unwrap_or_default().join("\n");
    let tar_gz = match section("@@tar") {
        None => None,
        Some(lines) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(lines.concat().trim())
                .map_err(|e| format!("the saved run came back damaged ({e})"))?,
        ),
    };
    if exit.is_none() && tar_gz.is_none() {
        return Err("the pair's script stopped before `bench run` finished".into());
    }
    Ok(PairOutput {
        exit,
        stderr,
        tar_gz,
    })
}

/// One pair's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairResult {
    /// The first node (where `bench run` ran).
    pub from: String,
    /// The second node (the peer).
    pub to: String,
    /// Where its run was saved here (`bench report`/`bench compare` read it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved: Option<String>,
    /// Its results, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Results>,
    /// Why it did not run (or what went wrong), when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its ends' MTU and PCIe ceiling, from the run (for the causes).
    #[serde(skip)]
    pub run: Option<RunRecord>,
}

/// Which measurement a matrix shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// halobox TCP one-way latency, median µs.
    TcpLatency,
    /// halobox TCP bandwidth (the most of its stream counts), Gb/s.
    TcpBandwidth,
    /// `ib_write_lat`, median µs.
    RdmaLatency,
    /// `ib_write_bw` (the most of its rows), Gb/s.
    RdmaBandwidth,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 4] = [
        Metric::TcpLatency,
        Metric::TcpBandwidth,
        Metric::RdmaLatency,
        Metric::RdmaBandwidth,
    ];

    fn test(self) -> &'static str {
        match self {
            Metric::TcpLatency | Metric::TcpBandwidth => "tcp halobox",
            Metric::RdmaLatency => "rdma ib_write_lat",
            Metric::RdmaBandwidth => "rdma ib_write_bw",
        }
    }

    fn latency(self) -> bool {
        matches!(self, Metric::TcpLatency | Metric::RdmaLatency)
    }

    /// The matrix's title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::TcpLatency => "TCP latency, one-way median µs (halobox)",
            Metric::TcpBandwidth => "TCP bandwidth, Gb/s (halobox, best of 1 and N streams)",
            Metric::RdmaLatency => "RDMA latency, one-way median µs (ib_write_lat)",
            Metric::RdmaBandwidth => "RDMA bandwidth, Gb/s (ib_write_bw)",
        }
    }

    /// JSON key.
    pub fn key(self) -> &'static str {
        match self {
            Metric::TcpLatency => "tcp_latency_us",
            Metric::TcpBandwidth => "tcp_bandwidth_gbps",
            Metric::RdmaLatency => "rdma_latency_us",
            Metric::RdmaBandwidth => "rdma_bandwidth_gbps",
        }
    }
}

fn rows_of(res: &Results, m: Metric) -> impl Iterator<Item = &Row> {
    res.rows
        .iter()
        .filter(move |r| r.test == m.test() && r.message_bytes.is_none())
        .filter(move |r| r.latency.is_some() == m.latency())
}

/// The pair's value for `m`; `Err` says why there is none (the leg's
/// status and note or diagnosis).
pub fn value(p: &PairResult, m: Metric) -> Result<f64, String> {
    let Some(res) = &p.results else {
        return Err(p.error.clone().unwrap_or_else(|| "did not run".into()));
    };
    let ok = rows_of(res, m)
        .filter(|r| r.status == "ok")
        .filter_map(|r| match m.latency() {
            true => r.latency.as_ref().map(|l| l.median_us),
            false => r.bandwidth_gbps,
        });
    let best = if m.latency() {
        ok.fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.min(v))))
    } else {
        ok.fold(None, |b: Option<f64>, v| Some(b.map_or(v, |b| b.max(v))))
    };
    best.ok_or_else(|| {
        let r = rows_of(res, m)
            .find(|r| r.status != "ok")
            .or_else(|| res.rows.iter().find(|r| r.test == m.test()));
        match r {
            Some(r) => match (&r.diagnosis, &r.note) {
                (Some(d), _) => format!("{}: {}", r.status, d.why),
                (None, Some(n)) => format!("{}: {n}", r.status),
                (None, None) => r.status.clone(),
            },
            None => "not measured".into(),
        }
    })
}

/// A link worth a look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flag {
    /// `a ↔ b`.
    pub pair: String,
    /// What: `slowest link`, or `below 80% of the others`.
    pub what: String,
    /// The bandwidth it measured and which.
    pub bandwidth: String,
    /// The likely causes, each one line.
    pub causes: Vec<String>,
}

/// The metric the flags judge: RDMA bandwidth when every pair has it, else TCP.
pub fn judged(pairs: &[PairResult]) -> Metric {
    if !pairs.is_empty()
        && pairs
            .iter()
            .all(|p| value(p, Metric::RdmaBandwidth).is_ok())
    {
        Metric::RdmaBandwidth
    } else {
        Metric::TcpBandwidth
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The slowest link, and every pair below [`SLOW_PERCENT`] of the median
/// of the other pairs, each with its likely causes.
pub fn flags(pairs: &[PairResult]) -> Vec<Flag> {
    let m = judged(pairs);
    let measured: Vec<(usize, f64)> = pairs
        .iter()
        .enumerate()
        .filter_map(|(i, p)| value(p, m).ok().map(|v| (i, v)))
        .collect();
    let mut out = Vec::new();
    let slowest = measured
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .filter(|_| measured.len() > 1)
        .map(|(i, _)| *i);
    for &(i, v) in &measured {
        let others: Vec<f64> = measured
            .iter()
            .filter(|(j, _)| *j != i)
            .map(|(_, v)| *v)
            .collect();
        let slow = median(others).filter(|o| v < o * SLOW_PERCENT / 100.0);
        let what = match (slowest == Some(i), slow) {
            (_, Some(o)) => format!(
                "{:.0}% of the others' median ({o:.2} Gb/s), below {SLOW_PERCENT:.0}%{}",
                100.0 * v / o,
                if slowest == Some(i) {
                    "; the slowest link"
                } else {
                    ""
                }
            ),
            (true, None) => "the slowest link (within 80% of the others)".into(),
            (false, None) => continue,
        };
        out.push(Flag {
            pair: label(&pairs[i]),
            what,
            bandwidth: format!("{v:.2} Gb/s ({})", m.test()),
            causes: causes(&pairs[i], pairs),
        });
    }
    for p in pairs.iter().filter(|p| value(p, m).is_err()) {
        out.push(Flag {
            pair: label(p),
            what: "no bandwidth measured".into(),
            bandwidth: value(p, m).err().unwrap_or_default(),
            causes: causes(p, pairs),
        });
    }
    out
}

fn label(p: &PairResult) -> String {
    format!("{} ↔ {}", p.from, p.to)
}

/// The MTUs of a pair's ends (`from`, `to`), from its run.
fn mtus(p: &PairResult) -> Vec<(String, u32)> {
    let Some(run) = &p.run else { return vec![] };
    run.paths
        .iter()
        .flat_map(|path| {
            [
                path.local.mtu.map(|m| (p.from.clone(), m)),
                path.peer.mtu.map(|m| (p.to.clone(), m)),
            ]
        })
        .flatten()
        .collect()
}

/// Why `p` may be slow: a smaller MTU than other pairs' ends, a PCIe link
/// below the line rate, RDMA counters that moved, failed legs' diagnoses.
pub fn causes(p: &PairResult, all: &[PairResult]) -> Vec<String> {
    let mut out = Vec::new();
    let most = all.iter().flat_map(mtus).map(|(_, m)| m).max();
    for (node, mtu) in mtus(p) {
        if most.is_some_and(|x| mtu < x) {
            let line = format!(
                "MTU: {node} has {mtu}, other nodes {} (set the same MTU on every data-plane interface; `halobox cluster doctor` checks it)",
                most.unwrap_or_default()
            );
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    if let Some(run) = &p.run {
        for path in &run.paths {
            for (node, ctx) in [(&p.from, &path.local), (&p.to, &path.peer)] {
                if let (Some(pcie), Some(link)) = (ctx.pcie_gbps, ctx.link_gbps)
                    && pcie < link
                {
                    out.push(format!(
                        "PCIe: {node}'s NIC sits on {} ({pcie:.1} Gb/s), below its {link:.0} Gb/s line rate (move it to a wider or faster slot; see doctor's rdma.pcie)",
                        ctx.pcie.as_deref().unwrap_or("a PCIe link")
                    ));
                }
            }
        }
    }
    if let Some(res) = &p.results {
        for c in res.counters.iter().filter(|c| !c.deltas.is_empty()) {
            let node = if c.end == "peer" { &p.to } else { &p.from };
            out.push(format!("counters on {node}: {}", c.diagnosis));
        }
        for r in res.rows.iter().filter(|r| r.status == "failed") {
            if let Some(d) = &r.diagnosis {
                let line = format!("{}: {} (fix: {})", r.test, d.why, d.fix);
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    if out.is_empty() {
        out.push("no cause found in the MTUs, PCIe links or RDMA counters of its ends".into());
    }
    out
}

/// The matrix of `m` over `nodes`, as text (`-` on the diagonal, the
/// pair's value in both of its cells, `x` where it has none, blank for
/// pairs not measured).
pub fn matrix(nodes: &[String], pairs: &[PairResult], m: Metric) -> String {
    let w = nodes
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(1)
        .max(8);
    let mut out = format!("{}\n{:<w$}", m.title(), "");
    for n in nodes {
        out.push_str(&format!("  {n:>w$}"));
    }
    out.push('\n');
    for a in nodes {
        let mut line = format!("{a:<w$}");
        for b in nodes {
            let cell = if a == b {
                "-".to_string()
            } else {
                match pairs
                    .iter()
                    .find(|p| (&p.from == a && &p.to == b) || (&p.from == b && &p.to == a))
                {
                    None => String::new(),
                    Some(p) => match value(p, m) {
                        Ok(v) if m.latency() => format!("{v:.1}"),
                        Ok(v) => format!("{v:.2}"),
                        Err(_) => "x".into(),
                    },
                }
            };
            line.push_str(&format!("  {cell:>w$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The whole report: the matrices (a metric no pair measured is one line
/// saying why), the pairs that failed, the flagged links.
pub fn render(nodes: &[String], pairs: &[PairResult]) -> String {
    let mut out = String::new();
    for m in Metric::ALL {
        if pairs.iter().any(|p| value(p, m).is_ok()) {
            out.push_str(&matrix(nodes, pairs, m));
        } else {
            out.push_str(&format!("{}: no pair measured it\n", m.title()));
        }
        for p in pairs {
            if let Err(e) = value(p, m) {
                out.push_str(&format!("  x {}: {e}\n", label(p)));
            }
        }
        out.push('\n');
    }
    let flags = flags(pairs);
    for f in &flags {
        out.push_str(&format!("{}: {}, {}\n", f.pair, f.bandwidth, f.what));
        for c in &f.causes {
            out.push_str(&format!("  likely: {c}\n"));
        }
    }
    for p in pairs {
        if let Some(s) = &p.saved {
            out.push_str(&format!("{}: saved in {s}\n", label(p)));
        }
    }
    out
}

/// The `--json` document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Node names in cluster.toml's order.
    pub nodes: Vec<String>,
    /// Every pair measured, in order.
    pub pairs: Vec<PairResult>,
    /// Per metric key (`tcp_latency_us`, …): `from`, `to` and the value.
    pub matrices: std::collections::BTreeMap<String, Vec<(String, String, f64)>>,
    /// The links worth a look.
    pub flags: Vec<Flag>,
}

/// The `--json` document of a run.
pub fn report(nodes: Vec<String>, pairs: Vec<PairResult>) -> Report {
    let matrices = Metric::ALL
        .iter()
        .map(|&m| {
            let vals = pairs
                .iter()
                .filter_map(|p| value(p, m).ok().map(|v| (p.from.clone(), p.to.clone(), v)))
                .collect();
            (m.key().to_string(), vals)
        })
        .collect();
    Report {
        flags: flags(&pairs),
        nodes,
        pairs,
        matrices,
    }
}

/// The folder name of the pair `from`, `to` (characters outside
/// `[A-Za-z0-9._-]` become `_`).
pub fn pair_dir(from: &str, to: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{}--{}", clean(from), clean(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_all_and_head() {
        assert_eq!(pairs(3, Pairs::All), [(0, 1), (0, 2), (1, 2)]);
        assert_eq!(pairs(3, Pairs::Head), [(0, 1), (0, 2)]);
        assert!(pairs(1, Pairs::All).is_empty());
    }

    #[test]
    fn pair_output_is_read_back() {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"tar");
        let o = parse_pair(&format!(
            "@@bench-exit 1\n@@stderr\nerror: x\n@@tar\n{b64}\n@@end\n"
        ))
        .unwrap();
        assert_eq!(o.exit, Some(1));
        assert_eq!(o.stderr, "error: x");
        assert_eq!(o.tar_gz.as_deref(), Some(&b"tar"[..]));
        assert!(parse_pair("").is_err());
    }

    fn pair(from: &str, to: &str, error: Option<&str>) -> PairResult {
        PairResult {
            from: from.into(),
            to: to.into(),
            saved: None,
            results: None,
            error: error.map(str::to_string),
            run: None,
        }
    }

    #[test]
    fn a_pair_that_did_not_run_is_flagged_with_why() {
        let p = [pair("a", "b", Some("node a: cannot reach it over ssh"))];
        assert_eq!(
            value(&p[0], Metric::TcpBandwidth).unwrap_err(),
            "node a: cannot reach it over ssh"
        );
        let f = flags(&p);
        assert_eq!(f[0].what, "no bandwidth measured");
        let m = matrix(&["a".into(), "b".into()], &p, Metric::TcpBandwidth);
        assert!(m.lines().nth(2).unwrap().ends_with('x'), "{m}");
        assert_eq!(pair_dir("n 1", "b/2"), "n_1--b_2");
    }

    /// One end of a pair: its MTU, and its NIC's PCIe ceiling against its
    /// line rate.
    fn end(ip: &str, mtu: u32, pcie_gbps: Option<f64>) -> crate::bench::probe::NodeContext {
        serde_json::from_value(serde_json::json!({
            "ip": ip, "interface": "dp0", "mtu": mtu, "roce_mtu": 4096,
            "link_gbps": 100.0, "virtual_link": false,
            "pcie": pcie_gbps.map(|_| "PCIe 4.0 x2"), "pcie_gbps": pcie_gbps,
            "rdma": null, "rdma_devices": 1, "iperf3": true, "perftest": true
        }))
        .unwrap()
    }

    fn row(test: &str, status: &str, gbps: Option<f64>) -> Row {
        Row {
            path: "p0".into(),
            path_label: "dp0".into(),
            leg: "p0-leg".into(),
            test: test.into(),
            streams: 1,
            message_bytes: None,
            status: status.into(),
            latency: None,
            bandwidth_gbps: gbps,
            ceiling_gbps: None,
            percent_of_ceiling: None,
            note: None,
            diagnosis: None,
        }
    }

    /// A pair that ran: `rows` measured, its ends' MTUs and PCIe ceilings.
    fn measured(
        from: (&str, u32, Option<f64>),
        to: (&str, u32, Option<f64>),
        rows: Vec<Row>,
    ) -> PairResult {
        use crate::bench::plan::{BenchOptions, PathSpec, RdmaMode};
        use crate::bench::results::PathRecord;
        let (lip, pip) = ("10.0.0.1", "10.0.0.2");
        let spec = PathSpec {
            local_ip: lip.parse().unwrap(),
            peer_ip: pip.parse().unwrap(),
        };
        let run = RunRecord {
            schema_version: 1,
            started_utc: "2026-01-01T00:00:00Z".into(),
            options: BenchOptions {
                peer: to.0.into(),
                peer_from: None,
                peer_halobox: "halobox".into(),
                ssh_options: vec![],
                paths: vec![spec],
                rdma: RdmaMode::Auto,
                duration_s: 10,
                streams: 4,
                port: 5301,
                latency_samples: 1000,
                sweep: false,
                local_in: None,
                peer_container: None,
                host_why: None,
                link: None,
            },
            paths: vec![PathRecord {
                id: "p0".into(),
                local_ip: spec.local_ip,
                peer_ip: spec.peer_ip,
                local: end(lip, from.1, from.2),
                peer: end(pip, to.1, to.2),
                legs: vec![],
                rdma_counters: None,
            }],
        };
        PairResult {
            from: from.0.into(),
            to: to.0.into(),
            saved: None,
            results: Some(Results {
                schema_version: 1,
                started_utc: run.started_utc.clone(),
                peer: to.0.into(),
                ran_in: String::new(),
                context: vec![],
                rows,
                counters: vec![],
                link_notes: vec![],
            }),
            error: None,
            run: Some(run),
        }
    }

    fn tcp(gbps: f64) -> Vec<Row> {
        vec![
            row("tcp halobox", "ok", Some(gbps * 0.6)),
            row("tcp halobox", "ok", Some(gbps)),
        ]
    }

    #[test]
    fn a_pair_with_mtu_1500_among_9000s_is_flagged_with_the_mtu() {
        let ps = [
            measured(("a", 9000, None), ("b", 9000, None), tcp(9.4)),
            measured(("a", 9000, None), ("c", 9000, None), tcp(9.2)),
            measured(("a", 9000, None), ("d", 1500, None), tcp(6.0)),
        ];
        assert_eq!(judged(&ps), Metric::TcpBandwidth);
        assert_eq!(value(&ps[0], Metric::TcpBandwidth), Ok(9.4), "the best row");
        let f = flags(&ps);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pair, "a ↔ d");
        assert_eq!(f[0].bandwidth, "6.00 Gb/s (tcp halobox)");
        assert_eq!(
            f[0].what,
            "65% of the others' median (9.30 Gb/s), below 80%; the slowest link"
        );
        assert_eq!(
            f[0].causes,
            [
                "MTU: d has 1500, other nodes 9000 (set the same MTU on every data-plane interface; `halobox cluster doctor` checks it)"
            ]
        );
        let text = render(&["a".into(), "b".into(), "c".into(), "d".into()], &ps);
        assert!(
            text.contains("a ↔ d: 6.00 Gb/s (tcp halobox), 65% of the others' median")
                && text.contains("  likely: MTU: d has 1500"),
            "{text}"
        );
    }

    #[test]
    fn the_slowest_link_within_80_percent_is_named_without_a_cause() {
        let ps = [
            measured(("a", 9000, None), ("b", 9000, None), tcp(9.4)),
            measured(("a", 9000, None), ("c", 9000, None), tcp(9.0)),
            measured(("b", 9000, None), ("c", 9000, None), tcp(8.0)),
        ];
        let f = flags(&ps);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pair, "b ↔ c");
        assert_eq!(f[0].what, "the slowest link (within 80% of the others)");
        assert_eq!(
            f[0].causes,
            ["no cause found in the MTUs, PCIe links or RDMA counters of its ends"]
        );
        // One pair alone has no others to be slow against.
        assert!(flags(&ps[..1]).is_empty());
    }

    #[test]
    fn a_narrow_pcie_link_and_moved_counters_are_causes_of_a_slow_rdma_pair() {
        use crate::bench::counters::CounterReport;
        let rdma = |t: f64, g: f64| {
            vec![
                row("tcp halobox", "ok", Some(t)),
                row("rdma ib_write_bw", "ok", Some(g)),
            ]
        };
        let mut ps = vec![
            measured(("a", 9000, None), ("b", 9000, None), rdma(9.4, 92.0)),
            measured(("a", 9000, None), ("c", 9000, None), rdma(9.2, 90.0)),
            measured(("b", 9000, None), ("c", 9000, Some(31.5)), rdma(8.5, 30.0)),
        ];
        ps[2].results.as_mut().unwrap().counters = vec![CounterReport {
            path: "p0".into(),
            end: "peer".into(),
            port: Some("rocep1s0/1".into()),
            present: true,
            deltas: [("out_of_sequence".to_string(), 12)].into(),
            diagnosis: "packets arrived out of order".into(),
        }];
        assert_eq!(judged(&ps), Metric::RdmaBandwidth, "every pair has RDMA");
        let f = flags(&ps);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pair, "b ↔ c");
        assert_eq!(f[0].bandwidth, "30.00 Gb/s (rdma ib_write_bw)");
        assert!(
            f[0].what
                .starts_with("33% of the others' median (91.00 Gb/s)"),
            "{f:#?}"
        );
        assert_eq!(
            f[0].causes,
            [
                "PCIe: c's NIC sits on PCIe 4.0 x2 (31.5 Gb/s), below its 100 Gb/s line rate (move it to a wider or faster slot; see doctor's rdma.pcie)",
                "counters on c: packets arrived out of order",
            ]
        );
        // One pair without RDMA: all are judged on TCP, where none is slow
        // but one is the slowest; its failed RDMA leg is a cause.
        let leg = ps[2].results.as_mut().unwrap();
        leg.rows[1] = Row {
            diagnosis: Some(crate::bench::diagnose::Diagnosis {
                cause: crate::bench::diagnose::Cause::RetryExceeded,
                why: "packets were never acknowledged".into(),
                fix: "check the GID and MTU".into(),
                completion: None,
            }),
            ..row("rdma ib_write_bw", "failed", None)
        };
        assert_eq!(judged(&ps), Metric::TcpBandwidth);
        let f = flags(&ps);
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].pair, "b ↔ c");
        assert_eq!(f[0].bandwidth, "8.50 Gb/s (tcp halobox)");
        assert_eq!(f[0].what, "the slowest link (within 80% of the others)");
        assert!(
            f[0].causes.contains(
                &"rdma ib_write_bw: packets were never acknowledged (fix: check the GID and MTU)"
                    .to_string()
            ),
            "{f:#?}"
        );
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}

//! A saved run: `run.json` (what ran: options, contexts, legs, commands) plus
//! each leg's raw tool output. [`derive()`] turns these into [`Results`] —
//! the same way right after a run and later from the folder, so a saved run
//! re-renders identically.

use std::net::Ipv4Addr;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::counters::{self, CounterReport, Snapshots};
use super::diagnose::{self, Diagnosis, Side};
use super::plan::{BenchOptions, LegKind};
use super::probe::NodeContext;
use super::stats::{LatencySummary, summarise};
use super::{iperf3, perftest, sweep, tcp};
use crate::units::{half_rtt, path_ceiling_gbps};

/// Version of `run.json` and `results.json`.
pub const SCHEMA_VERSION: u32 = 1;

/// How a leg ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LegStatus {
    /// It ran; its raw output says how it went.
    Ran,
    /// It did not run.
    Skipped {
        /// Why.
        reason: String,
    },
    /// It could not run (e.g. the server did not start).
    Failed {
        /// What went wrong.
        message: String,
    },
}

/// One leg of a saved run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegRecord {
    /// File stem of the raw logs.
    pub id: String,
    /// What it measures.
    pub kind: LegKind,
    /// Streams or queue pairs.
    pub streams: u32,
    /// The commands as run (server on the peer over ssh, then client).
    pub commands: Vec<String>,
    /// How it ended.
    #[serde(flatten)]
    pub status: LegStatus,
}

/// One path of a saved run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathRecord {
    /// `p0`, `p1`, …
    pub id: String,
    /// This node's address.
    pub local_ip: Ipv4Addr,
    /// The peer's address.
    pub peer_ip: Ipv4Addr,
    /// This node's end.
    pub local: NodeContext,
    /// The peer's end.
    pub peer: NodeContext,
    /// Legs in order.
    pub legs: Vec<LegRecord>,
    /// RDMA counters of both ends around the RDMA leg (when it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma_counters: Option<Snapshots>,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Start time, UTC, RFC 3339.
    pub started_utc: String,
    /// What was asked.
    pub options: BenchOptions,
    /// Per path.
    pub paths: Vec<PathRecord>,
}

/// One row of the results table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// Path id.
    pub path: String,
    /// e.g. `enp1s0 10.0.0.1 → 10.0.0.2`.
    pub path_label: String,
    /// Leg id (raw log stem).
    pub leg: String,
    /// e.g. `tcp halobox`, `rdma ib_write_bw`.
    pub test: String,
    /// Streams or queue pairs.
    pub streams: u32,
    /// Message size of a size sweep's row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_bytes: Option<u64>,
    /// `ok`, `skipped` or `failed`.
    pub status: String,
    /// One-way latency (half a round trip), µs.
    pub latency: Option<LatencySummary>,
    /// Gb/s (decimal).
    pub bandwidth_gbps: Option<f64>,
    /// The path's ceiling in Gb/s, when known.
    pub ceiling_gbps: Option<f64>,
    /// Bandwidth as a percentage of the ceiling.
    pub percent_of_ceiling: Option<f64>,
    /// Skip reason or extra detail.
    pub note: Option<String>,
    /// Cause and fix of a failure.
    pub diagnosis: Option<Diagnosis>,
}

/// `results.json`: the table, derived from `run.json` and the raw logs.
/// Its JSON schema is `docs/bench-results.schema.json`; the `cause` names
/// of its diagnoses are stable (a renamed cause is a new schema version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Results {
    /// The format version of this file (1; `results::SCHEMA_VERSION`); it changes
    /// when a field or a `cause` name changes meaning or name.
    pub schema_version: u32,
    /// Start time, UTC.
    pub started_utc: String,
    /// The peer's ssh destination.
    pub peer: String,
    /// Where each end ran (`this node: container vllm (podman); peer: host`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ran_in: String,
    /// Per path: a line of context (interfaces, MTUs, link rates, ceiling).
    pub context: Vec<String>,
    /// The rows.
    pub rows: Vec<Row>,
    /// RDMA counter deltas of each end over the RDMA leg (paths where it ran).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterReport>,
    /// What a USB4 path's figures mean against the public ones
    /// (`bench run --link usb4`, or any path on thunderbolt-net).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_notes: Vec<String>,
}

/// Name of the run record in a results folder.
pub const RUN_FILE: &str = "run.json";
/// Name of the derived results in a results folder.
pub const RESULTS_FILE: &str = "results.json";
/// Largest file of a saved run that is read (it may come from a node).
const MAX_SAVED_BYTES: u64 = 64 << 20;

/// Reads `run.json` from `dir`.
pub fn load(dir: &Path) -> anyhow::Result<RunRecord> {
    let kind = super::saved::Kind {
        file: RUN_FILE,
        made_by: "halobox bench run --save",
        what: "bench record",
        max_bytes: MAX_SAVED_BYTES,
        schema_version: SCHEMA_VERSION,
    };
    super::saved::load(dir, &kind, |r: &RunRecord| r.schema_version)
}

/// True for the names a saved run's files have: [`RUN_FILE`],
/// [`RESULTS_FILE`] and the logs of its legs (`p<N>-<leg>.txt`, `.json`,
/// `.server.txt`).
pub fn is_run_file(name: &str) -> bool {
    if name == RUN_FILE || name == RESULTS_FILE {
        return true;
    }
    let Some(stem) = name
        .strip_suffix(".txt")
        .or_else(|| name.strip_suffix(".json"))
    else {
        return false;
    };
    let stem = stem.strip_suffix(".server").unwrap_or(stem);
    let Some((path, leg)) = stem.strip_prefix('p').and_then(|r| r.split_once('-')) else {
        return false;
    };
    !path.is_empty()
        && path.bytes().all(|b| b.is_ascii_digit())
        && !leg.is_empty()
        && leg
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The raw client log of a leg.
pub fn client_log(id: &str, kind: LegKind) -> String {
    match kind {
        LegKind::Iperf3 => format!("{id}.json"),
        _ => format!("{id}.txt"),
    }
}

/// The raw server log of a leg (peer side).
pub fn server_log(id: &str) -> String {
    format!("{id}.server.txt")
}

/// A raw log as text; bytes that are not UTF-8 (a tool's stray byte, a
/// truncated write) become U+FFFD instead of discarding the whole log.
pub fn read_log(dir: &Path, name: &str) -> std::io::Result<String> {
    let bytes = crate::confine::read_regular(&dir.join(name), true, MAX_SAVED_BYTES)?;
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(crate::remote::printable)
        .collect::<Vec<_>>()
        .join("\n"))
}

fn path_label(p: &PathRecord) -> String {
    match &p.local.interface {
        Some(i) => format!("{i} {} → {}", p.local_ip, p.peer_ip),
        None => format!("{} → {}", p.local_ip, p.peer_ip),
    }
}

/// The ceiling of a path: line rates and PCIe links of both ends.
pub fn ceiling(p: &PathRecord) -> Option<f64> {
    path_ceiling_gbps([
        p.local.link_gbps,
        p.local.pcie_gbps,
        p.peer.link_gbps,
        p.peer.pcie_gbps,
    ])
}

fn context_line(p: &PathRecord) -> String {
    let end = |c: &NodeContext| {
        let mut parts = vec![format!(
            "{}",
            c.interface.as_deref().unwrap_or("no interface")
        )];
        if let Some(m) = c.mtu {
            match c.roce_mtu {
                Some(r) if c.rdma.is_some() => parts.push(format!("MTU {m} (RoCE {r})")),
                _ => parts.push(format!("MTU {m}")),
            }
        }
        if let Some(r) = &c.rdma {
            let gid = r.gid_index.map(|g| format!(" GID {g}")).unwrap_or_default();
            parts.push(format!("{}/{}{gid}", r.device, r.port));
        }
        match (c.link_gbps, c.virtual_link) {
            (Some(g), _) => parts.push(format!("{g} Gb/s")),
            (None, true) => parts.push("virtual link".into()),
            (None, false) => {}
        }
        if let (Some(p), Some(g)) = (&c.pcie, c.pcie_gbps) {
            parts.push(format!("{p} = {g:.1} Gb/s"));
        }
        if let Some(u) = &c.usb4 {
            let lanes = u
                .lanes
                .as_deref()
                .map(|l| format!(" {l}"))
                .unwrap_or_default();
            parts.push(format!("USB4 (thunderbolt-net){lanes}"));
        }
        parts.join(", ")
    };
    let ceiling = match ceiling(p) {
        Some(c) => format!("ceiling {c:.1} Gb/s"),
        None => "ceiling unknown".into(),
    };
    format!(
        "{}: local {}; peer {}; {ceiling}",
        p.id,
        end(&p.local),
        end(&p.peer)
    )
}

/// Derives the results from a record and the raw logs in `dir`.
pub fn derive(rec: &RunRecord, dir: &Path) -> Results {
    let mut rows = Vec::new();
    for p in &rec.paths {
        let ceiling = ceiling(p);
        for leg in &p.legs {
            let mut row = Row {
                path: p.id.clone(),
                path_label: path_label(p),
                leg: leg.id.clone(),
                test: test_name(leg.kind),
                streams: leg.streams,
                message_bytes: None,
                status: "ok".into(),
                latency: None,
                bandwidth_gbps: None,
                ceiling_gbps: None,
                percent_of_ceiling: None,
                note: None,
                diagnosis: None,
            };
            match &leg.status {
                LegStatus::Skipped { reason } => {
                    row.status = "skipped".into();
                    row.note = Some(reason.clone());
                }
                LegStatus::Failed { message } => {
                    row.status = "failed".into();
                    row.note = Some(message.clone());
                    let server = read_log(dir, &server_log(&leg.id)).unwrap_or_default();
                    row.diagnosis =
                        tool_of(leg.kind).and_then(|t| diagnose::perftest(&server, Side::Peer, t));
                }
                LegStatus::Ran => fill(&mut row, leg, dir),
            }
            let per_size = match leg.kind {
                LegKind::RdmaSweep if row.status == "ok" => sweep_rows(&row, leg, dir),
                _ => vec![row],
            };
            let per_size = mark_collapses(per_size);
            for mut row in per_size {
                if let (Some(bw), Some(c)) = (row.bandwidth_gbps, ceiling) {
                    row.ceiling_gbps = Some(c);
                    row.percent_of_ceiling = Some(100.0 * bw / c);
                }
                rows.push(row);
            }
        }
    }
    let link_notes = rec
        .paths
        .iter()
        .flat_map(|p| super::usb4::notes(&p.id, &p.local, &p.peer, measured(&p.id, &rows)))
        .collect();
    Results {
        link_notes,
        schema_version: SCHEMA_VERSION,
        started_utc: rec.started_utc.clone(),
        peer: rec.options.peer.clone(),
        ran_in: rec.options.ran_in(),
        context: rec.paths.iter().map(context_line).collect(),
        rows,
        counters: rec
            .paths
            .iter()
            .filter_map(|p| {
                p.rdma_counters
                    .as_ref()
                    .map(|s| counters::reports(&p.id, s))
            })
            .flatten()
            .collect(),
    }
}

/// Path `id`'s TCP figures, for the USB4 notes: the first latency and the
/// best bandwidth of its TCP legs (halobox's and iperf3) that ran.
fn measured(id: &str, rows: &[Row]) -> super::usb4::Measured {
    let tcp = || {
        rows.iter().filter(|r| {
            r.path == id
                && r.status == "ok"
                && (r.test.starts_with("tcp") || r.test.starts_with("iperf3"))
        })
    };
    super::usb4::Measured {
        median_us: tcp().find_map(|r| r.latency.map(|l| l.median_us)),
        best_gbps: tcp()
            .filter_map(|r| r.bandwidth_gbps)
            .fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b)))),
    }
}

fn test_name(kind: LegKind) -> String {
    match kind {
        LegKind::TcpLatency | LegKind::TcpBandwidth => "tcp halobox",
        LegKind::Iperf3 => "tcp iperf3",
        LegKind::RdmaLatency => "rdma ib_write_lat",
        LegKind::RdmaBandwidth | LegKind::RdmaSweep => "rdma ib_write_bw",
    }
    .into()
}

fn tool_of(kind: LegKind) -> Option<&'static str> {
    match kind {
        LegKind::RdmaLatency => Some("ib_write_lat"),
        LegKind::RdmaBandwidth | LegKind::RdmaSweep => Some("ib_write_bw"),
        _ => None,
    }
}

/// A size sweep's rows, one per message size (`row` parsed as a table); a
/// size that moved nothing is a failed row.
fn sweep_rows(row: &Row, leg: &LegRecord, dir: &Path) -> Vec<Row> {
    let raw = read_log(dir, &client_log(&leg.id, leg.kind)).unwrap_or_default();
    match perftest::parse(&raw) {
        Some(perftest::Table::Bandwidth { rows, .. }) => rows
            .iter()
            .map(|r| {
                let mut out = Row {
                    message_bytes: Some(r.bytes),
                    bandwidth_gbps: Some(r.average_gbps),
                    ..row.clone()
                };
                if let Some(what) = bw_moved_nothing(r) {
                    out.bandwidth_gbps = None;
                    fail_no_data(&mut out, "ib_write_bw", what);
                }
                out
            })
            .collect(),
        _ => vec![row.clone()],
    }
}

/// Marks the sizes of a sweep where bandwidth collapses against the
/// smaller sizes (status `warn`, with the cause and the fix).
fn mark_collapses(mut rows: Vec<Row>) -> Vec<Row> {
    let points: Vec<(u64, f64)> = rows
        .iter()
        .filter(|r| r.status == "ok")
        .filter_map(|r| Some((r.message_bytes?, r.bandwidth_gbps?)))
        .collect();
    let found = sweep::collapses(&points);
    if found.is_empty() {
        return rows;
    }
    let sizes: Vec<String> = found
        .iter()
        .map(|c| crate::units::format_bytes(c.bytes))
        .collect();
    let first = found[0];
    let diagnosis = Diagnosis {
        cause: diagnose::Cause::Collapse,
        why: format!(
            "bandwidth collapses at {} (e.g. {:.2} Gb/s at {} against {:.2} Gb/s at {}): it must not fall as messages grow",
            sizes.join(", "),
            first.gbps,
            crate::units::format_bytes(first.bytes),
            first.best_gbps,
            crate::units::format_bytes(first.best_bytes)
        ),
        fix: "an MTU or flow-control symptom: both ends need the same MTU (9000, RoCE path MTU 4096: `halobox doctor` on both), \
the same pause/PFC settings on both NICs (both off on a direct cable, or PFC on the same priority end to end); \
the RDMA counters (above, when read) show retransmissions, out-of-sequence packets and pause/CNP deltas"
            .into(),
        completion: None,
    };
    for c in &found {
        if let Some(r) = rows.iter_mut().find(|r| r.message_bytes == Some(c.bytes)) {
            r.status = "warn".into();
            r.note = Some(format!(
                "under half of {:.2} Gb/s at {}",
                c.best_gbps,
                crate::units::format_bytes(c.best_bytes)
            ));
            r.diagnosis = Some(diagnosis.clone());
        }
    }
    rows
}

/// Why a bandwidth row measured nothing, or `None` when it did.
fn bw_moved_nothing(r: &perftest::BwRow) -> Option<String> {
    if r.iterations == 0 {
        Some(format!("0 iterations at {} B", r.bytes))
    } else if r.average_gbps == 0.0 {
        Some(format!(
            "{} iterations at {} B averaged 0.00 Gb/s",
            r.iterations, r.bytes
        ))
    } else {
        None
    }
}

fn fail_no_data(row: &mut Row, tool: &str, what: String) {
    let d = diagnose::no_data(tool, what);
    row.status = "failed".into();
    row.note = Some(d.why.clone());
    row.diagnosis = Some(d);
}

fn fill(row: &mut Row, leg: &LegRecord, dir: &Path) {
    let raw = match read_log(dir, &client_log(&leg.id, leg.kind)) {
        Ok(t) => t,
        Err(e) => {
            row.status = "failed".into();
            row.note = Some(format!(
                "raw log {} unreadable: {e}",
                client_log(&leg.id, leg.kind)
            ));
            return;
        }
    };
    let fail = |row: &mut Row, note: String| {
        row.status = "failed".into();
        row.note = Some(note);
    };
    match leg.kind {
        LegKind::TcpLatency => match tcp::parse_latency_log(&raw) {
            Ok(rtts) => {
                let one_way: Vec<f64> = rtts
                    .iter()
                    .map(|ns| half_rtt(*ns as f64 / 1000.0))
                    .collect();
                match summarise(&one_way) {
                    Some(s) => row.latency = Some(s),
                    None => fail(row, "no round trip was measured".into()),
                }
            }
            Err(e) => fail(row, e),
        },
        LegKind::TcpBandwidth => match tcp::parse_bandwidth_log(&raw) {
            Ok(s) if s.iter().all(|s| s.bytes == 0) && !s.is_empty() => fail_no_data(
                row,
                "the halobox TCP client",
                format!("{} stream(s), 0 bytes", s.len()),
            ),
            Ok(s) if !s.is_empty() => row.bandwidth_gbps = Some(tcp::aggregate_gbps(&s)),
            Ok(_) => fail(row, "no stream was measured".into()),
            Err(e) => fail(row, e),
        },
        LegKind::Iperf3 => match iperf3::parse(&raw) {
            Ok(r) if r.moved_nothing() => fail_no_data(
                row,
                "iperf3",
                format!(
                    "the receiver got {} bytes in {:.1} s",
                    r.received_bytes.unwrap_or(0),
                    r.seconds
                ),
            ),
            Ok(r) => {
                row.bandwidth_gbps = Some(r.received_gbps);
                row.note = r.retransmits.map(|n| format!("{n} retransmits"));
            }
            Err(e) => fail(row, e),
        },
        LegKind::RdmaLatency | LegKind::RdmaBandwidth | LegKind::RdmaSweep => {
            let tool = tool_of(leg.kind).expect("rdma leg");
            match perftest::parse(&raw) {
                Some(perftest::Table::Latency { rows }) if leg.kind == LegKind::RdmaLatency => {
                    let r = rows[rows.len() - 1];
                    if r.iterations == 0 {
                        return fail_no_data(row, tool, format!("0 iterations at {} B", r.bytes));
                    }
                    match r.typical_us.or(r.avg_us) {
                        Some(median_us) => {
                            row.latency = Some(LatencySummary {
                                samples: r.iterations,
                                min_us: r.min_us,
                                median_us,
                                p99_us: r.p99_us,
                                p999_us: r.p999_us,
                                max_us: r.max_us,
                            })
                        }
                        None => fail(row, format!("{tool} printed no typical or average latency")),
                    }
                }
                Some(perftest::Table::Bandwidth { rows, .. })
                    if leg.kind != LegKind::RdmaLatency =>
                {
                    let last = &rows[rows.len() - 1];
                    match bw_moved_nothing(last) {
                        // A sweep judges each size on its own.
                        Some(what) if leg.kind != LegKind::RdmaSweep => {
                            fail_no_data(row, tool, what)
                        }
                        _ => row.bandwidth_gbps = Some(last.average_gbps),
                    }
                }
                _ => {
                    let server = read_log(dir, &server_log(&leg.id)).unwrap_or_default();
                    let d = diagnose::pick(
                        diagnose::perftest(&raw, Side::Local, tool),
                        diagnose::perftest(&server, Side::Peer, tool),
                    )
                    .unwrap_or_else(|| diagnose::unknown(&raw, Side::Local, tool));
                    row.status = "failed".into();
                    row.note = Some(d.why.clone());
                    row.diagnosis = Some(d);
                }
            }
        }
    }
}

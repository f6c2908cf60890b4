//! Executes a plan: the peer's servers over ssh, the clients here, every
//! step bounded by a timeout, everything started on the peer stopped
//! afterwards (also on failure), raw outputs saved as they come.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use super::counters::Snapshots;
use super::plan::{self, BenchOptions, Leg, LegKind, PathPlan, PathSpec, Plan};
use super::probe::{self, NodeContext};
use super::results::{self, LegRecord, LegStatus, PathRecord, RunRecord, SCHEMA_VERSION};
use super::tcp::{self, LatencyOptions, Target};
use crate::host::rdma::PortCounters;
use crate::host::{HostRoot, Reader};
use crate::proc::{self, Proc, WaitError};
use crate::remote::{self, Node, STOP_GRACE};

/// How long a server on the peer may take to say it listens.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Client attempts while a perftest or iperf3 server is not yet listening.
const CLIENT_ATTEMPTS: u32 = 10;

/// The address this node sends from to reach `peer` (the kernel's route
/// choice; no packet is sent).
pub fn source_address(peer: Ipv4Addr) -> anyhow::Result<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect((peer, 9))
        .with_context(|| format!("no route from this node to {peer}"))?;
    match s.local_addr()? {
        SocketAddr::V4(a) => Ok(*a.ip()),
        SocketAddr::V6(_) => bail!("no IPv4 route to {peer}"),
    }
}

/// Pairs `--peer-ip` with `--iface-ip` (or the routed source address).
pub fn paths(peer_ips: &[Ipv4Addr], iface_ips: &[Ipv4Addr]) -> anyhow::Result<Vec<PathSpec>> {
    if !iface_ips.is_empty() && iface_ips.len() != peer_ips.len() {
        bail!(
            "{} --iface-ip for {} --peer-ip: give one local address per peer address, in the same order, or none",
            iface_ips.len(),
            peer_ips.len()
        );
    }
    peer_ips
        .iter()
        .enumerate()
        .map(|(i, &peer_ip)| {
            let local_ip = match iface_ips.get(i) {
                Some(ip) => *ip,
                None => source_address(peer_ip)?,
            };
            Ok(PathSpec { local_ip, peer_ip })
        })
        .collect()
}

/// Asks the peer for its end of `path` (`halobox bench probe` over ssh).
pub fn peer_context(opts: &BenchOptions, path: &PathSpec) -> anyhow::Result<NodeContext> {
    let peer = plan::peer(opts);
    let done = peer.run_ok(
        "`halobox bench probe`",
        &plan::probe_command(opts, path),
        Duration::from_secs(60),
    )?;
    remote::last_json(
        peer.label(),
        "`halobox bench probe`",
        &done.stdout,
        &done.output,
    )
    .map_err(anyhow::Error::msg)
}

/// The UTC time now as RFC 3339 and as a folder name (`20250101T120000Z`).
pub fn utc_now() -> (String, String) {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (
        format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
        format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}Z"),
    )
}

/// `$XDG_STATE_HOME/halobox/bench/<stamp>` or `~/.local/state/halobox/bench/<stamp>`.
pub fn default_save_dir(stamp: &str) -> anyhow::Result<PathBuf> {
    let state = match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        Some(s) => PathBuf::from(s),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .context("neither XDG_STATE_HOME nor HOME is set: pass --save DIR")?,
        )
        .join(".local/state"),
    };
    Ok(state.join("halobox/bench").join(stamp))
}

/// Runs the plan and saves `run.json` and the raw logs in `dir`.
pub fn execute(
    opts: &BenchOptions,
    plan: &Plan,
    ends: &[(NodeContext, NodeContext)],
    started_utc: String,
    dir: &Path,
) -> anyhow::Result<RunRecord> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut paths = Vec::new();
    for (p, (local, peer)) in plan.paths.iter().zip(ends) {
        let (legs, rdma_counters) = run_path(opts, p, local, dir)?;
        paths.push(PathRecord {
            id: p.id.clone(),
            local_ip: p.spec.local_ip,
            peer_ip: p.spec.peer_ip,
            local: local.clone(),
            peer: peer.clone(),
            legs,
            rdma_counters,
        });
    }
    let rec = RunRecord {
        schema_version: SCHEMA_VERSION,
        started_utc,
        options: opts.clone(),
        paths,
    };
    fs::write(
        dir.join(results::RUN_FILE),
        serde_json::to_string_pretty(&rec)? + "\n",
    )?;
    Ok(rec)
}

fn record(leg: &Leg, commands: Vec<String>, status: LegStatus) -> LegRecord {
    LegRecord {
        id: leg.id.clone(),
        kind: leg.kind,
        streams: leg.streams,
        commands,
        status,
    }
}

/// Both ends' RDMA counters now: this node's read here, the peer's through
/// `bench probe` (or why that failed).
fn counters_now(
    opts: &BenchOptions,
    spec: &PathSpec,
    local: &NodeContext,
) -> (Option<PortCounters>, Result<Option<PortCounters>, String>) {
    let here = probe::counters(&Reader::new(HostRoot::live()), local);
    let peer = peer_context(opts, spec)
        .map(|c| c.counters)
        .map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string());
    (here, peer)
}

fn run_path(
    opts: &BenchOptions,
    p: &PathPlan,
    local: &NodeContext,
    dir: &Path,
) -> anyhow::Result<(Vec<LegRecord>, Option<Snapshots>)> {
    let mut out = Vec::new();
    let mut snaps: Option<Snapshots> = None;
    let tcp_legs: Vec<&Leg> = p
        .legs
        .iter()
        .filter(|l| matches!(l.kind, LegKind::TcpLatency | LegKind::TcpBandwidth))
        .collect();
    out.extend(run_tcp(opts, p, &tcp_legs, dir)?);
    for leg in p
        .legs
        .iter()
        .filter(|l| !matches!(l.kind, LegKind::TcpLatency | LegKind::TcpBandwidth))
    {
        let peer = plan::peer(opts);
        let commands: Vec<String> = leg
            .server
            .iter()
            .map(|s| crate::shell::line(&peer.argv(s)))
            .chain([client_line(leg)])
            .collect();
        if let Some(reason) = &leg.skip {
            out.push(record(
                leg,
                commands,
                LegStatus::Skipped {
                    reason: reason.clone(),
                },
            ));
            continue;
        }
        let server = leg.server.as_deref().expect("tool legs have a server");
        if leg.kind != LegKind::Iperf3 && snaps.is_none() {
            let (here, peer) = counters_now(opts, &p.spec, local);
            snaps = Some(Snapshots {
                local_before: here,
                peer_error: peer.as_ref().err().cloned(),
                peer_before: peer.ok().flatten(),
                ..Snapshots::default()
            });
        }
        let status = match leg.kind {
            LegKind::Iperf3 => run_iperf3(opts, leg, server, dir)?,
            _ => run_perftest(opts, leg, server, dir)?,
        };
        out.push(record(leg, commands, status));
    }
    if let Some(s) = &mut snaps {
        let (here, peer) = counters_now(opts, &p.spec, local);
        s.local_after = here;
        if s.peer_error.is_none() {
            s.peer_error = peer.as_ref().err().cloned();
        }
        s.peer_after = peer.ok().flatten();
    }
    Ok((out, snaps))
}

/// Starts `server` (argv on the peer) under the guard and waits for its
/// ready line. A server whose line does not come in time is stopped and
/// started once more: podman 4's exec can lose a command's output on the
/// way, the ready line with it.
fn start_server(
    peer: &Node,
    server: &[String],
    ready: impl Fn(&str) -> bool,
    what: &str,
) -> Result<Proc, String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let mut proc = peer.spawn(server).map_err(|e| e.to_string())?;
        match proc.wait_for_line(&ready, READY_TIMEOUT) {
            Ok(()) => return Ok(proc),
            Err(WaitError::Exited) => {
                return Err(peer.error(what, &proc.wait(STOP_GRACE)).to_string());
            }
            Err(WaitError::Timeout) => {
                let out = proc.finish(STOP_GRACE);
                if tries < 2 {
                    continue;
                }
                return Err(format!(
                    "{}: {what} did not report listening within {} s, twice (stopped there): {}",
                    peer.label(),
                    READY_TIMEOUT.as_secs(),
                    remote::tail(&out, 3)
                ));
            }
        }
    }
}

fn run_tcp(
    opts: &BenchOptions,
    p: &PathPlan,
    legs: &[&Leg],
    dir: &Path,
) -> anyhow::Result<Vec<LegRecord>> {
    let peer = plan::peer(opts);
    let server_line = crate::shell::line(&peer.argv(&p.tcp_server));
    let commands = |leg: &Leg| vec![server_line.clone(), client_line(leg)];
    let server = start_server(
        &peer,
        &p.tcp_server,
        |l| l.starts_with(tcp::READY_PREFIX),
        "the halobox server",
    );
    let mut server = match server {
        Ok(s) => s,
        Err(message) => {
            return Ok(legs
                .iter()
                .map(|l| {
                    record(
                        l,
                        commands(l),
                        LegStatus::Failed {
                            message: message.clone(),
                        },
                    )
                })
                .collect());
        }
    };
    let target = Target {
        peer: SocketAddr::new(IpAddr::V4(p.spec.peer_ip), opts.port),
        local: Some(p.spec.local_ip),
    };
    let duration = Duration::from_secs(u64::from(opts.duration_s.max(1)));
    let mut out = Vec::new();
    for leg in legs {
        let raw = if leg.client.first().is_some_and(|c| c == plan::BUILT_IN) {
            let samples = (leg.kind == LegKind::TcpLatency).then_some(opts.latency_samples);
            tcp_client(&target, samples, leg.streams, duration).map_err(|e| e.to_string())
        } else {
            // halobox's client in this node's container; a result that
            // came back empty was lost on the way (podman 4's exec): once more.
            let within = duration * 2 + Duration::from_secs(60);
            let mut done = run_here(&leg.client, within)?;
            if done.status.is_some_and(|s| s.success()) && done.stdout.trim().is_empty() {
                done = run_here(&leg.client, within)?;
            }
            if done.status.is_some_and(|s| s.success()) {
                Ok(done.stdout)
            } else {
                Err(remote::tail(&done.output, 3))
            }
        };
        let status = match raw {
            Ok(raw) => {
                fs::write(dir.join(results::client_log(&leg.id, leg.kind)), raw)?;
                LegStatus::Ran
            }
            Err(e) => {
                let alive = server.try_status().is_none();
                LegStatus::Failed {
                    message: if alive {
                        format!("halobox TCP client to {}: {e}", target.peer)
                    } else {
                        format!(
                            "{}: the halobox server stopped: {}",
                            peer.label(),
                            remote::tail(&server.output(), 3)
                        )
                    },
                }
            }
        };
        out.push(record(leg, commands(leg), status));
    }
    let token = server
        .stdout()
        .lines()
        .find_map(tcp::StopToken::from_ready_line);
    if let Some(token) = &token {
        let _ = tcp::bye(&target, token);
    }
    let mut log = server.finish(STOP_GRACE);
    if let Some(token) = &token {
        log = log.replace(&token.hex(), "********");
    }
    fs::write(dir.join(format!("{}-tcp.server.txt", p.id)), log)?;
    Ok(out)
}

/// halobox's TCP client: `samples` round trips (latency), else `streams`
/// streams for `duration` (bandwidth); the raw log.
pub fn tcp_client(
    target: &Target,
    samples: Option<u32>,
    streams: u32,
    duration: Duration,
) -> std::io::Result<String> {
    match samples {
        Some(samples) => tcp::latency(
            target,
            &LatencyOptions {
                message_bytes: plan::TCP_LATENCY_BYTES,
                warmup: 100,
                samples,
                max_time: duration,
            },
        )
        .map(|r| tcp::format_latency_log(&r)),
        None => tcp::bandwidth(target, streams, duration).map(|s| tcp::format_bandwidth_log(&s)),
    }
}

/// This node's end of `ip`: read here, or by halobox in its container when
/// its end runs there.
pub fn local_context(
    opts: &BenchOptions,
    facts: &crate::host::HostFacts,
    ip: Ipv4Addr,
) -> anyhow::Result<NodeContext> {
    if opts.local_in.is_none() {
        return Ok(probe::context(facts, &Reader::new(HostRoot::live()), ip));
    }
    let argv = plan::here(
        opts,
        vec![
            "halobox".into(),
            "bench".into(),
            "probe".into(),
            "--ip".into(),
            ip.to_string(),
        ],
    );
    let done = run_here(&argv, Duration::from_secs(60))?;
    if !done.status.is_some_and(|s| s.success()) {
        anyhow::bail!(
            "`halobox bench probe` in this node's container failed: {}",
            remote::tail(&done.output, 3)
        );
    }
    remote::last_json(
        "this node's container",
        "`halobox bench probe`",
        &done.stdout,
        &done.output,
    )
    .map_err(anyhow::Error::msg)
}

/// Runs `argv` here to completion within `timeout`, its stdin open until
/// then: a command guarded in this node's container (see
/// [`plan::here`]) is stopped when stdin closes, so it must not close early.
fn run_here(argv: &[String], timeout: Duration) -> std::io::Result<proc::Finished> {
    Ok(Proc::spawn(argv)?.complete(timeout, STOP_GRACE))
}

/// The client as the record shows it.
fn client_line(leg: &Leg) -> String {
    if leg.client.first().is_some_and(|c| c == plan::BUILT_IN) {
        leg.client.join(" ")
    } else {
        crate::shell::line(&leg.client)
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((50u64 << attempt.min(5)).min(1000))
}

fn run_iperf3(
    opts: &BenchOptions,
    leg: &Leg,
    server: &[String],
    dir: &Path,
) -> anyhow::Result<LegStatus> {
    let peer = plan::peer(opts);
    let server = start_server(
        &peer,
        server,
        |l| l.contains("Server listening"),
        "iperf3 -s",
    );
    let server = match server {
        Ok(s) => s,
        Err(message) => return Ok(LegStatus::Failed { message }),
    };
    let timeout = Duration::from_secs(u64::from(opts.duration_s) + 30);
    let mut attempt = 0;
    let done = loop {
        let done = run_here(&leg.client, timeout)?;
        let refused = done.stdout.contains("Connection refused");
        if !refused || attempt + 1 >= CLIENT_ATTEMPTS {
            break done;
        }
        thread::sleep(backoff(attempt));
        attempt += 1;
    };
    fs::write(
        dir.join(results::client_log(&leg.id, leg.kind)),
        &done.stdout,
    )?;
    let log = server.finish(STOP_GRACE);
    fs::write(dir.join(results::server_log(&leg.id)), log)?;
    Ok(LegStatus::Ran)
}

fn run_perftest(
    opts: &BenchOptions,
    leg: &Leg,
    server_argv: &[String],
    dir: &Path,
) -> anyhow::Result<LegStatus> {
    let peer = plan::peer(opts);
    let mut server = peer.spawn(server_argv)?;
    let timeout = Duration::from_secs(u64::from(opts.duration_s) + 60);
    let mut attempt = 0;
    let mut lost = false;
    let status = loop {
        if server.try_status().is_some() {
            break LegStatus::Failed {
                message: format!(
                    "{}: {} exited before the client connected: {}",
                    peer.label(),
                    if leg.kind == LegKind::RdmaLatency {
                        "ib_write_lat"
                    } else {
                        "ib_write_bw"
                    },
                    remote::tail(&server.output(), 3)
                ),
            };
        }
        let done = run_here(&leg.client, timeout)?;
        let refused = done.output.contains("Couldn't connect to");
        if refused && attempt + 1 < CLIENT_ATTEMPTS {
            thread::sleep(backoff(attempt));
            attempt += 1;
            continue;
        }
        // perftest always prints something: an empty output was lost on
        // the way (podman 4's exec drops a short command's output at
        // times). The leg runs once more, from a new server.
        if done.output.trim().is_empty() && !lost {
            lost = true;
            let _ = server.finish(STOP_GRACE);
            server = peer.spawn(server_argv)?;
            continue;
        }
        fs::write(
            dir.join(results::client_log(&leg.id, leg.kind)),
            &done.output,
        )?;
        break LegStatus::Ran;
    };
    let log = server.finish(STOP_GRACE);
    fs::write(dir.join(results::server_log(&leg.id)), log)?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_format() {
        let (rfc, stamp) = utc_now();
        assert_eq!(rfc.len(), 20);
        assert!(rfc.ends_with('Z') && stamp.ends_with('Z'));
        assert_eq!(stamp.len(), 16);
    }
}

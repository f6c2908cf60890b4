//! `cluster doctor`, the pure part: the probe each node runs (its own
//! `doctor --json`, halobox's version, its container's image and a ping to
//! every other node's data-plane address), reading what it printed, the
//! checks no single node can make, and one table of checks × nodes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::container::spec::LABEL_DIGEST;
use crate::doctor::{Check, NodeIdentity, Pending, Status};

/// The probe as a shell script: `$1` halobox, `$2` the data-plane address,
/// `$3` the container (empty: Ray runs on the host), then the peers. Each
/// part is announced by a `@@` line, so its output can be told apart.
const PROBE: &str = r#"h=$1 ip=$2 c=$3; shift 3
echo "@@version"; "$h" --version 2>&1; echo "@@version-exit $?"
a=""; for p in "$@"; do a="$a --peer $p"; done
echo "@@doctor"; "$h" doctor --json --ip "$ip" $a; echo "@@doctor-exit $?"
if [ -n "$c" ]; then echo "@@list"; "$h" list --json 2>&1; echo "@@list-exit $?"; fi
command -v ping >/dev/null 2>&1 || echo "@@noping"
for p in "$@"; do ( if ping -c 1 -W 2 "$p" >/dev/null 2>&1; then echo "@@reach $p ok"; else echo "@@reach $p fail"; fi ) & done
wait"#;

/// The probe's argv on a node: `halobox` there, its data-plane `ip`, its
/// `container` (`None` for the host backend) and the other nodes' `peers`.
pub fn probe_command(
    halobox: &str,
    ip: Ipv4Addr,
    container: Option<&str>,
    peers: &[Ipv4Addr],
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "sh".into(),
        "-c".into(),
        PROBE.into(),
        "halobox-cluster-doctor".into(),
        halobox.into(),
        ip.to_string(),
        container.unwrap_or("").into(),
    ];
    a.extend(peers.iter().map(Ipv4Addr::to_string));
    a
}

/// A node's doctor report, as read back (the fields `cluster doctor` uses).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DoctorDoc {
    /// Every check.
    pub checks: Vec<Check>,
    /// The data plane as the node resolved it (`outcome`, `mtu`, …).
    pub data_plane: serde_json::Value,
    /// Versions and GID type (absent from an older halobox).
    #[serde(default)]
    pub node: Option<NodeIdentity>,
}

impl DoctorDoc {
    /// The data-plane interface's MTU.
    pub fn mtu(&self) -> Option<u64> {
        self.data_plane.get("mtu")?.as_u64()
    }

    /// The data-plane interface's name.
    pub fn interface(&self) -> Option<&str> {
        self.data_plane.get("interface")?.as_str()
    }
}

/// The image the node's halobox container runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Image {
    /// Ray runs on the host: there is no container to compare.
    Host,
    /// The container is not there.
    NoContainer {
        /// Its name.
        name: String,
    },
    /// The container and its image (the digest halobox pinned it by, else the image id).
    Found {
        /// Its name.
        name: String,
        /// `sha256:…`.
        digest: String,
    },
    /// The engine could not be asked.
    Unknown {
        /// Why.
        why: String,
    },
}

/// What one node's probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// Its doctor report.
    pub doctor: DoctorDoc,
    /// `halobox --version` there (`0.1.0`).
    pub halobox_version: Option<String>,
    /// Its container's image.
    pub image: Image,
    /// The other nodes' addresses and whether a ping reached them
    /// (empty when the node has no `ping`).
    pub reach: Vec<(Ipv4Addr, bool)>,
    /// The node has no `ping`.
    pub no_ping: bool,
}

/// A node of cluster.toml and what its probe gave.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its name.
    pub name: String,
    /// Its ssh target.
    pub ssh: String,
    /// Its data-plane address.
    pub ip: Ipv4Addr,
    /// What it found, or why there is nothing (cannot reach it, no halobox, …).
    pub probe: Result<Probe, String>,
}

/// The lines of the probe's part `name` (after `@@name`, up to the next `@@` line).
fn part<'a>(stdout: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let head = format!("@@{name}");
    let mut lines = stdout.lines().skip_while(|l| l.trim_end() != head);
    lines.next()?;
    Some(lines.take_while(|l| !l.starts_with("@@")).collect())
}

/// The exit code the probe printed for part `name`.
fn exit_of(stdout: &str, name: &str) -> Option<i32> {
    let head = format!("@@{name}-exit ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|c| c.trim().parse().ok())
}

/// Reads the probe's output on a node whose container is `container`;
/// `Err` says why the node's doctor report is missing.
pub fn parse_probe(stdout: &str, container: Option<&str>) -> Result<Probe, String> {
    let doctor_text = part(stdout, "doctor")
        .map(|l| l.join("\n"))
        .unwrap_or_default();
    let doctor: DoctorDoc = match crate::remote::parse_json_lines(doctor_text.trim()) {
        Ok(d) => d,
        Err(e) => {
            let why = match exit_of(stdout, "doctor") {
                Some(127) => "halobox is not installed there (or not at cluster.toml's `halobox` path)\n  hint: `halobox cluster install`, or set `halobox` in cluster.toml".to_string(),
                Some(c) => format!(
                    "its `halobox doctor --json` (exit {c}) printed no report this halobox reads ({e}): different versions? install the same halobox everywhere: {}",
                    crate::remote::tail(&doctor_text, 2)
                ),
                None => "the probe stopped before doctor answered".to_string(),
            };
            return Err(why);
        }
    };
    let halobox_version = part(stdout, "version")
        .filter(|_| exit_of(stdout, "version") == Some(0))
        .and_then(|l| {
            l.first()
                .map(|v| v.trim().trim_start_matches("halobox ").to_string())
        });
    let image = match container {
        None => Image::Host,
        Some(name) => image_of(stdout, name),
    };
    let reach = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("@@reach "))
        .filter_map(|r| {
            let (ip, ok) = r.trim().split_once(' ')?;
            Some((ip.parse().ok()?, ok == "ok"))
        })
        .collect();
    Ok(Probe {
        doctor,
        halobox_version,
        image,
        reach,
        no_ping: stdout.lines().any(|l| l.trim_end() == "@@noping"),
    })
}

/// The container `name` in the node's `halobox list --json`.
fn image_of(stdout: &str, name: &str) -> Image {
    #[derive(Deserialize)]
    struct Listed {
        name: String,
        #[serde(default)]
        image_id: String,
        #[serde(default)]
        labels: BTreeMap<String, String>,
    }
    let text = part(stdout, "list")
        .map(|l| l.join("\n"))
        .unwrap_or_default();
    let start = text.find('[').unwrap_or(text.len());
    match crate::remote::parse_json::<Vec<Listed>>(&text[start..]) {
        Ok(list) => match list.into_iter().find(|c| c.name == name) {
            Some(c) => Image::Found {
                name: name.into(),
                digest: c.labels.get(LABEL_DIGEST).cloned().unwrap_or(c.image_id),
            },
            None => Image::NoContainer { name: name.into() },
        },
        Err(_) => Image::Unknown {
            why: format!(
                "`halobox list --json` there: {}",
                crate::remote::tail(&text, 2)
            ),
        },
    }
}

/// One node's cell of a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// The node.
    pub node: String,
    /// Its outcome (`None`: the node gave no answer for this check).
    pub status: Option<Status>,
    /// Why.
    pub summary: String,
    /// The fix, for a non-pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// For a pass the node's files configure but it does not show yet: what
    /// it waits for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// A check across the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The check (`net.mtu`; `fleet.*` for the cross-node checks).
    pub id: String,
    /// The worst outcome of any node.
    pub worst: Status,
    /// One line for the whole row (cross-node checks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// One cell per node, in cluster.toml's order.
    pub cells: Vec<Cell>,
}

/// A node as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeLine {
    /// Name.
    pub name: String,
    /// ssh target.
    pub ssh: String,
    /// Data-plane address.
    pub ip: Ipv4Addr,
    /// Its doctor report was read.
    pub reached: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// halobox's version there.
    pub halobox_version: Option<String>,
    /// Its container's image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
}

/// `cluster doctor`'s report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The nodes, in cluster.toml's order.
    pub nodes: Vec<NodeLine>,
    /// Every check, worst first.
    pub rows: Vec<Row>,
    /// True when any node or cross-node check FAILs.
    pub failed: bool,
}

/// How bad a status is for the ordering (lower: worse).
fn rank(s: Status) -> u8 {
    match s {
        Status::Fail => 0,
        Status::Warn => 1,
        Status::Pass => 2,
        Status::Info => 3,
        Status::Skip => 4,
    }
}

fn worst(cells: &[Cell]) -> Status {
    cells
        .iter()
        .filter_map(|c| c.status)
        .min_by_key(|s| rank(*s))
        .unwrap_or(Status::Skip)
}

fn row(id: &str, summary: Option<String>, cells: Vec<Cell>) -> Row {
    Row {
        id: id.into(),
        worst: worst(&cells),
        summary,
        cells,
    }
}

fn cell(node: &str, status: Status, summary: impl Into<String>) -> Cell {
    Cell {
        pending: None,
        node: node.into(),
        status: Some(status),
        summary: summary.into(),
        fix: None,
    }
}

/// `values` (per node; `None` unknown) agree: every known value equals the
/// most common one (ties: the earliest node's). Nodes that differ get
/// `mismatch`, with `fix`.
fn agree(
    id: &str,
    what: &str,
    answers: &[Answer],
    values: &[Option<String>],
    mismatch: Status,
    fix: &str,
) -> Row {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for v in values.iter().flatten() {
        match counts.iter_mut().find(|(k, _)| k == v) {
            Some((_, n)) => *n += 1,
            None => counts.push((v, 1)),
        }
    }
    let common = counts
        .iter()
        .fold(None::<(&str, usize)>, |best, &(k, n)| match best {
            Some((_, b)) if b >= n => best,
            _ => Some((k, n)),
        })
        .map(|(k, _)| k.to_string());
    let cells: Vec<Cell> = answers
        .iter()
        .zip(values)
        .map(|(a, v)| match (v, &common) {
            (None, _) => cell(&a.name, Status::Skip, format!("{what}: unknown")),
            (Some(v), Some(c)) if v == c => cell(&a.name, Status::Pass, format!("{what} {v}")),
            (Some(v), _) => Cell {
                pending: None,
                fix: Some(fix.into()),
                ..cell(
                    &a.name,
                    mismatch,
                    format!(
                        "{what} {v}, the others {}",
                        common.as_deref().unwrap_or("?")
                    ),
                )
            },
        })
        .collect();
    let differ: Vec<String> = answers
        .iter()
        .zip(values)
        .filter(|(_, v)| v.is_some() && *v != &common)
        .map(|(a, v)| format!("{} {}", a.name, v.as_deref().unwrap_or("")))
        .collect();
    let summary = match (&common, differ.is_empty()) {
        (None, _) => format!("{what}: unknown on every node"),
        (Some(c), true) => format!("{what} {c} on every node that reports it"),
        (Some(c), false) => format!("{what} differs: {} (the others {c})", differ.join(", ")),
    };
    row(id, Some(summary), cells)
}

fn probes(answers: &[Answer]) -> impl Iterator<Item = (&Answer, Option<&Probe>)> {
    answers.iter().map(|a| (a, a.probe.as_ref().ok()))
}

/// The checks no single node can make, from every node's probe.
pub fn cross_checks(answers: &[Answer]) -> Vec<Row> {
    let reached = row(
        "fleet.reached",
        None,
        answers
            .iter()
            .map(|a| match &a.probe {
                Ok(_) => cell(&a.name, Status::Pass, "its doctor report was read"),
                Err(e) => Cell {
                    pending: None,
                    fix: Some(
                        "make `ssh NODE halobox doctor --json` work from here (see the error)"
                            .into(),
                    ),
                    ..cell(&a.name, Status::Fail, e.clone())
                },
            })
            .collect(),
    );
    let field = |f: &dyn Fn(&Probe) -> Option<String>| -> Vec<Option<String>> {
        probes(answers).map(|(_, p)| p.and_then(f)).collect()
    };
    let identity = |f: fn(&NodeIdentity) -> Option<String>| {
        field(&|p: &Probe| p.doctor.node.as_ref().and_then(f))
    };
    let mtu = agree(
        "fleet.mtu",
        "data-plane MTU",
        answers,
        &field(&|p: &Probe| p.doctor.mtu().map(|m| m.to_string())),
        Status::Fail,
        "set the same MTU on every node's data-plane interface (9000 for RoCE): `sudo ip link set dev IFACE mtu 9000`, and make it persistent (`nmcli connection modify CONN 802-3-ethernet.mtu 9000`); the switch ports must allow it",
    );
    let reach = reach_row(answers);
    let gid = agree(
        "fleet.gid_type",
        "RoCE GID type",
        answers,
        &identity(|n| n.gid_type.clone()),
        Status::Fail,
        "every node must carry the data plane on the same GID type (RoCE v2): see `halobox doctor` on the odd node (rdma.gid)",
    );
    let kernel = agree(
        "fleet.kernel",
        "kernel",
        answers,
        &identity(|n| n.kernel.clone()),
        Status::Warn,
        "run the same kernel on every node (see kernel.version for the one to choose)",
    );
    let firmware = agree(
        "fleet.gpu_firmware",
        "GPU firmware",
        answers,
        &identity(|n| match (&n.gpu_firmware, &n.mes_firmware) {
            (None, None) => None,
            (p, m) => Some(format!(
                "{}{}",
                p.as_deref().unwrap_or("package ?"),
                m.as_deref()
                    .map(|m| format!(" MES {m}"))
                    .unwrap_or_default()
            )),
        }),
        Status::Warn,
        "install the same GPU firmware on every node (see gpu.firmware for the one to choose), then reboot",
    );
    let image = agree(
        "fleet.image",
        "image",
        answers,
        &field(&|p: &Probe| match &p.image {
            Image::Found { digest, .. } => Some(digest.clone()),
            _ => None,
        }),
        Status::Fail,
        "`halobox cluster refresh` puts the same image on every node",
    );
    let image = Row {
        cells: image
            .cells
            .into_iter()
            .zip(probes(answers))
            .map(|(c, (_, p))| match p.map(|p| &p.image) {
                Some(Image::Host) => cell(&c.node, Status::Skip, "Ray runs on the host: no container"),
                Some(Image::NoContainer { name }) => Cell {
                    pending: None,
                    fix: Some(format!("halobox refresh --name {name}   # on that node, or `halobox cluster refresh`")),
                    ..cell(&c.node, Status::Warn, format!("no container {name} there"))
                },
                Some(Image::Unknown { why }) => cell(&c.node, Status::Warn, why.clone()),
                _ => c,
            })
            .collect(),
        ..image
    };
    let image = Row {
        worst: worst(&image.cells),
        ..image
    };
    let version = agree(
        "fleet.halobox",
        "halobox",
        answers,
        &field(&|p: &Probe| p.halobox_version.clone()),
        Status::Fail,
        "`halobox cluster install` copies this halobox to every node",
    );
    vec![reached, mtu, reach, gid, kernel, firmware, image, version]
}

/// Every node pings every other node's data-plane address.
fn reach_row(answers: &[Answer]) -> Row {
    let name_of = |ip: Ipv4Addr| {
        answers
            .iter()
            .find(|a| a.ip == ip)
            .map_or(ip.to_string(), |a| format!("{} ({ip})", a.name))
    };
    let mut broken = Vec::new();
    let cells = probes(answers)
        .map(|(a, p)| match p {
            None => Cell {
                pending: None,
                node: a.name.clone(),
                status: None,
                summary: "no answer".into(),
                fix: None,
            },
            Some(p) if p.no_ping => cell(&a.name, Status::Skip, "no `ping` there"),
            Some(p) => {
                let lost: Vec<String> = p
                    .reach
                    .iter()
                    .filter(|(_, ok)| !ok)
                    .map(|(ip, _)| name_of(*ip))
                    .collect();
                for l in &lost {
                    broken.push(format!("{} → {l}", a.name));
                }
                if lost.is_empty() {
                    cell(
                        &a.name,
                        Status::Pass,
                        format!("reaches the other {} node(s)", p.reach.len()),
                    )
                } else {
                    Cell {
                        pending: None,
                        fix: Some("check the data-plane addresses, cables and routes (`ip route get PEER` there must leave through the data-plane interface; see net.route)".into()),
                        ..cell(&a.name, Status::Fail, format!("cannot ping {}", lost.join(", ")))
                    }
                }
            }
        })
        .collect();
    let summary = if broken.is_empty() {
        "every node that answered pings every other node's data-plane address".to_string()
    } else {
        format!("no data-plane ping: {}", broken.join(", "))
    };
    row("fleet.reachable", Some(summary), cells)
}

/// The whole report: the cross-node checks and every node's own, worst first.
pub fn report(answers: &[Answer]) -> Report {
    let mut rows = cross_checks(answers);
    let mut ids: Vec<&str> = Vec::new();
    for (_, p) in probes(answers) {
        for c in p.iter().flat_map(|p| &p.doctor.checks) {
            if !ids.contains(&c.id.as_str()) {
                ids.push(&c.id);
            }
        }
    }
    for id in ids {
        let cells = probes(answers)
            .map(
                |(a, p)| match p.and_then(|p| p.doctor.checks.iter().find(|c| c.id == id)) {
                    Some(c) => Cell {
                        node: a.name.clone(),
                        status: Some(c.status),
                        summary: c.summary.clone(),
                        fix: c.fix.clone(),
                        pending: c.pending,
                    },
                    None => Cell {
                        pending: None,
                        node: a.name.clone(),
                        status: None,
                        summary: "no answer".into(),
                        fix: None,
                    },
                },
            )
            .collect();
        rows.push(row(id, None, cells));
    }
    rows.sort_by_key(|r| rank(r.worst));
    let failed = rows.iter().any(|r| r.worst == Status::Fail);
    let nodes = answers
        .iter()
        .map(|a| NodeLine {
            name: a.name.clone(),
            ssh: a.ssh.clone(),
            ip: a.ip,
            reached: a.probe.is_ok(),
            error: a.probe.as_ref().err().cloned(),
            halobox_version: a
                .probe
                .as_ref()
                .ok()
                .and_then(|p| p.halobox_version.clone()),
            image: a.probe.as_ref().ok().map(|p| p.image.clone()),
        })
        .collect();
    Report {
        nodes,
        rows,
        failed,
    }
}

/// Longest node name shown as a column heading.
const COLUMN: usize = 12;

fn heading(name: &str) -> String {
    match name.char_indices().nth(COLUMN) {
        Some((i, _)) => format!("{}…", &name[..i]),
        None => name.to_string(),
    }
}

/// The table (checks × nodes), then what is wrong and its fix, worst first.
pub fn render(r: &Report) -> String {
    let id_w = r.rows.iter().map(|x| x.id.len()).max().unwrap_or(5).max(5);
    let heads: Vec<String> = r.nodes.iter().map(|n| heading(&n.name)).collect();
    let widths: Vec<usize> = heads.iter().map(|h| h.chars().count().max(4)).collect();
    let mut out = format!("{:<id_w$}", "CHECK");
    for (h, w) in heads.iter().zip(&widths) {
        out.push_str(&format!("  {h:<w$}"));
    }
    let mut out = out.trim_end().to_string();
    out.push('\n');
    for row in &r.rows {
        let mut line = format!("{:<id_w$}", row.id);
        for (c, w) in row.cells.iter().zip(&widths) {
            line.push_str(&format!("  {:<w$}", c.status.map_or("-", Status::label)));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let bad: Vec<&Row> = r
        .rows
        .iter()
        .filter(|x| matches!(x.worst, Status::Fail | Status::Warn))
        .collect();
    if !bad.is_empty() {
        out.push('\n');
    }
    for row in bad {
        out.push_str(&format!("{} {}", row.worst.label(), row.id));
        match &row.summary {
            Some(s) => out.push_str(&format!(": {s}\n")),
            None => out.push('\n'),
        }
        let mut fixes: Vec<&str> = Vec::new();
        for c in &row.cells {
            let Some(s) = c
                .status
                .filter(|s| matches!(s, Status::Fail | Status::Warn))
            else {
                continue;
            };
            out.push_str(&format!("  {} {}: {}\n", c.node, s.label(), c.summary));
            if let Some(f) = c.fix.as_deref().filter(|f| !fixes.contains(f)) {
                fixes.push(f);
            }
        }
        for f in fixes {
            for (i, l) in f.lines().enumerate() {
                let lead = if i == 0 { "  fix: " } else { "       " };
                out.push_str(&format!("{lead}{l}\n"));
            }
        }
    }
    let waiting: Vec<(&Row, &Cell, Pending)> = r
        .rows
        .iter()
        .flat_map(|row| {
            row.cells
                .iter()
                .filter_map(move |c| c.pending.map(|p| (row, c, p)))
        })
        .collect();
    if !waiting.is_empty() {
        out.push_str("\npassing once applied (configured, not yet in effect):\n");
    }
    for (row, c, p) in waiting {
        out.push_str(&format!(
            "  {} {} PASS ({}): {}\n",
            row.id,
            c.node,
            p.label(),
            c.summary
        ));
    }
    let unreached: Vec<&str> = r
        .nodes
        .iter()
        .filter(|n| !n.reached)
        .map(|n| n.name.as_str())
        .collect();
    out.push_str(&format!(
        "\n{} node(s), {} answered{}: {}\n",
        r.nodes.len(),
        r.nodes.len() - unreached.len(),
        if unreached.is_empty() {
            String::new()
        } else {
            format!(" ({} did not)", unreached.join(", "))
        },
        if r.failed {
            "FAIL"
        } else if r.rows.iter().any(|x| x.worst == Status::Warn) {
            "warnings, nothing fails"
        } else {
            "every check passes"
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(name: &str, ip: u8, mtu: u32, kernel: &str, reach_ok: bool) -> Answer {
        let doc = format!(
            r#"{{"checks":[{{"id":"net.mtu","status":"PASS","summary":"ok","fix":null}}],
               "data_plane":{{"outcome":"chosen","ip":"10.0.0.{ip}","interface":"dp0","mtu":{mtu}}},
               "node":{{"kernel":"{kernel}","gpu_firmware":null,"mes_firmware":null,"gid_type":"RoCE v2"}}}}"#
        );
        let other = if ip == 1 { 2 } else { 1 };
        let stdout = format!(
            "@@version\nhalobox 0.1.0\n@@version-exit 0\n@@doctor\n{doc}\n@@doctor-exit 0\n@@reach 10.0.0.{other} {}\n",
            if reach_ok { "ok" } else { "fail" }
        );
        Answer {
            name: name.into(),
            ssh: format!("root@{name}"),
            ip: Ipv4Addr::new(10, 0, 0, ip),
            probe: parse_probe(&stdout, None),
        }
    }

    fn find<'a>(rows: &'a [Row], id: &str) -> &'a Row {
        rows.iter().find(|r| r.id == id).unwrap()
    }

    #[test]
    fn the_odd_mtu_fails_and_is_named() {
        let a = [
            answer("a", 1, 9000, "6.18.5", true),
            answer("b", 2, 9000, "6.18.5", true),
            answer("c", 3, 1500, "6.18.5", true),
        ];
        let r = report(&a);
        let mtu = find(&r.rows, "fleet.mtu");
        assert_eq!(mtu.worst, Status::Fail);
        assert_eq!(
            mtu.summary.as_deref(),
            Some("data-plane MTU differs: c 1500 (the others 9000)")
        );
        assert_eq!(r.rows[0].worst, Status::Fail, "worst first");
        assert!(r.failed);
        assert_eq!(find(&r.rows, "fleet.halobox").worst, Status::Pass);
        assert_eq!(find(&r.rows, "fleet.gid_type").worst, Status::Pass);
    }

    #[test]
    fn kernels_differing_warn_and_lost_pings_fail() {
        let a = [
            answer("a", 1, 9000, "6.18.5", true),
            answer("b", 2, 9000, "6.17.0", false),
        ];
        let r = report(&a);
        assert_eq!(find(&r.rows, "fleet.kernel").worst, Status::Warn);
        let reach = find(&r.rows, "fleet.reachable");
        assert_eq!(reach.worst, Status::Fail);
        assert_eq!(
            reach.summary.as_deref(),
            Some("no data-plane ping: b → a (10.0.0.1)")
        );
    }

    #[test]
    fn an_unreachable_node_is_a_fail_row_not_a_crash() {
        let mut gone = answer("gone", 2, 9000, "6.18.5", true);
        gone.probe = Err("node gone: cannot reach it over ssh".into());
        let r = report(&[answer("a", 1, 9000, "6.18.5", true), gone]);
        let reached = find(&r.rows, "fleet.reached");
        assert_eq!(reached.worst, Status::Fail);
        assert_eq!(
            reached.cells[1].summary,
            "node gone: cannot reach it over ssh"
        );
        assert!(render(&r).contains("2 node(s), 1 answered (gone did not): FAIL"));
        assert_eq!(find(&r.rows, "net.mtu").cells[1].status, None);
    }

    #[test]
    fn a_pass_waiting_for_a_reboot_is_listed_under_the_table() {
        let mut a = answer("a", 1, 9000, "6.18.5", true);
        if let Ok(p) = &mut a.probe {
            p.doctor.checks.push(Check {
                pending: Some(Pending::Reboot),
                ..Check::pass("kernel.iommu", "iommu=pt configured in /etc/default/grub")
            });
        }
        let r = report(&[a, answer("b", 2, 9000, "6.18.5", true)]);
        let iommu = find(&r.rows, "kernel.iommu");
        assert_eq!(iommu.worst, Status::Pass);
        assert_eq!(iommu.cells[0].pending, Some(Pending::Reboot));
        let shown = render(&r);
        assert!(
            shown.contains(
                "passing once applied (configured, not yet in effect):\n  kernel.iommu a PASS (after reboot): iommu=pt configured in /etc/default/grub\n"
            ),
            "{shown}"
        );
        // An older node's report without `pending` still reads.
        let doc: DoctorDoc = serde_json::from_str(
            r#"{"checks":[{"id":"x","status":"PASS","summary":"ok","fix":null}],"data_plane":{}}"#,
        )
        .unwrap();
        assert_eq!(doc.checks[0].pending, None);
    }

    #[test]
    fn probe_output_without_a_report_says_why() {
        let e = parse_probe("@@doctor\n@@doctor-exit 127\n", None).unwrap_err();
        assert!(e.contains("halobox is not installed there"), "{e}");
        let image = image_of(
            "@@list\n[{\"name\":\"vllm\",\"image_id\":\"sha256:1\",\"labels\":{\"dev.halobox.image-digest\":\"sha256:2\"}}]\n@@list-exit 0\n",
            "vllm",
        );
        assert_eq!(
            image,
            Image::Found {
                name: "vllm".into(),
                digest: "sha256:2".into()
            }
        );
    }
}

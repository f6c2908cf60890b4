//! Failed benchmark runs turned into a cause and a fix, never a 0.00.
//!
//! Every failure line perftest prints is matched by its own format string
//! (from perftest's sources: `perftest_resources.c`,
//! `perftest_communication.c`, `perftest_parameters.c` and the test mains),
//! and completion errors are decoded into their `ibv_wc_status`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::wc_status::{self, Remedy, WcStatus};

/// What went wrong, as far as the tool's own words tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// No RDMA device (`Did not detect devices`, `No IB devices found`).
    NoDevice,
    /// The device exists but cannot be opened (`Couldn't get context for the device`).
    DeviceAccess,
    /// The RDMA port is not ACTIVE (`Port number 1 state is Down`).
    PortDown,
    /// Memory registration or CQ/QP creation failed: memlock too low.
    Memlock,
    /// The client could not reach the server's TCP port (`Couldn't connect to HOST:PORT`).
    Connect,
    /// The server's TCP port is taken (`Couldn't listen to port`).
    PortInUse,
    /// The other end stopped talking during the exchange; its log has the cause.
    PeerExited,
    /// RDMA packets were never acknowledged: GID, MTU or route.
    RetryExceeded,
    /// Another work completion error (its status is decoded).
    Completion,
    /// The queue pair could not be connected (RTR/RTS): GID, MTU or route.
    QpSetup,
    /// The two ends run perftest versions that do not talk to each other.
    VersionMismatch,
    /// rdma_cm could not resolve the address or route.
    RdmaCm,
    /// perftest rejected the command line.
    Usage,
    /// The test started and then stopped; earlier lines or the other end say why.
    RunFailed,
    /// The tool is not installed where it ran.
    NotInstalled,
    /// The run finished but moved no data.
    NoData,
    /// Bandwidth falls as messages grow (a size sweep).
    Collapse,
    /// Anything else: the tool's last words are kept.
    Unknown,
}

impl Cause {
    /// True when this cause is only an echo of a failure elsewhere (the
    /// other end, or an earlier line), so another diagnosis should win.
    pub fn is_secondary(self) -> bool {
        matches!(
            self,
            Cause::Connect | Cause::PeerExited | Cause::RunFailed | Cause::Unknown
        )
    }
}

/// A diagnosis: the cause, one line of why, and the exact fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnosis {
    /// The cause.
    pub cause: Cause,
    /// One line: what the tool said and what it means.
    pub why: String,
    /// What to do.
    pub fix: String,
    /// The decoded work completion status, for a completion error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<WcStatus>,
}

impl Diagnosis {
    fn new(cause: Cause, why: String, fix: impl Into<String>) -> Self {
        Self {
            cause,
            why,
            fix: fix.into(),
            completion: None,
        }
    }
}

/// Where a tool ran, for the wording of fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// This node.
    Local,
    /// The peer.
    Peer,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Local => "this node",
            Side::Peer => "the peer",
        }
    }
}

const MEMLOCK_FIX: &str = "raise memlock to unlimited where perftest runs: \
printf '* soft memlock unlimited\\n* hard memlock unlimited\\n' | sudo tee /etc/security/limits.d/90-halobox-memlock.conf \
(log in again; `ulimit -l` must print unlimited); inside containers also set LimitMEMLOCK=infinity in the podman.service drop-in \
(`halobox doctor` prints it)";

const PATH_FIX: &str = "the usual causes are a wrong GID index (not the RoCE v2 GID of the data-plane IPv4), different MTUs at \
the two ends, no route between the RoCE addresses, or a firewall dropping RoCE (UDP 4791): run `halobox doctor --ip <data-plane IP>` on both nodes \
and `ping -M do -s 4000 <peer IP>`";

const OTHER_END_FIX: &str =
    "read the other end's log (saved with the results): its first error is the cause";

const VERSION_FIX: &str = "install the same perftest on both nodes (`ib_write_bw --version` must match), or run both ends from the same halobox image";

/// One family of perftest failure lines.
struct Rule {
    /// perftest's format strings (placeholders match anything).
    formats: &'static [&'static str],
    cause: Cause,
    meaning: &'static str,
    fix: &'static str,
}

/// How many of [`RULES`] (device and port) are root causes: among them
/// the earliest line decides, before any completion error.
const ROOT_RULES: usize = 3;

/// Failure lines in order of precedence: the first rule with a matching
/// line decides. Format strings as in perftest's sources.
const RULES: &[Rule] = &[
    Rule {
        formats: &[
            "No IB devices found",
            "Did not detect devices",
            "Unable to find the Infiniband/RoCE device",
            "Failed to get IB devices list",
            "IB device %s not found",
        ],
        cause: Cause::NoDevice,
        meaning: "no RDMA device",
        fix: "load the NIC's RDMA driver (irdma for Intel E810, mlx5_ib for ConnectX) and install rdma-core; \
`rdma link` must list the device (in a container: pass /dev/infiniband)",
    },
    Rule {
        formats: &["Couldn't get context for the device", "failed to open %s"],
        cause: Cause::DeviceAccess,
        meaning: "the RDMA device exists but /dev/infiniband/uverbs* could not be opened",
        fix: "check `ls -l /dev/infiniband` (the user needs read/write, e.g. the rdma group or a udev rule with MODE=0666); \
in a container, /dev/infiniband must be passed in (`halobox refresh` does) and `halobox doctor` must pass",
    },
    Rule {
        formats: &[
            "Port number %d state is %s",
            "Couldn't set the link layer",
            "Unable to query port %d attributes",
            "Error when trying to query port",
        ],
        cause: Cause::PortDown,
        meaning: "the RDMA port is not usable",
        fix: "bring the link up: cable and switch port, `ip link set <netdev> up`; `rdma link` must show state ACTIVE physical_state LINK_UP",
    },
    Rule {
        formats: &[
            "Failed to modify QP %d to RTR",
            "Failed to modify QP to RTR",
            "Failed to modify QP to RTS",
            "Failed to modify QP to INIT",
            "Unable to Connect the HCA's through the link",
            "Found Incompatibility issue with GID types.",
            "Failed to create AH",
            "Unable to create AH from WC",
            "Unable to create address handler for UD QP",
        ],
        cause: Cause::QpSetup,
        meaning: "the queue pair could not be connected to the peer's: the GID index does not exist or is not RoCE v2, \
the path MTU is above the port's, or there is no route to the peer's GID address",
        fix: "halobox takes the GID index from the GID table of the data-plane address: run `halobox doctor --ip <data-plane IP>` on both nodes \
(rdma.gid, net.mtu and net.route must pass) and check `ip route get <peer IP>` leaves through the RDMA netdev",
    },
    Rule {
        formats: &[
            "Couldn't allocate MR",
            "failed to create mr",
            "Failed to create MR",
            "Couldn't create CQ",
            "Failed to create CQs",
            "Couldn't create a receiver CQ",
            "Couldn't allocate PD",
            "Unable to create QP.",
            "Failed to create QP.",
            "Couldn't create IB resources",
            "Requested QP size might be too big",
            "Couldn't allocate work buf.",
            "Cannot Allocate",
            "Couldn't create SRQ",
        ],
        cause: Cause::Memlock,
        meaning: "the memlock limit is too low to pin its buffers",
        fix: MEMLOCK_FIX,
    },
    Rule {
        formats: &[
            "Current implementation is not compatible with versions older than 5.70",
            "Failed to exchange Page Size data between server and client",
            "Failed to exchange Cache Line Size data between server and client",
        ],
        cause: Cause::VersionMismatch,
        meaning: "the two ends run perftest versions that cannot talk to each other",
        fix: VERSION_FIX,
    },
    Rule {
        formats: &["Couldn't listen to port %d", "Failed to bind socket"],
        cause: Cause::PortInUse,
        meaning: "the server's TCP port is taken (another perftest still running?)",
        fix: "find and stop the old server there: `ss -ltnp | grep ib_` then `kill <pid>`; or run with another --port",
    },
    Rule {
        formats: &[
            "Failed to resolve RDMA CM address",
            "Failed to resolve RDMA CM route.",
            "rdma_resolve_addr failed",
            "rdma_resolve_route failed",
            "Received %d times ADDR_ERROR",
            "RDMA CM event error:",
            "Failed to get RDMA CM address",
            "rdma_bind_addr failed",
            "Failed to bind RDMA CM address",
        ],
        cause: Cause::RdmaCm,
        meaning: "rdma_cm could not resolve the address or route: the address is not on an RDMA netdev, or no route leads there",
        fix: "the address must be on the RDMA netdev at both ends and `ip route get <peer IP>` must leave through it: `halobox doctor --ip <data-plane IP>`",
    },
    Rule {
        formats: &[
            "Couldn't connect to %s:%d",
            "Unable to open file descriptor for socket connection",
            "Unable to init the socket connection",
            "Unable to connect (retries = %d)",
            "Failed to connect RDMA CM client, tried %d times.",
        ],
        cause: Cause::Connect,
        meaning: "the server on the peer was not listening",
        fix: "the perftest server on the peer exited or never started (see its log), or a firewall drops the TCP port: \
trust the data-plane interface on the peer (`sudo firewall-cmd --zone=trusted --add-interface=<netdev> --permanent && sudo firewall-cmd --reload`)",
    },
    Rule {
        formats: &[
            "Invalid Command line.",
            "Invalid Command or flag.",
            "Invalid MTU - %d",
            "Please choose mtu from {256,512,1024,2048,4096}",
            "Invalid Connection type.",
            "Parser function exited with Error",
            "Invalid server IP address",
            "Invalid client IP address",
            "Duration mode currently doesn't support running on all sizes.",
            "Number of iterations must be a multiple of post list size",
        ],
        cause: Cause::Usage,
        meaning: "this perftest rejected the options halobox passed (an older or newer build)",
        fix: "compare `ib_write_bw --version` on both nodes with the one in halobox's image; update perftest, or run the benchmark from the image",
    },
    Rule {
        formats: &[
            "Unable to read from socket/rdma_cm",
            "Unable to read to socket/rdma_cm",
            "Unable to write to socket/rdma_cm",
            "Unable to write from socket/rdma_cm",
            "Couldn't read remote address",
            "Couldn't send local address",
            "Failed to exchange data between server and clients",
            "Failed to close connection between server and client",
            "Failed to sync between server and client between different msg sizes",
            "Did not get Message for 120 Seconds, exiting..",
            "Couldn't read reports",
            "Couldn't send reports",
            "Couldn't write to socket",
            "accept() failed",
        ],
        cause: Cause::PeerExited,
        meaning: "the other end stopped answering during the exchange",
        fix: OTHER_END_FIX,
    },
    Rule {
        formats: &[
            "Failed to complete run_iter_bw function successfully",
            "Error occurred while running! aborting ...",
            "Error occurred while running infinitely! aborting ...",
            "Test exited with Error",
            "Couldn't post send",
            "Couldn't post recv",
            "poll CQ failed %d",
            "Poll send CQ failed ne=%d",
            "Poll Receive CQ failed %d",
            "Failed to poll CQ.",
            "Couldn't request CQ notification",
            "Failed to post receive recv_wqes",
            "Error: BW result is below bw limit",
        ],
        cause: Cause::RunFailed,
        meaning: "the test stopped while it ran",
        fix: OTHER_END_FIX,
    },
];

/// True when `line` holds `format`'s literal parts in order (a placeholder
/// such as `%d`, `%s` or `%lu` matches anything).
pub fn matches_format(line: &str, format: &str) -> bool {
    let mut rest = line;
    for part in literal_parts(format) {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn literal_parts(format: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        parts.push(&rest[..at]);
        let spec = &rest[at + 1..];
        let len = spec
            .find(|c: char| c.is_ascii_alphabetic() && !"lhzjt".contains(c))
            .map_or(spec.len(), |i| i + 1);
        rest = &spec[len..];
    }
    parts.push(rest);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// Diagnoses a perftest run's combined output (stdout and stderr).
/// `None` when nothing known failed.
pub fn perftest(output: &str, side: Side, tool: &str) -> Option<Diagnosis> {
    let lines: Vec<&str> = output.lines().map(str::trim).collect();
    if lines.iter().any(|l| l.contains("command not found"))
        || lines
            .iter()
            .any(|l| l.contains("No such file or directory") && l.contains(tool))
    {
        return Some(Diagnosis::new(
            Cause::NotInstalled,
            format!("{tool} is not installed on {}", side.name()),
            "install perftest there (Debian/Ubuntu: `sudo apt-get install perftest`; Fedora: `sudo dnf install perftest`)",
        ));
    }
    // Device and port problems come before anything they cause, and the
    // first of them printed is the root: a port that is down makes the
    // link layer and the device context fail after it.
    if let Some(d) = first_root(&lines, side, tool) {
        return Some(d);
    }
    if let Some(d) = completion(&lines, side, tool) {
        return Some(d);
    }
    RULES[ROOT_RULES..]
        .iter()
        .find_map(|rule| apply(rule, &lines, side, tool))
}

/// The device or port rule (`RULES[..ROOT_RULES]`) whose line comes first.
fn first_root(lines: &[&str], side: Side, tool: &str) -> Option<Diagnosis> {
    lines.iter().find_map(|line| {
        RULES[..ROOT_RULES]
            .iter()
            .find(|rule| rule.formats.iter().any(|f| matches_format(line, f)))
            .map(|rule| diagnosis(rule, line, side, tool))
    })
}

fn apply(rule: &Rule, lines: &[&str], side: Side, tool: &str) -> Option<Diagnosis> {
    let line = lines
        .iter()
        .find(|l| rule.formats.iter().any(|f| matches_format(l, f)))?;
    Some(diagnosis(rule, line, side, tool))
}

fn diagnosis(rule: &Rule, line: &str, side: Side, tool: &str) -> Diagnosis {
    Diagnosis::new(
        rule.cause,
        format!("{tool} on {}: {line}: {}", side.name(), rule.meaning),
        rule.fix,
    )
}

/// `Completion with error at client|server` + `Failed status N: …`.
fn completion(lines: &[&str], side: Side, tool: &str) -> Option<Diagnosis> {
    let (at, code) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| wc_status::code_in(l).map(|c| (i, c)))?;
    let role = lines[..=at]
        .iter()
        .rev()
        .find_map(|l| l.split_once("Completion with error at ").map(|(_, r)| r))
        .and_then(|r| r.split_whitespace().next())
        .map(|r| format!(" ({} side)", r.trim_end_matches(':')))
        .unwrap_or_default();
    let syndrome = lines[at]
        .split_once("syndrom ")
        .and_then(|(_, s)| s.split_whitespace().next())
        .map(|s| format!(", vendor syndrome {s}"))
        .unwrap_or_default();
    let where_ = format!("{tool} on {}{role}", side.name());
    let Some((status, meaning, remedy)) = wc_status::decode(code) else {
        return Some(Diagnosis::new(
            Cause::Completion,
            format!("{where_}: completion error {code} (not a status libibverbs knows){syndrome}"),
            "read the raw log; check `dmesg` on that node for the NIC driver's messages",
        ));
    };
    let why = format!(
        "{where_}: completion error {code} {} ({}){syndrome}: {meaning}",
        status.name, status.text
    );
    let fix = match remedy {
        Remedy::Registration => MEMLOCK_FIX.to_string(),
        Remedy::Earlier => format!(
            "this status follows an earlier failure: {OTHER_END_FIX}; if none is there, rerun and check `dmesg` for the NIC driver"
        ),
        Remedy::Mismatch => format!(
            "both ends must run the same test with the same options (message size, queue pairs, inline size): {VERSION_FIX}"
        ),
        Remedy::Path => PATH_FIX.to_string(),
        Remedy::ReceiverNotReady => "the receiving end had no buffer ready: it exited or fell behind (see its log); \
run write tests (ib_write_*) rather than send tests, and start the server before the client"
            .to_string(),
        Remedy::Device => {
            "check `dmesg` on that node for the NIC driver's errors; reload the RDMA driver (irdma/mlx5_ib) or reboot, and update the NIC firmware"
                .to_string()
        }
    };
    let cause = if code == 12 {
        Cause::RetryExceeded
    } else {
        Cause::Completion
    };
    Some(Diagnosis {
        cause,
        why,
        fix,
        completion: Some(status),
    })
}

/// The better of this end's and the peer's diagnoses: a primary cause wins
/// over an echo (a refused connection, a broken exchange) of the other end.
pub fn pick(local: Option<Diagnosis>, peer: Option<Diagnosis>) -> Option<Diagnosis> {
    match (local, peer) {
        (Some(l), Some(p)) if l.cause.is_secondary() && !p.cause.is_secondary() => Some(p),
        (Some(l), _) => Some(l),
        (None, p) => p,
    }
}

/// The diagnosis for a run that failed in no known way: its last lines.
pub fn unknown(output: &str, side: Side, tool: &str) -> Diagnosis {
    let tail: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("---"))
        .collect();
    let tail = tail[tail.len().saturating_sub(2)..].join(" / ");
    Diagnosis::new(
        Cause::Unknown,
        if tail.is_empty() {
            format!("{tool} on {} printed no result and no error", side.name())
        } else {
            format!("{tool} on {} printed no result: {tail}", side.name())
        },
        "read the raw log saved with the results",
    )
}

/// A run that finished and measured nothing.
pub fn no_data(tool: &str, what: String) -> Diagnosis {
    Diagnosis::new(
        Cause::NoData,
        format!("{tool} moved no data: {what}"),
        "the ends connected but nothing arrived: check the raw logs of both ends, then `halobox doctor --ip <data-plane IP>` on both (route, firewall, MTU)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_wording() {
        let d = perftest(
            " Did not detect devices \n If device exists, check if driver is up\n",
            Side::Peer,
            "ib_write_bw",
        )
        .unwrap();
        assert_eq!(d.cause, Cause::NoDevice);
        assert!(d.why.contains("the peer"));
        assert_eq!(perftest("all fine\n", Side::Local, "ib_write_bw"), None);
        let u = unknown("a\n\nb\n---\nc\n", Side::Local, "x");
        assert!(u.why.ends_with("b / c"), "{}", u.why);
        assert_eq!(
            perftest(
                "bash: line 1: ib_write_lat: command not found\n",
                Side::Peer,
                "ib_write_lat"
            )
            .unwrap()
            .cause,
            Cause::NotInstalled
        );
    }

    #[test]
    fn format_strings_match_their_output() {
        assert!(matches_format(
            "Couldn't connect to 192.168.125.211:18515",
            "Couldn't connect to %s:%d"
        ));
        assert!(matches_format(
            " Port number 1 state is Down",
            " Port number %d state is %s\n"
        ));
        assert!(matches_format(
            "Failed to modify QP 123 to RTR",
            "Failed to modify QP %d to RTR"
        ));
        assert!(!matches_format(
            "Failed to modify QP to RTS",
            "Failed to modify QP %d to RTR"
        ));
        assert_eq!(literal_parts("a %lu b %#04x c %.*s"), ["a", "b", "c"]);
    }

    #[test]
    fn the_cause_wins_over_its_echo() {
        let echo = perftest("Couldn't read remote address\n", Side::Local, "t");
        let cause = perftest("Couldn't allocate MR\n", Side::Peer, "t");
        assert_eq!(pick(echo.clone(), cause).unwrap().cause, Cause::Memlock);
        assert_eq!(pick(echo, None).unwrap().cause, Cause::PeerExited);
    }
}

//! Failed benchmark runs turned into a cause and a fix, never a 0.00.

use serde::{Deserialize, Serialize};

/// What went wrong, as far as the tool's own words tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// No RDMA device (`Did not detect devices`, `No IB devices found`).
    NoDevice,
    /// The RDMA port is not ACTIVE (`Port number 1 state is Down`).
    PortDown,
    /// Memory registration or CQ creation failed: memlock too low.
    Memlock,
    /// The client could not reach the server's TCP port (`Couldn't connect to HOST:PORT`).
    Connect,
    /// RDMA packets were never acknowledged: GID, MTU or route.
    RetryExceeded,
    /// The tool is not installed where it ran.
    NotInstalled,
    /// Anything else: the tool's last words are kept.
    Unknown,
}

/// A diagnosis: the cause, one line of why, and the exact fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The cause.
    pub cause: Cause,
    /// One line: what the tool said and what it means.
    pub why: String,
    /// What to do.
    pub fix: String,
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

/// Diagnoses a perftest run's combined output (stdout and stderr).
/// `None` when nothing known failed.
pub fn perftest(output: &str, side: Side, tool: &str) -> Option<Diagnosis> {
    let has = |needle: &str| output.contains(needle);
    let first = |needle: &str| {
        output
            .lines()
            .find(|l| l.contains(needle))
            .map(|l| l.trim().to_string())
            .unwrap_or_default()
    };
    let d = |cause, why: String, fix: String| Some(Diagnosis { cause, why, fix });
    if has("No IB devices found")
        || has("Did not detect devices")
        || has("Unable to find the Infiniband/RoCE device")
        || has("Failed to get IB devices list")
    {
        return d(
            Cause::NoDevice,
            format!("{tool} found no RDMA device on {}", side.name()),
            "load the NIC's RDMA driver (irdma for Intel E810, mlx5_ib for ConnectX) and install rdma-core; \
`rdma link` must list the device (in a container: pass /dev/infiniband)"
                .into(),
        );
    }
    if let Some(line) = output
        .lines()
        .find(|l| l.contains("Port number") && l.contains("state is"))
    {
        return d(
            Cause::PortDown,
            format!("{tool} on {}: {}", side.name(), line.trim()),
            "bring the link up: cable and switch port, `ip link set <netdev> up`; `rdma link` must show state ACTIVE physical_state LINK_UP".into(),
        );
    }
    if has("Couldn't allocate MR")
        || has("Couldn't create CQ")
        || has("failed to create mr")
        || has("Failed to create MR")
    {
        let line = [
            "Couldn't allocate MR",
            "Couldn't create CQ",
            "failed to create mr",
            "Failed to create MR",
        ]
        .into_iter()
        .find(|n| has(n))
        .map(first)
        .unwrap_or_default();
        return d(
            Cause::Memlock,
            format!(
                "{tool} on {}: {line}: the memlock limit is too low to pin its buffers",
                side.name()
            ),
            MEMLOCK_FIX.into(),
        );
    }
    if has("retry counter exceeded") || has("Failed status 12") {
        let line = if has("retry counter exceeded") {
            first("retry counter exceeded")
        } else {
            first("Failed status 12")
        };
        return d(
            Cause::RetryExceeded,
            format!("{tool} on {}: {line}: RDMA packets were never acknowledged", side.name()),
            "the usual causes are a wrong GID index (not the RoCE v2 GID of the data-plane IPv4), different MTUs at \
the two ends, or no route between the RoCE addresses: run `halobox doctor --ip <data-plane IP>` on both nodes \
and `ping -M do -s 4000 <peer IP>`"
                .into(),
        );
    }
    if has("Couldn't connect to") {
        return d(
            Cause::Connect,
            format!("{tool} on {}: {}: the server on the peer was not listening", side.name(), first("Couldn't connect to")),
            "the perftest server on the peer exited or never started (see its log), or a firewall drops the TCP port: \
trust the data-plane interface on the peer (`sudo firewall-cmd --zone=trusted --add-interface=<netdev> --permanent && sudo firewall-cmd --reload`)"
                .into(),
        );
    }
    if has("command not found") || (has("No such file or directory") && has(tool)) {
        return d(
            Cause::NotInstalled,
            format!("{tool} is not installed on {}", side.name()),
            "install perftest there (Debian/Ubuntu: `sudo apt-get install perftest`; Fedora: `sudo dnf install perftest`)".into(),
        );
    }
    None
}

/// The diagnosis for a run that failed in no known way: its last lines.
pub fn unknown(output: &str, side: Side, tool: &str) -> Diagnosis {
    let tail: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("---"))
        .collect();
    let tail = tail[tail.len().saturating_sub(2)..].join(" / ");
    Diagnosis {
        cause: Cause::Unknown,
        why: if tail.is_empty() {
            format!("{tool} on {} printed no result and no error", side.name())
        } else {
            format!("{tool} on {} printed no result: {tail}", side.name())
        },
        fix: "read the raw log saved with the results".into(),
    }
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
}

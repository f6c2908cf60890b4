//! RDMA port and hardware counters before and after the RDMA leg: the
//! deltas worth reading (retries, out-of-sequence, link errors, ECN/CNP)
//! and what they mean. Pure: the snapshots come from
//! [`crate::host::rdma::read_counters`] on each end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::host::rdma::PortCounters;

/// What a counter's increase says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Retransmissions, out-of-sequence packets, NAKs, timeouts.
    Retries,
    /// Errors on the wire (symbols, CRC, link recovery, discards).
    Link,
    /// Congestion notification (ECN marks, CNPs).
    Congestion,
}

/// The counters worth a delta, by file name: IB port counters, mlx5
/// `hw_counters`, irdma `hw_counters` (names from the kernel drivers).
const INTERESTING: &[(&str, Class)] = &[
    // mlx5
    ("out_of_sequence", Class::Retries),
    ("packet_seq_err", Class::Retries),
    ("local_ack_timeout_err", Class::Retries),
    ("implied_nak_seq_err", Class::Retries),
    ("duplicate_request", Class::Retries),
    ("roce_slow_restart", Class::Retries),
    ("rnr_nak_retry_err", Class::Retries),
    ("req_transport_retries_exceeded", Class::Retries),
    ("roce_adp_retrans", Class::Retries),
    ("roce_adp_retrans_to", Class::Retries),
    ("rx_icrc_encapsulated", Class::Link),
    ("np_cnp_sent", Class::Congestion),
    ("np_ecn_marked_roce_packets", Class::Congestion),
    ("rp_cnp_handled", Class::Congestion),
    ("rp_cnp_ignored", Class::Congestion),
    // irdma (E810)
    ("Nak Sequence Error", Class::Retries),
    ("Nak Sequence Error Implied", Class::Retries),
    ("RTO", Class::Retries),
    ("Rcvd Out of order packets", Class::Retries),
    ("CRC errors", Class::Link),
    ("cnpSent", Class::Congestion),
    ("cnpHandled", Class::Congestion),
    ("cnpIgnored", Class::Congestion),
    ("RxECNMrkd", Class::Congestion),
    // IB port counters (every driver)
    ("symbol_error", Class::Link),
    ("port_rcv_errors", Class::Link),
    ("port_xmit_discards", Class::Link),
    ("link_downed", Class::Link),
    ("link_error_recovery", Class::Link),
    ("local_link_integrity_errors", Class::Link),
    ("excessive_buffer_overrun_errors", Class::Link),
    ("port_rcv_remote_physical_errors", Class::Link),
];

/// The class of a counter key (`hw_counters/out_of_sequence`), when it is
/// one worth reporting.
pub fn class(key: &str) -> Option<Class> {
    let name = short(key);
    INTERESTING
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
}

/// `hw_counters/out_of_sequence` → `out_of_sequence`.
pub fn short(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, n)| n)
}

/// Both ends' counters around the RDMA leg of one path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshots {
    /// This node, before.
    pub local_before: Option<PortCounters>,
    /// This node, after.
    pub local_after: Option<PortCounters>,
    /// The peer, before.
    pub peer_before: Option<PortCounters>,
    /// The peer, after.
    pub peer_after: Option<PortCounters>,
    /// Why the peer's counters could not be asked for, when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_error: Option<String>,
}

/// One end's counter deltas over the RDMA leg.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CounterReport {
    /// Path id.
    pub path: String,
    /// `this node` or `peer`.
    pub end: String,
    /// `device/port`, when the end has counters.
    pub port: Option<String>,
    /// Counter files were there before and after.
    pub present: bool,
    /// Non-zero increases of the counters worth reading, by key.
    pub deltas: BTreeMap<String, u64>,
    /// One line: what the deltas mean.
    pub diagnosis: String,
}

/// The increase of every counter present in both snapshots (a counter that
/// went down was reset: its value after counts).
pub fn deltas(before: &PortCounters, after: &PortCounters) -> BTreeMap<String, u64> {
    after
        .values
        .iter()
        .filter_map(|(k, &a)| {
            let b = *before.values.get(k)?;
            Some((k.clone(), if a >= b { a - b } else { a }))
        })
        .collect()
}

/// The one-line meaning of a set of deltas of interesting counters.
pub fn diagnose(deltas: &BTreeMap<String, u64>) -> String {
    let mut classes: Vec<Class> = deltas.keys().filter_map(|k| class(k)).collect();
    classes.sort();
    classes.dedup();
    if classes.is_empty() {
        return "no retries, out-of-sequence packets, link errors or ECN/CNP during the RDMA leg"
            .into();
    }
    classes
        .iter()
        .map(|c| match c {
            Class::Retries => {
                "retries/out-of-sequence: packets were lost or refused on the way (check the MTU of both netdevs and the switch against the RoCE path MTU, the RoCE v2 GID index on both ends, and PFC/lossless settings)"
            }
            Class::Link => "link errors: check the cable, transceiver and switch port",
            Class::Congestion => {
                "ECN/CNP: congestion control was active (a few under full load are normal; many mean a congested or misconfigured path)"
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// One end's report from its snapshots.
pub fn report(
    path: &str,
    end: &str,
    before: Option<&PortCounters>,
    after: Option<&PortCounters>,
    error: Option<&str>,
) -> CounterReport {
    let port = before.or(after).map(|c| format!("{}/{}", c.device, c.port));
    let (present, deltas, diagnosis) = match (before, after) {
        (Some(b), Some(a)) => {
            let d: BTreeMap<String, u64> = deltas(b, a)
                .into_iter()
                .filter(|(k, v)| *v > 0 && class(k).is_some())
                .collect();
            let line = diagnose(&d);
            (true, d, line)
        }
        _ => (
            false,
            BTreeMap::new(),
            match error {
                Some(e) => format!("counters: not read ({e})"),
                None => "counters: not present".into(),
            },
        ),
    };
    CounterReport {
        path: path.to_string(),
        end: end.to_string(),
        port,
        present,
        deltas,
        diagnosis,
    }
}

/// Both ends' reports for one path.
pub fn reports(path: &str, s: &Snapshots) -> [CounterReport; 2] {
    [
        report(
            path,
            "this node",
            s.local_before.as_ref(),
            s.local_after.as_ref(),
            None,
        ),
        report(
            path,
            "peer",
            s.peer_before.as_ref(),
            s.peer_after.as_ref(),
            s.peer_error.as_deref(),
        ),
    ]
}

/// The report as one line of text.
pub fn line(r: &CounterReport) -> String {
    let who = match &r.port {
        Some(p) => format!("{} {p}", r.end),
        None => r.end.clone(),
    };
    if !r.present || r.deltas.is_empty() {
        return format!("{} RDMA counters, {who}: {}", r.path, r.diagnosis);
    }
    let list: Vec<String> = r
        .deltas
        .iter()
        .map(|(k, v)| format!("{} +{v}", short(k)))
        .collect();
    format!(
        "{} RDMA counters, {who}: {} → {}",
        r.path,
        list.join(", "),
        r.diagnosis
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(pairs: &[(&str, u64)]) -> PortCounters {
        PortCounters {
            device: "mlx5_0".into(),
            port: 1,
            values: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn deltas_keep_interesting_increases_only() {
        let b = snap(&[
            ("hw_counters/out_of_sequence", 5),
            ("hw_counters/np_cnp_sent", 0),
            ("counters/port_xmit_data", 100),
            ("counters/symbol_error", 2),
        ]);
        let a = snap(&[
            ("hw_counters/out_of_sequence", 17),
            ("hw_counters/np_cnp_sent", 3),
            ("counters/port_xmit_data", 900),
            ("counters/symbol_error", 2),
        ]);
        let r = report("p0", "this node", Some(&b), Some(&a), None);
        assert!(r.present);
        assert_eq!(r.port.as_deref(), Some("mlx5_0/1"));
        assert_eq!(
            r.deltas.into_iter().collect::<Vec<_>>(),
            [
                ("hw_counters/np_cnp_sent".to_string(), 3),
                ("hw_counters/out_of_sequence".to_string(), 12)
            ]
        );
        assert!(r.diagnosis.starts_with("retries/out-of-sequence"));
        assert!(r.diagnosis.contains("ECN/CNP"));
    }

    #[test]
    fn absent_and_quiet() {
        let r = report("p0", "peer", None, None, None);
        assert!(!r.present);
        assert_eq!(line(&r), "p0 RDMA counters, peer: counters: not present");
        let s = snap(&[("hw_counters/out_of_sequence", 1)]);
        let r = report("p0", "peer", Some(&s), Some(&s), None);
        assert!(line(&r).contains("no retries"));
        // A reset counter counts from zero.
        let d = deltas(&snap(&[("x/RTO", 50)]), &snap(&[("x/RTO", 4)]));
        assert_eq!(d["x/RTO"], 4);
        assert_eq!(class("hw_counters/RxECNMrkd"), Some(Class::Congestion));
        assert_eq!(
            class("hw_counters/Nak Sequence Error"),
            Some(Class::Retries)
        );
        assert_eq!(class("counters/port_rcv_data"), None);
    }
}

//! `enum ibv_wc_status` (rdma-core `libibverbs/verbs.h`): the code perftest
//! prints after `Failed status`, its name, `ibv_wc_status_str()` text
//! (`libibverbs/enum_strs.c`) and what it means on a RoCE link between two
//! nodes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A work completion status, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WcStatus {
    /// The number perftest printed.
    pub code: u32,
    /// The enum name (`IBV_WC_RETRY_EXC_ERR`).
    pub name: String,
    /// `ibv_wc_status_str()` (`transport retry counter exceeded`).
    pub text: String,
}

/// What to look at for a status, in the order of likelihood on these links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Memory registration: memlock, buffer permissions.
    Registration,
    /// A consequence of an earlier error on this or the other end.
    Earlier,
    /// The two ends disagree about the test (options, versions).
    Mismatch,
    /// No acknowledgement: GID, MTU, route, firewall, flow control.
    Path,
    /// The receiver had no buffer posted.
    ReceiverNotReady,
    /// The NIC or its driver failed.
    Device,
}

/// (code, name, text, meaning, remedy), codes 0..=23.
const TABLE: &[(u32, &str, &str, &str, Remedy)] = &[
    (
        1,
        "IBV_WC_LOC_LEN_ERR",
        "local length error",
        "a message did not fit the buffer or the path MTU",
        Remedy::Mismatch,
    ),
    (
        2,
        "IBV_WC_LOC_QP_OP_ERR",
        "local QP operation error",
        "the work request is not valid for this queue pair (inline size, opcode)",
        Remedy::Mismatch,
    ),
    (
        3,
        "IBV_WC_LOC_EEC_OP_ERR",
        "local EE context operation error",
        "an end-to-end context error (reliable datagram, unused by RoCE)",
        Remedy::Device,
    ),
    (
        4,
        "IBV_WC_LOC_PROT_ERR",
        "local protection error",
        "the NIC was refused access to a local buffer: its memory registration does not cover it (memlock, pinning, permissions)",
        Remedy::Registration,
    ),
    (
        5,
        "IBV_WC_WR_FLUSH_ERR",
        "Work Request Flushed Error",
        "the queue pair was already in the error state, so outstanding work was flushed: the real error came first",
        Remedy::Earlier,
    ),
    (
        6,
        "IBV_WC_MW_BIND_ERR",
        "memory management operation error",
        "a memory window bind failed",
        Remedy::Registration,
    ),
    (
        7,
        "IBV_WC_BAD_RESP_ERR",
        "bad response error",
        "the responder answered with an unexpected opcode: the two ends run different tests or versions",
        Remedy::Mismatch,
    ),
    (
        8,
        "IBV_WC_LOC_ACCESS_ERR",
        "local access error",
        "a local buffer's registration does not allow the access (memlock, registration flags)",
        Remedy::Registration,
    ),
    (
        9,
        "IBV_WC_REM_INV_REQ_ERR",
        "remote invalid request error",
        "the responder rejected the request: message larger than its buffer or an operation its queue pair does not allow",
        Remedy::Mismatch,
    ),
    (
        10,
        "IBV_WC_REM_ACCESS_ERR",
        "remote access error",
        "the responder's memory key or permissions rejected the RDMA access",
        Remedy::Mismatch,
    ),
    (
        11,
        "IBV_WC_REM_OP_ERR",
        "remote operation error",
        "the responder could not complete the operation (its own resources failed)",
        Remedy::Earlier,
    ),
    (
        12,
        "IBV_WC_RETRY_EXC_ERR",
        "transport retry counter exceeded",
        "the peer never acknowledged: packets are lost or go to the wrong place (GID, MTU, route, firewall, flow control)",
        Remedy::Path,
    ),
    (
        13,
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "RNR retry counter exceeded",
        "the receiver had no receive buffer posted (receiver not ready) for longer than the retries allow",
        Remedy::ReceiverNotReady,
    ),
    (
        14,
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "local RDD violation error",
        "a reliable-datagram domain violation (unused by RoCE)",
        Remedy::Device,
    ),
    (
        15,
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "remote invalid RD request",
        "a reliable-datagram request was rejected (unused by RoCE)",
        Remedy::Device,
    ),
    (
        16,
        "IBV_WC_REM_ABORT_ERR",
        "aborted error",
        "the responder aborted the operation",
        Remedy::Earlier,
    ),
    (
        17,
        "IBV_WC_INV_EECN_ERR",
        "invalid EE context number",
        "an end-to-end context error (unused by RoCE)",
        Remedy::Device,
    ),
    (
        18,
        "IBV_WC_INV_EEC_STATE_ERR",
        "invalid EE context state",
        "an end-to-end context error (unused by RoCE)",
        Remedy::Device,
    ),
    (
        19,
        "IBV_WC_FATAL_ERR",
        "fatal error",
        "the NIC reported a fatal error",
        Remedy::Device,
    ),
    (
        20,
        "IBV_WC_RESP_TIMEOUT_ERR",
        "response timeout error",
        "the responder did not answer in time",
        Remedy::Path,
    ),
    (
        21,
        "IBV_WC_GENERAL_ERR",
        "general error",
        "the driver reported an error it has no code for",
        Remedy::Device,
    ),
    (
        22,
        "IBV_WC_TM_ERR",
        "TM error",
        "a tag-matching error (unused by perftest)",
        Remedy::Device,
    ),
    (
        23,
        "IBV_WC_TM_RNDV_INCOMPLETE",
        "TM software rendezvous",
        "an incomplete tag-matching rendezvous (unused by perftest)",
        Remedy::Device,
    ),
];

/// Decodes a status code; `None` for 0 (success) and unknown codes.
pub fn decode(code: u32) -> Option<(WcStatus, &'static str, Remedy)> {
    TABLE
        .iter()
        .find(|row| row.0 == code)
        .map(|&(code, name, text, meaning, remedy)| {
            (
                WcStatus {
                    code,
                    name: name.into(),
                    text: text.into(),
                },
                meaning,
                remedy,
            )
        })
}

/// The status code in a perftest line: `Failed status 12: wr_id …`,
/// `Failed status 12 (transport retry counter exceeded): …`,
/// `Poll send CQ error status=12 qp 0`, or the name first and the number
/// in parentheses, as rc_pingpong and some perftest builds print it:
/// `Failed status transport retry counter exceeded (12) for wr_id 2`.
pub fn code_in(line: &str) -> Option<u32> {
    let rest = line
        .split_once("Failed status ")
        .or_else(|| line.split_once("error status="))?
        .1;
    leading_number(rest).or_else(|| named(rest))
}

fn leading_number(s: &str) -> Option<u32> {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `transport retry counter exceeded (12) …` → 12: the text of a known
/// status, then its number in parentheses (the number decides; a known
/// text without one gives its own code).
fn named(rest: &str) -> Option<u32> {
    let &(code, _, text, _, _) = TABLE
        .iter()
        .filter(|row| {
            rest.to_ascii_lowercase()
                .starts_with(&row.2.to_ascii_lowercase())
        })
        .max_by_key(|row| row.2.len())?;
    let after = rest[text.len()..].trim_start();
    match after.strip_prefix('(') {
        Some(inner) => leading_number(inner),
        None => Some(code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_verbs_h() {
        assert_eq!(decode(12).unwrap().0.name, "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(decode(4).unwrap().0.text, "local protection error");
        assert_eq!(decode(13).unwrap().2, Remedy::ReceiverNotReady);
        assert!(decode(0).is_none() && decode(99).is_none());
        for (i, row) in TABLE.iter().enumerate() {
            assert_eq!(row.0 as usize, i + 1, "table in enum order");
        }
    }

    #[test]
    fn status_in_each_format() {
        assert_eq!(code_in(" Failed status 4: wr_id 0 syndrom 0x51"), Some(4));
        assert_eq!(
            code_in(" Failed status 12 (transport retry counter exceeded): wr_id 0"),
            Some(12)
        );
        assert_eq!(code_in("Poll send CQ error status=5 qp 0"), Some(5));
        assert_eq!(
            code_in("Failed status transport retry counter exceeded (12) for wr_id 2"),
            Some(12)
        );
        assert_eq!(
            code_in("Failed status RNR retry counter exceeded (13) for wr_id 1"),
            Some(13)
        );
        assert_eq!(code_in("Failed status x"), None);
        assert_eq!(code_in("all fine"), None);
    }
}

//! `iperf3 --json` client output.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What halobox keeps from an iperf3 run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Iperf3Result {
    /// Parallel streams (`-P`).
    pub streams: u32,
    /// Seconds the test ran.
    pub seconds: f64,
    /// Receiver-side throughput in Gb/s (decimal): what arrived.
    pub received_gbps: f64,
    /// Sender-side throughput in Gb/s.
    pub sent_gbps: f64,
    /// TCP retransmissions, when the kernel reports them.
    pub retransmits: Option<u64>,
    /// Bytes the receiver got (`end.sum_received.bytes`); 0 means the run
    /// moved no data, whatever the rates say.
    pub received_bytes: Option<u64>,
}

impl Iperf3Result {
    /// True when the receiver got nothing.
    pub fn moved_nothing(&self) -> bool {
        self.received_bytes == Some(0) || self.received_gbps == 0.0
    }
}

/// Parses `iperf3 -c … --json` output. A run that failed carries iperf3's
/// own `error` text.
pub fn parse(text: &str) -> Result<Iperf3Result, String> {
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("iperf3 did not print JSON ({e})"))?;
    if let Some(err) = v.get("error").and_then(Value::as_str) {
        return Err(format!("iperf3: {err}"));
    }
    let end = v.get("end").ok_or("iperf3 JSON has no `end` section")?;
    let bps = |section: &str| {
        end.get(section)
            .and_then(|s| s.get("bits_per_second"))
            .and_then(Value::as_f64)
            .filter(|b| b.is_finite() && *b >= 0.0)
            .ok_or(format!("iperf3 JSON has no end.{section}.bits_per_second"))
    };
    let received = bps("sum_received")?;
    let sent = bps("sum_sent")?;
    let seconds = end
        .get("sum_received")
        .and_then(|s| s.get("seconds"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let streams = v
        .pointer("/start/test_start/num_streams")
        .and_then(Value::as_u64)
        .unwrap_or(1) as u32;
    Ok(Iperf3Result {
        streams,
        seconds,
        received_gbps: received / 1e9,
        sent_gbps: sent / 1e9,
        retransmits: end.pointer("/sum_sent/retransmits").and_then(Value::as_u64),
        received_bytes: end.pointer("/sum_received/bytes").and_then(Value::as_u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_and_garbage() {
        assert_eq!(
            parse(
                r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}"#
            ),
            Err("iperf3: unable to connect to server: Connection refused".into())
        );
        assert!(parse("iperf3: error").is_err());
        assert!(parse("{}").is_err());
    }
}

//! What a soak asks for (pure): the options saved with the run, the
//! duration words (`90s`, `10m`, `1h`), and the plan as text for `--dry-run`.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::bench::serving::plan::Endpoint;

/// A node whose GTT is watched: its name and its `halobox metrics` address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watched {
    /// The node's name (cluster.toml's, or the address given).
    pub name: String,
    /// Where its `halobox metrics` answers.
    pub addr: SocketAddr,
}

/// What was asked (saved with the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoakOptions {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Where the endpoint came from.
    pub endpoint_from: String,
    /// `--model` (default: the first one `/v1/models` lists).
    pub model: Option<String>,
    /// Requests in flight at once.
    pub concurrency: u32,
    /// Tokens in a long prompt.
    pub context: u32,
    /// Tokens in a short prompt.
    pub short_tokens: u32,
    /// Every this many requests, one is long (1: all long).
    pub long_every: u32,
    /// Output tokens per request (end of sequence ignored).
    pub output_tokens: u32,
    /// How long new requests start, seconds.
    pub duration_s: u64,
    /// Width of a window of the report over time, seconds.
    pub window_s: u64,
    /// Seconds without a byte that make a request stalled (and end the run).
    pub stall_s: u64,
    /// The most a node's GTT in use may grow from its first reading, MiB.
    pub max_gtt_growth_mib: u64,
    /// Seconds between GTT readings.
    pub sample_s: u64,
    /// The nodes whose GTT is watched.
    pub watched: Vec<Watched>,
    /// Seed of the random prompts.
    pub seed: u64,
    /// Where the API key comes from (never the key).
    pub key: String,
}

/// Seconds in `90`, `90s`, `10m` or `1h`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (n, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("{s:?} is not a duration (e.g. 90s, 10m, 1h)")),
    };
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 90s, 10m, 1h)"))?;
    match n.checked_mul(per) {
        Some(v) if (1..=24 * 3600).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: give 1 s to 24 h")),
    }
}

/// The window width when none is given: about twelve windows, at least 5 s.
pub fn default_window(duration_s: u64) -> u64 {
    (duration_s / 12).max(5)
}

/// The plan as text (`--dry-run`).
pub fn render(o: &SoakOptions) -> String {
    let nodes = if o.watched.is_empty() {
        "none (no cluster file and no --metrics): GTT is not watched".to_string()
    } else {
        o.watched
            .iter()
            .map(|w| format!("{} ({})", w.name, w.addr))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "bench soak plan (nothing is sent with --dry-run):\n  endpoint:     {} ({})\n  model:        {}\n  key:          {}\n  load:         {} requests in flight for {} s; one request in {} has {} prompt tokens, the others {}; {} output tokens each\n  report:       errors, time to first token and output tokens/s per {} s window; GTT in use every {} s\n  GTT from:     {nodes}\n  PASS when:    no request fails, none waits {} s for a byte, and no node's GTT in use grows more than {} MiB\n",
        o.endpoint.url(),
        o.endpoint_from,
        o.model
            .as_deref()
            .unwrap_or("the first one /v1/models lists"),
        o.key,
        o.concurrency,
        o.duration_s,
        o.long_every,
        o.context,
        o.short_tokens,
        o.output_tokens,
        o.window_s,
        o.sample_s,
        o.stall_s,
        o.max_gtt_growth_mib
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), 90);
        assert_eq!(parse_duration("90s").unwrap(), 90);
        assert_eq!(parse_duration("10m").unwrap(), 600);
        assert_eq!(parse_duration("1h").unwrap(), 3600);
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("2d").unwrap_err().contains("not a duration"));
        assert!(parse_duration("25h").unwrap_err().contains("1 s to 24 h"));
        assert_eq!(default_window(600), 50);
        assert_eq!(default_window(20), 5);
    }
}

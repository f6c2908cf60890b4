//! A soak's record turned into what it means (pure): windows over time
//! (requests ended, errors, time to first token, output tokens/s), each
//! node's GTT in use over time and its growth, and the verdict against the
//! limits: no request failed, none stalled, no node's GTT grew more than
//! the bound. A node whose GTT could not be read is named, not judged.

use serde::Serialize;

use super::record::{SoakRecord, SoakRequest};
use crate::bench::stats::percentile;

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// One window of the load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// Its start, seconds from the start of the load.
    pub start_s: f64,
    /// Its end.
    pub end_s: f64,
    /// Requests that ended in it.
    pub ended: usize,
    /// Of those, how many failed.
    pub failed: usize,
    /// Output tokens of the requests that finished in it, per second of the window.
    pub output_tokens_per_s: f64,
    /// Median time to first token of the short requests that ended in it, ms.
    pub ttft_short_p50_ms: Option<f64>,
    /// Median time to first token of the long requests that ended in it, ms.
    pub ttft_long_p50_ms: Option<f64>,
}

/// One node's GTT over the soak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeGtt {
    /// The node.
    pub node: String,
    /// `(seconds, GiB in use)` of every reading with a figure.
    pub points: Vec<(f64, f64)>,
    /// Last reading minus the first, MiB (`None`: fewer than two readings).
    pub growth_mib: Option<f64>,
    /// The most in use, GiB.
    pub max_gib: Option<f64>,
    /// Why it has no figure, when it has none.
    pub unread: Option<String>,
}

/// The soak, derived.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakResults {
    /// Start time, UTC.
    pub started_utc: String,
    /// The model.
    pub model: String,
    /// The server.
    pub server: String,
    /// The endpoint.
    pub endpoint: String,
    /// Seconds the load ran.
    pub elapsed_s: f64,
    /// Requests that ended.
    pub requests: usize,
    /// Of those, long ones.
    pub long_requests: usize,
    /// Requests that failed.
    pub failed: usize,
    /// The windows, in time order.
    pub windows: Vec<Window>,
    /// Each watched node's GTT.
    pub gtt: Vec<NodeGtt>,
    /// `PASS` or `FAIL`.
    pub verdict: &'static str,
    /// Why it failed (empty on a PASS).
    pub reasons: Vec<String>,
    /// What was not judged, and why.
    pub notes: Vec<String>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(percentile(&v, 50.0))
}

fn end_s(r: &SoakRequest) -> f64 {
    r.start_s + r.latency_ms / 1000.0
}

fn windows(rec: &SoakRecord) -> Vec<Window> {
    let width = rec.options.window_s.max(1) as f64;
    let last = rec.requests.iter().map(end_s).fold(rec.elapsed_s, f64::max);
    let count = (last / width).ceil().max(1.0) as usize;
    (0..count)
        .map(|i| {
            let (a, b) = (i as f64 * width, (i + 1) as f64 * width);
            let inside: Vec<&SoakRequest> = rec
                .requests
                .iter()
                .filter(|r| (a..b).contains(&end_s(r)) || (i + 1 == count && end_s(r) >= b))
                .collect();
            let ok = || inside.iter().filter(|r| r.error.is_none());
            let ttft = |long: bool| {
                median(
                    ok().filter(|r| r.long == long)
                        .filter_map(|r| r.ttft_ms)
                        .collect(),
                )
            };
            Window {
                start_s: a,
                end_s: b,
                ended: inside.len(),
                failed: inside.iter().filter(|r| r.error.is_some()).count(),
                output_tokens_per_s: ok().map(|r| r.output_tokens as f64).fold(0.0, |a, b| a + b)
                    / width,
                ttft_short_p50_ms: ttft(false),
                ttft_long_p50_ms: ttft(true),
            }
        })
        .collect()
}

fn node_gtt(rec: &SoakRecord, node: &str) -> NodeGtt {
    let mine: Vec<_> = rec.gtt.iter().filter(|s| s.node == node).collect();
    let points: Vec<(f64, f64)> = mine
        .iter()
        .filter_map(|s| s.used_bytes.map(|b| (s.at_s, b / GIB)))
        .collect();
    let growth_mib = match (points.first(), points.last()) {
        (Some(a), Some(b)) if points.len() >= 2 => Some((b.1 - a.1) * GIB / MIB),
        _ => None,
    };
    NodeGtt {
        node: node.to_string(),
        max_gib: points.iter().map(|p| p.1).reduce(f64::max),
        growth_mib,
        unread: points.is_empty().then(|| {
            mine.iter()
                .rev()
                .find_map(|s| s.why.clone())
                .unwrap_or_else(|| "no reading yet".into())
        }),
        points,
    }
}

fn failures(rec: &SoakRecord, reasons: &mut Vec<String>) {
    let stall = rec.options.stall_s;
    for r in rec.requests.iter().filter(|r| r.stalled) {
        reasons.push(format!(
            "stall: request {} ({}) got no byte for {stall} s, from {:.0} s into the soak",
            r.n,
            if r.long { "long" } else { "short" },
            r.start_s + r.ttft_ms.unwrap_or(0.0) / 1000.0
        ));
    }
    let failed: Vec<&SoakRequest> = rec
        .requests
        .iter()
        .filter(|r| r.error.is_some() && !r.stalled)
        .collect();
    if let Some(first) = failed.first() {
        reasons.push(format!(
            "{} request(s) failed; the first (request {}, at {:.0} s): {}",
            failed.len(),
            first.n,
            first.start_s,
            first.error.as_deref().unwrap_or_default()
        ));
    }
    if let Some(why) = &rec.ended_early
        && !rec.requests.iter().any(|r| r.stalled)
    {
        reasons.push(format!("the load ended early: {why}"));
    }
    if rec.requests.iter().all(|r| r.error.is_some()) {
        reasons.push("no request finished".into());
    }
}

/// Derives the windows, the GTT and the verdict.
pub fn derive(rec: &SoakRecord) -> SoakResults {
    let mut reasons = Vec::new();
    failures(rec, &mut reasons);
    let gtt: Vec<NodeGtt> = rec
        .options
        .watched
        .iter()
        .map(|w| node_gtt(rec, &w.name))
        .collect();
    let mut notes = Vec::new();
    let bound = rec.options.max_gtt_growth_mib as f64;
    for g in &gtt {
        match (g.growth_mib, &g.unread) {
            (Some(m), _) if m > bound => reasons.push(format!(
                "GTT in use on {} grew {m:.0} MiB during the soak (limit {bound:.0} MiB)",
                g.node
            )),
            (None, Some(why)) => notes.push(format!("GTT on {} not judged: {why}", g.node)),
            _ => {}
        }
    }
    if rec.options.watched.is_empty() {
        notes.push("GTT not watched: no cluster file and no --metrics".into());
    }
    if !rec.finished && rec.ended_early.is_none() {
        notes.push(
            "the soak is still running, or its halobox died: these are the requests so far".into(),
        );
    }
    SoakResults {
        started_utc: rec.started_utc.clone(),
        model: rec.model.clone(),
        server: rec.server.clone(),
        endpoint: rec.options.endpoint.url(),
        elapsed_s: rec.elapsed_s,
        requests: rec.requests.len(),
        long_requests: rec.requests.iter().filter(|r| r.long).count(),
        failed: rec.requests.iter().filter(|r| r.error.is_some()).count(),
        windows: windows(rec),
        gtt,
        verdict: if reasons.is_empty() { "PASS" } else { "FAIL" },
        reasons,
        notes,
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{x:.0}"))
}

/// The results as text.
pub fn render(r: &SoakResults) -> String {
    let mut s = format!(
        "soak of {} ({}) at {}: {:.0} s, {} requests ({} long), {} failed\n\n  window      ended  failed  out tok/s  TTFT short ms  TTFT long ms\n",
        crate::remote::printable(&r.model),
        r.server,
        r.endpoint,
        r.elapsed_s,
        r.requests,
        r.long_requests,
        r.failed
    );
    for w in &r.windows {
        s.push_str(&format!(
            "  {:<10}  {:>5}  {:>6}  {:>9.1}  {:>13}  {:>12}\n",
            format!("{:.0}-{:.0} s", w.start_s, w.end_s),
            w.ended,
            w.failed,
            w.output_tokens_per_s,
            ms(w.ttft_short_p50_ms),
            ms(w.ttft_long_p50_ms)
        ));
    }
    let read: Vec<&NodeGtt> = r.gtt.iter().filter(|g| g.unread.is_none()).collect();
    for g in &read {
        if let (Some(a), Some(b)) = (g.points.first(), g.points.last()) {
            s.push_str(&format!(
                "\n  GTT {}: {:.2} GiB at start, {:.2} GiB at end, {:.2} GiB at most ({} readings)",
                g.node,
                a.1,
                b.1,
                g.max_gib.unwrap_or(b.1),
                g.points.len()
            ));
        }
    }
    if !read.is_empty() {
        s.push('\n');
    }
    for n in &r.notes {
        s.push_str(&format!("\n  note: {n}"));
    }
    s.push_str(&format!("\n{}\n", r.verdict));
    for why in &r.reasons {
        s.push_str(&format!("  {why}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::plan::{SoakOptions, Watched};
    use super::super::record::{GttSample, SCHEMA_VERSION};
    use super::*;
    use crate::bench::serving::plan::Endpoint;

    fn rec() -> SoakRecord {
        let req =
            |n: u64, start_s: f64, long: bool, error: Option<&str>, stalled: bool| SoakRequest {
                n,
                start_s,
                long,
                ttft_ms: Some(if long { 900.0 } else { 50.0 }),
                latency_ms: 2000.0,
                output_tokens: 100,
                error: error.map(str::to_string),
                stalled,
            };
        let sample = |at_s: f64, gib: f64| GttSample {
            node: "a".into(),
            at_s,
            used_bytes: Some(gib * GIB),
            why: None,
        };
        SoakRecord {
            schema_version: SCHEMA_VERSION,
            started_utc: "2026-12-06T00:00:00Z".into(),
            options: SoakOptions {
                endpoint: Endpoint::parse("http://127.0.0.1:8000").unwrap(),
                endpoint_from: "--url".into(),
                model: None,
                concurrency: 2,
                context: 8192,
                short_tokens: 256,
                long_every: 2,
                output_tokens: 100,
                duration_s: 20,
                window_s: 10,
                stall_s: 60,
                max_gtt_growth_mib: 512,
                sample_s: 5,
                watched: vec![
                    Watched {
                        name: "a".into(),
                        addr: "127.0.0.1:9837".parse().unwrap(),
                    },
                    Watched {
                        name: "b".into(),
                        addr: "127.0.0.2:9837".parse().unwrap(),
                    },
                ],
                seed: 0,
                key: "none".into(),
            },
            model: "m".into(),
            server: "llamacpp".into(),
            prompt_lengths: "exact".into(),
            requests: vec![
                req(1, 0.0, true, None, false),
                req(2, 1.0, false, None, false),
                req(3, 12.0, true, None, false),
            ],
            gtt: vec![
                sample(0.0, 10.0),
                sample(10.0, 10.2),
                sample(20.0, 10.25),
                GttSample {
                    node: "b".into(),
                    at_s: 0.0,
                    used_bytes: None,
                    why: Some("connection refused".into()),
                },
            ],
            elapsed_s: 20.0,
            ended_early: None,
            finished: true,
        }
    }

    #[test]
    fn a_clean_soak_passes_with_its_windows_and_gtt() {
        let r = derive(&rec());
        assert_eq!(r.verdict, "PASS", "{:?}", r.reasons);
        assert_eq!(r.windows.len(), 2);
        assert_eq!((r.windows[0].ended, r.windows[1].ended), (2, 1));
        assert_eq!(r.windows[0].output_tokens_per_s, 20.0);
        assert_eq!(r.windows[0].ttft_long_p50_ms, Some(900.0));
        assert_eq!(r.windows[0].ttft_short_p50_ms, Some(50.0));
        assert_eq!(r.gtt[0].growth_mib, Some(256.0));
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("GTT on b not judged: connection refused")),
            "{:?}",
            r.notes
        );
        assert!(render(&r).ends_with("PASS\n"));
    }

    #[test]
    fn a_stall_an_error_and_gtt_growth_each_fail_it() {
        let mut stalled = rec();
        stalled.requests[2].error = Some("no answer for 60 s".into());
        stalled.requests[2].stalled = true;
        stalled.ended_early = Some("request 3: no answer for 60 s".into());
        let r = derive(&stalled);
        assert_eq!(r.verdict, "FAIL");
        assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
        assert!(
            r.reasons[0].starts_with("stall: request 3 (long) got no byte for 60 s"),
            "{:?}",
            r.reasons
        );

        let mut failed = rec();
        failed.requests[1].error = Some("HTTP 500: boom".into());
        let r = derive(&failed);
        assert!(
            r.reasons[0]
                .contains("1 request(s) failed; the first (request 2, at 1 s): HTTP 500: boom"),
            "{:?}",
            r.reasons
        );

        let mut grew = rec();
        grew.options.max_gtt_growth_mib = 100;
        let r = derive(&grew);
        assert_eq!(
            r.reasons,
            vec!["GTT in use on a grew 256 MiB during the soak (limit 100 MiB)".to_string()]
        );
    }
}

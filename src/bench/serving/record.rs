//! A saved serving run: `serving.json` holds what was asked and every
//! request's timings; [`derive()`] turns it into [`ServingResults`], the same
//! right after a run and later from the folder (`bench report`,
//! `bench compare`).

use std::path::Path;

use anyhow::Context;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::plan::ServingOptions;
use crate::bench::stats::percentile;

/// Version of `serving.json` and of [`ServingResults`].
pub const SCHEMA_VERSION: u32 = 1;
/// Name of the record in a results folder.
pub const SERVING_FILE: &str = "serving.json";
/// Largest record that is read.
const MAX_BYTES: u64 = 256 << 20;

/// One request's timings (milliseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Time to the first token.
    pub ttft_ms: Option<f64>,
    /// Gaps between tokens.
    pub itl_ms: Vec<f64>,
    /// Time to the end of the stream (or to the failure).
    pub latency_ms: f64,
    /// Output tokens (the server's usage, else the token chunks counted).
    pub output_tokens: u64,
    /// Prompt tokens as the server counted them, when it said.
    pub prompt_tokens: Option<u64>,
    /// Why it failed (`None`: it finished).
    pub error: Option<String>,
}

/// One concurrency level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelRecord {
    /// Requests in flight at once.
    pub concurrency: u32,
    /// Wall time of the level, seconds.
    pub duration_s: f64,
    /// The requests, in the order they ended.
    pub requests: Vec<RequestRecord>,
}

/// `serving.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Start time, UTC, RFC 3339.
    pub started_utc: String,
    /// What was asked.
    pub options: ServingOptions,
    /// The model benchmarked.
    pub model: String,
    /// Who serves it (`owned_by` of `/v1/models`: `vllm`, `llamacpp`, …).
    pub server: String,
    /// How the prompt lengths were made ([`super::prompts::EXACT`] or
    /// [`super::prompts::APPROXIMATE`]).
    pub prompt_lengths: String,
    /// The levels that ran, in order.
    pub levels: Vec<LevelRecord>,
    /// Why the run ended early (the endpoint died, Ctrl-C); `None` when it
    /// ran to the end.
    pub partial: Option<String>,
}

/// Mean, median and 99th percentile (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Spread {
    /// Samples.
    pub samples: u64,
    /// Mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
}

fn spread(samples: impl Iterator<Item = f64>) -> Option<Spread> {
    let mut s: Vec<f64> = samples.collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    Some(Spread {
        samples: s.len() as u64,
        mean: s.iter().sum::<f64>() / s.len() as f64,
        p50: percentile(&s, 50.0),
        p99: percentile(&s, 99.0),
    })
}

/// One level's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LevelResult {
    /// Requests in flight at once.
    pub concurrency: u32,
    /// `ok`, `failed` (some requests failed), `partial` (the run stopped
    /// during it) or `not run` (the run stopped before it).
    pub status: String,
    /// Requests asked.
    pub requests: u32,
    /// Requests that finished.
    pub completed: u32,
    /// Requests that failed.
    pub failed: u32,
    /// Wall time, seconds.
    pub duration_s: f64,
    /// Finished requests per second.
    pub request_throughput: f64,
    /// Output tokens of the finished requests per second.
    pub output_throughput: f64,
    /// Time to first token, ms.
    pub ttft_ms: Option<Spread>,
    /// Inter-token latency, ms.
    pub itl_ms: Option<Spread>,
    /// Whole-request latency, ms.
    pub e2e_ms: Option<Spread>,
    /// Mean output tokens of a finished request.
    pub mean_output_tokens: f64,
    /// The first failure, or outputs shorter than asked.
    pub note: Option<String>,
}

/// A serving run's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServingResults {
    /// The format version (1; `record::SCHEMA_VERSION`).
    pub schema_version: u32,
    /// Always `serving`.
    pub kind: String,
    /// Start time, UTC.
    pub started_utc: String,
    /// `http://HOST:PORT`.
    pub endpoint: String,
    /// The model.
    pub model: String,
    /// Who serves it (`owned_by` of `/v1/models`).
    pub server: String,
    /// Prompt tokens asked.
    pub input_tokens: u32,
    /// Output tokens asked.
    pub output_tokens: u32,
    /// How prompt lengths were made (exact or approximate).
    pub prompt_lengths: String,
    /// Why the run ended early; `None` when it ran to the end.
    pub partial: Option<String>,
    /// Per concurrency level, in the order asked.
    pub levels: Vec<LevelResult>,
}

fn level_result(l: &LevelRecord, asked: u32, stopped: bool, output_tokens: u32) -> LevelResult {
    let done: Vec<&RequestRecord> = l.requests.iter().filter(|r| r.error.is_none()).collect();
    let failed = l.requests.len() - done.len();
    let out: u64 = done.iter().map(|r| r.output_tokens).sum();
    let per_s = |x: f64| {
        if l.duration_s > 0.0 {
            x / l.duration_s
        } else {
            0.0
        }
    };
    let mean_out = if done.is_empty() {
        0.0
    } else {
        out as f64 / done.len() as f64
    };
    let first_error = l.requests.iter().find_map(|r| r.error.clone());
    let short = done
        .iter()
        .filter(|r| r.output_tokens < u64::from(output_tokens))
        .count();
    let note = first_error.or_else(|| {
        (short > 0).then(|| {
            format!(
                "{short} output(s) shorter than {output_tokens} tokens (mean {mean_out:.1}): the server did not honour ignore_eos/min_tokens"
            )
        })
    });
    let status = if stopped {
        "partial"
    } else if failed > 0 {
        "failed"
    } else {
        "ok"
    };
    LevelResult {
        concurrency: l.concurrency,
        status: status.into(),
        requests: asked,
        completed: done.len() as u32,
        failed: failed as u32,
        duration_s: l.duration_s,
        request_throughput: per_s(done.len() as f64),
        output_throughput: per_s(out as f64),
        ttft_ms: spread(done.iter().filter_map(|r| r.ttft_ms)),
        itl_ms: spread(done.iter().flat_map(|r| r.itl_ms.iter().copied())),
        e2e_ms: spread(done.iter().map(|r| r.latency_ms)),
        mean_output_tokens: mean_out,
        note,
    }
}

/// The results of a record.
pub fn derive(rec: &ServingRecord) -> ServingResults {
    let o = &rec.options;
    let levels = o
        .concurrency
        .iter()
        .enumerate()
        .map(|(i, &c)| match rec.levels.get(i) {
            Some(l) => {
                let last = i + 1 == rec.levels.len();
                let stopped = rec.partial.is_some() && last;
                level_result(l, o.requests, stopped, o.output_tokens)
            }
            None => LevelResult {
                concurrency: c,
                status: "not run".into(),
                requests: o.requests,
                completed: 0,
                failed: 0,
                duration_s: 0.0,
                request_throughput: 0.0,
                output_throughput: 0.0,
                ttft_ms: None,
                itl_ms: None,
                e2e_ms: None,
                mean_output_tokens: 0.0,
                note: rec.partial.clone(),
            },
        })
        .collect();
    printable(ServingResults {
        schema_version: SCHEMA_VERSION,
        kind: "serving".into(),
        started_utc: rec.started_utc.clone(),
        endpoint: o.endpoint.url(),
        model: rec.model.clone(),
        server: rec.server.clone(),
        input_tokens: o.input_tokens,
        output_tokens: o.output_tokens,
        prompt_lengths: rec.prompt_lengths.clone(),
        partial: rec.partial.clone(),
        levels,
    })
}

/// `res` with every text in it safe for a terminal
/// ([`crate::remote::printable`], line breaks kept): the model id and
/// `owned_by` come from the endpoint, and a saved record may hold anything.
/// Every report, fresh or saved, text, JSON or HTML, passes through this.
fn printable(mut res: ServingResults) -> ServingResults {
    use crate::remote::printable_lines as clean;
    for s in [
        &mut res.started_utc,
        &mut res.endpoint,
        &mut res.model,
        &mut res.server,
        &mut res.prompt_lengths,
    ] {
        *s = clean(s);
    }
    let notes = res.levels.iter_mut().map(|l| &mut l.note);
    for t in notes.chain([&mut res.partial]).flatten() {
        *t = clean(t);
    }
    res
}

/// True when `dir` holds a serving run.
pub fn is_saved(dir: &Path) -> bool {
    dir.join(SERVING_FILE).is_file()
}

/// Writes the record to `dir` (made when missing), replacing it.
pub fn save(dir: &Path, rec: &ServingRecord) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(SERVING_FILE);
    let text = serde_json::to_string_pretty(rec)? + "\n";
    crate::confine::write_atomic(&path, text.as_bytes(), 0o666)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Reads `serving.json` from `dir`.
pub fn load(dir: &Path) -> anyhow::Result<ServingRecord> {
    let kind = crate::bench::saved::Kind {
        file: SERVING_FILE,
        made_by: "halobox bench serving",
        what: "serving record",
        max_bytes: MAX_BYTES,
        schema_version: SCHEMA_VERSION,
    };
    crate::bench::saved::load(dir, &kind, |r: &ServingRecord| r.schema_version)
}

fn ms(s: Option<Spread>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{:.1} / {:.1}", s.p50, s.p99))
}

/// The results as text.
pub fn render(r: &ServingResults) -> String {
    let mut out = format!(
        "bench serving: {} at {} ({}), started {}\n  prompts {} tokens, {}; outputs {} tokens\n",
        r.model,
        r.endpoint,
        r.server,
        r.started_utc,
        r.input_tokens,
        r.prompt_lengths,
        r.output_tokens
    );
    out.push_str(&format!(
        "\n{:>5} {:>9} {:>8} {:>11} {:>17} {:>17}  {}\n",
        "conc", "ok/reqs", "req/s", "out tok/s", "TTFT p50/p99 ms", "ITL p50/p99 ms", "status"
    ));
    for l in &r.levels {
        out.push_str(&format!(
            "{:>5} {:>9} {:>8.2} {:>11.1} {:>17} {:>17}  {}\n",
            l.concurrency,
            format!("{}/{}", l.completed, l.requests),
            l.request_throughput,
            l.output_throughput,
            ms(l.ttft_ms),
            ms(l.itl_ms),
            l.status
        ));
    }
    for l in r.levels.iter().filter(|l| l.status != "not run") {
        if let Some(n) = &l.note {
            out.push_str(&format!("  concurrency {}: {n}\n", l.concurrency));
        }
    }
    if let Some(p) = &r.partial {
        out.push_str(&format!(
            "PARTIAL: the run stopped early ({p}); the levels above that ran are kept\n"
        ));
    }
    out
}

/// Two runs side by side, level by level (b against a).
pub fn compare(a: &ServingResults, b: &ServingResults) -> String {
    let mut out = format!(
        "A: {} {} at {} (prompts {}, outputs {}){}\nB: {} {} at {} (prompts {}, outputs {}){}\n",
        a.started_utc,
        a.model,
        a.endpoint,
        a.input_tokens,
        a.output_tokens,
        if a.partial.is_some() { ", PARTIAL" } else { "" },
        b.started_utc,
        b.model,
        b.endpoint,
        b.input_tokens,
        b.output_tokens,
        if b.partial.is_some() { ", PARTIAL" } else { "" },
    );
    if (a.input_tokens, a.output_tokens, &a.model) != (b.input_tokens, b.output_tokens, &b.model) {
        out.push_str(
            "note: the runs differ in model or lengths: their numbers are not like for like\n",
        );
    }
    out.push_str(&format!(
        "\n{:>5} {:>21} {:>21} {:>21} {:>21}\n",
        "conc", "out tok/s A → B", "req/s A → B", "TTFT p50 ms A → B", "ITL p50 ms A → B"
    ));
    let ratio = |x: f64, y: f64| {
        if x > 0.0 {
            format!(" ({:.2}x)", y / x)
        } else {
            String::new()
        }
    };
    let p50 = |s: Option<Spread>| s.map_or_else(|| "-".into(), |s| format!("{:.1}", s.p50));
    for la in &a.levels {
        let Some(lb) = b.levels.iter().find(|l| l.concurrency == la.concurrency) else {
            continue;
        };
        if la.status == "not run" || lb.status == "not run" {
            out.push_str(&format!("{:>5}  not run in A or B\n", la.concurrency));
            continue;
        }
        out.push_str(&format!(
            "{:>5} {:>21} {:>21} {:>21} {:>21}\n",
            la.concurrency,
            format!(
                "{:.1} → {:.1}{}",
                la.output_throughput,
                lb.output_throughput,
                ratio(la.output_throughput, lb.output_throughput)
            ),
            format!(
                "{:.2} → {:.2}{}",
                la.request_throughput,
                lb.request_throughput,
                ratio(la.request_throughput, lb.request_throughput)
            ),
            format!("{} → {}", p50(la.ttft_ms), p50(lb.ttft_ms)),
            format!("{} → {}", p50(la.itl_ms), p50(lb.itl_ms)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::serving::plan::Endpoint;

    fn req(ttft: f64, itl: &[f64], out: u64, error: Option<&str>) -> RequestRecord {
        RequestRecord {
            ttft_ms: Some(ttft),
            itl_ms: itl.to_vec(),
            latency_ms: ttft + itl.iter().sum::<f64>(),
            output_tokens: out,
            prompt_tokens: Some(8),
            error: error.map(str::to_string),
        }
    }

    fn record(levels: Vec<LevelRecord>, partial: Option<&str>) -> ServingRecord {
        ServingRecord {
            schema_version: SCHEMA_VERSION,
            started_utc: "2026-01-01T00:00:00Z".into(),
            options: ServingOptions {
                endpoint: Endpoint::parse("http://127.0.0.1:8000").unwrap(),
                endpoint_from: "--url".into(),
                model: None,
                concurrency: vec![1, 4],
                requests: 2,
                input_tokens: 8,
                output_tokens: 3,
                seed: 0,
                timeout_s: 60,
                key: "no key".into(),
            },
            model: "m".into(),
            server: "llamacpp".into(),
            prompt_lengths: "exact".into(),
            levels,
            partial: partial.map(str::to_string),
        }
    }

    #[test]
    fn throughput_counts_finished_requests_over_the_wall_time() {
        let l = LevelRecord {
            concurrency: 1,
            duration_s: 2.0,
            requests: vec![
                req(10.0, &[5.0, 7.0], 3, None),
                req(20.0, &[5.0, 9.0], 3, None),
            ],
        };
        let r = derive(&record(vec![l], None));
        let l = &r.levels[0];
        assert_eq!((l.completed, l.failed, l.status.as_str()), (2, 0, "ok"));
        assert_eq!(l.output_throughput, 3.0);
        assert_eq!(l.request_throughput, 1.0);
        assert_eq!(l.ttft_ms.unwrap().p50, 10.0);
        assert_eq!(l.itl_ms.unwrap().samples, 4);
        assert_eq!(l.itl_ms.unwrap().p99, 9.0);
        assert_eq!(r.levels[1].status, "not run");
        assert!(render(&r).contains("not run"));
    }

    #[test]
    fn a_run_that_stopped_is_partial_and_says_why() {
        let l = LevelRecord {
            concurrency: 1,
            duration_s: 1.0,
            requests: vec![
                req(10.0, &[5.0], 2, None),
                req(10.0, &[], 0, Some("the connection broke")),
            ],
        };
        let r = derive(&record(vec![l], Some("the endpoint died")));
        assert_eq!(r.levels[0].status, "partial");
        assert_eq!(r.levels[0].failed, 1);
        assert_eq!(r.levels[0].output_throughput, 2.0);
        let text = render(&r);
        assert!(
            text.contains("PARTIAL: the run stopped early (the endpoint died)"),
            "{text}"
        );
        assert!(
            text.contains("concurrency 1: the connection broke"),
            "{text}"
        );
        let c = compare(&r, &r);
        assert!(c.contains("A: ") && c.contains(", PARTIAL"), "{c}");
    }
}

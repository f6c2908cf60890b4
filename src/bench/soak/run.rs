//! The soak's load: ask the endpoint what it serves, make one long prompt
//! (each long request rotates it, so no two share a prefix the engine
//! could cache) and a few short ones, one warm-up request, then
//! `concurrency` workers until the duration is up, while every watched
//! node's GTT is read each `sample_s` and the record is saved. A stall (no
//! byte for `stall_s`), the endpoint gone, or Ctrl-C ends the load early;
//! what ran is kept.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::plan::SoakOptions;
use super::record::{GttSample, SCHEMA_VERSION, SoakRecord, SoakRequest};
use crate::bench::serving::client::{self, Failure, Key};
use crate::bench::serving::plan::ServingOptions;
use crate::bench::serving::prompts::{self, Prompt};
use crate::bench::serving::run::{Served, probe, request_body};
use crate::metrics::top;

/// How many different short prompts there are.
const SHORT_PROMPTS: usize = 8;

/// `p` rotated left by `k` tokens (or words).
fn rotated(p: &Prompt, k: usize) -> Prompt {
    match p {
        Prompt::Tokens(t) if !t.is_empty() => {
            let mut t = t.clone();
            let n = t.len();
            t.rotate_left(k % n);
            Prompt::Tokens(t)
        }
        Prompt::Text(s) => {
            let mut w: Vec<&str> = s.split(' ').collect();
            let n = w.len().max(1);
            w.rotate_left(k % n);
            Prompt::Text(w.join(" "))
        }
        other => other.clone(),
    }
}

/// What the endpoint serves, and that the long requests fit it.
async fn served(o: &SoakOptions, key: Option<&Key>) -> anyhow::Result<Served> {
    let ask = ServingOptions {
        endpoint: o.endpoint.clone(),
        endpoint_from: o.endpoint_from.clone(),
        model: o.model.clone(),
        concurrency: vec![o.concurrency],
        requests: o.concurrency,
        input_tokens: 1,
        output_tokens: 1,
        seed: o.seed,
        timeout_s: o.stall_s,
        key: o.key.clone(),
    };
    let served = probe(&ask, key).await.map_err(anyhow::Error::msg)?;
    let need = u64::from(o.context) + u64::from(o.output_tokens);
    if let Some(max) = served.max_model_len
        && need > max
    {
        anyhow::bail!(
            "--context {} + --output-tokens {} = {need} is more than {} serves ({max} tokens, its max_model_len)\n  hint: halobox bench soak --context {}",
            o.context,
            o.output_tokens,
            crate::remote::printable(&served.model),
            max.saturating_sub(u64::from(o.output_tokens))
        );
    }
    Ok(served)
}

/// One reading of every watched node's GTT in use.
async fn read_gtt(o: &SoakOptions, at_s: f64) -> Vec<GttSample> {
    let mut out = Vec::new();
    for w in &o.watched {
        let node = top::Watched {
            addr: w.addr,
            engine: None,
        };
        let read = tokio::task::spawn_blocking(move || top::read_node(node, None)).await;
        let (used_bytes, why) = match read {
            Ok(Ok((r, _))) => match r.gtt {
                Some((used, _)) => (Some(used), None),
                None => (
                    None,
                    Some(format!("{} reports no GTT (no amdgpu card)", w.addr)),
                ),
            },
            Ok(Err(e)) => (None, Some(crate::remote::printable(&e))),
            Err(e) => (None, Some(e.to_string())),
        };
        out.push(GttSample {
            node: w.name.clone(),
            at_s,
            used_bytes,
            why,
        });
    }
    out
}

fn to_request(
    n: u64,
    start_s: f64,
    long: bool,
    t: client::Timing,
    f: Option<Failure>,
) -> SoakRequest {
    SoakRequest {
        n,
        start_s,
        long,
        ttft_ms: t.ttft_ms,
        latency_ms: t.latency_ms,
        output_tokens: t.completion_tokens.unwrap_or(t.chunks),
        stalled: matches!(f, Some(Failure::Timeout(_))),
        error: f.map(|f| f.to_string()),
    }
}

/// The prompts: one long (rotated per request) and a few short, and how
/// their lengths were made.
async fn make_prompts(
    o: &SoakOptions,
    model: &str,
    key: Option<&Key>,
) -> anyhow::Result<(Prompt, Vec<Prompt>, &'static str)> {
    let url = o.endpoint.url();
    let auth = &o.endpoint.authority;
    let (mut long, how) = prompts::build(auth, model, key, 1, o.context as usize, o.seed)
        .await
        .map_err(|e| anyhow::anyhow!("{url}: cannot make the long prompt: {e}"))?;
    let (short, _) = prompts::build(
        auth,
        model,
        key,
        SHORT_PROMPTS,
        o.short_tokens as usize,
        o.seed + 1,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{url}: cannot make the short prompts: {e}"))?;
    Ok((long.remove(0), short, how))
}

/// One short request before the load: a server that cannot answer it is
/// named before anything is timed.
async fn warm_up(
    o: &SoakOptions,
    model: &str,
    key: Option<&Key>,
    short: &Prompt,
) -> anyhow::Result<()> {
    let body = request_body(model, short, o.output_tokens.min(16));
    let (t, f) = client::stream(
        &o.endpoint.authority,
        body,
        key,
        Duration::from_secs(o.stall_s),
    )
    .await;
    match f {
        Some(f) => anyhow::bail!(
            "{}: the warm-up completion failed: {f}\n  hint: `halobox serve status` shows the serve's state; `halobox serve logs` its log",
            o.endpoint.url()
        ),
        None if t.chunks == 0 => anyhow::bail!(
            "{} streamed no token for the warm-up completion: not an OpenAI completion stream",
            o.endpoint.url()
        ),
        None => Ok(()),
    }
}

/// A line for the progress at `at_s`.
fn progress_line(rec: &SoakRecord, at_s: f64, samples: &[GttSample]) -> String {
    let failed = rec.requests.iter().filter(|r| r.error.is_some()).count();
    let gtt: Vec<String> = samples
        .iter()
        .filter_map(|s| {
            s.used_bytes
                .map(|b| format!("{} {:.2} GiB", s.node, b / (1u64 << 30) as f64))
        })
        .collect();
    format!(
        "{at_s:.0} s: {} request(s) ended, {failed} failed{}",
        rec.requests.len(),
        if gtt.is_empty() {
            String::new()
        } else {
            format!("; GTT in use: {}", gtt.join(", "))
        }
    )
}

/// Runs the soak; `saved` gets the record at every GTT reading and at the
/// end. `Err` is a failure before the load (not an OpenAI server, key
/// refused, a context that does not fit, the warm-up failed).
pub async fn run(
    o: &SoakOptions,
    key: Option<&Key>,
    started_utc: String,
    mut progress: impl FnMut(&str),
    saved: impl FnMut(&SoakRecord) -> anyhow::Result<()>,
) -> anyhow::Result<SoakRecord> {
    let served = served(o, key).await?;
    progress(&format!(
        "{} serves {} ({}); making a {}-token prompt and {SHORT_PROMPTS} of {} tokens",
        o.endpoint.url(),
        crate::remote::printable(&served.model),
        served.server,
        o.context,
        o.short_tokens
    ));
    let (long, short, how) = make_prompts(o, &served.model, key).await?;
    warm_up(o, &served.model, key, &short[0]).await?;
    let rec = RefCell::new(SoakRecord {
        schema_version: SCHEMA_VERSION,
        started_utc,
        options: o.clone(),
        model: served.model.clone(),
        server: served.server.clone(),
        prompt_lengths: how.into(),
        requests: vec![],
        gtt: vec![],
        elapsed_s: 0.0,
        ended_early: None,
        finished: false,
    });
    let saved = RefCell::new(saved);
    let save = || (saved.borrow_mut())(&rec.borrow());
    save()?;
    progress(&format!(
        "soaking for {} s at concurrency {} (1 in {} requests long)",
        o.duration_s, o.concurrency, o.long_every
    ));
    let start = Instant::now();
    let deadline = start + Duration::from_secs(o.duration_s);
    let stop: RefCell<Option<String>> = RefCell::new(None);
    let next = Cell::new(0u64);
    let stall = Duration::from_secs(o.stall_s);
    let worker = || async {
        while stop.borrow().is_none() && Instant::now() < deadline {
            let n = next.get() + 1;
            next.set(n);
            let long_one = (n - 1).is_multiple_of(u64::from(o.long_every.max(1)));
            let prompt = if long_one {
                rotated(&long, (n as usize).wrapping_mul(131))
            } else {
                short[n as usize % short.len()].clone()
            };
            let start_s = start.elapsed().as_secs_f64();
            let body = request_body(&served.model, &prompt, o.output_tokens);
            let (t, f) = client::stream(&o.endpoint.authority, body, key, stall).await;
            if let Some(f) = f.as_ref().filter(|f| f.ends_run()) {
                let mut s = stop.borrow_mut();
                if s.is_none() {
                    *s = Some(format!("request {n}: {f}"));
                }
            }
            rec.borrow_mut()
                .requests
                .push(to_request(n, start_s, long_one, t, f));
        }
    };
    let sampler = async {
        loop {
            let at_s = start.elapsed().as_secs_f64();
            let samples = read_gtt(o, at_s).await;
            progress(&progress_line(&rec.borrow(), at_s, &samples));
            {
                let mut r = rec.borrow_mut();
                r.gtt.extend(samples);
                r.elapsed_s = at_s;
            }
            if let Err(e) = save() {
                return e;
            }
            tokio::time::sleep(Duration::from_secs(o.sample_s.max(1))).await;
        }
    };
    let all = join_all((0..o.concurrency).map(|_| worker()));
    tokio::select! {
        _ = all => {}
        e = sampler => return Err(e),
        _ = tokio::signal::ctrl_c() => {
            let mut s = stop.borrow_mut();
            if s.is_none() {
                *s = Some("interrupted (Ctrl-C)".into());
            }
        }
    }
    let at_s = start.elapsed().as_secs_f64();
    let last = read_gtt(o, at_s).await;
    {
        let mut r = rec.borrow_mut();
        r.gtt.extend(last);
        r.elapsed_s = at_s;
        r.ended_early = stop.borrow().clone();
        r.finished = true;
    }
    save()?;
    Ok(rec.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_prompts_rotate_so_no_two_share_a_prefix() {
        let p = Prompt::Tokens((0..10).collect());
        let (a, b) = (rotated(&p, 131), rotated(&p, 262));
        match (a, b) {
            (Prompt::Tokens(a), Prompt::Tokens(b)) => {
                assert_eq!(a.len(), 10);
                assert_ne!(a[0], b[0]);
                let mut s = a.clone();
                s.sort();
                assert_eq!(s, (0..10).collect::<Vec<u64>>());
            }
            _ => panic!("tokens stay tokens"),
        }
        match rotated(&Prompt::Text("a b c".into()), 1) {
            Prompt::Text(t) => assert_eq!(t, "b c a"),
            _ => panic!("text stays text"),
        }
    }
}

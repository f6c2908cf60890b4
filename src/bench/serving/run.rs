//! The run: ask the endpoint what it serves (and that it is an OpenAI
//! server that takes the key), make the prompts, one warm-up request, then
//! each concurrency level. The endpoint dying, freezing, or Ctrl-C ends
//! the run cleanly: what finished is kept and the record says it is
//! partial.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::client::{self, Failure, Key};
use super::plan::ServingOptions;
use super::prompts::{self, Prompt};
use super::record::{LevelRecord, RequestRecord, SCHEMA_VERSION, ServingRecord};
use super::sse::short;

/// What `/v1/models` says about the model to benchmark.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// Its id.
    pub model: String,
    /// `owned_by` (`vllm`, `llamacpp`, …).
    pub server: String,
    /// vLLM's `max_model_len`, when listed.
    pub max_model_len: Option<u64>,
}

/// Reads `/v1/models` (as JSON text) and picks `wanted` or the first model.
pub fn pick_model(url: &str, body: &str, wanted: Option<&str>) -> Result<Served, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|_| {
        format!(
            "{url} is not an OpenAI API server: GET /v1/models answered {}",
            short(body)
        )
    })?;
    let models = v.get("data").and_then(|d| d.as_array()).ok_or_else(|| {
        format!(
            "{url} is not an OpenAI API server: GET /v1/models has no `data` list ({})",
            short(body)
        )
    })?;
    let id = |m: &serde_json::Value| m.get("id").and_then(|i| i.as_str()).map(str::to_string);
    let found = match wanted {
        Some(w) => models.iter().find(|m| id(m).as_deref() == Some(w)),
        None => models.first(),
    };
    let Some(m) = found else {
        let ids: Vec<String> = models.iter().filter_map(id).collect();
        return Err(match wanted {
            Some(w) => format!(
                "{url} does not serve {w}; it serves: {}\n  hint: pass one of them with --model, or drop --model",
                short(&ids.join(", "))
            ),
            None => format!("{url} serves no model (/v1/models is empty)"),
        });
    };
    Ok(Served {
        model: id(m).ok_or_else(|| format!("{url}: a model without an id in /v1/models"))?,
        server: m
            .get("owned_by")
            .and_then(|o| o.as_str())
            .map_or_else(|| "unknown".into(), crate::remote::printable),
        max_model_len: m.get("max_model_len").and_then(|n| n.as_u64()),
    })
}

/// Asks `/v1/models`; every way it can go wrong is an error that says what
/// the endpoint is and what to do.
pub async fn probe(o: &ServingOptions, key: Option<&Key>) -> Result<Served, String> {
    let url = o.endpoint.url();
    let auth = &o.endpoint.authority;
    let hint_status = "  hint: `halobox serve status` shows the serve's endpoint and state";
    let served = match client::json(auth, "/v1/models", None, key, Duration::from_secs(15)).await {
        Ok((200, body)) => pick_model(&url, &body, o.model.as_deref())?,
        Ok((401 | 403, body)) => {
            return Err(format!(
                "{url} refused the API key ({}; key: {})\n  hint: export the serve's key as VLLM_API_KEY or LLAMA_API_KEY, or pass --cluster with the cluster file whose serve this is",
                crate::bench::serving::sse::short(&body),
                o.key
            ));
        }
        Ok((code, body)) => {
            return Err(format!(
                "{url} is not an OpenAI API server: GET /v1/models answered HTTP {code} ({})\n{hint_status}",
                short(&body)
            ));
        }
        Err(Failure::Unreachable(e)) => {
            return Err(format!(
                "nothing answers at {url} ({e}): is the serve running?\n{hint_status}"
            ));
        }
        Err(Failure::Protocol(e)) => {
            return Err(format!("{url} is not an OpenAI API server: {e}"));
        }
        Err(Failure::NotOurs(why)) => {
            return Err(format!(
                "{url}: the API key was not sent: {why}\n{}",
                client::not_ours_hint(auth, &why)
            ));
        }
        Err(e) => return Err(format!("{url}: GET /v1/models: {e}\n{hint_status}")),
    };
    if let Some(max) = served.max_model_len {
        let need = u64::from(o.input_tokens) + u64::from(o.output_tokens);
        if need > max {
            return Err(format!(
                "--input-tokens {} + --output-tokens {} = {need} is more than {} serves ({max} tokens, its max_model_len)\n  hint: halobox bench serving --input-tokens {} --output-tokens {}",
                o.input_tokens,
                o.output_tokens,
                crate::remote::printable(&served.model),
                max / 2,
                max / 4
            ));
        }
    }
    Ok(served)
}

/// The body of one streamed completion.
pub fn request_body(model: &str, prompt: &Prompt, output_tokens: u32) -> String {
    serde_json::json!({
        "model": model,
        "prompt": prompt.json(),
        "max_tokens": output_tokens,
        "min_tokens": output_tokens,
        "ignore_eos": true,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
    .to_string()
}

fn to_record(t: client::Timing, f: Option<Failure>) -> RequestRecord {
    RequestRecord {
        ttft_ms: t.ttft_ms,
        itl_ms: t.itl_ms,
        latency_ms: t.latency_ms,
        output_tokens: t.completion_tokens.unwrap_or(t.chunks),
        prompt_tokens: t.prompt_tokens,
        error: f.map(|f| f.to_string()),
    }
}

/// One level: `concurrency` workers share `prompts`; the first failure
/// that means the endpoint is gone sets `stop` (with why) and no new
/// request starts; Ctrl-C sets it too (requests in flight are dropped).
async fn level(
    o: &ServingOptions,
    model: &str,
    key: Option<&Key>,
    prompts: &[Prompt],
    concurrency: u32,
    stop: &RefCell<Option<String>>,
) -> LevelRecord {
    let next = Cell::new(0usize);
    let done = RefCell::new(Vec::new());
    let idle = Duration::from_secs(o.timeout_s);
    let worker = || async {
        loop {
            let i = next.get();
            if stop.borrow().is_some() || i >= prompts.len() {
                break;
            }
            next.set(i + 1);
            let body = request_body(model, &prompts[i], o.output_tokens);
            let (t, f) = client::stream(&o.endpoint.authority, body, key, idle).await;
            if let Some(f) = f.as_ref().filter(|f| f.ends_run()) {
                let mut s = stop.borrow_mut();
                if s.is_none() {
                    *s = Some(format!(
                        "request {} at concurrency {concurrency}: {f}",
                        i + 1
                    ));
                }
            }
            done.borrow_mut().push(to_record(t, f));
        }
    };
    let start = Instant::now();
    let all = join_all((0..concurrency).map(|_| worker()));
    tokio::select! {
        _ = all => {}
        _ = tokio::signal::ctrl_c() => {
            let mut s = stop.borrow_mut();
            if s.is_none() {
                *s = Some(format!("interrupted (Ctrl-C) at concurrency {concurrency}"));
            }
        }
    }
    LevelRecord {
        concurrency,
        duration_s: start.elapsed().as_secs_f64(),
        requests: done.into_inner(),
    }
}

/// Runs the benchmark; `saved` gets the record after each level (so a
/// halobox that dies keeps what ran). `Err` is a failure before the load
/// (not an OpenAI server, key refused, the warm-up failed).
pub async fn run(
    o: &ServingOptions,
    key: Option<&Key>,
    started_utc: String,
    mut progress: impl FnMut(&str),
    mut saved: impl FnMut(&ServingRecord) -> anyhow::Result<()>,
) -> anyhow::Result<ServingRecord> {
    let served = probe(o, key).await.map_err(anyhow::Error::msg)?;
    progress(&format!(
        "{} serves {} ({}); making {} prompts of {} tokens",
        o.endpoint.url(),
        crate::remote::printable(&served.model),
        served.server,
        o.concurrency.len() as u32 * o.requests + 1,
        o.input_tokens
    ));
    let count = o.concurrency.len() * o.requests as usize + 1;
    let (prompts, how) = prompts::build(
        &o.endpoint.authority,
        &served.model,
        key,
        count,
        o.input_tokens as usize,
        o.seed,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{}: cannot make the prompts: {e}", o.endpoint.url()))?;
    let (t, f) = client::stream(
        &o.endpoint.authority,
        request_body(&served.model, &prompts[0], o.output_tokens),
        key,
        Duration::from_secs(o.timeout_s),
    )
    .await;
    if let Some(f) = f {
        let hint = match &f {
            Failure::Status(400 | 422, _) => {
                "\n  hint: shorter lengths fit: halobox bench serving --input-tokens 128 --output-tokens 128"
            }
            _ => {
                "\n  hint: `halobox serve status` shows the serve's state; `halobox serve logs` its log"
            }
        };
        anyhow::bail!(
            "{}: the warm-up completion failed: {f}{hint}",
            o.endpoint.url()
        );
    }
    if t.chunks == 0 {
        anyhow::bail!(
            "{} streamed no token for the warm-up completion: not an OpenAI completion stream",
            o.endpoint.url()
        );
    }
    let mut rec = ServingRecord {
        schema_version: SCHEMA_VERSION,
        started_utc,
        options: o.clone(),
        model: served.model.clone(),
        server: served.server.clone(),
        prompt_lengths: how.into(),
        levels: vec![],
        partial: None,
    };
    saved(&rec)?;
    let stop = RefCell::new(None);
    let per = o.requests as usize;
    for (i, &c) in o.concurrency.iter().enumerate() {
        progress(&format!(
            "concurrency {c}: {} requests of {} + {} tokens",
            o.requests, o.input_tokens, o.output_tokens
        ));
        let slice = &prompts[1 + i * per..1 + (i + 1) * per];
        let l = level(o, &served.model, key, slice, c, &stop).await;
        rec.levels.push(l);
        rec.partial = stop.borrow().clone();
        saved(&rec)?;
        if rec.partial.is_some() {
            break;
        }
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_lists() {
        let vllm = r#"{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","owned_by":"vllm","max_model_len":2048}]}"#;
        let s = pick_model("U", vllm, None).unwrap();
        assert_eq!(
            (s.model.as_str(), s.server.as_str(), s.max_model_len),
            ("Qwen/Qwen3-0.6B", "vllm", Some(2048))
        );
        let e = pick_model("U", vllm, Some("other")).unwrap_err();
        assert!(
            e.contains("does not serve other; it serves: Qwen/Qwen3-0.6B"),
            "{e}"
        );
        assert!(
            pick_model("U", "<html>", None)
                .unwrap_err()
                .contains("U is not an OpenAI API server")
        );
        assert!(
            pick_model("U", r#"{"models":[]}"#, None)
                .unwrap_err()
                .contains("no `data` list")
        );
        assert!(
            pick_model("U", r#"{"data":[]}"#, None)
                .unwrap_err()
                .contains("serves no model")
        );
    }

    #[test]
    fn the_request_asks_for_a_fixed_length_stream() {
        let b = request_body("m", &Prompt::Tokens(vec![1, 2]), 16);
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["prompt"], serde_json::json!([1, 2]));
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(16), Some(16))
        );
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
    }
}

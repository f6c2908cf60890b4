//! Golden tokens: when a serve first answers, a few greedy completions of
//! fixed prompts (three short ones, and one past 4k tokens where the
//! model's context allows, else near its limit) are recorded beside the
//! serve record, with the engine's version. `serve golden` asks the same
//! prompts again and says whether the serve still gives them, and where
//! not, the first token that differs (`serve status` shows the last such
//! check); an upgrade is judged by them.
//!
//! The prompts and the judgement are pure ([`prompt_plan`], [`judge`]);
//! [`record`] and [`check`] ask the engine through [`Api`]: the serve's
//! own requests ([`super::api_key`]), the key sent only to a listener
//! proven this user's.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::api_key;
use crate::bench::serving::prompts;

/// Tokens each golden completion asks for.
pub const MAX_TOKENS: u32 = 16;
/// The long prompt's length when the context allows it: past 4k tokens,
/// where long-context faults show (llama.cpp's TOP_K crash past 4096).
pub const LONG_TOKENS: u64 = 4608;
/// Tokens of the serve's context the long prompt leaves to other requests
/// while it runs (an eighth of a smaller context): llama-server's slots
/// share one KV cache of the context's
/// size, so a long prompt that filled it but for its own output made any
/// user's request during a check (or the check, during a user's request)
/// fail with "Context size has been exceeded", and `cluster refresh
/// --verify` rolled back a good image of a serve in use.
pub const LEFT_FOR_OTHERS: u64 = 256;

/// The tokens of a `context`-token serve left to other requests beside a
/// check's or a soak's own: [`LEFT_FOR_OTHERS`], or an eighth of a smaller
/// context.
pub fn left_for_others(context: u64) -> u64 {
    (context / 8).min(LEFT_FOR_OTHERS)
}

/// The short prompts, fixed.
const SHORT: [&str; 3] = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Here is a list of the planets of the solar system, in order from the Sun:",
];
/// How long one golden completion may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// One golden prompt and what the serve answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Golden {
    /// `short-1`…, `long-4608`.
    pub name: String,
    /// The prompt as sent (text, or token ids for the long one).
    pub prompt: serde_json::Value,
    /// The completion's text.
    pub text: String,
    /// The completion's token ids (the server's `/tokenize` of its text),
    /// when the server has one.
    pub tokens: Option<Vec<u64>>,
}

/// The recorded set (`KEY.golden.json` in the state folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoldenSet {
    /// The model as the API names it.
    pub model: String,
    /// The engine (`vllm`, `llama.cpp`).
    pub engine: String,
    /// The engine's version as its API said (`/version`, `/props`).
    pub engine_version: Option<String>,
    /// When they were recorded, UTC.
    pub recorded_utc: String,
    /// The prompts and their completions.
    pub prompts: Vec<Golden>,
    /// The last check against them (`serve golden`).
    #[serde(default)]
    pub last_check: Option<Check>,
}

/// Where one prompt's completion now differs from the recorded one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Difference {
    /// The prompt's name.
    pub prompt: String,
    /// The first differing token, from 0.
    pub token: usize,
    /// The recorded completion from that token on (a few characters).
    pub recorded: String,
    /// What the serve answers now from there.
    pub now: String,
}

/// The serve against its golden tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// When the set was recorded.
    pub recorded_utc: String,
    /// When this check ran.
    pub checked_utc: String,
    /// How many prompts.
    pub prompts: usize,
    /// How many still give the recorded completion.
    pub same: usize,
    /// The ones that do not.
    pub differences: Vec<Difference>,
    /// `(recorded, now)` when the engine's version changed.
    pub engine_changed: Option<(String, String)>,
}

/// The prompts for a serve whose context is `max_model_len` tokens: the
/// short ones, and the long one's length (`None`: the context is too short
/// for one longer than the short ones).
pub fn prompt_plan(max_model_len: Option<u64>) -> (Vec<(String, String)>, Option<u64>) {
    let short = SHORT
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("short-{}", i + 1), p.to_string()))
        .collect();
    let room = max_model_len.map_or(LONG_TOKENS, |m| {
        m.saturating_sub(u64::from(MAX_TOKENS) + 8 + left_for_others(m))
    });
    let long = room.min(LONG_TOKENS);
    (short, (long >= 256).then_some(long))
}

/// The first token where `now` differs from `recorded` (`None`: the same).
/// Token ids when both have them, else characters.
pub fn first_difference(recorded: &Golden, now: &Golden) -> Option<Difference> {
    let index = match (&recorded.tokens, &now.tokens) {
        (Some(a), Some(b)) => {
            let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            (i < a.len().max(b.len())).then_some(i)?
        }
        _ => {
            let i = recorded
                .text
                .chars()
                .zip(now.text.chars())
                .take_while(|(x, y)| x == y)
                .count();
            (recorded.text != now.text).then_some(i)?
        }
    };
    let char_at = recorded
        .text
        .chars()
        .zip(now.text.chars())
        .take_while(|(x, y)| x == y)
        .count();
    let from = |t: &str| -> String {
        let rest: String = t.chars().skip(char_at).take(24).collect();
        crate::remote::printable(&rest)
    };
    Some(Difference {
        prompt: recorded.name.clone(),
        token: index,
        recorded: from(&recorded.text),
        now: from(&now.text),
    })
}

/// Judges the completions `now` (in the set's order) against `set`.
pub fn judge(
    set: &GoldenSet,
    now: &[Golden],
    version_now: Option<&str>,
    checked_utc: &str,
) -> Check {
    let differences: Vec<Difference> = set
        .prompts
        .iter()
        .zip(now)
        .filter_map(|(a, b)| first_difference(a, b))
        .collect();
    let engine_changed = match (set.engine_version.as_deref(), version_now) {
        (Some(a), Some(b)) if a != b => Some((a.to_string(), b.to_string())),
        _ => None,
    };
    Check {
        recorded_utc: set.recorded_utc.clone(),
        checked_utc: checked_utc.to_string(),
        prompts: set.prompts.len(),
        same: set.prompts.len() - differences.len(),
        differences,
        engine_changed,
    }
}

/// The check as lines for `serve status`.
pub fn render(c: &Check) -> String {
    if c.differences.is_empty() {
        return format!(
            "  golden:   {} of {} prompts give the completions recorded {}\n",
            c.same, c.prompts, c.recorded_utc
        );
    }
    let mut s = format!(
        "  golden:   {} of {} prompts differ from the completions recorded {}\n",
        c.differences.len(),
        c.prompts,
        c.recorded_utc
    );
    for d in &c.differences {
        s.push_str(&format!(
            "            {}: first differing token #{}: recorded {:?}, now {:?}\n",
            d.prompt, d.token, d.recorded, d.now
        ));
    }
    if let Some((a, b)) = &c.engine_changed {
        s.push_str(&format!(
            "            the engine changed ({a} -> {b}): other kernels can change greedy tokens; record them as the golden set with `halobox serve golden --record`\n"
        ));
    }
    s
}

/// What `serve status` shows of the recorded set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// When the set was recorded.
    pub recorded_utc: String,
    /// How many prompts.
    pub prompts: usize,
    /// The engine and its version then.
    pub engine: String,
    /// The engine's version then.
    pub engine_version: Option<String>,
    /// The last check against it.
    pub last_check: Option<Check>,
}

/// The set without its prompts and completions.
pub fn summarize(set: &GoldenSet) -> Summary {
    Summary {
        recorded_utc: set.recorded_utc.clone(),
        prompts: set.prompts.len(),
        engine: set.engine.clone(),
        engine_version: set.engine_version.clone(),
        last_check: set.last_check.clone(),
    }
}

/// `serve status`'s line about the recorded set and its last check.
pub fn summary(set: &Summary) -> String {
    let head = format!(
        "  golden:   {} prompts recorded {} ({} {})",
        set.prompts,
        set.recorded_utc,
        set.engine,
        set.engine_version.as_deref().unwrap_or("version unknown")
    );
    match &set.last_check {
        None => format!("{head}; not checked since: `halobox serve golden` checks them\n"),
        Some(c) if c.differences.is_empty() => format!(
            "{head}; checked {}: the serve gave all {} again\n",
            c.checked_utc, c.prompts
        ),
        Some(c) => format!(
            "{head}; checked {}: {} of {} differ (the first: {} at token #{}): `halobox serve golden` shows them\n",
            c.checked_utc,
            c.differences.len(),
            c.prompts,
            c.differences[0].prompt,
            c.differences[0].token
        ),
    }
}

/// The serve's API as golden tokens ask it: every request through
/// [`super::api_key`], so the key goes only to a listener proven this
/// user's (the serve's engine), never to another process on its port.
pub struct Api<'a> {
    /// Where the API listens.
    pub addr: SocketAddr,
    /// Its key, when it wants one.
    pub key: Option<&'a str>,
}

impl Api<'_> {
    fn get(&self, path: &str, timeout: Duration) -> Result<(u16, String), String> {
        api_key::get(self.addr, path, self.key, timeout)
            .map(|r| (r.status, r.body))
            .map_err(|e| e.to_string())
    }

    fn post(&self, path: &str, body: &str, timeout: Duration) -> Result<(u16, String), String> {
        api_key::post_json(self.addr, path, body, self.key, timeout)
            .map(|r| (r.status, r.body))
            .map_err(|e| e.to_string())
    }

    /// `text`'s token ids (`None`: the server has no `/tokenize`).
    fn tokenize(&self, model: &str, text: &str) -> Result<Option<Vec<u64>>, String> {
        let (code, body) = self
            .post(
                "/tokenize",
                &prompts::tokenize_body(model, text),
                Duration::from_secs(60),
            )
            .map_err(|e| format!("/tokenize: {e}"))?;
        prompts::tokens_in(code, &body)
    }
}

/// The recorded serve of `cluster` as golden tokens need it: its API's
/// address, its key, its model as the API names it, and its engine.
fn serve_of(cluster: &Path) -> anyhow::Result<(SocketAddr, Option<String>, String, String)> {
    let rec = super::state::load(cluster).ok_or_else(|| {
        crate::error::UsageError(format!(
            "no serve is recorded for {}\n  hint: start one with `halobox serve MODEL --detach`",
            cluster.display()
        ))
    })?;
    let addr: SocketAddr = rec
        .endpoint
        .trim_start_matches("http://")
        .parse()
        .map_err(|_| {
            anyhow::anyhow!(
                "the serve record's endpoint {:?} is not HOST:PORT",
                rec.endpoint
            )
        })?;
    let from = crate::bench::serving::key::key_from(
        false,
        Some(&rec),
        Some(cluster),
        crate::bench::serving::key::is_set,
    );
    let key = crate::bench::serving::key::load_key(&from)?.map(|k| k.0);
    let api = Api {
        addr,
        key: key.as_deref(),
    };
    let hint = "\n  hint: `halobox serve status` shows the serve's state";
    let (code, body) = api
        .get("/v1/models", Duration::from_secs(15))
        .map_err(|e| anyhow::anyhow!("{}: GET /v1/models: {e}{hint}", rec.endpoint))?;
    let model = crate::bench::serving::run::pick_model(&rec.endpoint, &body, None)
        .map(|s| s.model)
        .map_err(|e| anyhow::anyhow!("{e} (HTTP {code}){hint}"))?;
    Ok((addr, key, model, rec.engine))
}

/// The context length of `cluster`'s recorded serve, as its API lists it
/// (`None`: no serve answers, or it lists none).
pub fn serve_context(cluster: &Path) -> Option<u64> {
    let (addr, key, model, _) = serve_of(cluster).ok()?;
    context_of(
        &Api {
            addr,
            key: key.as_deref(),
        },
        &model,
    )
}

/// What `serve golden` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Outcome {
    /// A new set was recorded (none was, the model changed, or `--record`).
    Recorded(Summary),
    /// The serve was checked against the recorded set.
    Checked(Check),
}

/// `serve golden`: records the set when there is none for this model (or
/// `again`), else checks the serve against it and keeps the check.
pub fn run(cluster: &Path, again: bool) -> anyhow::Result<Outcome> {
    let (addr, key, model, engine) = serve_of(cluster)?;
    let api = Api {
        addr,
        key: key.as_deref(),
    };
    match load(cluster).filter(|s| s.model == model && !again) {
        Some(mut set) => {
            let c = check(&api, &set).map_err(anyhow::Error::msg)?;
            set.last_check = Some(c.clone());
            save(cluster, &set)?;
            Ok(Outcome::Checked(c))
        }
        None => {
            let set = record(&api, &model, &engine).map_err(anyhow::Error::msg)?;
            save(cluster, &set)?;
            Ok(Outcome::Recorded(summarize(&set)))
        }
    }
}

/// Records the set for a serve that just answered, unless one is recorded
/// for this model already; what to say about it.
pub fn record_first(cluster: &Path, api: &Api, model: &str, engine: &str) -> Option<String> {
    if load(cluster).is_some_and(|s| s.model == model) {
        return None;
    }
    Some(match record(api, model, engine) {
        Ok(set) => match save(cluster, &set) {
            Ok(()) => format!(
                "recorded {} golden completions (greedy; {}) for `halobox serve golden` and upgrades to compare against\n",
                set.prompts.len(),
                set.prompts
                    .iter()
                    .map(|g| g.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(e) => format!("warning: cannot record the golden completions: {e}\n"),
        },
        Err(e) => format!("warning: the golden completions were not recorded: {e}\n"),
    })
}

fn path(cluster: &Path) -> Option<std::path::PathBuf> {
    super::state::file(cluster, "golden.json")
}

/// The set recorded for `cluster`'s serve.
pub fn load(cluster: &Path) -> Option<GoldenSet> {
    let text = std::fs::read_to_string(path(cluster)?).ok()?;
    serde_json::from_str(&text).ok()
}

/// Records `set` for `cluster` (0600, written beside, then renamed).
pub fn save(cluster: &Path, set: &GoldenSet) -> std::io::Result<()> {
    super::state::write(
        path(cluster),
        &serde_json::to_string_pretty(set).expect("serialises"),
    )
}

/// One greedy completion of `prompt`, with its tokens.
fn complete(
    api: &Api,
    model: &str,
    name: &str,
    prompt: serde_json::Value,
) -> Result<Golden, String> {
    let body = serde_json::json!({
        "model": model, "prompt": prompt, "max_tokens": MAX_TOKENS,
        "temperature": 0.0, "top_k": 1, "seed": 0, "stream": false,
        // llama.cpp: no reuse of a slot's cache, so a prompt asked again is
        // computed the same way as the first time (vLLM ignores the field).
        "cache_prompt": false,
    });
    let (code, text) = api
        .post("/v1/completions", &body.to_string(), ASK_TIMEOUT)
        .map_err(|e| format!("{name}: {e}"))?;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let Some(out) = v.pointer("/choices/0/text").and_then(|t| t.as_str()) else {
        return Err(format!(
            "{name}: HTTP {code}: {}",
            crate::bench::serving::sse::short(&text)
        ));
    };
    Ok(Golden {
        name: name.to_string(),
        prompt,
        text: out.to_string(),
        tokens: api.tokenize(model, out).ok().flatten(),
    })
}

/// The engine's version as its API says it (vLLM `/version`, llama.cpp
/// `/props` `build_info`).
fn version(api: &Api) -> Option<String> {
    [("/version", "/version"), ("/props", "/build_info")]
        .iter()
        .find_map(|(path, field)| {
            let (code, body) = api.get(path, Duration::from_secs(10)).ok()?;
            let v: serde_json::Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
            v.pointer(field)
                .and_then(|x| x.as_str())
                .map(crate::remote::printable)
        })
}

/// Asks every prompt of `prompts` again, in order.
fn ask_all(
    api: &Api,
    model: &str,
    prompts: &[(String, serde_json::Value)],
) -> Result<Vec<Golden>, String> {
    prompts
        .iter()
        .map(|(name, p)| complete(api, model, name, p.clone()))
        .collect()
}

/// The context length `/v1/models` lists for `model` (vLLM's
/// `max_model_len`; llama.cpp's `/props` `n_ctx` per slot).
fn context_of(api: &Api, model: &str) -> Option<u64> {
    if let Ok((200, body)) = api.get("/v1/models", Duration::from_secs(15))
        && let Ok(s) = crate::bench::serving::run::pick_model("the serve", &body, Some(model))
        && s.max_model_len.is_some()
    {
        return s.max_model_len;
    }
    let (code, body) = api.get("/props", Duration::from_secs(15)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok().filter(|_| code == 200)?;
    v.pointer("/default_generation_settings/n_ctx")
        .and_then(|n| n.as_u64())
}

/// The long prompt: exactly `n` token ids of fixed random words through the
/// server's `/tokenize`, else `n` words.
fn long_prompt(api: &Api, model: &str, n: usize) -> Result<serde_json::Value, String> {
    let mut rng = prompts::Rng::new(4242);
    let mut text = rng.words(n + 8);
    for _ in 0..4 {
        match api.tokenize(model, &text)? {
            None => return Ok(serde_json::json!(rng.words(n))),
            Some(mut ids) if ids.len() >= n => {
                ids.truncate(n);
                return Ok(serde_json::json!(ids));
            }
            Some(_) => {
                text.push(' ');
                text.push_str(&rng.words(n));
            }
        }
    }
    Err(format!(
        "/tokenize made fewer than {n} tokens of {} words",
        text.split(' ').count()
    ))
}

/// Records the golden completions of the serve at `api` (its model, as
/// the API names it, `model`).
pub fn record(api: &Api, model: &str, engine: &str) -> Result<GoldenSet, String> {
    let (short, long) = prompt_plan(context_of(api, model));
    let mut asked: Vec<(String, serde_json::Value)> = short
        .into_iter()
        .map(|(n, p)| (n, serde_json::json!(p)))
        .collect();
    if let Some(n) = long {
        asked.push((format!("long-{n}"), long_prompt(api, model, n as usize)?));
    }
    Ok(GoldenSet {
        model: model.to_string(),
        engine: engine.to_string(),
        engine_version: version(api),
        recorded_utc: crate::bench::run::utc_now().0,
        prompts: ask_all(api, model, &asked)?,
        last_check: None,
    })
}

/// Asks the recorded prompts of `set` again and judges the answers.
pub fn check(api: &Api, set: &GoldenSet) -> Result<Check, String> {
    let asked: Vec<(String, serde_json::Value)> = set
        .prompts
        .iter()
        .map(|g| (g.name.clone(), g.prompt.clone()))
        .collect();
    let now = ask_all(api, &set.model, &asked)?;
    Ok(judge(
        set,
        &now,
        version(api).as_deref(),
        &crate::bench::run::utc_now().0,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str, text: &str, tokens: Option<Vec<u64>>) -> Golden {
        Golden {
            name: name.into(),
            prompt: serde_json::json!("p"),
            text: text.into(),
            tokens,
        }
    }

    #[test]
    fn the_long_prompt_goes_past_4k_where_the_context_allows() {
        assert_eq!(prompt_plan(Some(131_072)).1, Some(LONG_TOKENS));
        assert_eq!(prompt_plan(None).1, Some(LONG_TOKENS));
        assert_eq!(
            prompt_plan(Some(2048)).1,
            Some(2048 - 24 - LEFT_FOR_OTHERS),
            "near the limit, with room for another request"
        );
        assert_eq!(prompt_plan(Some(512)).1, Some(512 - 24 - 64));
        assert_eq!(prompt_plan(Some(128)).1, None);
        assert_eq!(prompt_plan(Some(2048)).0.len(), 3);
    }

    #[test]
    fn the_first_differing_token_is_named() {
        let a = g("short-1", " Paris. It is", Some(vec![1, 2, 3, 4]));
        assert_eq!(first_difference(&a, &a.clone()), None);
        let b = g("short-1", " Paris, the", Some(vec![1, 9, 10]));
        let d = first_difference(&a, &b).unwrap();
        assert_eq!(
            (d.token, d.recorded.as_str(), d.now.as_str()),
            (1, ". It is", ", the")
        );
        let shorter = g("short-1", " Paris.", Some(vec![1, 2]));
        assert_eq!(first_difference(&a, &shorter).unwrap().token, 2);
        let untokenized = g("short-1", " Paris! It", None);
        assert_eq!(first_difference(&a, &untokenized).unwrap().token, 6);
    }

    #[test]
    fn a_judgement_counts_and_names_the_engine_change() {
        let set = GoldenSet {
            model: "m".into(),
            engine: "vllm".into(),
            engine_version: Some("0.32.0".into()),
            recorded_utc: "2026-12-06T00:00:00Z".into(),
            prompts: vec![
                g("short-1", "a b", Some(vec![1, 2])),
                g("long-4608", "c", Some(vec![3])),
            ],
            last_check: None,
        };
        let same = judge(&set, &set.prompts, Some("0.32.0"), "T");
        assert_eq!(
            (
                same.same,
                same.differences.len(),
                same.engine_changed.clone()
            ),
            (2, 0, None)
        );
        assert!(render(&same).contains("2 of 2 prompts give the completions recorded"));
        let now = vec![set.prompts[0].clone(), g("long-4608", "d", Some(vec![4]))];
        let c = judge(&set, &now, Some("0.33.0"), "T");
        assert_eq!(c.same, 1);
        assert_eq!(c.differences[0].prompt, "long-4608");
        let text = render(&c);
        assert!(
            text.contains("long-4608: first differing token #0"),
            "{text}"
        );
        let mut checked = set.clone();
        checked.last_check = Some(c.clone());
        assert!(
            summary(&summarize(&checked))
                .contains("1 of 2 differ (the first: long-4608 at token #0)")
        );
        assert!(summary(&summarize(&set)).contains("not checked since"));
        assert!(
            text.contains("the engine changed (0.32.0 -> 0.33.0)"),
            "{text}"
        );
    }
}

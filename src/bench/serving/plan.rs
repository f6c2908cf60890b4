//! What `bench serving` will do, decided from the flags alone: the
//! endpoint, the concurrency levels, the lengths, where the key comes from
//! (never the key).

use serde::{Deserialize, Serialize};

/// Most requests in flight at once.
pub const MAX_CONCURRENCY: u32 = 256;

/// An OpenAI-compatible endpoint: `http://HOST:PORT` (a trailing `/v1` is
/// dropped: the paths below add it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// `HOST:PORT`.
    pub authority: String,
}

impl Endpoint {
    /// `http://HOST:PORT[/v1][/]` → the endpoint; anything else is an error
    /// that says what to pass.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = if let Some(r) = url.strip_prefix("http://") {
            r
        } else if url.starts_with("https://") {
            return Err(format!(
                "{url}: https is not supported (`halobox serve` answers plain HTTP on the data plane): pass http://HOST:PORT"
            ));
        } else {
            return Err(format!("{url}: not an http:// URL: pass http://HOST:PORT"));
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = path.trim_end_matches('/');
        if !(path.is_empty() || path == "v1") {
            return Err(format!(
                "{url}: the path /{path} is not an OpenAI API root: pass http://HOST:PORT (or …/v1)"
            ));
        }
        let port_ok = authority
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok || authority.contains(['@', '?', '#', ' ']) {
            return Err(format!(
                "{url}: expected http://HOST:PORT with a port (e.g. http://10.0.0.1:8000)"
            ));
        }
        Ok(Endpoint {
            authority: authority.to_string(),
        })
    }

    /// `http://HOST:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.authority)
    }
}

/// The concurrency levels of `--concurrency 1,4,8`: each from 1 to
/// [`MAX_CONCURRENCY`], no repeats, in the order given.
pub fn parse_levels(list: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for word in list.split(',').map(str::trim) {
        let n: u32 = word.parse().map_err(|_| {
            format!("--concurrency {list}: `{word}` is not a number (e.g. --concurrency 1,4,8)")
        })?;
        if !(1..=MAX_CONCURRENCY).contains(&n) {
            return Err(format!(
                "--concurrency {list}: {n} is out of range (1 to {MAX_CONCURRENCY})"
            ));
        }
        if out.contains(&n) {
            return Err(format!("--concurrency {list}: {n} is given twice"));
        }
        out.push(n);
    }
    Ok(out)
}

/// What was asked (saved with the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingOptions {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Where the endpoint came from (`--url`, or the serve recorded for a cluster file).
    pub endpoint_from: String,
    /// `--model` (default: the first model `/v1/models` lists).
    pub model: Option<String>,
    /// Concurrency levels, in order.
    pub concurrency: Vec<u32>,
    /// Requests per level.
    pub requests: u32,
    /// Prompt length in tokens.
    pub input_tokens: u32,
    /// Output length in tokens (end of sequence ignored).
    pub output_tokens: u32,
    /// Seed of the random prompts.
    pub seed: u64,
    /// Seconds one request may take.
    pub timeout_s: u64,
    /// Where the API key comes from (never the key).
    pub key: String,
}

impl ServingOptions {
    /// Checks what the flags cannot say alone.
    pub fn check(&self) -> Result<(), String> {
        if let Some(&c) = self.concurrency.iter().max()
            && self.requests < c
        {
            return Err(format!(
                "--requests {} is below --concurrency {c}: that level would never have {c} requests in flight\n  hint: halobox bench serving --requests {}",
                self.requests,
                c * 4
            ));
        }
        Ok(())
    }
}

/// The plan as text (`--dry-run`).
pub fn render(o: &ServingOptions) -> String {
    let levels: Vec<String> = o.concurrency.iter().map(u32::to_string).collect();
    format!(
        "bench serving plan (nothing is sent with --dry-run):\n  endpoint:     {} ({})\n  model:        {}\n  key:          {}\n  prompts:      {} random tokens each (exact through the server's /tokenize, else about one word a token), seed {}\n  outputs:      {} tokens each (max_tokens, min_tokens, ignore_eos)\n  load:         concurrency {}, {} streamed /v1/completions per level, after one warm-up request\n  measures:     time to first token, inter-token latency (p50/p99), output tokens/s, requests/s\n  timeout:      {} s per request; a server that stops answering ends the run, partial results kept\n",
        o.endpoint.url(),
        o.endpoint_from,
        o.model
            .as_deref()
            .unwrap_or("the first one /v1/models lists"),
        o.key,
        o.input_tokens,
        o.seed,
        o.output_tokens,
        levels.join(", "),
        o.requests,
        o.timeout_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let e = Endpoint::parse("http://10.0.0.1:8000/v1/").unwrap();
        assert_eq!(e.url(), "http://10.0.0.1:8000");
        assert_eq!(
            Endpoint::parse("http://localhost:8000").unwrap().authority,
            "localhost:8000"
        );
        assert!(
            Endpoint::parse("https://x:1")
                .unwrap_err()
                .contains("https is not supported")
        );
        assert!(
            Endpoint::parse("10.0.0.1:8000")
                .unwrap_err()
                .contains("http://HOST:PORT")
        );
        assert!(
            Endpoint::parse("http://10.0.0.1")
                .unwrap_err()
                .contains("with a port")
        );
        assert!(
            Endpoint::parse("http://h:8000/v2")
                .unwrap_err()
                .contains("/v2")
        );
        assert!(Endpoint::parse("http://u@h:8000").is_err());
    }

    #[test]
    fn levels() {
        assert_eq!(parse_levels("1,4,8").unwrap(), vec![1, 4, 8]);
        assert_eq!(parse_levels(" 2 ").unwrap(), vec![2]);
        assert!(
            parse_levels("1,x")
                .unwrap_err()
                .contains("`x` is not a number")
        );
        assert!(parse_levels("0").unwrap_err().contains("out of range"));
        assert!(parse_levels("4,4").unwrap_err().contains("twice"));
        assert!(parse_levels("1,,2").is_err());
    }
}

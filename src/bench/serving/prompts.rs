//! Random prompts of a fixed length: random words from a seeded generator,
//! cut to exactly N tokens by the server's own `/tokenize` (vLLM and
//! llama.cpp's llama-server both have it) and sent as token ids; a server
//! without it gets text of N words (about one token a word).

use std::time::Duration;

use super::client::{self, Key};

/// Common words, most of them one token in the usual vocabularies.
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "at", "be",
    "this", "have", "from", "or", "one", "had", "by", "word", "but", "not", "what", "all", "were",
    "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do", "how",
    "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so",
    "some", "her", "would", "make", "like", "him", "into", "time", "has", "look", "two", "more",
    "write", "go", "see", "number", "no", "way", "could", "people", "my", "than", "first", "water",
    "been", "call", "who", "oil", "its", "now", "find", "long", "down", "day", "did", "get",
    "come", "made", "may", "part", "river", "stone", "light", "green", "cloud", "house", "bread",
    "music", "north", "paper", "quiet", "table",
];

/// A small seeded generator (xorshift64*): the same seed, the same prompts.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `n` random words, space-separated.
    pub fn words(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| WORDS[(self.next() % WORDS.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One prompt as sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// Token ids, exactly the asked length.
    Tokens(Vec<u64>),
    /// Text of the asked number of words.
    Text(String),
}

impl Prompt {
    /// The `prompt` field of a completion request.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Prompt::Tokens(t) => serde_json::json!(t),
            Prompt::Text(s) => serde_json::json!(s),
        }
    }
}

/// How prompt lengths were made.
pub const EXACT: &str = "exact (token ids cut by the server's /tokenize)";
/// … when the server has no `/tokenize`.
pub const APPROXIMATE: &str = "approximate (one word a token: the server has no /tokenize)";

/// The body of a `/tokenize` request for `text` (vLLM reads
/// model/prompt/add_special_tokens, llama.cpp content/add_special).
pub fn tokenize_body(model: &str, text: &str) -> String {
    serde_json::json!({
        "model": model, "prompt": text, "add_special_tokens": false,
        "content": text, "add_special": false,
    })
    .to_string()
}

/// The token ids in a `/tokenize` answer (`code`, `body`); `None` when
/// the server has no `/tokenize` (404/405).
pub fn tokens_in(code: u16, body: &str) -> Result<Option<Vec<u64>>, String> {
    match code {
        200 => {
            let v: serde_json::Value = serde_json::from_str(body)
                .map_err(|_| format!("/tokenize answered {}", super::sse::short(body)))?;
            let ids = v
                .get("tokens")
                .and_then(|t| t.as_array())
                .and_then(|a| a.iter().map(serde_json::Value::as_u64).collect());
            ids.map(Some)
                .ok_or_else(|| format!("/tokenize answered {}", super::sse::short(body)))
        }
        404 | 405 => Ok(None),
        code => Err(format!(
            "/tokenize answered HTTP {code}: {}",
            super::sse::short(body)
        )),
    }
}

/// The token ids of `text` from the server's `/tokenize`, `None` when it
/// has none (404/405).
pub async fn tokenize(
    authority: &str,
    model: &str,
    text: &str,
    key: Option<&Key>,
) -> Result<Option<Vec<u64>>, String> {
    let body = tokenize_body(model, text);
    match client::json(
        authority,
        "/tokenize",
        Some(body),
        key,
        Duration::from_secs(60),
    )
    .await
    {
        Ok((code, body)) => tokens_in(code, &body),
        Err(e) => Err(format!("/tokenize: {e}")),
    }
}

/// `count` prompts of `tokens` tokens and how their length was made
/// ([`EXACT`] or [`APPROXIMATE`]).
pub async fn build(
    authority: &str,
    model: &str,
    key: Option<&Key>,
    count: usize,
    tokens: usize,
    seed: u64,
) -> Result<(Vec<Prompt>, &'static str), String> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(count);
    let mut has_tokenize = true;
    for _ in 0..count {
        if !has_tokenize {
            out.push(Prompt::Text(rng.words(tokens)));
            continue;
        }
        let mut text = rng.words(tokens + 8);
        let Some(mut ids) = tokenize(authority, model, &text, key).await? else {
            has_tokenize = false;
            out.push(Prompt::Text(rng.words(tokens)));
            continue;
        };
        let mut tries = 0;
        while ids.len() < tokens {
            tries += 1;
            if tries > 4 {
                return Err(format!(
                    "/tokenize made only {} tokens of {} words: cannot make a {tokens}-token prompt",
                    ids.len(),
                    text.split(' ').count()
                ));
            }
            text.push(' ');
            text.push_str(&rng.words(tokens));
            ids = tokenize(authority, model, &text, key)
                .await?
                .ok_or("/tokenize went away")?;
        }
        ids.truncate(tokens);
        out.push(Prompt::Tokens(ids));
    }
    let how = match out.first() {
        Some(Prompt::Text(_)) => APPROXIMATE,
        _ => EXACT,
    };
    Ok((out, how))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_makes_the_same_words() {
        let a = Rng::new(7).words(50);
        assert_eq!(a, Rng::new(7).words(50));
        assert_ne!(a, Rng::new(8).words(50));
        assert_eq!(a.split(' ').count(), 50);
    }
}

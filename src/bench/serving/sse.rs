//! The server-sent events of a streamed `/v1/completions`: `data:` lines
//! out of the byte stream ([`Lines`]), and what each says ([`parse`]).

/// The most one event line may hold (a longer one is a server fault).
const MAX_LINE: usize = 1 << 20;

/// Splits a byte stream into `data:` payloads.
#[derive(Debug, Default)]
pub struct Lines {
    buf: Vec<u8>,
}

impl Lines {
    /// Takes the next bytes; returns the payloads of the `data:` lines they
    /// complete (other SSE fields and comments are dropped).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<String>, String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(data) = line.strip_prefix("data:") {
                out.push(data.strip_prefix(' ').unwrap_or(data).to_string());
            }
        }
        if self.buf.len() > MAX_LINE {
            return Err(format!(
                "an event line longer than {MAX_LINE} bytes: not a completion stream"
            ));
        }
        Ok(out)
    }
}

/// One event of a completion stream. vLLM v0.32.0 (VLLM_VERSION of
/// images/vllm-therock-gfx1151.toml) ends a stream with `data: [DONE]` in
/// `vllm/entrypoints/openai/completion/serving.py` and
/// `vllm/entrypoints/openai/chat_completion/serving.py`.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A chunk of choices: a token (vLLM sends one per token, also when its
    /// text is held back; llama.cpp ends with an empty chunk that only
    /// carries `finish_reason`, which is no token). `completion_tokens` is
    /// the usage when the chunk carries it.
    Chunk {
        /// It stands for a generated token.
        token: bool,
        /// `usage.completion_tokens`, when present.
        completion_tokens: Option<u64>,
        /// `usage.prompt_tokens`, when present.
        prompt_tokens: Option<u64>,
    },
    /// `[DONE]`.
    Done,
    /// The server reported an error in the stream.
    Error(String),
}

/// What a `data:` payload says; `Err` when it is not a completion chunk.
pub fn parse(data: &str) -> Result<Event, String> {
    if data.trim() == "[DONE]" {
        return Ok(Event::Done);
    }
    let v: serde_json::Value = serde_json::from_str(data)
        .map_err(|_| format!("not a completion chunk: {}", short(data)))?;
    if let Some(e) = v.get("error") {
        let msg = e
            .get("message")
            .and_then(|m| m.as_str())
            .map_or_else(|| e.to_string(), str::to_string);
        return Ok(Event::Error(crate::remote::printable(&msg)));
    }
    let usage = |k: &str| {
        v.get("usage")
            .and_then(|u| u.get(k))
            .and_then(|n| n.as_u64())
    };
    let choices = v.get("choices").and_then(|c| c.as_array());
    let Some(choices) = choices else {
        return Err(format!(
            "a chunk without choices: {} (not an OpenAI completion stream)",
            short(data)
        ));
    };
    let token = choices.first().is_some_and(|c| {
        let text = c.get("text").and_then(|t| t.as_str()).unwrap_or("");
        let finished = c.get("finish_reason").is_some_and(|f| !f.is_null());
        !(text.is_empty() && finished)
    });
    Ok(Event::Chunk {
        token,
        completion_tokens: usage("completion_tokens"),
        prompt_tokens: usage("prompt_tokens"),
    })
}

/// At most 200 characters of a server's words, made printable.
pub fn short(s: &str) -> String {
    let s: String = s.chars().take(200).collect();
    crate::remote::printable(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_reads() {
        let mut l = Lines::default();
        assert!(l.push(b"data: {\"a\"").unwrap().is_empty());
        assert_eq!(
            l.push(b":1}\r\n\r\n: ping\n\ndata:[DONE]\n").unwrap(),
            vec!["{\"a\":1}".to_string(), "[DONE]".to_string()]
        );
    }

    #[test]
    fn events_of_vllm_and_llama_cpp() {
        // vLLM: a token, an empty-text token, the usage chunk.
        let tok = |t: &str| format!(r#"{{"choices":[{{"text":"{t}","finish_reason":null}}]}}"#);
        let token = Event::Chunk {
            token: true,
            completion_tokens: None,
            prompt_tokens: None,
        };
        assert_eq!(parse(&tok(" hi")).unwrap(), token);
        assert_eq!(parse(&tok("")).unwrap(), token);
        assert_eq!(
            parse(r#"{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":16}}"#).unwrap(),
            Event::Chunk {
                token: false,
                completion_tokens: Some(16),
                prompt_tokens: Some(8)
            }
        );
        // llama.cpp: the last chunk only carries finish_reason and usage.
        assert_eq!(
            parse(r#"{"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":5}}"#)
                .unwrap(),
            Event::Chunk {
                token: false,
                completion_tokens: Some(5),
                prompt_tokens: None
            }
        );
        assert_eq!(parse("[DONE]").unwrap(), Event::Done);
        assert_eq!(
            parse(r#"{"error":{"message":"boom\u001b[31m","code":500}}"#).unwrap(),
            Event::Error("boom".into())
        );
        assert!(
            parse("<html>")
                .unwrap_err()
                .contains("not a completion chunk")
        );
        assert!(parse(r#"{"x":1}"#).unwrap_err().contains("without choices"));
    }
}

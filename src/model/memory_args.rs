//! The engine arguments that change how much memory a serve takes, read
//! wherever they are given: as a halobox flag, or among the arguments
//! after `--` that go to vLLM as they are (pure). The same argument with
//! two different values is refused, naming both: the fit check would
//! otherwise count one and the engine use the other.

use serde::Serialize;

use super::kv::{CacheDtype, KvOptions, VLLM_BLOCK, VLLM_DEFAULT_BATCHED_TOKENS};

/// What halobox's own flags say (`None`: not given).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flags {
    /// `--max-model-len`.
    pub max_model_len: Option<u64>,
    /// `--tp`.
    pub tp: Option<u32>,
    /// `--gpu-memory-utilization`, when given (not its default).
    pub gpu_memory_utilization: Option<f64>,
}

/// Every memory-relevant argument, wherever it was given.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemoryArgs {
    /// `--max-model-len` (`None`: the model's own).
    pub max_model_len: Option<u64>,
    /// `--kv-cache-dtype` (`None`: auto).
    pub kv_cache_dtype: Option<String>,
    /// `--max-num-seqs`.
    pub max_num_seqs: Option<u64>,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// `--pipeline-parallel-size` / `-pp`.
    pub pp: Option<u32>,
    /// `--tensor-parallel-size` / `-tp` / halobox's `--tp`.
    pub tp: Option<u32>,
    /// `--gpu-memory-utilization`.
    pub gpu_memory_utilization: Option<f64>,
    /// `--dtype` (`None`: auto).
    pub dtype: Option<String>,
    /// `--block-size` (`None`: [`VLLM_BLOCK`]).
    pub block_size: Option<u64>,
}

impl MemoryArgs {
    /// The cache options these arguments give (tp 1; the split sets it).
    pub fn kv_options(&self) -> Result<KvOptions, String> {
        Ok(KvOptions {
            tp: 1,
            dtype: match &self.kv_cache_dtype {
                Some(d) => CacheDtype::parse(d)?,
                None => CacheDtype::Auto,
            },
            max_num_batched_tokens: self
                .max_num_batched_tokens
                .unwrap_or(VLLM_DEFAULT_BATCHED_TOKENS),
            seqs: self.max_num_seqs.unwrap_or(1).max(1),
            block: self.block_size.unwrap_or(VLLM_BLOCK),
            model_dtype_bytes: match self.dtype.as_deref() {
                None | Some("auto") => None,
                Some("float32" | "float") => Some(4),
                Some("bfloat16" | "float16" | "half") => Some(2),
                Some(d) => {
                    return Err(format!(
                        "--dtype {d}: not a dtype vLLM knows (auto, half, float16, bfloat16, float, float32)"
                    ));
                }
            },
        })
    }
}

/// Every value `names` is given in `extra` (`--flag V`, `--flag=V`,
/// underscores for dashes), in order, with the spelling used.
fn occurrences(extra: &[String], names: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < extra.len() {
        let a = &extra[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let norm = if flag.starts_with("--") {
            flag.replace('_', "-")
        } else {
            flag.to_string()
        };
        if names.contains(&norm.as_str()) {
            match inline {
                Some(v) => out.push((flag.to_string(), v)),
                None => {
                    out.push((
                        flag.to_string(),
                        extra.get(i + 1).cloned().unwrap_or_default(),
                    ));
                    i += 1;
                }
            }
        }
        i += 1;
    }
    out
}

/// A token count as vLLM reads it: `32768`, `32k` (× 1000), `32K` (× 1024),
/// `1m`/`1M`; `auto` and `-1` mean the engine's choice (`None`).
fn tokens(v: &str) -> Option<Option<u64>> {
    if v == "auto" || v == "-1" {
        return Some(None);
    }
    let (num, mul) = match v.chars().last()? {
        'k' => (&v[..v.len() - 1], 1000),
        'K' => (&v[..v.len() - 1], 1024),
        'm' => (&v[..v.len() - 1], 1_000_000),
        'M' => (&v[..v.len() - 1], 1 << 20),
        _ => (v, 1),
    };
    num.parse::<u64>().ok().map(|n| Some(n * mul))
}

/// One argument: the halobox flag's value (if any) and every value after
/// `--`, which must agree; `parse` reads a value.
fn one<T: PartialEq + Clone + std::fmt::Display>(
    name: &str,
    names: &[&str],
    flag: Option<T>,
    extra: &[String],
    parse: impl Fn(&str) -> Option<T>,
    what: &str,
) -> Result<Option<T>, String> {
    let mut seen: Vec<(String, T)> = Vec::new();
    if let Some(v) = flag {
        seen.push((format!("halobox's {name}"), v));
    }
    for (spelling, v) in occurrences(extra, names) {
        let Some(p) = parse(&v) else {
            return Err(format!(
                "{spelling} {} after `--`: not {what}",
                if v.is_empty() { "(missing)" } else { &v }
            ));
        };
        seen.push((format!("{spelling} after `--`"), p));
    }
    if let Some((a, b)) = seen
        .iter()
        .flat_map(|a| seen.iter().map(move |b| (a, b)))
        .find(|(a, b)| a.1 != b.1)
    {
        return Err(format!(
            "{name} is given twice with two values: {} ({}) and {} ({})\n  hint: give `{name}` once, as a halobox flag or after `--`",
            a.1, a.0, b.1, b.0
        ));
    }
    Ok(seen.into_iter().next().map(|(_, v)| v))
}

/// Reads every memory-relevant argument from halobox's `flags` and the
/// engine arguments `extra`; an error names a bad value or two that disagree.
pub fn read(flags: &Flags, extra: &[String]) -> Result<MemoryArgs, String> {
    let len = one(
        "--max-model-len",
        &["--max-model-len"],
        flags.max_model_len.map(|v| v.to_string()),
        extra,
        |v| {
            tokens(v).map(|t| match t {
                Some(n) => n.to_string(),
                None => "auto".to_string(),
            })
        },
        "a number of tokens (32768, 32k, 32K, auto)",
    )?;
    let count = |v: &str| v.parse::<u64>().ok().filter(|n| *n >= 1);
    let size = |v: &str| v.parse::<u32>().ok().filter(|n| *n >= 1);
    Ok(MemoryArgs {
        max_model_len: len.and_then(|v| v.parse().ok()),
        kv_cache_dtype: one(
            "--kv-cache-dtype",
            &["--kv-cache-dtype"],
            None,
            extra,
            |v| (!v.is_empty() && !v.starts_with('-')).then(|| v.to_string()),
            "a KV cache dtype",
        )?,
        max_num_seqs: one(
            "--max-num-seqs",
            &["--max-num-seqs"],
            None,
            extra,
            count,
            "a whole number from 1",
        )?,
        max_num_batched_tokens: one(
            "--max-num-batched-tokens",
            &["--max-num-batched-tokens"],
            None,
            extra,
            |v| tokens(v).flatten(),
            "a number of tokens",
        )?,
        pp: one(
            "--pipeline-parallel-size",
            &["--pipeline-parallel-size", "-pp"],
            None,
            extra,
            size,
            "a whole number from 1",
        )?,
        tp: one(
            "--tensor-parallel-size",
            &["--tensor-parallel-size", "-tp"],
            flags.tp,
            extra,
            size,
            "a whole number from 1",
        )?,
        gpu_memory_utilization: one(
            "--gpu-memory-utilization",
            &["--gpu-memory-utilization"],
            flags.gpu_memory_utilization,
            extra,
            |v| v.parse::<f64>().ok().filter(|u| *u > 0.0 && *u <= 1.0),
            "a fraction in (0, 1]",
        )?,
        dtype: one(
            "--dtype",
            &["--dtype"],
            None,
            extra,
            |v| (!v.is_empty() && !v.starts_with('-')).then(|| v.to_string()),
            "a dtype",
        )?,
        block_size: one(
            "--block-size",
            &["--block-size"],
            None,
            extra,
            count,
            "a whole number of tokens from 1",
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn block_size_after_the_double_dash() {
        let m = read(&Flags::default(), &v(&["--block-size", "128"])).unwrap();
        assert_eq!(m.kv_options().unwrap().block, 128);
        let m = read(&Flags::default(), &v(&[])).unwrap();
        assert_eq!(m.kv_options().unwrap().block, VLLM_BLOCK);
        assert!(read(&Flags::default(), &v(&["--block-size", "0"])).is_err());
    }

    #[test]
    fn read_wherever_given() {
        let m = read(
            &Flags::default(),
            &v(&[
                "--max-model-len",
                "32k",
                "--kv-cache-dtype=fp8",
                "--max_num_seqs",
                "8",
                "-pp",
                "2",
                "--max-num-batched-tokens",
                "4096",
            ]),
        )
        .unwrap();
        assert_eq!(m.max_model_len, Some(32000));
        assert_eq!(m.kv_cache_dtype.as_deref(), Some("fp8"));
        assert_eq!(m.max_num_seqs, Some(8));
        assert_eq!(m.pp, Some(2));
        let o = m.kv_options().unwrap();
        assert_eq!((o.seqs, o.max_num_batched_tokens), (8, 4096));
        assert_eq!(o.dtype, CacheDtype::Bytes(1));
        assert_eq!(o.model_dtype_bytes, None);
        let m = read(&Flags::default(), &v(&["--dtype", "float32"])).unwrap();
        assert_eq!(m.kv_options().unwrap().model_dtype_bytes, Some(4));
    }

    #[test]
    fn the_same_value_twice_is_fine_two_values_are_refused() {
        let f = Flags {
            max_model_len: Some(32768),
            ..Flags::default()
        };
        assert_eq!(
            read(&f, &v(&["--max-model-len", "32K"]))
                .unwrap()
                .max_model_len,
            Some(32768)
        );
        let e = read(&f, &v(&["--max-model-len=65536"])).unwrap_err();
        assert!(
            e.contains("--max-model-len is given twice with two values: 32768 (halobox's --max-model-len) and 65536 (--max-model-len after `--`)"),
            "{e}"
        );
        let e = read(
            &Flags::default(),
            &v(&["--kv-cache-dtype", "fp8", "--kv-cache-dtype", "auto"]),
        )
        .unwrap_err();
        assert!(e.contains("fp8") && e.contains("auto"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = read(&Flags::default(), &v(&["--max-num-seqs", "many"])).unwrap_err();
        assert!(
            e.contains("--max-num-seqs many after `--`: not a whole number"),
            "{e}"
        );
        let e = read(&Flags::default(), &v(&["--max-model-len"])).unwrap_err();
        assert!(e.contains("(missing)"), "{e}");
    }
}

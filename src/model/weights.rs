//! A model's size and attention shape from its files, reading only their
//! headers: safetensors (an 8-byte little-endian header length, then JSON
//! with `dtype`, `shape` and `data_offsets` per tensor), GGUF (the tensor
//! data after the header's key/value pairs and tensor infos), and the
//! `config.json` beside safetensors for the KV cache.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use super::fit::ModelSize;
use super::kv::{self, KvModel};

/// A safetensors header larger than this is refused (the format's own limit
/// is 100 MB).
const MAX_HEADER: u64 = 100_000_000;

/// The tensor bytes of one safetensors file, from its header.
pub fn safetensors_bytes(path: &Path) -> io::Result<u64> {
    let mut f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len)?;
    let n = u64::from_le_bytes(len);
    if n > MAX_HEADER || n + 8 > file_len {
        return Err(bad(
            path,
            format!("header length {n} does not fit the file"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header)?;
    let doc: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| bad(path, format!("header: {e}")))?;
    let mut total = 0u64;
    for (name, t) in doc.iter().filter(|(k, _)| *k != "__metadata__") {
        let offsets = t
            .get("data_offsets")
            .and_then(|o| o.as_array())
            .and_then(|o| Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?)));
        match offsets {
            Some((a, b)) if a <= b && b <= file_len - 8 - n => total += b - a,
            _ => return Err(bad(path, format!("tensor {name}: bad data_offsets"))),
        }
    }
    Ok(total)
}

fn bad(path: &Path, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is not a safetensors/GGUF file: {why}", path.display()),
    )
}

/// The model's cache as vLLM counts it, from `config.json` ([`kv::hf`]).
pub fn kv_from_config(config: &serde_json::Value) -> Result<KvModel, String> {
    kv::hf::from_config(config)
}

/// The size of the model at `path`: a folder with safetensors (and
/// config.json), a folder with one GGUF (or the parts of one split GGUF),
/// or a `.gguf` file.
pub fn read(path: &Path) -> Result<ModelSize, String> {
    let is_gguf = |p: &Path| p.extension().is_some_and(|e| e == "gguf");
    if path.is_file() && is_gguf(path) {
        return gguf_size(&[path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read the model folder {}: {e}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let st: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    if !st.is_empty() {
        let mut total = 0;
        for f in &st {
            total += safetensors_bytes(f).map_err(|e| e.to_string())?;
        }
        let kv = std::fs::read(path.join("config.json"))
            .map_err(|e| format!("no config.json beside the weights: {e}"))
            .and_then(|b| {
                serde_json::from_slice(&b).map_err(|e| format!("config.json is not JSON: {e}"))
            })
            .and_then(|c| kv_from_config(&c));
        return Ok(ModelSize {
            weights_bytes: total,
            source: format!(
                "{} safetensors file{}",
                st.len(),
                if st.len() == 1 { "" } else { "s" }
            ),
            kv: kv.as_ref().ok().cloned(),
            kv_unknown: kv.err(),
        });
    }
    let gg: Vec<PathBuf> = files.iter().filter(|p| is_gguf(p)).cloned().collect();
    let split = gg.len() > 1
        && gg.iter().all(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains("-of-"))
        });
    match gg.len() {
        1 => gguf_size(&gg),
        _ if split => gguf_size(&gg),
        0 => Err(format!(
            "{} holds no .safetensors or .gguf weights",
            path.display()
        )),
        n => Err(format!(
            "{} holds {n} GGUF files: name the one to serve",
            path.display()
        )),
    }
}

fn gguf_size(files: &[PathBuf]) -> Result<ModelSize, String> {
    let mut total = 0;
    let mut kv = None;
    for f in files {
        let h = gguf_header(f).map_err(|e| e.to_string())?;
        total += h.data_bytes;
        kv = kv.or(h.kv);
    }
    let kv_unknown = kv.is_none().then(|| {
        "the GGUF header gives no block_count/attention.head_count for its architecture".to_string()
    });
    Ok(ModelSize {
        weights_bytes: total,
        source: if files.len() == 1 {
            "GGUF".into()
        } else {
            format!("{} GGUF parts", files.len())
        },
        kv,
        kv_unknown,
    })
}

/// What a GGUF header says.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// Bytes of tensor data (the file after the aligned header).
    pub data_bytes: u64,
    /// The cache from `ARCH.block_count`, `ARCH.attention.*`, as llama.cpp
    /// counts it ([`kv::gguf`]).
    pub kv: Option<KvModel>,
}

/// A GGUF metadata value, as far as the fit check needs it.
enum Value {
    Uint(u64),
    Str(String),
    Array(Vec<u64>),
    Other,
}

/// Number arrays longer than this are skipped (per-layer arrays are short).
const MAX_ARRAY: u64 = 1 << 16;

struct Gguf<R> {
    r: R,
    pos: u64,
}

impl<R: Read> Gguf<R> {
    fn bytes<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b)?;
        self.pos += N as u64;
        Ok(b)
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    fn skip(&mut self, n: u64) -> io::Result<()> {
        let got = io::copy(&mut (&mut self.r).take(n), &mut io::sink())?;
        self.pos += got;
        if got < n {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }
    fn string(&mut self) -> io::Result<String> {
        let n = self.u64()?;
        if n > 1 << 20 {
            self.skip(n)?;
            return Ok(String::new());
        }
        let mut b = vec![0u8; n as usize];
        self.r.read_exact(&mut b)?;
        self.pos += n;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }
    fn value(&mut self, ty: u32) -> io::Result<Value> {
        Ok(match ty {
            0 | 1 | 7 => Value::Uint(u64::from(self.bytes::<1>()?[0])),
            2 | 3 => Value::Uint(u64::from(u16::from_le_bytes(self.bytes()?))),
            4 | 5 => Value::Uint(u64::from(self.u32()?)),
            6 => {
                self.skip(4)?;
                Value::Other
            }
            8 => Value::Str(self.string()?),
            9 => {
                let inner = self.u32()?;
                let n = self.u64()?;
                let width = match inner {
                    0 | 1 | 7 => Some(1),
                    2 | 3 => Some(2),
                    4..=6 => Some(4),
                    10..=12 => Some(8),
                    _ => None,
                };
                match width {
                    Some(_) if n <= MAX_ARRAY && !matches!(inner, 6 | 12) => {
                        let mut out = Vec::with_capacity(n as usize);
                        for _ in 0..n {
                            if let Value::Uint(v) = self.value(inner)? {
                                out.push(v);
                            }
                        }
                        return Ok(Value::Array(out));
                    }
                    Some(w) => self.skip(n.saturating_mul(w))?,
                    None => {
                        for _ in 0..n {
                            self.value(inner)?;
                        }
                    }
                }
                Value::Other
            }
            10 | 11 => Value::Uint(self.u64()?),
            12 => {
                self.skip(8)?;
                Value::Other
            }
            t => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unknown GGUF value type {t}"),
                ));
            }
        })
    }
}

struct Meta<'a>(&'a [(String, u64)], &'a [(String, Vec<u64>)]);

impl kv::gguf::Metadata for Meta<'_> {
    fn num(&self, key: &str) -> Option<u64> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
    fn array(&self, key: &str) -> Option<&[u64]> {
        self.1
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_slice())
    }
}

/// Reads a GGUF file's header.
pub fn gguf_header(path: &Path) -> io::Result<GgufHeader> {
    let f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut g = Gguf {
        r: BufReader::new(f),
        pos: 0,
    };
    let wrap = |e: io::Error| bad(path, e.to_string());
    if &g.bytes::<4>().map_err(wrap)? != b"GGUF" {
        return Err(bad(path, "no GGUF magic".into()));
    }
    let version = g.u32().map_err(wrap)?;
    if version < 2 {
        return Err(bad(path, format!("GGUF version {version} is too old")));
    }
    let tensors = g.u64().map_err(wrap)?;
    let kvs = g.u64().map_err(wrap)?;
    let mut arch = String::new();
    let mut nums: Vec<(String, u64)> = Vec::new();
    let mut arrays: Vec<(String, Vec<u64>)> = Vec::new();
    for _ in 0..kvs {
        let key = g.string().map_err(wrap)?;
        let ty = g.u32().map_err(wrap)?;
        match g.value(ty).map_err(wrap)? {
            Value::Str(s) if key == "general.architecture" => arch = s,
            Value::Uint(v) => nums.push((key, v)),
            Value::Array(a) if key.starts_with(&format!("{arch}.")) => arrays.push((key, a)),
            _ => {}
        }
    }
    for _ in 0..tensors {
        g.string().map_err(wrap)?;
        let dims = g.u32().map_err(wrap)?;
        g.skip(8 * u64::from(dims) + 4 + 8).map_err(wrap)?;
    }
    let num = |k: &str| nums.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    let align = num("general.alignment").filter(|a| *a > 0).unwrap_or(32);
    let data_start = g.pos.div_ceil(align) * align;
    let kv = kv::gguf::from_metadata(&arch, &Meta(&nums, &arrays));
    Ok(GgufHeader {
        data_bytes: file_len.saturating_sub(data_start),
        kv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn safetensors(dir: &Path, name: &str, tensors: &[(&str, u64)]) {
        let mut off = 0;
        let mut h = serde_json::Map::new();
        h.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
        for (t, n) in tensors {
            h.insert(
                (*t).into(),
                serde_json::json!({"dtype": "BF16", "shape": [n / 2], "data_offsets": [off, off + n]}),
            );
            off += n;
        }
        let j = serde_json::to_vec(&h).unwrap();
        let mut f = File::create(dir.join(name)).unwrap();
        f.write_all(&(j.len() as u64).to_le_bytes()).unwrap();
        f.write_all(&j).unwrap();
        f.write_all(&vec![0u8; off as usize]).unwrap();
    }

    #[test]
    fn safetensors_shards_and_config() {
        let d = tempfile::tempdir().unwrap();
        safetensors(
            d.path(),
            "model-00001-of-00002.safetensors",
            &[("a", 1000), ("b", 24)],
        );
        safetensors(d.path(), "model-00002-of-00002.safetensors", &[("c", 2048)]);
        std::fs::write(
            d.path().join("config.json"),
            r#"{"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 256, "torch_dtype": "bfloat16", "max_position_embeddings": 2048}"#,
        )
        .unwrap();
        let m = read(d.path()).unwrap();
        assert_eq!(m.weights_bytes, 3072);
        assert_eq!(m.source, "2 safetensors files");
        let kv = m.kv.unwrap();
        assert_eq!(kv.layers.len(), 4);
        assert_eq!(kv.max_positions, Some(2048));
        // 4 layers × 2 KV heads × (32 K + 32 V) × 2 B.
        assert_eq!(
            kv.bytes_per_token(&kv::KvOptions::default()),
            4 * 2 * 64 * 2
        );
    }

    #[test]
    fn a_lying_header_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.safetensors");
        std::fs::write(&p, 1_000_000u64.to_le_bytes()).unwrap();
        let e = safetensors_bytes(&p).unwrap_err().to_string();
        assert!(e.contains("header length 1000000 does not fit"), "{e}");
        let e = read(d.path()).unwrap_err();
        assert!(e.contains("x.safetensors"), "{e}");
    }

    fn gguf_string(b: &mut Vec<u8>, s: &str) {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    }

    #[test]
    fn gguf_header_gives_data_and_shape() {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(1u64.to_le_bytes()); // tensors
        b.extend(6u64.to_le_bytes()); // kvs
        gguf_string(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        gguf_string(&mut b, "llama");
        for (k, v) in [
            ("llama.block_count", 30u32),
            ("llama.attention.head_count", 9),
            ("llama.attention.head_count_kv", 3),
            ("llama.embedding_length", 576),
        ] {
            gguf_string(&mut b, k);
            b.extend(4u32.to_le_bytes());
            b.extend(v.to_le_bytes());
        }
        gguf_string(&mut b, "tokenizer.ggml.tokens");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        gguf_string(&mut b, "a");
        gguf_string(&mut b, "bc");
        gguf_string(&mut b, "w");
        b.extend(2u32.to_le_bytes());
        b.extend(16u64.to_le_bytes());
        b.extend(4u64.to_le_bytes());
        b.extend(0u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        let start = b.len().div_ceil(32) * 32;
        b.resize(start + 256, 0);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.gguf");
        std::fs::write(&p, &b).unwrap();
        let m = read(&p).unwrap();
        assert_eq!(m.weights_bytes, 256);
        assert_eq!(m.source, "GGUF");
        let kv = m.kv.unwrap();
        assert_eq!(kv.layers.len(), 30);
        assert_eq!(kv.rules, kv::Rules::LlamaCpp);
        // 30 layers × 3 KV heads × (64 + 64) × 2 B (f16).
        assert_eq!(
            kv.bytes_per_token(&kv::KvOptions::default()),
            30 * 3 * 128 * 2
        );
        std::fs::write(d.path().join("other.gguf"), &b).unwrap();
        assert!(read(d.path()).unwrap_err().contains("2 GGUF files"));
    }
}

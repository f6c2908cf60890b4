"""A random-weight Llama in one GGUF file, made on the spot (no download):
f32 weights from a seeded generator and a small SentencePiece-style vocab
(byte fallback, printable ASCII), written with the `gguf` package. llama.cpp
loads it like any Llama. The shape comes from the arguments.

usage: python make-gguf.py OUT.gguf [--layers N] [--hidden N] [--heads N]
       [--kv-heads N] [--intermediate N] [--ctx N] [--seed N]
Run with the python of /opt/halobox-llama-cpp/venv (scripts/llama-cpp.sh).
"""

import argparse

import numpy as np
import gguf


def vocab():
    """<unk> <s> </s>, the 256 byte tokens, then '▁' and printable ASCII,
    with and without the word-start mark."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = ["\u2581"] + [chr(c) for c in range(0x21, 0x7F)]
    pieces += ["\u2581" + chr(c) for c in range(0x21, 0x7F)]
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=0, help="default: 2.75 x hidden, rounded to 32")
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads:
        p.error("heads must divide hidden, and kv-heads must divide heads")
    ff = a.intermediate or (a.hidden * 11 // 4 + 31) // 32 * 32
    hd = a.hidden // a.heads
    tokens, scores, types = vocab()
    n_vocab = len(tokens)
    rng = np.random.default_rng(a.seed)

    def rand(*shape):
        # numpy (rows, cols) is ggml's ne = [cols, rows]: (out, in) for a matrix.
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("halobox random llama")
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(a.heads)
    w.add_head_count_kv(a.kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, a.hidden))).astype(np.float32))
    for i in range(a.layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(a.hidden, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", rand(a.hidden, a.hidden))
        w.add_tensor(b + "attn_k.weight", rand(a.kv_heads * hd, a.hidden))
        w.add_tensor(b + "attn_v.weight", rand(a.kv_heads * hd, a.hidden))
        w.add_tensor(b + "attn_output.weight", rand(a.hidden, a.hidden))
        w.add_tensor(b + "ffn_norm.weight", np.ones(a.hidden, dtype=np.float32))
        w.add_tensor(b + "ffn_gate.weight", rand(ff, a.hidden))
        w.add_tensor(b + "ffn_up.weight", rand(ff, a.hidden))
        w.add_tensor(b + "ffn_down.weight", rand(a.hidden, ff))
    w.add_tensor("output_norm.weight", np.ones(a.hidden, dtype=np.float32))
    w.add_tensor("output.weight", rand(n_vocab, a.hidden) * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{a.out}: llama, {a.layers} layers, hidden {a.hidden}, {a.heads} heads ({a.kv_heads} kv), ffn {ff}, vocab {n_vocab}, seed {a.seed}")


if __name__ == "__main__":
    main()

"""A random-weight Llama made on the spot (no download): safetensors weights
and a byte-level BPE tokenizer trained on text already on this machine, in a
folder vLLM and transformers load with HF_HUB_OFFLINE=1. The shape comes
from the arguments; heads must divide by the tensor-parallel size you serve
it with. Run with the serve engine's python (scripts/vllm-venv.sh: torch,
transformers, tokenizers).

usage: python make-llama.py OUT [--layers N] [--hidden N] [--heads N]
       [--kv-heads N] [--intermediate N] [--vocab N] [--seed N]
"""

import argparse
import glob
import os
import sys


def corpus():
    """Text files that every Debian has (licences, Python's own sources)."""
    files = sorted(glob.glob("/usr/share/common-licenses/*"))
    files += sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:60]
    return [f for f in files if os.path.isfile(f)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=512)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads:
        sys.exit(f"error: hidden ({a.hidden}) must divide by heads ({a.heads}), heads by kv-heads ({a.kv_heads})")

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    files = corpus()
    if not files:
        sys.exit("error: no text found to train the tokenizer on (/usr/share/common-licenses)")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab,
        special_tokens=["<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    vocab = len(fast)

    torch.manual_seed(a.seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=a.hidden,
        intermediate_size=a.intermediate,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        max_position_embeddings=2048,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.5)
    os.makedirs(a.out, exist_ok=True)
    model.save_pretrained(a.out, safe_serialization=True)
    fast.save_pretrained(a.out)
    for f in os.listdir(a.out):
        os.chmod(os.path.join(a.out, f), 0o644)
    print(f"{a.out}: Llama, {a.layers} layers, hidden {a.hidden}, {a.heads} heads ({a.kv_heads} kv), vocab {vocab}")


if __name__ == "__main__":
    main()

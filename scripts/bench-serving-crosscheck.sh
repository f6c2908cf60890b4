#!/usr/bin/env bash
# `halobox bench serving` against vLLM's own `vllm bench serve` on the same
# endpoint, with the same lengths (random prompts, ignore_eos) and the same
# concurrency levels: output tokens per second of both, per level, rounds
# alternating which goes first, and the mean of the rounds compared.
# Without --url it starts `vllm serve` from the CPU venv on loopback with a
# random-weight Llama (scripts/serve/make-llama.py) and an API key (in the
# environment only: VLLM_API_KEY for vLLM and halobox, OPENAI_API_KEY for
# `vllm bench serve`), and stops it at the end. Its last line is the ratio:
#   output tokens/s, halobox / vllm bench serve   (goal: within 10%, 0.90x to 1.10x)
# usage: scripts/bench-serving-crosscheck.sh [--url URL --model NAME --tokenizer DIR]
#   [--concurrency 1,4,8] [--requests N] [--input N] [--output N] [--rounds N]
#   HALOBOX_BIN: the halobox binary (default: target/debug/halobox)
#   VENV: vLLM's venv (default: /opt/halobox-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/opt/halobox-vllm}
HALOBOX_BIN=${HALOBOX_BIN:-target/debug/halobox}
url='' model='' tokenizer='' levels=1,4,8 requests=32 input=128 output=128 rounds=2
while [ $# -gt 0 ]; do
  case "$1" in
  --url) url=$2; shift 2 ;;
  --model) model=$2; shift 2 ;;
  --tokenizer) tokenizer=$2; shift 2 ;;
  --concurrency) levels=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --input) input=$2; shift 2 ;;
  --output) output=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  *) echo "usage: $0 [--url URL --model NAME --tokenizer DIR] [--concurrency L] [--requests N] [--input N] [--output N] [--rounds N]" >&2; exit 2 ;;
  esac
done
[ -x "$HALOBOX_BIN" ] || { echo "error: $HALOBOX_BIN is missing: cargo build" >&2; exit 1; }
[ -x "$VENV/bin/vllm" ] || { echo "error: $VENV/bin/vllm is missing: scripts/vllm-venv.sh" >&2; exit 1; }
DIR=$(mktemp -d /tmp/hb-serving-xcheck.XXXXXX)
vllm_pid=''
cleanup() {
  if [ -n "$vllm_pid" ]; then kill "$vllm_pid" 2>/dev/null || true; wait "$vllm_pid" 2>/dev/null || true; fi
  rm -rf "$DIR"
}
trap cleanup EXIT
log() { echo "== $*" >&2; }

if [ -z "$url" ]; then
  log "a random-weight Llama (scripts/serve/make-llama.py)"
  HF_HUB_OFFLINE=1 "$VENV/bin/python" scripts/serve/make-llama.py "$DIR/model" >&2
  model=$DIR/model tokenizer=$DIR/model
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  url=http://127.0.0.1:$port
  VLLM_API_KEY=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export VLLM_API_KEY
  log "vllm serve on $url (log: $DIR/vllm.log)"
  HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 setsid "$VENV/bin/vllm" serve "$model" --host 127.0.0.1 --port "$port" \
    --max-model-len $((input + output + 64)) --enforce-eager --dtype float32 >"$DIR/vllm.log" 2>&1 &
  vllm_pid=$!
  for _ in $(seq 600); do
    curl -sf -o /dev/null -H "Authorization: Bearer $VLLM_API_KEY" "$url/v1/models" && break
    kill -0 "$vllm_pid" 2>/dev/null || { tail -n 30 "$DIR/vllm.log" >&2; echo "error: vllm serve exited" >&2; exit 1; }
    sleep 1
  done
fi
[ -n "$model" ] && [ -n "$tokenizer" ] || { echo "error: --url needs --model NAME and --tokenizer DIR (for vllm bench serve)" >&2; exit 2; }
export OPENAI_API_KEY=${VLLM_API_KEY:-}

# halobox C FILE / vllm_bench C FILE: one level's output tokens/s into FILE.
halobox() {
  "$HALOBOX_BIN" bench serving --url "$url" --model "$model" --concurrency "$1" --requests "$requests" \
    --input-tokens "$input" --output-tokens "$output" --save "$DIR/hb-$1-$r" --json >"$DIR/hb.json" 2>>"$DIR/hb.log"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["levels"][0]["output_throughput"])' "$DIR/hb.json" >"$2"
}
vllm_bench() {
  HF_HUB_OFFLINE=1 "$VENV/bin/vllm" bench serve --backend vllm --base-url "$url" --model "$model" --tokenizer "$tokenizer" \
    --dataset-name random --random-input-len "$input" --random-output-len "$output" --random-range-ratio 0 \
    --num-prompts "$requests" --max-concurrency "$1" --ignore-eos --num-warmups 1 --disable-tqdm \
    --save-result --result-dir "$DIR" --result-filename "vb.json" >>"$DIR/vb.log" 2>&1 \
    || { tail -n 30 "$DIR/vb.log" >&2; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["output_throughput"])' "$DIR/vb.json" >"$2"
}

IFS=, read -r -a conc <<<"$levels"
for c in "${conc[@]}"; do
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then
      log "concurrency $c, round $r: halobox, then vllm bench serve"
      halobox "$c" "$DIR/h.$c.$r"; vllm_bench "$c" "$DIR/v.$c.$r"
    else
      log "concurrency $c, round $r: vllm bench serve, then halobox"
      vllm_bench "$c" "$DIR/v.$c.$r"; halobox "$c" "$DIR/h.$c.$r"
    fi
  done
done

python3 - "$DIR" "$levels" "$rounds" "$requests" "$input" "$output" <<'EOF'
import sys
d, levels, rounds, requests, inp, out = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), *sys.argv[4:]
def mean(kind, c):
    xs = [float(open(f"{d}/{kind}.{c}.{r}").read()) for r in range(1, rounds + 1)]
    return sum(xs) / len(xs), xs
print(f"output tokens/s, {requests} requests of {inp} + {out} tokens per level, mean of {rounds} round(s):")
ratios = []
for c in levels:
    h, hs = mean("h", c)
    v, vs = mean("v", c)
    ratios.append((c, h / v))
    print(f"  concurrency {c}: halobox bench serving {h:.1f} ({', '.join(f'{x:.1f}' for x in hs)}), "
          f"vllm bench serve {v:.1f} ({', '.join(f'{x:.1f}' for x in vs)})")
worst = max(ratios, key=lambda cr: abs(cr[1] - 1))
print("output tokens/s, halobox / vllm bench serve: "
      + ", ".join(f"c{c} {r:.3f}x" for c, r in ratios)
      + f" (goal 0.90x to 1.10x; furthest: {worst[1]:.3f}x)")
EOF

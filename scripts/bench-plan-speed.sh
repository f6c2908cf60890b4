#!/usr/bin/env bash
# `halobox plan`'s decode estimate beside a measured decode on this
# machine: llama.cpp's CPU build (scripts/llama-cpp.sh, in
# $HALOBOX_LLAMA_CPP) decoding a small GGUF on one node, against plan's
# estimate for one node with this machine's memory bandwidth measured here
# (a STREAM-like read: a C loop summing a 1 GiB array on every core, best
# of 5). It checks the estimate's shape, not its Strix Halo constants: the
# per-layer cost is calibrated for a Strix Halo GPU, so the ratio on a CPU
# is information, not a goal, and not a Strix Halo figure.
# Its last line: measured / estimated decode tokens/s.
# usage: scripts/bench-plan-speed.sh [--model FILE.gguf] [--tokens N (default 128)] [--threads N (default: nproc)]
#   --model: default SmolLM2-135M-Instruct Q4_1, which scripts/llama-cpp.sh
#   keeps in $HALOBOX_LLAMA_CPP/models.
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
llama=${HALOBOX_LLAMA_CPP:-/opt/halobox-llama-cpp}
model=$llama/models/SmolLM2-135M-Instruct.Q4_1.gguf
tokens=128
threads=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
  --model) model=$2; shift 2 ;;
  --tokens) tokens=$2; shift 2 ;;
  --threads) threads=$2; shift 2 ;;
  *) echo "usage: $0 [--model FILE.gguf] [--tokens N] [--threads N]" >&2; exit 2 ;;
  esac
done
[ -x "$llama/bin/llama-completion" ] || { echo "error: no $llama/bin/llama-completion: run scripts/llama-cpp.sh" >&2; exit 1; }
[ -f "$model" ] || { echo "error: no model $model" >&2; exit 1; }
halobox=$(bash scripts/release-bin.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/stream.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define N (1L << 27)
int main(void) {
  double *a = malloc(N * sizeof *a), best = 0;
  for (long i = 0; i < N; i++) a[i] = (double)i;
  for (int r = 0; r < 5; r++) {
    struct timespec t0, t1;
    double s = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
#pragma omp parallel for reduction(+ : s)
    for (long i = 0; i < N; i++) s += a[i];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double gbs = N * sizeof *a / ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9) / 1e9;
    if (gbs > best) best = gbs;
    if (s < 0) puts("");
  }
  printf("%.2f\n", best);
  return 0;
}
EOF
gcc -O2 -fopenmp -o "$work/stream" "$work/stream.c"
bandwidth=$(OMP_NUM_THREADS=$threads "$work/stream")
echo "memory bandwidth (read, $threads threads, best of 5): $bandwidth GB/s"

estimate=$("$halobox" plan "$model" --nodes 1 --gtt 64G --memory-bandwidth-gbs "$bandwidth" --json |
  python3 -c 'import json, sys
d = json.load(sys.stdin)
s = d["splits"][d["chosen"]]
e = s["speed"]
print("%.2f %.2f %.2f %.2f" % (s["decode_tokens_per_s"], e["read_s"] * 1e3, e["layers_s"] * 1e3, e["link_s"] * 1e3))')
read -r est read_ms layers_ms link_ms <<<"$estimate"
echo "plan's estimate: $est tokens/s (reads $read_ms ms + layers $layers_ms ms + link $link_ms ms a token)"

"$llama/bin/llama-completion" -m "$model" -p "The capital of France is" -n "$tokens" -t "$threads" \
  -no-cnv --no-display-prompt --temp 0 --no-warmup >"$work/out" 2>"$work/err" </dev/null || {
  tail -20 "$work/err" >&2
  exit 1
}
measured=$(grep -E '^[^a-z]*(common_perf_print|llama_perf_context_print|llama_print_timings): +eval time' "$work/err" |
  sed -E 's/.*, *([0-9.]+) tokens per second.*/\1/' | tail -1)
[ -n "$measured" ] || { echo "error: no eval time line in llama-completion's output" >&2; tail -20 "$work/err" >&2; exit 1; }
echo "measured: $measured tokens/s (llama-completion, $tokens tokens, $threads threads, $(basename "$model"))"
python3 -c "import sys; print('measured / estimated decode: %.2fx' % (float(sys.argv[1]) / float(sys.argv[2])))" "$measured" "$est"

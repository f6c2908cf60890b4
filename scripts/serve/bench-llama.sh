#!/usr/bin/env bash
# scripts/bench-serve.sh --engine llama.cpp: `halobox serve` against
# the same RPC servers and llama-server started by hand, in the same
# containers on the same test nodes (scripts/serve/lib.sh's llama_setup). By
# hand is what the guides do: `ggml-rpc-server -H ADDR -p 50052 -c` in every
# worker's container, then `llama-server -m MODEL -ngl 99 --rpc
# W1:50052,...` on the head. The RPC servers run before the clock starts on
# both sides (`cluster up` for halobox): each round times the command to an
# answering /health (halobox: `serve --detach` returning, which waits for
# it), then one greedy request whose tokens both sides must agree on, then
# decode with scripts/serve/decode.py: REQUESTS requests of TOKENS tokens,
# each timed by the client and by llama-server's own
# `timings.predicted_per_second`. The sides' order rotates between rounds;
# medians are compared. Then, as information, decode tokens per second by
# llama-server alone on the head, and over 1 and 2 RPC workers.
# --variants: the halobox sides, each holding one difference alone
# (comma-separated; default `halobox`): halobox (as a user runs it),
# no-metrics (`cluster up --no-metrics`), no-api-key (`serve --no-api-key`),
# restart (`serve --restart=on-failure --detach`: the supervisor watching), prometheus
# (a real Prometheus scraping the cluster's metrics once a second).
# Its last lines are the ratios, one per variant:
#   VARIANT: ready halobox / by hand (goal <= 1.10x), decode halobox / by hand (goal >= 0.97x)
# usage (as root): scripts/bench-serve.sh --engine llama.cpp [ROUNDS (default 3)]
#   [--nodes N (default 2)] [--backend podman|docker] [--model FILE.gguf]
#   [--variants LIST] [--requests N (default 5)] [--tokens N (default 128)]
#   --model: default SmolLM2-135M-Instruct Q4_1, which scripts/llama-cpp.sh
#   keeps in $HALOBOX_LLAMA_CPP/models.
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
{
cd "$(dirname "$0")/../.."
root=$PWD
rounds=3 nodes=2 backend=podman model='' variants=halobox requests=5 tokens=128
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) [ "$2" = llama.cpp ] || { echo "error: this script benches --engine llama.cpp" >&2; exit 2; }; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  --model) model=$2; shift 2 ;;
  --variants) variants=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --tokens) tokens=$2; shift 2 ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: scripts/bench-serve.sh --engine llama.cpp [ROUNDS] [--nodes N] [--backend podman|docker] [--model FILE.gguf] [--variants LIST] [--requests N] [--tokens N]" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a VARIANTS <<<"$variants"
for v in "${VARIANTS[@]}"; do
  case "$v" in
  halobox | no-metrics | no-api-key | restart | prometheus) ;;
  *) echo "error: --variants: unknown variant $v (halobox, no-metrics, no-api-key, restart, prometheus)" >&2; exit 2 ;;
  esac
done
[ "$nodes" -ge 2 ] 2>/dev/null && [ "$nodes" -le 4 ] || { echo "error: --nodes must be 2..4" >&2; exit 2; }
model=${model:-${HALOBOX_LLAMA_CPP:-/opt/halobox-llama-cpp}/models/SmolLM2-135M-Instruct.Q4_1.gguf}
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
total=$((nodes > 3 ? nodes : 3))
llama_setup lb "$backend" "$total" "$model"
llama_refresh
# The cluster the comparison serves on: the first $nodes nodes.
BENCH_CFG=$DIR/bench.toml
awk -v n="$nodes" '/^\[\[node\]\]/ { k++ } k <= n' "$CFG" >"$BENCH_CFG"
KEY=$DIR/bench.api-key
HEAD_IP=$(node_ip a)

# rpc_by_hand X...: the RPC server started by hand in each node's container.
rpc_by_hand() {
  local x
  for x in "$@"; do
    in_container "$x" sh -c "mkdir -p /tmp/halobox-e2e; setsid $LLAMA/bin/ggml-rpc-server -H $(node_ip "$x") -p $PORT -c \
      </dev/null >/tmp/halobox-e2e/rpc.log 2>&1 & echo \$! >/tmp/halobox-e2e/rpc.pid"
    wait_listen "$x" "$PORT" || fail "the RPC server started by hand on node $x did not listen"
  done
}
# rpc_stop X...: stops them.
rpc_stop() {
  local x
  # shellcheck disable=SC2016
  for x in "$@"; do in_container "$x" sh -c 'kill "$(cat /tmp/halobox-e2e/rpc.pid)" 2>/dev/null; true'; done
  for x in "$@"; do
    for _ in $(seq 50); do [ -z "$(ip netns exec "hb-$TAG-$x" ss -ltnH "sport = :$PORT")" ] && break; sleep 0.2; done
  done
}
# head_by_hand WORKER...: llama-server by hand on the head over those workers' RPC servers (none: alone).
head_by_hand() {
  local rpc='' x
  for x in "$@"; do rpc="$rpc${rpc:+,}$(node_ip "$x"):$PORT"; done
  in_container a sh -c "mkdir -p /tmp/halobox-e2e; setsid $LLAMA/bin/llama-server -m $MODEL --host $HEAD_IP --port 8000 -ngl 99 ${rpc:+--rpc $rpc} \
    </dev/null >/tmp/halobox-e2e/ref.log 2>&1 & echo \$! >/tmp/halobox-e2e/ref.pid"
}
# health_poll: until the head's /health answers 200, polled every 0.1 s (as halobox does).
health_poll() {
  for _ in $(seq 6000); do
    ip netns exec "hb-$TAG-a" curl -sf -o /dev/null --max-time 2 "http://$HEAD_IP:8000/health" && return 0
    sleep 0.1
  done
  return 1
}
# decode NAME [KEY_FILE]: one request for the tokens (its JSON in $DIR/NAME.tokens.json,
# and the warm-up), then decode_measure (scripts/serve/lib.sh).
decode() {
  ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$HEAD_IP:8000" "$PROMPT" 64 ${2:+"$2"} \
    >"$DIR/$1.tokens.json" || fail "first request to $1"
  decode_measure "$1" llama.cpp "http://$HEAD_IP:8000" "$tokens" "$requests" "${2:-}"
}

WORKER_LIST=$(echo "$NODE_NAMES" | cut -d' ' -f2-"$nodes")
by_halobox() { # VARIANT
  local v=$1 up=() serve=(--detach) key=$KEY
  case "$v" in
  no-metrics) up=(--no-metrics) ;;
  no-api-key) serve+=(--no-api-key); key= ;;
  restart) serve+=(--restart=on-failure) ;;
  esac
  step "round $r: $v (cluster up ${up[*]}, serve ${serve[*]})"
  hb cluster up --cluster "$BENCH_CFG" "${up[@]}" >/dev/null 2>&1 || fail "cluster up ${up[*]}"
  t0=$(now)
  hb serve "$MODEL" "${serve[@]}" --cluster "$BENCH_CFG" >/dev/null 2>"$DIR/serve.err" \
    || { cat "$DIR/serve.err" >&2; fail "halobox serve"; }
  elapsed "$t0" >>"$DIR/$v.ready"
  [ "$v" != prometheus ] || prometheus_start "$BENCH_CFG"
  decode "$v" "$key"
  [ "$v" != prometheus ] || prometheus_stop
  hb serve stop --cluster "$BENCH_CFG" >/dev/null
  hb cluster down --cluster "$BENCH_CFG" >/dev/null 2>&1 || true
}
by_hand() {
  step "round $r: by hand (ggml-rpc-server in each worker's container, llama-server on the head)"
  # shellcheck disable=SC2086
  rpc_by_hand $WORKER_LIST
  t0=$(now)
  # shellcheck disable=SC2086
  head_by_hand $WORKER_LIST
  health_poll || fail "llama-server by hand did not come up: $(in_container a tail -n 20 /tmp/halobox-e2e/ref.log)"
  elapsed "$t0" >>"$DIR/hand.ready"
  decode hand
  stop_plain a
  # shellcheck disable=SC2086
  rpc_stop $WORKER_LIST
}
side() { if [ "$1" = hand ]; then by_hand; else by_halobox "$1"; fi; }
SIDES=(hand "${VARIANTS[@]}")
bench_rounds "$rounds" "${SIDES[@]}"
for v in "${VARIANTS[@]}"; do
  same_tokens "$DIR/$v.tokens.json" "$DIR/hand.tokens.json" || fail "halobox serve ($v) and the servers by hand gave different tokens"
done

step "information: decode by llama-server alone, and over 1 and 2 RPC workers"
declare -a scale
for workers in "" "b" "b c"; do
  n=$(echo "$workers" | wc -w)
  # shellcheck disable=SC2086
  [ -z "$workers" ] || rpc_by_hand $workers
  # shellcheck disable=SC2086
  head_by_hand $workers
  health_poll || fail "llama-server by hand did not come up"
  decode "scale$n"
  scale+=("$(tail -n 1 "$DIR/scale$n.decode" | cut -d' ' -f1)")
  stop_plain a
  # shellcheck disable=SC2086
  [ -z "$workers" ] || rpc_stop $workers
done

echo "model: $(basename "$MODEL"); $backend test nodes; greedy"
echo "decode by hand, information: 1 node ${scale[0]}, 2 nodes ${scale[1]}, 3 nodes ${scale[2]} tokens/s"
bench_summary "$rounds" "$nodes nodes, $backend, $requests requests of $tokens tokens each per round" "${SIDES[@]}"
exit 0
}

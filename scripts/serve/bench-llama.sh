#!/usr/bin/env bash
# scripts/bench-serve.sh --engine llama.cpp: `halobox serve` against the same
# RPC servers and llama-server started by hand, in the same containers on
# the same test nodes (scripts/serve/lib.sh's llama_setup). By hand is what
# the guides do: `ggml-rpc-server -H ADDR -p 50052 -c` in every worker's
# container, then `llama-server -m MODEL -ngl 99 --rpc W1:50052,...` on the
# head. The RPC servers run before the clock starts on both sides (`cluster
# up` for halobox): each round times the command to an answering /health
# (halobox: `serve --detach` returning, which waits for it), then a greedy
# request of 64 tokens, three times, for decode tokens per second (their median),
# after a 4-token warm-up.
# Which side goes first alternates between rounds; medians are compared.
# Then, as information, decode tokens per second by llama-server alone on
# the head, and over 1 and 2 RPC workers (2 and 3 nodes).
# Its last two lines are the ratios:
#   time until the API answers: halobox / by hand   (goal <= 1.10x)
#   decode tokens per second:   halobox / by hand   (goal >= 0.97x)
# usage (as root): scripts/bench-serve.sh --engine llama.cpp [ROUNDS (default 3)]
#   [--nodes N (default 2)] [--backend podman|docker] [--model FILE.gguf]
#   --model: default SmolLM2-135M-Instruct Q4_1, which scripts/llama-cpp.sh
#   keeps in $HALOBOX_LLAMA_CPP/models.
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
{
cd "$(dirname "$0")/../.."
root=$PWD
rounds=3 nodes=2 backend=podman model=
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) [ "$2" = llama.cpp ] || { echo "error: this script benches --engine llama.cpp" >&2; exit 2; }; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  --model) model=$2; shift 2 ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: scripts/bench-serve.sh --engine llama.cpp [ROUNDS] [--nodes N] [--backend podman|docker] [--model FILE.gguf]" >&2; exit 2 ;;
  esac
done
[ "$nodes" -ge 2 ] 2>/dev/null && [ "$nodes" -le 4 ] || { echo "error: --nodes must be 2..4" >&2; exit 2; }
model=${model:-${HALOBOX_LLAMA_CPP:-/opt/halobox-llama-cpp}/models/SmolLM2-135M-Instruct.Q4_1.gguf}
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
TOKENS=64
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
# decode [KEY_FILE]: the warm-up, then 3 measured requests (the last's JSON in $DIR/last.json); the median tokens per second.
decode() {
  ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$HEAD_IP:8000" "$PROMPT" 4 ${1:+"$1"} >/dev/null \
    || fail "warm-up request"
  for _ in 1 2 3; do
    ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$HEAD_IP:8000" "$PROMPT" "$TOKENS" ${1:+"$1"} >"$DIR/last.json" \
      || fail "request"
    tps "$DIR/last.json"
  done | sort -g | sed -n 2p
}

WORKER_LIST=$(echo "$NODE_NAMES" | cut -d' ' -f2-"$nodes")
declare -a t_hb t_hand d_hb d_hand
by_halobox() {
  step "round $r: halobox (cluster up, serve --detach)"
  hb cluster up --cluster "$BENCH_CFG" >/dev/null 2>&1 || fail "cluster up"
  t0=$(now)
  hb serve "$MODEL" --detach --cluster "$BENCH_CFG" >/dev/null 2>"$DIR/serve.err" \
    || { cat "$DIR/serve.err" >&2; fail "halobox serve"; }
  t_hb+=("$(elapsed "$t0")")
  d_hb+=("$(decode "$KEY")")
  cp "$DIR/last.json" "$DIR/hb.json"
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
  t_hand+=("$(elapsed "$t0")")
  d_hand+=("$(decode)")
  cp "$DIR/last.json" "$DIR/hand.json"
  stop_plain a
  # shellcheck disable=SC2086
  rpc_stop $WORKER_LIST
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then by_halobox; by_hand; else by_hand; by_halobox; fi
  echo "round $r: ready ${t_hb[-1]} s vs ${t_hand[-1]} s; decode ${d_hb[-1]} vs ${d_hand[-1]} tokens/s" >&2
done
same_tokens "$DIR/hb.json" "$DIR/hand.json" || fail "halobox serve and the servers by hand gave different tokens"

step "information: decode by llama-server alone, and over 1 and 2 RPC workers"
declare -a scale
for workers in "" "b" "b c"; do
  # shellcheck disable=SC2086
  [ -z "$workers" ] || rpc_by_hand $workers
  # shellcheck disable=SC2086
  head_by_hand $workers
  health_poll || fail "llama-server by hand did not come up"
  scale+=("$(decode)")
  stop_plain a
  # shellcheck disable=SC2086
  [ -z "$workers" ] || rpc_stop $workers
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mt_hb=$(median "${t_hb[@]}") mt_hand=$(median "${t_hand[@]}")
md_hb=$(median "${d_hb[@]}") md_hand=$(median "${d_hand[@]}")
echo "model: $(basename "$MODEL"); $backend test nodes; $TOKENS tokens greedy"
echo "decode by hand, information: 1 node ${scale[0]}, 2 nodes ${scale[1]}, 3 nodes ${scale[2]} tokens/s"
echo "halobox serve: ready in $mt_hb s, decode $md_hb tokens/s (median of $rounds, $nodes nodes)"
echo "by hand:       ready in $mt_hand s, decode $md_hand tokens/s"
python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'time until the API answers: halobox / by hand = {a/b:.2f}x (goal <= 1.10x)')" "$mt_hb" "$mt_hand"
python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'decode tokens per second: halobox / by hand = {a/b:.2f}x (goal >= 0.97x)')" "$md_hb" "$md_hand"
exit 0
}

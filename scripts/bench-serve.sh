#!/usr/bin/env bash
# `halobox serve` against the same vLLM started by hand, on the same test
# nodes and containers (scripts/serve/lib.sh): by hand is what the guides do
# (`ray start --head` / `ray start --address` in each container with the
# node's GLOO_SOCKET_IFNAME and VLLM_HOST_IP, then `vllm serve --tp N
# --distributed-executor-backend ray` on the head). Each round times every
# side from the command to an API that lists the model, then measures decode
# with scripts/serve/decode.py: a 4-token warm-up (the first request
# compiles torch's CPU kernels), then REQUESTS greedy requests of TOKENS
# tokens, each timed by the client and by vLLM's own counters (/metrics:
# generation tokens over decode seconds). The order of the sides rotates
# between rounds, and the medians are compared, with each side's spread.
#
# --variants: the halobox sides, each holding one difference from the
# default alone (comma-separated; default `halobox`):
#   halobox       cluster up + serve --detach, as a user runs them
#   no-metrics    cluster up --no-metrics (no `halobox metrics` on the nodes)
#   insecure-ray  cluster up --insecure-ray (Ray without token authentication)
#   no-api-key    serve --no-api-key (no key, no key middleware)
#   bare          all three of the above at once
#   restart       serve --restart=on-failure --detach (the supervisor and its probes watching)
#   prometheus    a real Prometheus scraping every node's `halobox metrics`
#                 and the engine's /metrics once a second
#   worker-niceN  Ray's workers (vLLM's ranks) at niceness N (0..19; 15 is
#                 Ray's own default): `RAY_worker_niceness = "N"` in the
#                 cluster file's [env]
# Its last lines are the ratios, one line per variant:
#   VARIANT: ready halobox / by hand (goal <= 1.10x), decode halobox / by hand (goal >= 0.97x)
# usage (as root): scripts/bench-serve.sh [ROUNDS (default 3)] [--engine vllm]
#   [--nodes N] [--backend podman|docker] [--variants LIST]
#   [--requests N (default 5)] [--tokens N (default 128)]
# With --engine llama.cpp it runs scripts/serve/bench-llama.sh: the same
# comparison for llama.cpp over RPC (its usage is there).
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
{
cd "$(dirname "$0")/.."
root=$PWD
for a in "$@"; do [ "$a" = llama.cpp ] && exec bash scripts/serve/bench-llama.sh "$@"; done
rounds=3 nodes=2 backend=podman variants=halobox requests=5 tokens=128
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) [ "$2" = vllm ] || { echo "error: --engine $2: vllm or llama.cpp" >&2; exit 2; }; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  --variants) variants=$2; shift 2 ;;
  --requests) requests=$2; shift 2 ;;
  --tokens) tokens=$2; shift 2 ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: $0 [ROUNDS] [--engine vllm] [--nodes N] [--backend podman|docker] [--variants LIST] [--requests N] [--tokens N]" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a VARIANTS <<<"$variants"
for v in "${VARIANTS[@]}"; do
  case "$v" in
  halobox | no-metrics | insecure-ray | no-api-key | bare | restart | prometheus | worker-nice[0-9] | worker-nice1[0-9]) ;;
  *) echo "error: --variants: unknown variant $v (halobox, no-metrics, insecure-ray, no-api-key, bare, restart, prometheus, worker-niceN)" >&2; exit 2 ;;
  esac
done
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
serve_setup "$backend" "$nodes" "" 2,256,4,2
for x in $NODE_NAMES; do on_node "$x" "$HALOBOX" refresh --backend "$backend" --image "$IMAGE" --memlock 8M --name vllm \
  --volume "$VENV:$VENV:ro" --volume "$MODEL_HOST:$MODEL:ro" --yes >/dev/null; done

# The guides' Ray, by hand, in every container.
ray_by_hand() {
  local x ip head_ip
  head_ip=$(node_ip a)
  for x in $NODE_NAMES; do
    ip=$(node_ip "$x")
    local role=(--head --port=6379 --include-dashboard=false)
    [ "$x" = a ] || role=(--address="$head_ip:6379")
    in_container "$x" env GLOO_SOCKET_IFNAME=dp0 NCCL_SOCKET_IFNAME=dp0 VLLM_HOST_IP="$ip" HF_HUB_OFFLINE=1 \
      VLLM_CPU_KVCACHE_SPACE=1 RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES=1 \
      "$VENV/bin/ray" start "${role[@]}" --node-ip-address="$ip" --num-gpus=1 --num-cpus=1 \
      --object-store-memory=200000000 --disable-usage-stats >/dev/null 2>&1 || fail "ray start on $x"
  done
}
ray_stop_all() { for x in $NODE_NAMES; do in_container "$x" "$VENV/bin/ray" stop >/dev/null 2>&1 || true; done; }

# measure NAME [KEY_FILE]: decode_measure (scripts/serve/lib.sh) against the head's API.
measure() { decode_measure "$1" vllm "http://$(node_ip a):8000" "$tokens" "$requests" "${2:-}"; }

by_halobox() { # VARIANT
  local v=$1 up=() serve=(--detach) key=$DIR/cluster.api-key cfg=$CFG
  case "$v" in
  no-metrics) up=(--no-metrics) ;;
  insecure-ray) up=(--insecure-ray) ;;
  no-api-key) serve+=(--no-api-key); key= ;;
  bare) up=(--no-metrics --insecure-ray); serve+=(--no-api-key); key= ;;
  restart) serve+=(--restart=on-failure) ;;
  worker-nice*)
    cfg=$DIR/$v.toml key=$DIR/$v.api-key
    sed "s/^\\[env\\]\$/[env]\\nRAY_worker_niceness = \"${v#worker-nice}\"/" "$CFG" >"$cfg"
    ;;
  esac
  step "round $r: $v (cluster up ${up[*]}, serve ${serve[*]})"
  hb cluster up --cluster "$cfg" "${up[@]}" >/dev/null 2>&1 || fail "cluster up ${up[*]}"
  t0=$(now)
  hb serve "$MODEL" --tp "$nodes" "${serve[@]}" --cluster "$cfg" --max-model-len 512 -- --dtype float32 >/dev/null 2>"$DIR/serve.err" \
    || { cat "$DIR/serve.err" >&2; fail "halobox serve"; }
  elapsed "$t0" >>"$DIR/$v.ready"
  [ "$v" != prometheus ] || prometheus_start "$cfg"
  measure "$v" "$key"
  [ "$v" != prometheus ] || prometheus_stop
  hb serve stop --cluster "$cfg" >/dev/null
  hb cluster down --cluster "$cfg" >/dev/null 2>&1 || true
}
by_hand() {
  step "round $r: by hand (ray start in each container, vllm serve on the head)"
  ray_by_hand
  t0=$(now)
  PLAIN_ENV="GLOO_SOCKET_IFNAME=dp0 NCCL_SOCKET_IFNAME=dp0 VLLM_HOST_IP=$(node_ip a)" plain_vllm a 8000 "$nodes"
  for _ in $(seq 1200); do
    ip netns exec "hb-$TAG-a" python3 -c "import json,sys,urllib.request as u; d=json.load(u.urlopen('http://$(node_ip a):8000/v1/models',timeout=2)); sys.exit(0 if any(m['id']=='$MODEL' for m in d['data']) else 1)" 2>/dev/null && break
    sleep 0.5
  done
  elapsed "$t0" >>"$DIR/hand.ready"
  measure hand
  stop_plain a
  ray_stop_all
}
side() { if [ "$1" = hand ]; then by_hand; else by_halobox "$1"; fi; }
SIDES=(hand "${VARIANTS[@]}")
bench_rounds "$rounds" "${SIDES[@]}"

bench_summary "$rounds" "$nodes nodes, $backend, $requests requests of $tokens tokens each per round" "${SIDES[@]}"
exit 0
}

#!/usr/bin/env bash
# `halobox serve` against the same vLLM started by hand, on the same test
# nodes and containers (scripts/serve/lib.sh): by hand is what the guides do
# (`ray start --head` / `ray start --address` in each container with the
# node's GLOO_SOCKET_IFNAME and VLLM_HOST_IP, then `vllm serve --tp N
# --distributed-executor-backend ray` on the head). Each round times both
# from the command to an API that lists the model, then one greedy request
# of 64 tokens for decode tokens per second, after a 4-token warm-up request
# (the first request compiles torch's CPU kernels). Which side goes first
# alternates between rounds, and the medians are compared. Its last two lines are the ratios:
#   time until the API answers: halobox / by hand   (goal <= 1.10x)
#   decode tokens per second:   halobox / by hand   (goal >= 0.97x)
# usage (as root): scripts/bench-serve.sh [ROUNDS (default 3)] [--engine vllm]
#   [--nodes N] [--backend podman|docker]
# With --engine llama.cpp it runs scripts/serve/bench-llama.sh: the same
# comparison for llama.cpp over RPC (its usage is there).
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
{
cd "$(dirname "$0")/.."
root=$PWD
for a in "$@"; do [ "$a" = llama.cpp ] && exec bash scripts/serve/bench-llama.sh "$@"; done
rounds=3 nodes=2 backend=podman
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) [ "$2" = vllm ] || { echo "error: --engine $2: vllm or llama.cpp" >&2; exit 2; }; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: $0 [ROUNDS] [--engine vllm] [--nodes N] [--backend podman|docker]" >&2; exit 2 ;;
  esac
done
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
TOKENS=64
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

declare -a t_hb t_hand d_hb d_hand
by_halobox() {
  step "round $r: halobox (cluster up, serve --detach)"
  hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up"
  t0=$(now)
  hb serve "$MODEL" --tp "$nodes" --detach --cluster "$CFG" --max-model-len 512 -- --dtype float32 >/dev/null 2>"$DIR/serve.err" \
    || { cat "$DIR/serve.err" >&2; fail "halobox serve"; }
  t_hb+=("$(elapsed "$t0")")
  complete a 8000 4 "$DIR/cluster.api-key" >/dev/null || fail "warm-up request to halobox serve"
  complete a 8000 "$TOKENS" "$DIR/cluster.api-key" >"$DIR/hb.json" || fail "request to halobox serve"
  d_hb+=("$(tps "$DIR/hb.json")")
  hb serve stop --cluster "$CFG" >/dev/null
  hb cluster down --cluster "$CFG" >/dev/null 2>&1 || true
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
  t_hand+=("$(elapsed "$t0")")
  complete a 8000 4 >/dev/null || fail "warm-up request to the vLLM started by hand"
  complete a 8000 >"$DIR/hand.json" || fail "request to the vLLM started by hand"
  d_hand+=("$(tps "$DIR/hand.json")")
  stop_plain a
  ray_stop_all
}
# Odd rounds start with halobox, even rounds by hand: neither side always
# meets the colder page cache.
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then by_halobox; by_hand; else by_hand; by_halobox; fi
  echo "round $r: ready ${t_hb[-1]} s vs ${t_hand[-1]} s; decode ${d_hb[-1]} vs ${d_hand[-1]} tokens/s" >&2
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mt_hb=$(median "${t_hb[@]}") mt_hand=$(median "${t_hand[@]}")
md_hb=$(median "${d_hb[@]}") md_hand=$(median "${d_hand[@]}")
echo "halobox serve: ready in $mt_hb s, decode $md_hb tokens/s (median of $rounds, $nodes nodes, $backend)"
echo "by hand:       ready in $mt_hand s, decode $md_hand tokens/s"
python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'time until the API answers: halobox / by hand = {a/b:.2f}x (goal <= 1.10x)')" "$mt_hb" "$mt_hand"
python3 -c "import sys; a,b=map(float,sys.argv[1:3]); print(f'decode tokens per second: halobox / by hand = {a/b:.2f}x (goal >= 0.97x)')" "$md_hb" "$md_hand"
exit 0
}

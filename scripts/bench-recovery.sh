#!/usr/bin/env bash
# scripts/bench-recovery.sh: the seconds from a fault to serving again, on
# test nodes (scripts/serve/lib.sh): halobox's supervisor (`serve --detach
# --restart`) against the steps a person runs by hand once they know
# (`serve stop; cluster up; serve --detach`, started at the moment of the
# fault: no time to notice is counted for the person). "Serving again" is
# the first 1-token completion that answers (polled every 0.2 s from the
# fault on, both sides the same). Faults, per round:
#   llama.cpp (default):
#     kill9:  llama-server killed with kill -9 in the head's container;
#     rpc:    node b's RPC server killed with kill -9 in its container;
#   vLLM (--engine vllm, TP 2 over Ray, vLLM's CPU build):
#     kill9:  vLLM killed with kill -9 in the head's container;
#     worker: node b's whole container killed (`cluster up` starts it
#             again and b rejoins the head's Ray);
#     raylet: node b's raylet killed with kill -9 (its container stays);
#     gcs:    the head's gcs_server killed with kill -9 (Ray's control
#             store: the head's raylet and the engine outlive it a while).
# --faults LIST picks some of the engine's faults (comma-separated; default
# kill9,rpc for llama.cpp, kill9,worker,raylet,gcs for vLLM).
# Medians over the rounds; the last lines are the ratios halobox / by hand,
# one per fault, each ending in `x` (goal <= 1.2x, with no person involved).
# usage (as root): scripts/bench-recovery.sh [ROUNDS (default 3)] [--engine llama.cpp|vllm] [--backend podman|docker] [--faults LIST]
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
{
cd "$(dirname "$0")/.."
root=$PWD
rounds=3 backend=podman engine=llama.cpp only=
while [ $# -gt 0 ]; do
  case "$1" in
  --backend) backend=$2; shift 2 ;;
  --engine) engine=$2; shift 2 ;;
  --faults) only=$2; shift 2 ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: scripts/bench-recovery.sh [ROUNDS] [--engine llama.cpp|vllm] [--backend podman|docker] [--faults LIST]" >&2; exit 2 ;;
  esac
done
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
case "$engine" in
llama.cpp)
  llama_setup rc "$backend" 2
  llama_refresh
  faults="kill9 rpc"
  serve_args=("$MODEL")
  client=(scripts/serve/complete-llama.py)
  ;;
vllm)
  serve_setup "$backend" 2 "" 2,256,4,2
  for x in $NODE_NAMES; do on_node "$x" "$HALOBOX" refresh --backend "$backend" --image "$IMAGE" --memlock 8M --name vllm \
    --volume "$VENV:$VENV:ro" --volume "$MODEL_HOST:$MODEL:ro" --yes >/dev/null; done
  faults="kill9 worker raylet gcs"
  serve_args=("$MODEL" --tp 2 --max-model-len 512 -- --dtype float32)
  client=(scripts/serve/complete.py)
  ;;
*) fail "--engine $engine: llama.cpp or vllm" ;;
esac
if [ -n "$only" ]; then
  for kind in ${only//,/ }; do
    case " $faults " in *" $kind "*) ;; *) fail "--faults: $kind is not a $engine fault (one of: $faults)" ;; esac
  done
  faults=${only//,/ }
fi
KEY=$DIR/cluster.api-key
HEAD_IP=$(node_ip a)
[ "$engine" = vllm ] && client+=("http://$HEAD_IP:8000" "$MODEL") || client+=("http://$HEAD_IP:8000")
client+=("$PROMPT" 1 "$KEY")

# served_after T0: polls a 1-token completion until one answers; the seconds since T0.
# A completion that answers only after more than 5 s is named on stderr (a
# request that waited on the engine, not a refused connection).
served_after() {
  local t0=$1 t1 took
  for _ in $(seq 3000); do
    t1=$(now)
    if ip netns exec "hb-$TAG-a" python3 "${client[@]}" >/dev/null 2>&1; then
      took=$(elapsed "$t1")
      python3 -c "import sys; sys.exit(float(sys.argv[1]) <= 5)" "$took" && echo "  note: the answering completion itself took $took s" >&2
      elapsed "$t0"
      return 0
    fi
    sleep 0.2
  done
  fail "not serving again within 10 minutes"
}
# engine_pid: the serve's pid in the head's container.
engine_pid() { hb serve status --json --cluster "$CFG" | python3 -c 'import json,sys; print(json.load(sys.stdin)["serve"]["pid"])'; }
# rpc_pid: node b's RPC server's pid.
rpc_pid() { hb cluster status --cluster "$CFG" | awk '$1 == "b" && $3 == "running" { sub(",", "", $5); print $5; exit }'; }
# engine_cli X ARGS...: node X's own podman or docker.
engine_cli() {
  local x=$1 pid
  shift
  pid=$(cat "$DIR/node_$x.pid")
  case "$backend" in
  podman) podman --url "unix:///proc/$pid/root/run/podman/podman.sock" "$@" ;;
  *) docker -H "unix:///proc/$pid/root/run/docker.sock" "$@" ;;
  esac
}
# fault KIND: makes it.
fault() {
  case "$1" in
  kill9) in_container a kill -KILL "$(engine_pid)" ;;
  rpc) in_container b kill -KILL "$(rpc_pid)" ;;
  worker) engine_cli b kill vllm >/dev/null ;;
  raylet) on_node b pkill -KILL -x raylet ;;
  gcs) on_node a pkill -KILL -x gcs_server ;;
  esac
}

declare -A hbs hands
for r in $(seq "$rounds"); do
  for kind in $faults; do
    step "round $r, $kind: halobox serve --detach --restart"
    hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up"
    hb serve --detach --restart on-failure:100 --cluster "$CFG" "${serve_args[@]}" >/dev/null 2>"$DIR/serve.err" \
      || { cat "$DIR/serve.err" >&2; fail "halobox serve --restart"; }
    t0=$(now)
    fault "$kind"
    sleep 0.5
    s=$(served_after "$t0")
    hbs[$kind]="${hbs[$kind]:-} $s"
    # Where the supervisor's seconds went: its timestamped log of this round.
    for log in "$DIR"/state/halobox/serve/*.supervisor.log; do
      [ -f "$log" ] && sed 's/^/  supervisor: /' "$log" >&2 && : >"$log"
    done
    hb serve stop --cluster "$CFG" >/dev/null

    step "round $r, $kind: by hand (serve stop; cluster up; serve --detach)"
    hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up"
    hb serve --detach --cluster "$CFG" "${serve_args[@]}" >/dev/null 2>"$DIR/serve.err" \
      || { cat "$DIR/serve.err" >&2; fail "halobox serve"; }
    t0=$(now)
    fault "$kind"
    sleep 0.5
    hb serve stop --cluster "$CFG" >/dev/null
    hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up by hand"
    hb serve --detach --cluster "$CFG" "${serve_args[@]}" >/dev/null 2>"$DIR/serve.err" \
      || { cat "$DIR/serve.err" >&2; fail "halobox serve by hand"; }
    h=$(served_after "$t0")
    hands[$kind]="${hands[$kind]:-} $h"
    hb serve stop --cluster "$CFG" >/dev/null
    echo "round $r, $kind: halobox $s s, by hand $h s" >&2
  done
done
hb cluster down --cluster "$CFG" >/dev/null 2>&1 || true
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for kind in $faults; do
  echo "$kind: halobox $(echo "${hbs[$kind]}" | median) s, by hand $(echo "${hands[$kind]}" | median) s (medians of $rounds)"
done
for kind in $faults; do
  python3 -c "import sys; print(f'{sys.argv[1]}: halobox / by hand: {float(sys.argv[2]) / float(sys.argv[3]):.2f}x')" \
    "$kind" "$(echo "${hbs[$kind]}" | median)" "$(echo "${hands[$kind]}" | median)"
done
exit 0
}

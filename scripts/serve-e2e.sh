#!/usr/bin/env bash
# The whole serving path, live, on test nodes of this machine (network
# namespaces, each with its own podman or dockerd and sshd:
# scripts/netns/nodes.sh): `halobox refresh` on every node (vLLM's CPU build
# bound in read-only with --volume, and the model folder), `cluster up`,
# `halobox serve MODEL --tp N --detach` (returns once the API answers),
# `serve status` and `serve logs`, one greedy /v1/completions request,
# `serve stop`; then the same model served by plain `vllm serve` on one node
# in the same container, the same request, and the tokens compared; then
# `cluster down`, with no vLLM or Ray process left on any node.
#
# With --engine llama.cpp it runs scripts/serve/llama-e2e.sh (read there).
#
# usage: scripts/serve-e2e.sh [--engine vllm] [--model DIR] [--nodes N]
#          [--backend podman|docker] [--shape LAYERS,HIDDEN,HEADS,KV_HEADS]
#          [--faults]
#   --model DIR   a Hugging Face model folder (default: a random-weight Llama
#                 made now by scripts/serve/make-llama.py with --shape,
#                 default 2,256,4,2)
#   --faults      also: a foreground serve stopped by SIGINT (exit 0, nothing
#                 left), and one whose worker node is killed mid-request
#                 (exit non-zero naming the node, nothing left on the head)
# Its last line is `identical: yes|no` (scripts/bench-serve.sh measures).
# Exits non-zero when a step fails or the tokens differ. Needs root, the
# engines of scripts/engines/start.sh and scripts/vllm-venv.sh's venv
# (installed when missing). HALOBOX_BIN: the halobox binary (default
# target/debug/halobox, built when missing); SERVE_E2E_KEEP=1 keeps the
# nodes after a failure, to look at them.
set -euo pipefail
# One block: bash reads it whole before running it, so an edit of this file
# while it runs cannot change what runs.
{
cd "$(dirname "$0")/.."
root=$PWD

for a in "$@"; do
  [ "$a" = llama.cpp ] && exec bash scripts/serve/llama-e2e.sh "$@"
done
engine=vllm model='' nodes=2 backend=podman shape=2,256,4,2 faults=0
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) engine=$2; shift 2 ;;
  --model) model=$2; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  --shape) shape=$2; shift 2 ;;
  --faults) faults=1; shift ;;
  *) echo "usage: $0 [--engine vllm] [--model DIR] [--nodes N] [--backend podman|docker] [--shape L,H,HEADS,KV] [--faults]" >&2; exit 2 ;;
  esac
done
[ "$engine" = vllm ] || { echo "error: --engine $engine: use vllm or llama.cpp" >&2; exit 2; }
case "$backend" in podman | docker) ;; *) echo "error: --backend must be podman or docker" >&2; exit 2 ;; esac
[ "$nodes" -ge 1 ] 2>/dev/null && [ "$nodes" -le 4 ] || { echo "error: --nodes must be 1..4" >&2; exit 2; }

# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
serve_setup "$backend" "$nodes" "$model" "$shape"

step "refresh on every node (vLLM bound in read-only from $VENV)"
for x in $NODE_NAMES; do on_node "$x" "$HALOBOX" refresh --backend "$backend" --image "$IMAGE" --memlock 8M --name vllm \
  --volume "$VENV:$VENV:ro" --volume "$MODEL_HOST:$MODEL:ro" --yes >/dev/null; done

step "cluster up ($nodes nodes)"
hb cluster up --cluster "$CFG" >"$DIR/up.log" 2>&1 || { cat "$DIR/up.log" >&2; fail "cluster up"; }

step "bad input: each refused before anything starts, naming the thing and the fix"
refused() { # WHAT PATTERN ARGS...: serve ARGS must fail with PATTERN in its message
  local what=$1 pattern=$2 out
  shift 2
  if out=$(hb serve "$@" 2>&1); then fail "serve accepted $what"; fi
  grep -q -- "$pattern" <<<"$out" || fail "serve refused $what without naming it: $out"
  grep -q "hint:" <<<"$out" || fail "serve refused $what without a fix: $out"
}
refused "a model folder missing on the nodes" "missing in the container on node a ($(node_ip a))" /models/nope --cluster "$CFG"
sed "s|^vllm = .*|vllm = \"/opt/no-vllm/bin/vllm\"|" "$CFG" >"$DIR/novllm.toml"
refused "an image without vLLM" "has no \`/opt/no-vllm/bin/vllm\`" "$MODEL" --cluster "$DIR/novllm.toml"
{ cat "$CFG"; printf '\n[[node]]\nname = "z"\nssh = "root@10.77.%s.99"\nip = "10.77.%s.99"\nbackend = "%s"\ncpus = 1\n' "$NET" "$NET" "$backend"; } >"$DIR/more.toml"
refused "--tp larger than Ray's GPUs" "not in Ray: node z" "$MODEL" --tp "$((nodes + 1))" --cluster "$DIR/more.toml"
ip netns exec "hb-$TAG-a" python3 -c 'import socket, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8000)); s.listen(); time.sleep(60)' &
holder=$!
wait_listen a 8000 || fail "the port holder did not listen"
refused "a port already taken" "port 8000 is already taken" "$MODEL" --cluster "$CFG"
kill "$holder"; wait "$holder" 2>/dev/null || true

step "halobox serve $MODEL --tp $nodes --detach --preflight (VLLM_API_KEY set: it goes on stdin)"
head -c 24 /dev/urandom | base64 >"$DIR/api_key"
t0=$(now)
VLLM_API_KEY=$(cat "$DIR/api_key") hb serve "$MODEL" --tp "$nodes" --detach --preflight --cluster "$CFG" --max-model-len 512 -- --dtype float32 \
  >"$DIR/serve.out" 2>"$DIR/serve.err" || { cat "$DIR/serve.out" "$DIR/serve.err" >&2; fail "halobox serve"; }
ready_halobox=$(elapsed "$t0")
cat "$DIR/serve.out"
grep -q "^collective over $nodes node(s), backend gloo" "$DIR/serve.err" \
  || fail "serve --preflight did not run the collective: $(cat "$DIR/serve.err")"
echo "preflight: $(grep -c '^all_reduce' "$DIR/serve.err") all-reduce row(s) before vLLM started"
grep -q "^serving $MODEL at http://" "$DIR/serve.out" || fail "serve did not print the endpoint"
grep -q "Authorization: Bearer \$VLLM_API_KEY" "$DIR/serve.out" || fail "serve's curl line lacks the key header"
if grep -qF "$(cat "$DIR/api_key")" "$DIR/serve.out" "$DIR/serve.err"; then fail "serve printed the API key"; fi
ip netns exec "hb-$TAG-a" curl -s -o /dev/null -w '%{http_code}' "http://$(node_ip a):8000/v1/models" | grep -q 401 \
  || fail "the API answered without the key"
for x in $NODE_NAMES; do
  grep -q "$x ($(node_ip "$x"))" "$DIR/serve.out" || fail "serve did not name node $x among its workers"
done

step "serve status, serve logs"
hb serve status --cluster "$CFG" >"$DIR/status.out" || { cat "$DIR/status.out" >&2; fail "serve status"; }
grep -q "^serve: serving" "$DIR/status.out" || fail "serve status does not say serving: $(cat "$DIR/status.out")"
hb serve logs -n 20 --cluster "$CFG" >"$DIR/logs.out" || fail "serve logs"
[ -s "$DIR/logs.out" ] || fail "serve logs printed nothing"

step "one greedy completion over $nodes node(s)"
complete a 8000 "$TOKENS" "$DIR/api_key" >"$DIR/cluster.json" || fail "the completion from halobox serve"
cat "$DIR/cluster.json"
decode_halobox=$(tps "$DIR/cluster.json")

step "bench serving against the recorded serve (its key from VLLM_API_KEY)"
VLLM_API_KEY=$(cat "$DIR/api_key") hb bench serving --cluster "$CFG" --concurrency 1,2 --requests 2 --input-tokens 16 \
  --output-tokens 8 --save "$DIR/serving" --json >"$DIR/serving.out" 2>"$DIR/serving.err" \
  || { cat "$DIR/serving.out" "$DIR/serving.err" >&2; fail "bench serving"; }
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if r["server"] == "vllm" and r["prompt_lengths"].startswith("exact") and all(l["status"] == "ok" and l["mean_output_tokens"] == 8 for l in r["levels"]) else 1)' \
  "$DIR/serving.out" || { cat "$DIR/serving.out" >&2; fail "bench serving: not every level ok with 8-token outputs"; }
if grep -qrF "$(cat "$DIR/api_key")" "$DIR/serving.out" "$DIR/serving.err" "$DIR/serving"; then fail "bench serving printed or saved the API key"; fi

step "serve stop"
hb serve stop --cluster "$CFG" | tee "$DIR/stop.out"
grep -q "stopped vLLM" "$DIR/stop.out" || fail "serve stop did not stop vLLM"
code=0; hb serve status --cluster "$CFG" >"$DIR/status2.out" || code=$?
if [ "$code" != 3 ] || ! grep -q "^serve: stopped" "$DIR/status2.out"; then
  fail "serve status after stop (exit $code): $(cat "$DIR/status2.out")"
fi
no_vllm_left

if [ "$faults" = 1 ]; then
  step "foreground serve, then SIGINT"
  foreground_serve "$DIR/fg1"
  kill -INT "$HB_PID"
  code=0; wait "$FG_PID" || code=$?
  [ "$code" = 0 ] || { cat "$DIR/fg1.err" >&2; fail "serve stopped by SIGINT exited $code"; }
  grep -q "vLLM stopped" "$DIR/fg1.err" || fail "serve did not say it stopped vLLM"
  no_vllm_left
  if [ "$nodes" -ge 2 ]; then
    step "foreground serve, a long request, node b killed"
    foreground_serve "$DIR/fg2"
    # Without VLLM_API_KEY serve made the cluster's key, 0600 beside cluster.toml.
    [ "$(stat -c %a "$DIR/cluster.api-key")" = 600 ] || fail "the cluster's API key file is not 0600"
    grep -qF "Bearer \$(cat $DIR/cluster.api-key)" "$DIR/fg2.out" || fail "serve's curl line does not read the cluster's key file"
    complete a 8000 2000 "$DIR/cluster.api-key" >"$DIR/long.json" 2>&1 &
    sleep 3
    engine_cli b kill vllm >/dev/null
    code=0
    wait "$FG_PID" || code=$?
    cat "$DIR/fg2.err" | tail -n 25
    [ "$code" != 0 ] || fail "serve exited 0 after its worker node died"
    grep -q "node b ($(node_ip b))" "$DIR/fg2.err" || fail "serve did not name node b"
    no_vllm_left a
    echo "faults: SIGINT stopped cleanly; killed worker named (exit $code)"
  fi
fi

step "cluster down"
hb cluster down --cluster "$CFG" >"$DIR/down.log" 2>&1 || [ "$faults" = 1 ] || { cat "$DIR/down.log" >&2; fail "cluster down"; }
no_ray_left
refused "serve while the cluster is down" "the cluster is down" "$MODEL" --cluster "$CFG"
echo "bad input: 5 cases refused, each naming the thing and the fix"

step "the same model on one node by plain vllm serve (the reference)"
t0=$(now)
plain_vllm a 8001
wait_api a 8001 || fail "plain vllm serve did not come up: $(in_container a tail -n 20 /tmp/halobox-e2e/ref.log)"
ready_plain1=$(elapsed "$t0")
complete a 8001 >"$DIR/single.json" || fail "the completion from plain vllm serve"
cat "$DIR/single.json"
stop_plain a

echo "ready: halobox serve over $nodes node(s) ${ready_halobox} s; plain vllm serve on 1 node ${ready_plain1} s (information)"
echo "decode: halobox serve over $nodes node(s) $decode_halobox tokens/s"

if same_tokens "$DIR/cluster.json" "$DIR/single.json"; then
  echo "identical: yes"
  result=0
else
  echo "identical: no"
  result=1
fi
exit "$result"
}

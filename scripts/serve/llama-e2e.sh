#!/usr/bin/env bash
# scripts/serve-e2e.sh --engine llama.cpp: llama.cpp over RPC, live, on test
# nodes of this machine (scripts/netns/nodes.sh, each with its own podman or
# dockerd and sshd): `halobox refresh` on every node (llama.cpp's CPU build
# from scripts/llama-cpp.sh bound in read-only, and the model's folder), bad
# input refused, `cluster up` (an RPC server on every node but the head,
# checked with `ss` to listen on its data-plane address only), `serve
# MODEL.gguf --detach`, a second head refused, status, logs, one greedy
# completion, `bench serving --ab-transport` (refused while a request runs;
# then both legs, the serve back; SIGINT mid-run names the state, and the
# restore it prints works), `serve stop`; with --faults a worker's RPC server killed
# mid-generation (named, non-zero exit) and one frozen by SIGSTOP (named
# within the bound); `cluster down` with nothing left; then the same model by
# llama-server alone on one node, the tokens compared.
#
# usage: scripts/serve-e2e.sh --engine llama.cpp [--model FILE.gguf] [--nodes N]
#          [--backend podman|docker] [--shape LAYERS,HIDDEN,HEADS,KV_HEADS] [--faults]
#   --model FILE.gguf  a GGUF file (default: a random-weight Llama made now by
#                      scripts/serve/make-gguf.py with --shape, default 2,128,4,2)
# Its last line is `identical: yes|no`. Needs root, the engines of
# scripts/engines/start.sh and /opt/halobox-llama-cpp (scripts/llama-cpp.sh).
# HALOBOX_BIN: the halobox binary; HALOBOX_LLAMA_CPP: the llama.cpp folder (bin/, venv/;
# default /opt/halobox-llama-cpp); SERVE_E2E_KEEP=1 keeps the nodes after a failure.
set -euo pipefail
{
cd "$(dirname "$0")/../.."
root=$PWD

model='' nodes=2 backend=podman shape=2,128,4,2 faults=0
while [ $# -gt 0 ]; do
  case "$1" in
  --engine) [ "$2" = llama.cpp ] || { echo "error: this script serves --engine llama.cpp" >&2; exit 2; }; shift 2 ;;
  --model) model=$2; shift 2 ;;
  --nodes) nodes=$2; shift 2 ;;
  --backend) backend=$2; shift 2 ;;
  --shape) shape=$2; shift 2 ;;
  --faults) faults=1; shift ;;
  *) echo "usage: scripts/serve-e2e.sh --engine llama.cpp [--model FILE.gguf] [--nodes N] [--backend podman|docker] [--shape L,H,HEADS,KV] [--faults]" >&2; exit 2 ;;
  esac
done
case "$backend" in podman | docker) ;; *) echo "error: --backend must be podman or docker" >&2; exit 2 ;; esac
[ "$nodes" -ge 2 ] 2>/dev/null && [ "$nodes" -le 4 ] || { echo "error: --nodes must be 2..4" >&2; exit 2; }

# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
llama_setup le "$backend" "$nodes" "$model" "$shape"
echo "not a gguf file" >"$DIR/models/bad.gguf"
chmod a+r "$DIR/models/bad.gguf"

# llama_left [X...]: no llama-server or RPC server in the containers (every node by default) within 30 s.
llama_left() {
  local x left which
  # shellcheck disable=SC2206
  which=(${@:-$NODE_NAMES})
  for x in "${which[@]}"; do
    for _ in $(seq 30); do
      left=$(processes "$x" | grep -E 'llama-server|rpc-server' | grep -v grep || true)
      [ -z "$left" ] && break
      sleep 1
    done
    [ -z "$left" ] || fail "llama.cpp processes left on node $x: $left"
  done
}
# rpc_pid X: the pid of node X's RPC server in its container (from `cluster status`).
rpc_pid() { hb cluster status --cluster "$CFG" 2>/dev/null | awk -v n="$1" '$1 == n && $3 == "running" { sub(",", "", $5); print $5 }'; }
refused() { # WHAT PATTERN CMD ARGS...: halobox CMD must fail with PATTERN and a hint
  local what=$1 pattern=$2 out
  shift 2
  if out=$(hb "$@" 2>&1); then fail "halobox $1 accepted $what"; fi
  grep -q -- "$pattern" <<<"$out" || fail "halobox $1 refused $what without naming it: $out"
  grep -q "hint:" <<<"$out" || fail "halobox $1 refused $what without a fix: $out"
}
# fg_serve PREFIX: a foreground `halobox serve`, waited for until it serves; FG_PID set.
fg_serve() {
  hb serve "$MODEL" --cluster "$CFG" >"$1.out" 2>"$1.err" &
  FG_PID=$!
  for _ in $(seq 300); do
    grep -q "^serving " "$1.out" 2>/dev/null && return 0
    kill -0 "$FG_PID" 2>/dev/null || { cat "$1.out" "$1.err" >&2; fail "foreground serve ended before it served"; }
    sleep 1
  done
  fail "foreground serve did not serve within 5 min"
}

llama_refresh

step "bad input before cluster up: a worker without the RPC server, its port taken"
sed 's|^llama_server = .*|llama_server = "/opt/none/bin/llama-server"|' "$CFG" >"$DIR/nobin.toml"
refused "a worker without the RPC server" "node b ($(node_ip b)): container vllm has no RPC server" cluster up --cluster "$DIR/nobin.toml"
ip netns exec "hb-$TAG-b" python3 -c 'import socket, sys, time; s = socket.socket(); s.bind((sys.argv[1], 50052)); s.listen(); time.sleep(60)' "$(node_ip b)" &
holder=$!
wait_listen b "$PORT" || fail "the port holder did not listen"
refused "a taken RPC port" "node b ($(node_ip b)): the RPC server could not listen on $(node_ip b):$PORT" cluster up --cluster "$CFG"
kill "$holder"; wait "$holder" 2>/dev/null || true
hb cluster down --cluster "$CFG" >/dev/null

step "cluster up ($nodes nodes: RPC servers on $WORKERS)"
hb cluster up --cluster "$CFG" | tee "$DIR/up.log" >&2 || fail "cluster up"
for x in $WORKERS; do
  ss_out=$(ip netns exec "hb-$TAG-$x" ss -ltnH "sport = :$PORT")
  echo "node $x listens: $(echo "$ss_out" | awk '{print $4}' | tr '\n' ' ')" >&2
  [ "$(echo "$ss_out" | awk '{print $4}')" = "$(node_ip "$x"):$PORT" ] || fail "node $x: the RPC server does not listen on its data-plane address only: $ss_out"
done
echo "rpc-server bound to the data plane only: yes"
hb cluster status --cluster "$CFG" | tee "$DIR/cstatus.out" >&2 || fail "cluster status"
for x in $WORKERS; do grep -q "^$x .*running.*protocol" "$DIR/cstatus.out" || fail "cluster status does not show node $x's RPC server answering"; done

step "bad input for serve: each refused before anything starts, naming the thing and the fix"
refused "a missing GGUF" "/models/nope.gguf: no such file in container vllm on the head" serve /models/nope.gguf --cluster "$CFG"
refused "a file that is not GGUF" "/models/bad.gguf: not a GGUF file" serve /models/bad.gguf --cluster "$CFG"
refused "--engine that disagrees" "--engine vllm, but" serve "$MODEL" --engine vllm --cluster "$CFG"
sed "s|^engine = .*|engine = \"llama.cpp\"\nrpc_port = 50099|" "$CFG" >"$DIR/old.toml"
ip netns exec "hb-$TAG-b" python3 -c '
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 50099)); s.listen()
while True:
    c, _ = s.accept(); c.recv(64); c.sendall(struct.pack("<Q", 28) + bytes([3, 0, 0, 0]) + bytes(24)); c.close()' "$(node_ip b)" &
fake=$!
wait_listen b 50099 || fail "the fake RPC server did not listen"
refused "an RPC server of another protocol" "node b ($(node_ip b)): the RPC server on $(node_ip b):50099 speaks RPC protocol 3.0.0" serve "$MODEL" --cluster "$DIR/old.toml"
kill "$fake"; wait "$fake" 2>/dev/null || true
echo "bad input: 6 cases refused, each naming the thing and the fix"

step "halobox serve $MODEL --detach"
t0=$(now)
hb serve "$MODEL" --detach --cluster "$CFG" >"$DIR/serve.out" 2>"$DIR/serve.err" || { cat "$DIR/serve.out" "$DIR/serve.err" >&2; fail "halobox serve"; }
ready_halobox=$(elapsed "$t0")
cat "$DIR/serve.out"
grep -q "^serving $MODEL at http://" "$DIR/serve.out" || fail "serve did not print the endpoint"
in_container a ps -eo args | grep -qF -- "--rpc $(for x in $WORKERS; do printf '%s:%s,' "$(node_ip "$x")" "$PORT"; done | sed 's/,$//')" \
  || fail "llama-server does not list every worker with --rpc: $(in_container a ps -eo args | grep llama-server)"

step "a second head on the busy RPC servers is refused before it hangs"
refused "a second head" "another llama-server holds it" serve "$MODEL" --port 8001 --cluster "$CFG"

step "serve status, serve logs"
hb serve status --cluster "$CFG" >"$DIR/status.out" || { cat "$DIR/status.out" >&2; fail "serve status"; }
grep -q "^serve: serving" "$DIR/status.out" || fail "serve status does not say serving: $(cat "$DIR/status.out")"
grep -q "engine:   llama.cpp" "$DIR/status.out" || fail "serve status does not name the engine: $(cat "$DIR/status.out")"
hb serve logs -n 20 --cluster "$CFG" >"$DIR/logs.out" || fail "serve logs"
[ -s "$DIR/logs.out" ] || fail "serve logs printed nothing"

step "one greedy completion over $nodes node(s)"
# Without LLAMA_API_KEY serve made the cluster's key, 0600 beside cluster.toml.
KEY=${CFG%.toml}.api-key
[ "$(stat -c %a "$KEY")" = 600 ] || fail "the cluster's API key file is not 0600"
ip netns exec "hb-$TAG-a" curl -s -o /dev/null -w '%{http_code}' -d '{"prompt": "a", "n_predict": 1}' "http://$(node_ip a):8000/completion" | grep -q 401 \
  || fail "llama-server answered without the key"
ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" "$TOKENS" "$KEY" >"$DIR/cluster.json" || fail "the completion from halobox serve"
cat "$DIR/cluster.json"
decode_halobox=$(tps "$DIR/cluster.json")

# serve_pid: the pid `serve status` shows for the serve.
serve_pid() { hb serve status --cluster "$CFG" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["serve"]["pid"])'; }

step "bench serving --ab-transport refused while a long request runs; the serve untouched"
ab_t0=$(now)
pid_before=$(serve_pid)
ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 100000 "$KEY" >/dev/null 2>&1 &
long=$!
sleep 2
refused "a serve in use" "is in use: llama-server's slot(s)" bench serving --ab-transport --cluster "$CFG"
[ "$(serve_pid)" = "$pid_before" ] || fail "the refused --ab-transport touched the serve (pid $pid_before -> $(serve_pid))"
kill "$long" 2>/dev/null || true; wait "$long" 2>/dev/null || true
sleep 2

step "bench serving --ab-transport: ethernet, then the configured transport; the serve back at the same endpoint"
t0=$(now)
hb bench serving --ab-transport --cluster "$CFG" --concurrency 1,2 --requests 2 --input-tokens 16 --output-tokens 8 \
  --save "$DIR/ab" --json >"$DIR/ab.out" 2>"$DIR/ab.err" || { cat "$DIR/ab.out" "$DIR/ab.err" >&2; fail "bench serving --ab-transport"; }
ab_s=$(elapsed "$t0")
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
legs = r["legs"]
assert [l["name"] for l in legs] == ["ethernet", "configured"], legs
for l in legs:
    assert l["error"] is None, l["error"]
    assert l["nodes"] and all(n["path"] == "sockets" for n in l["nodes"]), l["nodes"]
    assert all(v["status"] == "ok" and v["mean_output_tokens"] == 8 for v in l["results"]["levels"]), l["results"]
assert [x["concurrency"] for x in r["ratios"]] == [1, 2], r["ratios"]
assert r["changed"] and r["restored"] and r["interrupted"] is None
' "$DIR/ab.out" || { cat "$DIR/ab.out" >&2; fail "--ab-transport: not both legs ok with ratios, restored"; }
[ -s "$DIR/ab/ethernet/serving.json" ] && [ -s "$DIR/ab/configured/serving.json" ] && [ -s "$DIR/ab/ab-transport.json" ] \
  || fail "--ab-transport did not save both legs"
if grep -qrF "$(cat "$KEY")" "$DIR/ab.out" "$DIR/ab.err" "$DIR/ab"; then fail "--ab-transport printed or saved the API key"; fi
hb serve status --cluster "$CFG" >"$DIR/status3.out" || { cat "$DIR/status3.out" >&2; fail "serve status after --ab-transport"; }
grep -q "^serve: serving" "$DIR/status3.out" || fail "the serve is not serving after --ab-transport: $(cat "$DIR/status3.out")"
[ "$(serve_pid)" != "$pid_before" ] || fail "--ab-transport did not restart the serve"
ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 4 "$KEY" >/dev/null \
  || fail "the serve does not answer at the same endpoint after --ab-transport"
echo "ab-transport: both legs on sockets, ratios shown, serve back at the same endpoint in ${ab_s} s ($(elapsed "$ab_t0") s with the refusal and checks)"

step "bench serving --ab-transport stopped by SIGINT after leg 1's cluster up: the state and the restore named"
hb bench serving --ab-transport --cluster "$CFG" --concurrency 1 --requests 2 --input-tokens 16 --output-tokens 8 \
  --save "$DIR/ab-int" >"$DIR/ab-int.out" 2>"$DIR/ab-int.err" &
abj=$!
for _ in $(seq 300); do grep -q "RPC server(s) listening" "$DIR/ab-int.err" 2>/dev/null && break; sleep 0.1; done
grep -q "RPC server(s) listening" "$DIR/ab-int.err" || { cat "$DIR/ab-int.err" >&2; fail "--ab-transport did not reach leg 1's cluster up"; }
# halobox itself (nsenter, which runs it in node a's namespaces, does not pass SIGINT on).
hpid=$(ps -eo pid=,ppid=,comm= | awk -v top="$abj" '{ up[$1] = $2; name[$1] = $3 }
  END { for (p in up) { q = p; while (q in up && q != top && q > 1) q = up[q]; if (q == top && name[p] == "halobox") print p } }')
[ -n "$hpid" ] || fail "no halobox under the background --ab-transport ($abj)"
# shellcheck disable=SC2086 # one pid per word: every halobox under it
kill -INT $hpid
code=0; wait "$abj" || code=$?
[ "$code" = 1 ] || { cat "$DIR/ab-int.out" "$DIR/ab-int.err" >&2; fail "--ab-transport after SIGINT exited $code, not 1"; }
grep -q '^stopped early: SIGINT during leg ethernet.*: the cluster is up with transport = "ethernet"; no serve runs' "$DIR/ab-int.out" \
  || { cat "$DIR/ab-int.out" >&2; fail "--ab-transport did not say where SIGINT left the cluster"; }
restore=$(sed -n 's/^  hint: \(halobox cluster down .*\)$/\1/p' "$DIR/ab-int.out")
[ -n "$restore" ] || { cat "$DIR/ab-int.out" >&2; fail "--ab-transport did not print the restore after SIGINT"; }
# shellcheck disable=SC2329 # the printed restore line calls it, through eval
halobox() { hb "$@"; }
eval "$restore" >"$DIR/restore.out" 2>&1 || { cat "$DIR/restore.out" >&2; fail "the restore --ab-transport printed: $restore"; }
unset -f halobox
ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 4 "$KEY" >/dev/null \
  || fail "the serve does not answer after the printed restore"
echo "ab-transport: SIGINT named the state, its restore brought the serve back in $(elapsed "$ab_t0") s since the refusal step"

step "serve stop"
hb serve stop --cluster "$CFG" | tee "$DIR/stop.out"
grep -q "stopped llama.cpp's llama-server" "$DIR/stop.out" || fail "serve stop did not stop llama-server"
code=0; hb serve status --cluster "$CFG" >"$DIR/status2.out" || code=$?
if [ "$code" != 3 ] || ! grep -q "^serve: stopped" "$DIR/status2.out"; then
  fail "serve status after stop (exit $code): $(cat "$DIR/status2.out")"
fi
llama_left a

if [ "$faults" = 1 ]; then
  step "foreground serve, a long request, node b's RPC server killed"
  fg_serve "$DIR/fg1"
  ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 100000 "$KEY" >/dev/null 2>&1 &
  long=$!
  sleep 2
  pid=$(rpc_pid b)
  [ -n "$pid" ] || fail "no pid for node b's RPC server in cluster status"
  in_container b kill -KILL "$pid"
  code=0; wait "$FG_PID" || code=$?
  kill "$long" 2>/dev/null || true; wait "$long" 2>/dev/null || true
  tail -n 12 "$DIR/fg1.err" >&2
  [ "$code" != 0 ] || fail "serve exited 0 after node b's RPC server died"
  grep -q "node b ($(node_ip b))" "$DIR/fg1.err" || fail "serve did not name node b"
  llama_left a
  hb cluster up --cluster "$CFG" >/dev/null || fail "cluster up again"

  step "foreground serve, node b's RPC server frozen (SIGSTOP)"
  fg_serve "$DIR/fg2"
  pid=$(rpc_pid b)
  t0=$(now)
  in_container b kill -STOP "$pid"
  ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 1000 "$KEY" >/dev/null 2>&1 &
  long=$!
  code=0; wait "$FG_PID" || code=$?
  frozen_s=$(elapsed "$t0")
  kill "$long" 2>/dev/null || true; wait "$long" 2>/dev/null || true
  tail -n 8 "$DIR/fg2.err" >&2
  [ "$code" != 0 ] || fail "serve exited 0 with node b frozen"
  grep -q "node b ($(node_ip b)): its RPC server (pid $pid) is stopped (frozen" "$DIR/fg2.err" || fail "serve did not name node b as frozen"
  python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 60 else 1)" "$frozen_s" || fail "the frozen node was found after $frozen_s s (bound: 60 s)"
  llama_left a
  echo "faults: killed worker named (exit $code); frozen worker named after $frozen_s s"
fi

step "cluster down"
hb cluster down --cluster "$CFG" | tee "$DIR/down.log" >&2 || fail "cluster down"
llama_left
echo "cluster down: nothing left"

step "the same model on one node by llama-server alone (the reference)"
in_container a sh -c "mkdir -p /tmp/halobox-e2e; setsid $LLAMA/bin/llama-server -m $MODEL --host $(node_ip a) --port 8001 -ngl 99 \
  </dev/null >/tmp/halobox-e2e/ref.log 2>&1 & echo \$! >/tmp/halobox-e2e/ref.pid"
wait_api a 8001 || fail "llama-server alone did not come up: $(in_container a tail -n 20 /tmp/halobox-e2e/ref.log)"
ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "http://$(node_ip a):8001" "$PROMPT" "$TOKENS" >"$DIR/single.json" || fail "the completion from llama-server alone"
cat "$DIR/single.json"
stop_plain a

echo "ready: halobox serve over $nodes node(s) ${ready_halobox} s (information)"
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

# shellcheck shell=bash
# What the serving benchmarks (scripts/bench-serve.sh, scripts/serve/
# bench-llama.sh, scripts/bench-collective.sh) share: test nodes with an
# engine each (scripts/netns/nodes.sh), the node image, vLLM's or llama.cpp's
# CPU build bound into the containers, a model, a cluster file, and the
# helpers that run things on a node, in its container, and against the API.
# The end-to-end checks are Rust tests (tests/serve_e2e.rs on
# tests/common/serve.rs). Sourced, not run.

VENV=/opt/halobox-vllm
PROMPT="The capital of France is"
TOKENS=24

step() { printf '==> %s\n' "$*" >&2; }
fail() { echo "FAILED: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# shellcheck disable=SC2034
# serve_setup BACKEND NODES MODEL SHAPE: sets HALOBOX, DIR, TAG, NET, IMAGE,
# MODEL (the path in the containers), MODEL_HOST, CFG, NODE_NAMES; the
# nodes go away when the script exits.
serve_setup() {
  local backend=$1 count=$2 given=$3 shape=$4
  BACKEND=$backend
  HALOBOX=${HALOBOX_BIN:-$root/target/debug/halobox}
  if [ ! -x "$HALOBOX" ]; then
    step "building halobox (cargo build)"
    cargo build -q --bin halobox
  fi
  bash scripts/vllm-venv.sh "$VENV" >&2
  DIR=$(mktemp -d /tmp/hb-serve-e2e.XXXXXX)
  TAG=se$$
  TAG=${TAG:0:10}
  NET=$(($$ % 200 + 30))
  trap 'serve_teardown' EXIT
  if [ -n "$given" ]; then
    [ -f "$given/config.json" ] || fail "--model $given: no config.json there (a Hugging Face model folder)"
    MODEL_HOST=$(cd "$given" && pwd)
  else
    IFS=, read -r layers hidden heads kv <<<"$shape"
    MODEL_HOST=$DIR/model
    step "a random-weight Llama: $layers layers, hidden $hidden, $heads heads ($kv kv)"
    HF_HUB_OFFLINE=1 "$VENV/bin/python" scripts/serve/make-llama.py "$MODEL_HOST" \
      --layers "$layers" --hidden "$hidden" --heads "$heads" --kv-heads "$kv" >&2
  fi
  MODEL=/models/$(basename "$MODEL_HOST")
  local specs=() i
  for i in $(seq "$count"); do specs+=(9000); done
  step "$count test node(s) with $backend (hb-$TAG-*, 10.77.$NET.0/24)"
  HB_NODE_ENGINE=$backend HB_NODE_REGISTRY_DATA=/var/cache/halobox-engines/node-registry \
    bash scripts/netns/nodes.sh up "$TAG" "$NET" "$DIR" "${specs[@]}" >&2
  NODE_NAMES=$(echo abcd | cut -c"1-$count" | sed 's/./& /g')
  IMAGE=$(HALOBOX_BIN=$HALOBOX bash scripts/netns/node-image.sh "$TAG" "$NET" | tail -n 1)
  mkdir -p "$DIR/state" "$DIR/tmp"
  CFG=$DIR/cluster.toml
  {
    echo "ray = \"$VENV/bin/ray\""
    echo "vllm = \"$VENV/bin/vllm\""
    echo "halobox = \"$HALOBOX\""
    echo "timeout_s = 180"
    echo 'ray_args = ["--object-store-memory=200000000"]'
    echo 'ray_head_args = ["--include-dashboard=false"]'
    echo "ssh_options = [\"UserKnownHostsFile=$DIR/known_hosts\", \"IdentityFile=$DIR/client_key\", \"IdentitiesOnly=yes\"]"
    echo
    echo '[env]'
    echo 'HF_HUB_OFFLINE = "1"'
    echo 'VLLM_CPU_KVCACHE_SPACE = "1"'
    node_tables "cpus = 1"
  } >"$CFG"
}

serve_teardown() {
  local code=$?
  [ -n "${DIR:-}" ] || return "$code"
  if [ "$code" != 0 ] && [ -n "${SERVE_E2E_KEEP:-}" ]; then
    echo "SERVE_E2E_KEEP: nodes kept; remove them with: bash scripts/netns/nodes.sh down $TAG $DIR" >&2
    return "$code"
  fi
  bash scripts/netns/nodes.sh down "$TAG" "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
  return "$code"
}

# node_tables [LINE]: the cluster file's [[node]] table of every node of
# $NODE_NAMES on $BACKEND, each ending in LINE when given.
node_tables() {
  local x
  for x in $NODE_NAMES; do
    printf '\n[[node]]\nname = "%s"\nssh = "root@%s"\nip = "%s"\nbackend = "%s"\n' \
      "$x" "$(node_ip "$x")" "$(node_ip "$x")" "$BACKEND"
    [ -z "${1:-}" ] || echo "$1"
  done
}

# node_ip X: node X's data-plane address.
node_ip() { echo "10.77.$NET.$(($(printf %d "'$1") - 96))"; }

# on_node X CMD...: CMD on node X (its network, mount and PID namespaces,
# with its own /root), as a login there would run it.
on_node() {
  local x=$1
  shift
  nsenter -t "$(cat "$DIR/node_$x.pid")" -m -p -n -- env -u SSH_AUTH_SOCK -u CONTAINER_HOST -u DOCKER_HOST \
    -u XDG_RUNTIME_DIR HOME=/root XDG_STATE_HOME="$DIR/state" TMPDIR="$DIR/tmp" "$@"
}

# hb ARGS...: halobox on the head (node a).
hb() { on_node a "$HALOBOX" "$@"; }

# in_container X CMD...: CMD in node X's halobox container.
in_container() {
  local x=$1
  shift
  on_node "$x" "$HALOBOX" enter vllm -- "$@"
}

# complete X PORT [MAX_TOKENS [KEY_FILE]]: one greedy completion from node X's API (JSON).
complete() {
  ip netns exec "hb-$TAG-$1" python3 scripts/serve/complete.py "http://$(node_ip "$1"):$2" "$MODEL" "$PROMPT" "${3:-$TOKENS}" ${4:+"$4"}
}

# tps FILE: decode tokens per second of a completion's JSON.
tps() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['completion_tokens']/d['secs']:.2f}\")" "$1"; }

# same_tokens A B: the two completions have the same tokens and text.
same_tokens() {
  python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(0 if (a['tokens'],a['text'])==(b['tokens'],b['text']) and a['tokens'] else 1)" "$1" "$2"
}

# wait_listen X PORT: until something listens on TCP PORT in node X (10 s at most).
wait_listen() {
  for _ in $(seq 50); do
    [ -n "$(ip netns exec "hb-$TAG-$1" ss -ltnH "sport = :$2")" ] && return 0
    sleep 0.2
  done
  return 1
}

# plain_vllm X PORT [TP]: `vllm serve` started by hand in node X's container
# (tensor-parallel over the running Ray with TP > 1).
plain_vllm() {
  local x=$1 port=$2 tp=${3:-1} extra=
  [ "$tp" -gt 1 ] && extra="--tensor-parallel-size $tp --distributed-executor-backend ray"
  in_container "$x" sh -c "mkdir -p /tmp/halobox-e2e; HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 ${PLAIN_ENV:-} \
    setsid $VENV/bin/vllm serve $MODEL --port $port --max-model-len 512 --enforce-eager --dtype float32 $extra \
    </dev/null >/tmp/halobox-e2e/ref.log 2>&1 & echo \$! >/tmp/halobox-e2e/ref.pid"
}

# stop_plain X: stops it.
stop_plain() {
  # shellcheck disable=SC2016
  in_container "$1" sh -c 'p=$(cat /tmp/halobox-e2e/ref.pid); kill -TERM "-$p" 2>/dev/null; for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done; kill -KILL "-$p" 2>/dev/null; rm -f /dev/shm/psm_*; true'
}

# llama_setup TAG_PREFIX BACKEND COUNT [MODEL.gguf] [SHAPE]: COUNT test nodes
# with BACKEND for llama.cpp (scripts/llama-cpp.sh's CPU build at $LLAMA),
# the GGUF given (copied to $DIR/models) or a random-weight one of SHAPE,
# and a cluster file with engine llama.cpp. Sets LLAMA, PORT, HALOBOX, DIR,
# TAG, NET, MODEL, BACKEND, NODE_NAMES, WORKERS, IMAGE and CFG.
# shellcheck disable=SC2034
llama_setup() {
  local prefix=$1 backend=$2 count=$3 given=${4:-} shape=${5:-2,128,4,2} layers hidden heads kv specs=()
  LLAMA=${HALOBOX_LLAMA_CPP:-/opt/halobox-llama-cpp}
  PORT=50052
  [ -x "$LLAMA/bin/llama-server" ] || fail "$LLAMA/bin/llama-server is missing: bash scripts/llama-cpp.sh"
  HALOBOX=${HALOBOX_BIN:-$root/target/debug/halobox}
  [ -x "$HALOBOX" ] || { step "building halobox (cargo build)"; cargo build -q --bin halobox; }
  DIR=$(mktemp -d /tmp/hb-llama-e2e.XXXXXX)
  TAG=$prefix$$
  TAG=${TAG:0:10}
  NET=$(($$ % 200 + 30))
  trap 'serve_teardown' EXIT
  mkdir -p "$DIR/models"
  if [ -n "$given" ]; then
    [ -f "$given" ] || fail "--model $given: no such file"
    cp "$given" "$DIR/models/"
    MODEL=/models/$(basename "$given")
  else
    IFS=, read -r layers hidden heads kv <<<"$shape"
    step "a random-weight Llama GGUF: $layers layers, hidden $hidden, $heads heads ($kv kv)"
    "$LLAMA/venv/bin/python" scripts/serve/make-gguf.py "$DIR/models/random.gguf" \
      --layers "$layers" --hidden "$hidden" --heads "$heads" --kv-heads "$kv" >&2
    MODEL=/models/random.gguf
  fi
  chmod -R a+rX "$DIR/models"
  for _ in $(seq "$count"); do specs+=(9000); done
  step "$count test node(s) with $backend (hb-$TAG-*, 10.77.$NET.0/24)"
  HB_NODE_ENGINE=$backend HB_NODE_REGISTRY_DATA=/var/cache/halobox-engines/node-registry \
    bash scripts/netns/nodes.sh up "$TAG" "$NET" "$DIR" "${specs[@]}" >&2
  BACKEND=$backend
  NODE_NAMES=$(echo abcd | cut -c"1-$count" | sed 's/./& /g')
  WORKERS=$(echo "$NODE_NAMES" | cut -d' ' -f2-)
  IMAGE=$(HALOBOX_BIN=$HALOBOX bash scripts/netns/node-image.sh "$TAG" "$NET" | tail -n 1)
  mkdir -p "$DIR/state" "$DIR/tmp"
  CFG=$DIR/cluster.toml
  {
    echo 'engine = "llama.cpp"'
    echo "llama_server = \"$LLAMA/bin/llama-server\""
    echo "halobox = \"$HALOBOX\""
    echo "ssh_options = [\"UserKnownHostsFile=$DIR/known_hosts\", \"IdentityFile=$DIR/client_key\", \"IdentitiesOnly=yes\"]"
    node_tables
  } >"$CFG"
}

# llama_refresh: `halobox refresh` on every node, llama.cpp and the models bound in read-only.
llama_refresh() {
  local x
  step "refresh on every node (llama.cpp bound in read-only from $LLAMA)"
  for x in $NODE_NAMES; do on_node "$x" "$HALOBOX" refresh --backend "$BACKEND" --image "$IMAGE" --memlock 8M --name vllm \
    --volume "$LLAMA:$LLAMA:ro" --volume "$DIR/models:/models:ro" --yes >/dev/null; done
}

# decode_measure NAME ENGINE URL TOKENS REQUESTS [KEY_FILE]: scripts/serve/
# decode.py against URL from the head's namespace; appends "CLIENT ENGINE
# SPREAD" (the medians in tokens per second, the client's spread) to
# $DIR/NAME.decode and the whole JSON to $DIR/NAME.json.
decode_measure() {
  ip netns exec "hb-$TAG-a" python3 scripts/serve/decode.py "$3" "$2" "$MODEL" "$PROMPT" "$4" "$5" ${6:+"$6"} \
    >"$DIR/decode.last" || fail "decode requests to $1"
  cat "$DIR/decode.last" >>"$DIR/$1.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['client']['median'], (d['engine'] or {}).get('median', 0), d['client']['spread'])" \
    "$DIR/decode.last" >>"$DIR/$1.decode"
}

# prometheus_start CLUSTER_FILE: a real Prometheus in the head's namespace
# scraping the cluster's targets (`halobox cluster metrics
# --prometheus-config`: every node's `halobox metrics` and the engine's
# /metrics) once a second; prometheus_stop stops it.
prometheus_start() {
  hb cluster metrics --cluster "$1" --prometheus-config >"$DIR/scrape.yml" || fail "cluster metrics --prometheus-config"
  { printf 'global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n'; cat "$DIR/scrape.yml"; } >"$DIR/prometheus.yml"
  rm -rf "$DIR/prom"
  ip netns exec "hb-$TAG-a" setsid prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/prom" \
    --web.listen-address=127.0.0.1:9090 </dev/null >"$DIR/prometheus.log" 2>&1 &
  PROM_PID=$!
}
prometheus_stop() { kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null || true; }

# bench_rounds ROUNDS SIDE...: ROUNDS rounds of `side SIDE` (the caller's
# function, which reads the round's number in $r) for every side, their
# order rotated each round (none always meets the colder page cache), then
# each side's figures of the round ($DIR/SIDE.ready, $DIR/SIDE.decode).
bench_rounds() {
  local rounds=$1 r k i s
  shift
  local sides=("$@")
  for r in $(seq "$rounds"); do
    k=$(((r - 1) % ${#sides[@]}))
    for i in $(seq 0 $((${#sides[@]} - 1))); do side "${sides[$(((i + k) % ${#sides[@]}))]}"; done
    for s in "${sides[@]}"; do
      echo "round $r: $s ready $(tail -n 1 "$DIR/$s.ready") s, decode (client engine spread) $(tail -n 1 "$DIR/$s.decode")" >&2
    done
  done
}

# bench_summary ROUNDS WHAT SIDE...: the medians of each side's rounds
# ($DIR/SIDE.ready, $DIR/SIDE.decode), then each side after the first (by
# hand) as a ratio to it, one line per side.
bench_summary() {
  python3 - "$DIR" "$@" <<'PY'
import statistics, sys
d, rounds, what, *sides = sys.argv[1:]
def col(side, ext, i=0):
    return [float(l.split()[i]) for l in open(f"{d}/{side}.{ext}") if l.strip()]
med = {s: (statistics.median(col(s, "ready")), statistics.median(col(s, "decode", 0)),
           statistics.median(col(s, "decode", 1)), max(col(s, "decode", 2))) for s in sides}
print(f"medians of {rounds} rounds, {what}:")
for s in sides:
    r, c, e, sp = med[s]
    print(f"  {s:13} ready {r:6.1f} s  decode {c:7.2f} tokens/s (engine's own {e:7.2f}; widest spread in a round {sp:.0%})")
hr, hc, he, _ = med[sides[0]]
for s in sides[1:]:
    r, c, e, _ = med[s]
    print(f"{s}: ready halobox / by hand = {r / hr:.2f}x (goal <= 1.10x), decode halobox / by hand = {c / hc:.2f}x "
          f"(engine's own {e / he:.2f}x; goal >= 0.97x)")
PY
}

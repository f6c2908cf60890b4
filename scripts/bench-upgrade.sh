#!/usr/bin/env bash
# scripts/bench-upgrade.sh: how long the serve is down while a new image
# reaches the cluster, on test nodes (scripts/serve/lib.sh: two nodes with
# their own podman, llama.cpp's CPU build over an RPC server, a random-weight
# GGUF). Three ways, per round:
#   verified:  `cluster refresh --verify --yes` (check, swap, the serve
#              again, its golden tokens, a 10 s soak, the old containers
#              removed);
#   rollback:  the same to an image whose llama-server computes other tokens
#              (its rope base changed in the image's environment): the swap,
#              the failed golden check, every node back, the old serve again;
#   by hand:   the steps a person runs (`serve stop; cluster refresh
#              --no-verify --restart; serve --detach`) and a look at one
#              completion.
# "Down" is measured the same way for all three (scripts/serve/poll.py): from
# the head's namespace a 1-token completion is asked every 50 ms, each poll's
# send and answer (or failure) time recorded; an outage runs from the first
# failed poll to the next answer, and an operation's downtime is the sum of
# its outages (a rollback has two: the swap, then the rollback). An operation
# in which no poll failed, or after which no answer comes, fails the script:
# a figure is never taken from a serve that did not go down or did not come
# back. The images alternate between two good ones (the node image with one
# more layer each), so every round is a real change of image.
# Every operation's output is kept in OUT (default /tmp/bench-upgrade.PID):
# ROUND-KIND.json (the refresh's --json: verify.outcome, verify.failed,
# verify.down_s), ROUND-KIND.log (its stderr, each line stamped with the
# seconds since the operation began), ROUND-KIND.poll (the polls).
# Medians over the rounds; the last lines are the ratios, one per line, each
# ending in `x` (goals: verified / by hand <= 1.2x, rollback / by hand <= 2x).
# usage (as root): scripts/bench-upgrade.sh [ROUNDS (default 2)]
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
#   OUT: where each operation's output is kept
set -euo pipefail
{
cd "$(dirname "$0")/.."
root=$PWD
rounds=${1:-2}
case "$rounds" in [0-9]*) ;; *) echo "usage: scripts/bench-upgrade.sh [ROUNDS]" >&2; exit 2 ;; esac
HALOBOX_BIN=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}
export HALOBOX_BIN
# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
llama_setup up podman 2
# The containers cluster refresh makes keep llama.cpp and the model bound in.
for x in $NODE_NAMES; do
  # shellcheck disable=SC2016
  on_node "$x" sh -c 'mkdir -p /root/.config/halobox && printf "%s" "$1" >/root/.config/halobox/config.toml' sh \
    "volumes = [\"$LLAMA:$LLAMA:ro\", \"$DIR/models:/models:ro\"]"
done
llama_refresh

# image NAME CONTAINERFILE-LINES: the node image with them on top, in the
# nodes' registry as halobox/upgrade-bench:NAME; prints its reference there.
base=localhost/halobox-node:${IMAGE##*:}
image() {
  local d=$DIR/image-$1 local=localhost/halobox-upgrade-bench:$1 remote=10.77.$NET.254:5000/halobox/upgrade-bench:$1
  mkdir -p "$d"
  printf 'FROM %s\n%s\n' "$base" "$2" >"$d/Containerfile"
  podman build -q -t "$local" "$d" >/dev/null
  ip netns exec "hb-$TAG-sw" skopeo copy -q --dest-tls-verify=false "containers-storage:$local" "docker://$remote" >&2
  echo "$remote"
}
step "three images: two good ones (one more layer each) and one that serves other tokens"
good1=$(image good1 'LABEL io.halobox.bench=good1
RUN echo 1 >/etc/halobox-bench-layer')
good2=$(image good2 'LABEL io.halobox.bench=good2
RUN echo 2 >/etc/halobox-bench-layer')
bad=$(image tokens 'ENV LLAMA_ARG_ROPE_FREQ_BASE=1.5 LLAMA_ARG_ROPE_SCALING=linear LLAMA_ARG_ROPE_FREQ_SCALE=0.25')

KEY=$DIR/cluster.api-key
OUT=${OUT:-/tmp/bench-upgrade.$$}
mkdir -p "$OUT"
step "each operation's output is kept in $OUT"
url="http://$(node_ip a):8000"
# shellcheck disable=SC2329
refresh() { hb cluster refresh --image "$1" --memlock 8M --yes --cluster "$CFG" "${@:2}"; }

# down NAME OP...: runs OP while scripts/serve/poll.py polls the serve from
# the head's namespace; its stdout to $OUT/NAME.json, its stderr stamped to
# $OUT/NAME.log, the polls to $OUT/NAME.poll. Once OP ended, waits (10 min
# at most) for an answer; prints the seconds the serve was down in all, and
# fails when no poll failed during OP or no answer came after it.
down() {
  local name=$1 poller t0 t1 rc figures
  shift
  local log=$OUT/$name.poll
  : >"$log"
  ip netns exec "hb-$TAG-a" python3 scripts/serve/poll.py run "$url" "$PROMPT" "$KEY" >"$log" 2>"$OUT/$name.poller.err" &
  poller=$!
  for _ in $(seq 600); do grep -q ' ok$' "$log" && break; sleep 0.1; done
  grep -q ' ok$' "$log" || { kill "$poller"; echo "the serve does not answer before $name" >&2; return 1; }
  t0=$(now)
  { rc=0; "$@" 2>&1 >"$OUT/$name.json" || rc=$?; echo "exit status $rc"; } | python3 scripts/serve/poll.py stamp "$t0" >"$OUT/$name.log"
  t1=$(now)
  rc=$(tail -n 1 "$OUT/$name.log" | awk '{ print $NF }')
  # A failed operation gets a minute for the serve to answer, not ten.
  for _ in $(seq "$([ "$rc" = 0 ] && echo 6000 || echo 600)"); do
    awk -v t="$t1" '$1 >= t && $3 == "ok" { found = 1 } END { exit !found }' "$log" && break
    sleep 0.1
  done
  kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null || true
  figures=$(python3 scripts/serve/poll.py down "$log" "$t0" 2>>"$OUT/$name.log") || {
    tail -n 30 "$OUT/$name.log" >&2
    echo "$name: no downtime to measure (exit status $rc; see $OUT/$name.log)" >&2
    return 1
  }
  printf '%s %s\n' "$name" "$(python3 -c 'import sys; print(f"op {float(sys.argv[2]) - float(sys.argv[1]):.1f} s, exit status {sys.argv[3]}")' "$t0" "$t1" "$rc")" >>"$OUT/summary"
  echo "$figures" | awk '{ print $1 }'
}
# verify_outcome NAME: the refresh's verify.outcome from $OUT/NAME.json,
# and verify.failed and halobox's own downtime on stderr.
verify_outcome() {
  python3 - "$OUT/$1.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except ValueError:
    print("no-json")
    sys.exit(0)
v = r.get("verify") or {}
print(v.get("outcome", "not-verified"))
print(f"  halobox: outcome {v.get('outcome')}, down_s {v.get('down_s')}, rollback_down_s {v.get('rollback_down_s')}, failed {json.dumps(v.get('failed'))}", file=sys.stderr)
for n in v.get("notes", []) + r.get("notes", []):
    print(f"  note: {n}", file=sys.stderr)
PY
}
# shellcheck disable=SC2329
by_hand() {
  hb serve stop --cluster "$CFG" || return 1
  refresh "$1" --no-verify --restart || return 1
  hb serve "$MODEL" --detach --cluster "$CFG" || return 1
  ip netns exec "hb-$TAG-a" python3 scripts/serve/complete-llama.py "$url" "$PROMPT" 1 "$KEY"
}

step "cluster up and the serve (records its golden tokens)"
hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up"
hb serve "$MODEL" --detach --cluster "$CFG" >/dev/null 2>&1 || fail "serve --detach"
declare -a verified=() rollback=() hands=()
next=$good1
for r in $(seq "$rounds"); do
  step "round $r: verified cluster refresh to ${next##*:}"
  v=$(down "$r-verified" refresh "$next" --verify --soak 10s --json) || fail "round $r: verified refresh"
  o=$(verify_outcome "$r-verified" 2>>"$OUT/$r-verified.log")
  [ "$o" = proven ] || { tail -n 40 "$OUT/$r-verified.log" >&2; fail "round $r: the verified refresh was not proven ($o; see $OUT/$r-verified.log)"; }
  verified+=("$v")
  next=$([ "$next" = "$good1" ] && echo "$good2" || echo "$good1")
  step "round $r: verified cluster refresh to the other-tokens image (rolls back)"
  b=$(down "$r-rollback" refresh "$bad" --verify --soak 10s --json) || fail "round $r: rollback"
  o=$(verify_outcome "$r-rollback" 2>>"$OUT/$r-rollback.log")
  [ "$o" = rolled_back ] || { tail -n 40 "$OUT/$r-rollback.log" >&2; fail "round $r: the bad image was not rolled back ($o; see $OUT/$r-rollback.log)"; }
  rollback+=("$b")
  step "round $r: by hand to ${next##*:} (serve stop; cluster refresh --no-verify --restart; serve --detach; one completion)"
  h=$(down "$r-by-hand" by_hand "$next") || fail "round $r: by hand"
  grep -q '^+.* exit status 0$' "$OUT/$r-by-hand.log" || { tail -n 40 "$OUT/$r-by-hand.log" >&2; fail "round $r: a step by hand failed (see $OUT/$r-by-hand.log)"; }
  hands+=("$h")
  next=$([ "$next" = "$good1" ] && echo "$good2" || echo "$good1")
  echo "round $r: verified $v s, rollback $b s, by hand $h s" >&2
  sed -n "/^$r-/p" "$OUT/summary" >&2
done
hb serve stop --cluster "$CFG" >/dev/null 2>&1 || true
hb cluster down --cluster "$CFG" >/dev/null 2>&1 || true
echo "every operation's output: $OUT (summary: $OUT/summary)" >&2
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mv=$(echo "${verified[*]}" | median) mb=$(echo "${rollback[*]}" | median) mh=$(echo "${hands[*]}" | median)
echo "serve down (medians of $rounds): verified upgrade $mv s, rollback $mb s, by hand $mh s"
python3 -c "import sys; print(f'verified / by hand: {float(sys.argv[1]) / float(sys.argv[3]):.2f}x'); print(f'rollback / by hand: {float(sys.argv[2]) / float(sys.argv[3]):.2f}x')" "$mv" "$mb" "$mh"
exit 0
}

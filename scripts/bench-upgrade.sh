#!/usr/bin/env bash
# scripts/bench-upgrade.sh: how long the serve is down while a new image
# reaches the cluster, on test nodes (scripts/serve/lib.sh: two nodes with
# their own podman, llama.cpp's CPU build over an RPC server, a random-weight
# GGUF). Three ways, per round:
#   verified:  `cluster refresh --yes` while the serve is recorded (the
#              default --verify: check, swap, the serve again, its golden
#              tokens, a 10 s soak, the old containers removed);
#   rollback:  the same to an image whose llama-server computes other tokens
#              (its rope base changed in the image's environment): the swap,
#              the failed golden check, every node back, the old serve again;
#   by hand:   the steps a person runs (`serve stop; cluster refresh
#              --no-verify --restart; serve --detach`) and a look at one
#              completion.
# "Down" is the longest gap between two answering 1-token completions, polled
# every 0.2 s from the head's namespace across the whole operation (both sides
# the same); the images alternate between two good ones (the node image with
# one more layer each), so every round is a real change of image.
# Medians over the rounds; the last lines are the ratios, one per line, each
# ending in `x` (goals: verified / by hand <= 1.2x, rollback / by hand <= 2x).
# usage (as root): scripts/bench-upgrade.sh [ROUNDS (default 2)]
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
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
client=(scripts/serve/complete-llama.py "http://$(node_ip a):8000" "$PROMPT" 1 "$KEY")
# shellcheck disable=SC2329
refresh() { hb cluster refresh --image "$1" --memlock 8M --yes --cluster "$CFG" "${@:2}"; }

# down OP...: runs OP while a poller asks for a 1-token completion every
# 0.2 s; once OP ended, waits for an answer; prints the longest gap (s)
# between two answers.
down() {
  local log=$DIR/poll.log poller
  : >"$log"
  # shellcheck disable=SC2016
  ip netns exec "hb-$TAG-a" env LOG="$log" bash -c 'while :; do python3 "$@" >/dev/null 2>&1 && date +%s.%N >>"$LOG"; sleep 0.2; done' \
    poll "${client[@]}" &
  poller=$!
  sleep 1
  "$@" >"$DIR/op.out" 2>"$DIR/op.err" || true
  local n0 ; n0=$(wc -l <"$log")
  for _ in $(seq 3000); do [ "$(wc -l <"$log")" -gt "$n0" ] && break; sleep 0.2; done
  kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null || true
  python3 -c 'import sys; t=[float(x) for x in open(sys.argv[1]) if x.strip()]; print(f"{max((b - a for a, b in zip(t, t[1:])), default=0.0):.1f}")' "$log"
}
# shellcheck disable=SC2329
by_hand() {
  hb serve stop --cluster "$CFG"
  refresh "$1" --no-verify --restart
  hb serve "$MODEL" --detach --cluster "$CFG"
}

step "cluster up and the serve (records its golden tokens)"
hb cluster up --cluster "$CFG" >/dev/null 2>&1 || fail "cluster up"
hb serve "$MODEL" --detach --cluster "$CFG" >/dev/null 2>&1 || fail "serve --detach"
declare -a verified=() rollback=() hands=()
next=$good1
for r in $(seq "$rounds"); do
  step "round $r: verified cluster refresh to ${next##*:}"
  v=$(down refresh "$next" --soak 10s)
  grep -q 'verify: proven' "$DIR/op.out" || { cat "$DIR/op.out" "$DIR/op.err" >&2; fail "the verified refresh was not proven"; }
  verified+=("$v")
  next=$([ "$next" = "$good1" ] && echo "$good2" || echo "$good1")
  step "round $r: verified cluster refresh to the other-tokens image (rolls back)"
  b=$(down refresh "$bad" --soak 10s)
  grep -q 'verify: rolled back' "$DIR/op.out" || { cat "$DIR/op.out" "$DIR/op.err" >&2; fail "the bad image was not rolled back"; }
  rollback+=("$b")
  step "round $r: by hand to ${next##*:} (serve stop; cluster refresh --no-verify --restart; serve --detach)"
  h=$(down by_hand "$next")
  hands+=("$h")
  next=$([ "$next" = "$good1" ] && echo "$good2" || echo "$good1")
  echo "round $r: verified $v s, rollback $b s, by hand $h s" >&2
done
hb serve stop --cluster "$CFG" >/dev/null 2>&1 || true
hb cluster down --cluster "$CFG" >/dev/null 2>&1 || true
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mv=$(echo "${verified[*]}" | median) mb=$(echo "${rollback[*]}" | median) mh=$(echo "${hands[*]}" | median)
echo "serve down (medians of $rounds): verified upgrade $mv s, rollback $mb s, by hand $mh s"
python3 -c "import sys; print(f'verified / by hand: {float(sys.argv[1]) / float(sys.argv[3]):.2f}x'); print(f'rollback / by hand: {float(sys.argv[2]) / float(sys.argv[3]):.2f}x')" "$mv" "$mb" "$mh"
exit 0
}

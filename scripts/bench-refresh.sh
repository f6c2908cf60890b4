#!/usr/bin/env bash
# halobox refresh against two references, on an image already pulled from
# the loopback registry (runs alternate; medians printed):
#
# 1. The community refresh script's approach (toolbox backend): the CLI
#    calls refresh_toolbox.sh makes (toolbox list + rm, pull, image inspect
#    x3, tag, toolbox create, images listing), which never checks that the
#    container starts.
# 2. The engine floor (podman backend): podman's own `create` of the same
#    container (halobox's own `--dry-run` command line), `start`, `rename`
#    and `stop`, timed the same way. halobox does that work plus the pull
#    check, pinning, the journal, the lock, the settle window (the new
#    container must keep running that long), keeping the old container as
#    NAME-prev and deleting the one before. The last line is halobox's wall
#    time without the settle window as a multiple of the floor (goal <= 1.3x).
#
# Needs the test engines: bash scripts/engines/start.sh (as root).
# Usage: scripts/bench-refresh.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
image=127.0.0.1:5000/halobox/test:1
sock=unix:///run/podman/podman.sock
settle=3
[ -S /run/podman/podman.sock ] || { echo "error: no podman API socket: run scripts/engines/start.sh" >&2; exit 1; }
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/halobox
podman pull -q --tls-verify=false "$image" >/dev/null
state=$(mktemp -d)
export XDG_STATE_HOME=$state
cleanup() {
  toolbox rm -f bench-community >/dev/null 2>&1 || true
  podman rm -f bench-halobox bench-halobox-prev bench-toolbox bench-toolbox-prev \
    bench-floor bench-floor-new >/dev/null 2>&1 || true
  podman rmi 127.0.0.1:5000/halobox/test:bench-community >/dev/null 2>&1 || true
  rm -rf "$state"
}
trap cleanup EXIT

community() {
  toolbox list >/dev/null 2>&1
  toolbox rm -f bench-community >/dev/null 2>&1 || true
  podman pull -q "$image" >/dev/null
  for _ in 1 2 3; do podman image inspect "$image" --format '{{.Id}}' >/dev/null; done
  podman tag "$image" 127.0.0.1:5000/halobox/test:bench-community
  toolbox -y create --image "$image" bench-community >/dev/null 2>&1
  podman images --format '{{.Repository}}:{{.Tag}} {{.ID}}' >/dev/null
}

refresh() { # BACKEND NAME
  "$bin" refresh --engine "$sock" --backend "$1" --name "$2" --image "$image" \
    --memlock 8M --settle "$settle" --yes --json 2>/dev/null
}

# The floor's create line: exactly what halobox creates for the podman
# backend, under the floor's own name.
mapfile -t create < <("$bin" refresh --engine "$sock" --backend podman --name bench-floor \
  --image "$image" --memlock 8M --dry-run --json | jq -r '.create_command' \
  | python3 -c 'import shlex,sys; print("\n".join(shlex.split(sys.stdin.read())))')
create=("${create[@]/#bench-floor-halobox-new/bench-floor-new}")
[ "${create[0]}" = podman ] && [ "${create[1]}" = create ] || { echo "error: unexpected dry-run command: ${create[*]}" >&2; exit 1; }
floor() {
  "${create[@]}" >/dev/null
  podman start bench-floor-new >/dev/null
  podman rename bench-floor-new bench-floor
  podman stop bench-floor >/dev/null
}

now_us() { echo $(( $(date +%s%N) / 1000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
step_ms() { jq "[.timings[] | select(.step == \"$1\") | .ms] | add * 1000 | floor"; }

# Warm every path once (a first refresh only creates; the timed ones replace).
community; refresh toolbox bench-toolbox >/dev/null; refresh podman bench-halobox >/dev/null
podman rm -f bench-floor >/dev/null 2>&1 || true; floor
c_times=() t_times=() f_times=() h_times=() s_times=()
for _ in $(seq "$runs"); do
  t0=$(now_us); community; t1=$(now_us); c_times+=($(( t1 - t0 )))
  t0=$(now_us); out=$(refresh toolbox bench-toolbox); t1=$(now_us); t_times+=($(( t1 - t0 )))
  podman rm -f bench-floor >/dev/null
  t0=$(now_us); floor; t1=$(now_us); f_times+=($(( t1 - t0 )))
  t0=$(now_us); out=$(refresh podman bench-halobox); t1=$(now_us); h_times+=($(( t1 - t0 )))
  s_times+=("$(printf '%s' "$out" | step_ms start_check)")
done
c=$(printf '%s\n' "${c_times[@]}" | median)
t=$(printf '%s\n' "${t_times[@]}" | median)
f=$(printf '%s\n' "${f_times[@]}" | median)
h=$(printf '%s\n' "${h_times[@]}" | median)
s=$(printf '%s\n' "${s_times[@]}" | median)
awk -v c="$c" -v t="$t" -v f="$f" -v h="$h" -v s="$s" -v w="$settle" -v n="$runs" 'BEGIN {
  w = w * 1000000
  printf "community approach (toolbox CLI calls):      median %8.1f ms over %d runs\n", c / 1000, n
  printf "halobox refresh (toolbox backend):           median %8.1f ms (%.1f ms without the %.1f s settle window)\n", t / 1000, (t - w) / 1000, w / 1000000
  printf "engine floor (podman create+start+rename+stop): median %8.1f ms\n", f / 1000
  printf "halobox refresh (podman backend):            median %8.1f ms\n", h / 1000
  printf "  of which start, check and settle window:   median %8.1f ms\n", s / 1000
  printf "halobox refresh without the settle window / engine floor: %.2fx\n", (h - w) / f
}'

#!/usr/bin/env bash
# halobox's peak memory while a peer floods it with output: the scenario of
# tests/bench_netns.rs::remote_output_arrives_stripped_and_bounded (a
# peer's "halobox" prints 48 MB of coloured noise, then fails) between two
# test nodes of this machine (scripts/netns/nodes.sh), over a real sshd.
# The test asserts what halobox keeps (at most remote::OUTPUT_LIMIT bytes);
# this prints what that costs, which depends on the machine's state and so
# is no test: halobox's peak resident memory (VmHWM, sampled every 10 ms)
# for each round, and their median.
# Usage (as root): scripts/bench-remote-output.sh [ROUNDS (default 3)]
#   HALOBOX_BIN: the halobox binary (default: this checkout's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces)" >&2; exit 1; }
bin=${HALOBOX_BIN:-$(bash scripts/release-bin.sh)}

tag="bo$$"
tag=${tag:0:10}
net=$(($$ % 200 + 30))
dir="$(mktemp -d)"
trap 'bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
bash scripts/netns/nodes.sh up "$tag" "$net" "$dir" 9000 9000 >/dev/null
cat >"$dir/noisy-halobox" <<'EOF'
#!/bin/sh
yes $(printf '\033[31mnoise\033[0m\r\007') | head -c 48000010
printf '\033[2J\033]0;title\007last \033[1mwords\033[0m\r\302\205done\n'
exit 1
EOF
chmod 755 "$dir/noisy-halobox"
peer=10.77.$net.2

peaks=()
for r in $(seq "$rounds"); do
  ip netns exec "hb-$tag-a" "$bin" bench run --on host \
    --peer "root@$peer" --peer-ip "$peer" --peer-halobox "$dir/noisy-halobox" \
    --ssh-option "UserKnownHostsFile=$dir/known_hosts" --ssh-option "IdentityFile=$dir/client_key" \
    --ssh-option IdentitiesOnly=yes --no-rdma --save "$dir/none" >/dev/null 2>"$dir/err" &
  top=$!
  peak=0
  while kill -0 "$top" 2>/dev/null; do
    # `ip netns exec` execs halobox: the pid is halobox's once it runs.
    if grep -q '^Name:[[:space:]]*halobox$' "/proc/$top/status" 2>/dev/null; then
      kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$top/status" 2>/dev/null || true)
      [ -n "$kib" ] && [ "$kib" -gt "$peak" ] && peak=$kib
    fi
    sleep 0.01
  done
  code=0
  wait "$top" || code=$?
  [ "$code" = 1 ] || { cat "$dir/err" >&2; echo "error: halobox bench run exited $code, not 1" >&2; exit 1; }
  grep -q "bytes of output not kept]" "$dir/err" || { cat "$dir/err" >&2; echo "error: halobox did not say what it dropped" >&2; exit 1; }
  echo "round $r: halobox peaked at $peak KiB with 48 MB of remote output" >&2
  peaks+=("$peak")
done
median=$(printf '%s\n' "${peaks[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
echo "peak resident memory with 48 MB of remote output: median $median KiB of $rounds round(s)"

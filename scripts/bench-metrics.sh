#!/usr/bin/env bash
# The cost of one scrape: `halobox metrics` against Debian's
# prometheus-node-exporter on this host, side by side. Each serves on
# loopback; RUNS scrapes of each (curl, sequential), median wall time, and
# the exporter's CPU time per scrape (utime+stime from /proc/PID/stat) as a
# share of one core at a 15 s scrape interval. node_exporter runs twice: with
# its default collectors (what people run), and with only the collectors
# that read what halobox reads (netdev, hwmon, infiniband). The last lines
# are the ratios of the median scrape times, halobox / node_exporter, the
# very last (like for like) ending in `x` (goal <= 1.0x; halobox's target:
# under 10 ms a scrape, under 1 % of a core).
#
#   bash scripts/bench-metrics.sh [RUNS]
#
# HALOBOX=path uses that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-200}
command -v prometheus-node-exporter >/dev/null || {
  echo "error: prometheus-node-exporter missing: apt-get install prometheus-node-exporter" >&2
  exit 1
}
command -v curl >/dev/null || { echo "error: curl missing" >&2; exit 1; }
if [ -z "${HALOBOX:-}" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
  cargo build --release --locked -q
  HALOBOX=$CARGO_TARGET_DIR/release/halobox
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hb_port=$(free_port)
ne_port=$(free_port)
nl_port=$(free_port)
work=$(mktemp -d /tmp/halobox-bench-metrics-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$HALOBOX" metrics --listen "127.0.0.1:$hb_port" --node bench 2>"$work/halobox.log" &
pids+=($!)
hb_pid=$!
prometheus-node-exporter --web.listen-address="127.0.0.1:$ne_port" 2>"$work/node-exporter.log" &
pids+=($!)
ne_pid=$!
prometheus-node-exporter --web.listen-address="127.0.0.1:$nl_port" --collector.disable-defaults \
  --collector.netdev --collector.hwmon --collector.infiniband 2>"$work/node-exporter-narrow.log" &
pids+=($!)
nl_pid=$!

wait_up() {
  for _ in $(seq 100); do
    curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$1/metrics" && return 0
    sleep 0.1
  done
  echo "error: nothing answers on 127.0.0.1:$1 ($2)" >&2
  exit 1
}
wait_up "$hb_port" halobox
wait_up "$ne_port" node_exporter
wait_up "$nl_port" "node_exporter (netdev, hwmon, infiniband)"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure NAME PORT PID: prints "median_ms cpu_ms_per_scrape series"
measure() {
  local port=$1 pid=$2 t0 t1
  curl -sf "http://127.0.0.1:$port/metrics" >"$work/body"
  t0=$(cpu_ticks "$pid")
  for _ in $(seq "$runs"); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/metrics"
  done >"$work/times"
  t1=$(cpu_ticks "$pid")
  local hz
  hz=$(getconf CLK_TCK)
  sort -g "$work/times" | awk -v n="$runs" -v dt=$((t1 - t0)) -v hz="$hz" \
    -v series="$(grep -vc '^#' "$work/body")" \
    'NR == int((n + 1) / 2) { printf "%.3f %.3f %d\n", $1 * 1000, dt / hz * 1000 / n, series }'
}

read -r hb_ms hb_cpu hb_series < <(measure "$hb_port" "$hb_pid")
read -r ne_ms ne_cpu ne_series < <(measure "$ne_port" "$ne_pid")
read -r nl_ms nl_cpu nl_series < <(measure "$nl_port" "$nl_pid")

printf '%-26s %10s %14s %15s %7s\n' exporter "median ms" "CPU ms/scrape" "% core at 15s" series
for row in "halobox $hb_ms $hb_cpu $hb_series" "node_exporter(default) $ne_ms $ne_cpu $ne_series" \
  "node_exporter(net,hwmon,ib) $nl_ms $nl_cpu $nl_series"; do
  set -- $row
  printf '%-26s %10s %14s %15s %7s\n' "$1" "$2" "$3" "$(awk -v c="$3" 'BEGIN { printf "%.4f", c / 15000 * 100 }')" "$4"
done
echo "($runs scrapes each over loopback; $HALOBOX, $(prometheus-node-exporter --version 2>&1 | head -1))"
awk -v a="$hb_ms" -v b="$ne_ms" 'BEGIN { printf "scrape time halobox / node_exporter (default collectors): %.2fx\n", a / b }'
awk -v a="$hb_ms" -v b="$nl_ms" 'BEGIN { printf "scrape time halobox / node_exporter (netdev, hwmon, infiniband): %.2fx\n", a / b }'

#!/usr/bin/env bash
# `halobox bench collective` live, on two test nodes of this machine
# (network namespaces with podman and sshd: scripts/netns/nodes.sh), their
# halobox containers carrying the torch of vLLM's CPU venv (bound in
# read-only, as scripts/serve-e2e.sh does): gloo over the data plane.
#
# It runs `halobox bench collective --json --save` (the JSON and `bench
# report --json` of the saved run go to --out DIR when given), the same
# with a cluster.toml whose Python has no torch (it must fail naming the
# node and the fix), then a plain torch.distributed script written by hand,
# run by hand in the same containers with the same sizes, iterations and
# interface, then `cluster bench --collective`, and prints last the bus-bandwidth ratios halobox/hand at 1 MiB
# and 16 MiB (goal >= 0.95x; each side runs BENCH_COLLECTIVE_ROUNDS times,
# default 3, alternating, the best run of each kept: this machine is shared).
#
# usage: scripts/bench-collective.sh [--out DIR]
# Needs root, the engines of scripts/engines/start.sh and
# scripts/vllm-venv.sh's venv. HALOBOX_BIN: the halobox binary (default
# target/debug/halobox).
set -euo pipefail
{
cd "$(dirname "$0")/.."
# shellcheck disable=SC2034 # scripts/serve/lib.sh reads it
root=$PWD
out=''
while [ $# -gt 0 ]; do
  case "$1" in
  --out) out=$2; shift 2 ;;
  *) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
  esac
done
[ -z "$out" ] || mkdir -p "$out"

# shellcheck source=scripts/serve/lib.sh
. scripts/serve/lib.sh
serve_setup podman 2 "" 2,256,4,2
SIZES=4K,16K,64K,1M,16M
ITERS=100
ROUNDS=${BENCH_COLLECTIVE_ROUNDS:-3}
WARMUP=10

step "refresh on both nodes (vLLM's venv, with its torch, bound in read-only from $VENV)"
for x in $NODE_NAMES; do on_node "$x" "$HALOBOX" refresh --backend podman --image "$IMAGE" --memlock 8M --name vllm \
  --volume "$VENV:$VENV:ro" --yes >/dev/null; done

step "halobox bench collective --dry-run"
hb bench collective --cluster "$CFG" --dry-run >"$DIR/plan.txt" || { cat "$DIR/plan.txt" >&2; fail "bench collective --dry-run"; }
cat "$DIR/plan.txt" >&2

collective() { # N SIZES: a halobox run, its JSON in $DIR/collective-N.json
  hb bench collective --cluster "$CFG" --sizes "$2" --iters "$ITERS" --warmup "$WARMUP" --json --save "$DIR/saved-$1" \
    >"$DIR/collective-$1.json" 2>"$DIR/collective-$1.err" \
    || { cat "$DIR/collective-$1.json" "$DIR/collective-$1.err" >&2; fail "bench collective"; }
}

# The hand-written reference: what a user writes with torch.distributed.
HAND='
import os, sys, time, json
import torch, torch.distributed as dist
dist.init_process_group("gloo")
n = dist.get_world_size()
iters, warmup = int(sys.argv[1]), int(sys.argv[2])
for op in ("all_reduce", "all_gather"):
    for size in (1 << 20, 16 << 20):
        if op == "all_reduce":
            x = torch.zeros(size // 4)
            f = lambda: dist.all_reduce(x)
            factor = 2 * (n - 1) / n
        else:
            x = torch.zeros(size // 4 // n)
            outs = [torch.empty_like(x) for _ in range(n)]
            f = lambda: dist.all_gather(outs, x)
            factor = (n - 1) / n
        for _ in range(warmup):
            f()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            f()
        t = (time.perf_counter() - t0) / iters
        t = torch.tensor([t], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if dist.get_rank() == 0:
            print(json.dumps({"op": op, "bytes": size, "busbw_gbs": size / t.item() / 1e9 * factor}), flush=True)
dist.destroy_process_group()
'
hand() { # N: the hand-written script on both nodes, rank 0's lines in $DIR/hand-N.jsonl
  local x rank=0 pids=()
  for x in $NODE_NAMES; do
    in_container "$x" env MASTER_ADDR="$(node_ip a)" MASTER_PORT=29612 RANK=$rank WORLD_SIZE=2 GLOO_SOCKET_IFNAME=dp0 \
      "$VENV/bin/python" -c "$HAND" "$ITERS" "$WARMUP" >"$DIR/hand-$1-$x.jsonl" 2>"$DIR/hand-$1-$x.err" &
    pids+=($!)
    rank=$((rank + 1))
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$DIR"/hand-"$1"-*.err >&2; fail "the hand-written torch.distributed script"; }; done
  cp "$DIR/hand-$1-a.jsonl" "$DIR/hand-$1.jsonl"
}

step "halobox bench collective (gloo over the data plane, every size)"
collective 1 "$SIZES"
cat "$DIR/collective-1.err" >&2
python3 - "$DIR/collective-1.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"halobox bench collective: backend {r['backend']}, {r['world']} ranks, status {r['status']}")
for row in r["rows"]:
    print(f"  {row['op']:<10} {row['bytes']:>9} B  p50 {row['latency']['median_us']:9.1f} us  p99 {row['latency']['p99_us']:9.1f} us  busbw {row['busbw_gbs']:.3f} GB/s  {'ok' if row['correct'] else 'WRONG'}")
EOF

step "bench report of the saved run"
hb bench report "$DIR/saved-1" --json >"$DIR/report.json" || { cat "$DIR/report.json" >&2; fail "bench report"; }
hb bench report "$DIR/saved-1" >&2

step "bad input: a cluster.toml whose Python has no torch (the Ray venv)"
sed 's|^ray = .*|ray = "/opt/halobox-ray/bin/ray"|' "$CFG" >"$DIR/notorch.toml"
code=0
hb bench collective --cluster "$DIR/notorch.toml" --sizes 4K --timeout 60 >"$DIR/notorch.txt" 2>&1 || code=$?
cat "$DIR/notorch.txt" >&2
[ "$code" != 0 ] || fail "bench collective passed without torch"
grep -q "no torch in its container" "$DIR/notorch.txt" || fail "the no-torch error does not say so"
grep -q "hint:" "$DIR/notorch.txt" || fail "the no-torch error has no hint"
echo "no torch: refused (exit $code), naming the node and the fix"

step "cluster bench --collective (the pairs' links, then the collective)"
hb cluster bench --cluster "$CFG" --collective --no-rdma --duration 1 --json --save "$DIR/cluster-bench" \
  >"$DIR/cluster-bench.json" 2>"$DIR/cluster-bench.err" || { cat "$DIR/cluster-bench.json" "$DIR/cluster-bench.err" >&2; fail "cluster bench --collective"; }
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["collective"]; assert r["status"] == "ok", r; print("cluster bench --collective: collective", r["status"], "backend", r["backend"])' "$DIR/cluster-bench.json"

if [ -n "$out" ]; then
  cp "$DIR/collective-1.json" "$out/collective.json"
  cp "$DIR/report.json" "$out/report.json"
  cp "$DIR/notorch.txt" "$out/notorch.txt"
  cp "$DIR/plan.txt" "$out/plan.txt"
fi

step "1 MiB and 16 MiB: halobox and the hand-written script, $ROUNDS rounds each, alternating"
for i in $(seq "$ROUNDS"); do
  collective "r$i" 1M,16M
  hand "r$i"
done

hb bench compare "$DIR/saved-1" "$DIR/saved-r1" >&2

step "bus bandwidth, halobox / hand-written (the best of $ROUNDS rounds each: this machine is shared)"
python3 - "$DIR" "$ROUNDS" <<'EOF'
import json, sys
d = sys.argv[1]
best = {}
for n in (f"r{i}" for i in range(1, int(sys.argv[2]) + 1)):
    for row in json.load(open(f"{d}/collective-{n}.json"))["rows"]:
        k = (row["op"], row["bytes"])
        best.setdefault(("hb",) + k, 0.0)
        best[("hb",) + k] = max(best[("hb",) + k], row["busbw_gbs"] or 0.0)
    for line in open(f"{d}/hand-{n}.jsonl"):
        h = json.loads(line)
        k = ("hand", h["op"], h["bytes"])
        best[k] = max(best.get(k, 0.0), h["busbw_gbs"])
for op in ("all_reduce", "all_gather"):
    for size, name in ((1 << 20, "1 MiB"), (16 << 20, "16 MiB")):
        hb, hand = best.get(("hb", op, size), 0.0), best[("hand", op, size)]
        print(f"ratio {op} {name}: halobox {hb:.3f} GB/s / hand {hand:.3f} GB/s = {hb / hand:.2f}x")
EOF
}

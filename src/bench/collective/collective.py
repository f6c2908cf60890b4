"""One rank of `halobox bench collective` (torch.distributed).

halobox starts this on every node of cluster.toml, in the node's halobox
container, with the program on stdin (`python - ARGS`) and the rendezvous in
the environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, plus the
node's GLOO_/NCCL_ variables). It prints one JSON object per line on stdout:
`start` (with the backend: `auto` is RCCL when every rank's torch sees a
GPU, else gloo), then a `result` per operation and size (this rank's time of each
timed iteration, and whether the check got the right values), then `done`;
or an `error` (kind `no-torch`, `no-gpu`, `timeout` or `failed`).

Timing follows nccl-tests: warm-up iterations, then timed iterations of the
operation on a buffer whose values are not looked at; the check runs after
them, on its own, with known values.
"""

import argparse
import datetime
import json
import os
import sys
import threading
import time


def emit(**fields):
    print(json.dumps(fields), flush=True)


def watchdog(seconds, rank):
    def expire():
        emit(event="error", rank=rank, kind="timeout",
             message=f"did not finish within {seconds} s")
        os._exit(4)

    t = threading.Timer(seconds, expire)
    t.daemon = True
    t.start()


def pattern(torch, elements, device):
    # Small integers: their sums are exact in float32 whatever the order.
    return (torch.arange(elements, device=device) % 7 + 1).to(torch.float32)


def measure(torch, dist, group, op, size, world, rank, device, iters, warmup, sync):
    if op == "all_reduce":
        elements = max(1, size // 4)
        nbytes = elements * 4
        buf = torch.zeros(elements, dtype=torch.float32, device=device)

        def once():
            dist.all_reduce(buf, group=group)
    else:
        elements = max(1, size // (4 * world))
        nbytes = elements * 4 * world
        buf = torch.zeros(elements, dtype=torch.float32, device=device)
        outs = [torch.empty_like(buf) for _ in range(world)]

        def once():
            dist.all_gather(outs, buf, group=group)

    for _ in range(warmup):
        once()
    sync()
    dist.barrier(group=group)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        once()
        sync()
        times.append(round((time.perf_counter() - t0) * 1e6, 2))

    p = pattern(torch, elements, device)
    buf.copy_(p * (rank + 1))
    once()
    sync()
    if op == "all_reduce":
        expected = p * (world * (world + 1) // 2)
        wrong = int((buf != expected).sum().item())
    else:
        wrong = sum(int((outs[r] != p * (r + 1)).sum().item()) for r in range(world))
    emit(event="result", rank=rank, op=op, size=size, bytes=nbytes, elements=elements,
         times_us=times, correct=wrong == 0, wrong=wrong)


def main():
    ap = argparse.ArgumentParser(prog="halobox-collective")
    ap.add_argument("--backend", choices=["auto", "gloo", "nccl"], required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--ops", default="all_reduce,all_gather")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    watchdog(a.timeout, rank)
    try:
        import torch
        import torch.distributed as dist
    except Exception as e:  # ImportError, or a torch that cannot load
        emit(event="error", rank=rank, kind="no-torch", python=sys.executable,
             message=f"{type(e).__name__}: {e}")
        return 3
    try:
        # The default group is gloo (it also carries the GPU census); the
        # measured operations run on an RCCL group when every rank has a GPU.
        # A peer that never comes (its node failed to start) ends the wait
        # within a minute; an operation gets the same bound.
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=min(a.timeout, 60)))
        backend, why, group = "gloo", "", None
        device = torch.device("cpu")

        def sync():
            pass

        if a.backend != "gloo":
            flags = [torch.zeros(1) for _ in range(world)]
            dist.all_gather(flags, torch.tensor([1.0 if torch.cuda.is_available() else 0.0]))
            without = [r for r, f in enumerate(flags) if f.item() == 0.0]
            if without and a.backend == "nccl":
                emit(event="error", rank=rank, kind="no-gpu", python=sys.executable,
                     message="torch sees no GPU on rank(s) " + ", ".join(map(str, without)))
                return 5
            if without:
                why = ("torch sees no GPU on rank(s) "
                       + ", ".join(map(str, without)) + " (a CPU build of torch?): gloo over TCP")
            else:
                torch.cuda.set_device(0)
                group = dist.new_group(backend="nccl")
                device = torch.device("cuda", 0)
                sync = torch.cuda.synchronize
                backend, why = "nccl", "every rank's torch sees a GPU: RCCL"
        emit(event="start", rank=rank, world=world, backend=backend, why=why,
             torch=torch.__version__, hip=getattr(torch.version, "hip", None),
             device=str(device), python=sys.executable)
        for op in a.ops.split(","):
            for size in (int(s) for s in a.sizes.split(",")):
                measure(torch, dist, group, op, size, world, rank, device, a.iters, a.warmup, sync)
        dist.barrier()
        dist.destroy_process_group()
    except Exception as e:
        emit(event="error", rank=rank, kind="failed", message=f"{type(e).__name__}: {e}")
        return 1
    emit(event="done", rank=rank)
    return 0


if __name__ == "__main__":
    sys.exit(main())

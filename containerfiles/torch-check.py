"""What vLLM does at start, short of needing a GPU: import torch (which
loads libtorch_hip.so and the librccl it links), import torch.distributed,
check that it has NCCL (RCCL), import vllm. Prints the librccl files the
process mapped, with their sha256. Exit 0 when all of that works, 1 naming
the step that failed (with the error, such as "undefined symbol:
ncclCommResume").

Usage: python torch-check.py
"""

import hashlib
import os
import sys


def fail(step, err):
    print("torch-check: %s failed: %s: %s" % (step, type(err).__name__, err), file=sys.stderr)
    sys.exit(1)


def mapped_rccl():
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if os.path.basename(path).startswith("librccl") and path not in seen:
                seen.append(path)
    return seen


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    try:
        import torch
    except BaseException as e:
        fail("import torch", e)
    try:
        import torch.distributed as dist
    except BaseException as e:
        fail("import torch.distributed", e)
    try:
        nccl = dist.is_available() and dist.is_nccl_available()
    except BaseException as e:
        fail("torch.distributed.is_nccl_available()", e)
    if not nccl:
        print("torch-check: torch.distributed has no NCCL (RCCL) backend", file=sys.stderr)
        sys.exit(1)
    try:
        import vllm
    except BaseException as e:
        fail("import vllm", e)
    print("torch-check: torch %s (HIP %s), torch.distributed with NCCL, vllm %s"
          % (torch.__version__, getattr(torch.version, "hip", None) or "-",
             getattr(vllm, "__version__", "-")))
    for path in mapped_rccl():
        print("torch-check: loaded %s sha256 %s" % (os.path.realpath(path), sha256(path)))


if __name__ == "__main__":
    main()

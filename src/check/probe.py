# halobox check, the Python part: one of torch, amdsmi, vllm per run (a crash
# in one does not hide the others). Lines `@@hbx KEY VALUE…` on stdout.
# No single quotes here: the shell part holds this text in single quotes.
import hashlib
import os
import sys


def say(*words):
    text = " ".join(" ".join(str(w).split()) for w in words)
    print("@@hbx", text[:400], flush=True)


def why(e):
    return "%s: %s" % (type(e).__name__, e)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def loaded_rccl():
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if os.path.basename(path).startswith("librccl") and path not in seen:
                seen.append(path)
    return seen


def torch_part():
    try:
        import torch
    except BaseException as e:
        say("torch.import", "error", why(e))
        return
    say("torch.import", "ok", torch.__version__, getattr(torch.version, "hip", None) or "-")
    try:
        ok = torch.cuda.is_available()
        say("torch.cuda", ok, torch.cuda.device_count())
        if ok:
            props = torch.cuda.get_device_properties(0)
            say("torch.arch", getattr(props, "gcnArchName", "-"))
            say("torch.device", torch.cuda.get_device_name(0))
    except BaseException as e:
        say("torch.cuda.error", why(e))
    try:
        torch.cuda.nccl.version()
    except BaseException:
        pass
    try:
        import torch.distributed as dist

        say("torch.nccl", bool(dist.is_available() and dist.is_nccl_available()))
    except BaseException as e:
        say("torch.nccl", "error", why(e))
    libs = loaded_rccl()
    for path in libs:
        try:
            say("rccl.loaded", sha256(path), os.path.realpath(path))
        except BaseException as e:
            say("rccl.loaded", "unreadable", path, why(e))
    if not libs:
        say("rccl.loaded", "none")


def amdsmi_part():
    try:
        import amdsmi
    except BaseException as e:
        say("amdsmi.import", "error", why(e))
        return
    say("amdsmi.import", "ok")
    try:
        amdsmi.amdsmi_init()
        try:
            say("amdsmi.processors", len(amdsmi.amdsmi_get_processor_handles()))
        finally:
            amdsmi.amdsmi_shut_down()
    except BaseException as e:
        say("amdsmi.init", "error", why(e))


def vllm_part():
    try:
        import vllm
    except BaseException as e:
        say("vllm.import", "error", why(e))
        return
    say("vllm.import", "ok", getattr(vllm, "__version__", "-"))
    try:
        from vllm.platforms import current_platform

        say("vllm.platform", type(current_platform).__name__)
    except BaseException as e:
        say("vllm.platform", "error", why(e))


{"torch": torch_part, "amdsmi": amdsmi_part, "vllm": vllm_part}[sys.argv[1]]()

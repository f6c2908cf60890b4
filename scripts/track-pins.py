#!/usr/bin/env python3
"""The newest pins images/*.toml could move to: the newest *complete* gfx1151
torch set on TheRock's stable wheel index (torch, amd-torch-device-GFX,
torchvision, torchaudio and rocm-sdk-device-GFX, all for one ROCm release)
and the newest vLLM release tag. Used by .github/workflows/track.yml.

Usage: track-pins.py [--index URL] [--gfx gfx1151] [--vllm-repo URL]
                     [--update FILE...]

Prints one JSON document: the chosen set, the vLLM tag and commit, and every
newer set that is not complete with what it lacks. With --update, writes the
versions, RCCL_TAG, the THEROCK tarball URL and the vLLM pin into each FILE
and lists the files it changed ("changed"); the tarball's sha256 must then be
computed from the new URL (track.yml does). Exit 0; 1 when the index has no
complete set; 2 on a usage or network error.

A set is complete for ROCm R and torch T when the index has
torch==T+rocmR, amd-torch-device-GFX==T+rocmR, torchaudio==T+rocmR,
torchvision==0.(minor(T)+15).*+rocmR and rocm-sdk-device-GFX==R.
"""

import argparse
import html.parser
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request

DEFAULT_INDEX = "https://repo.amd.com/rocm/whl-multi-arch/"
DEFAULT_VLLM = "https://github.com/vllm-project/vllm"
RELEASE = re.compile(r"^\d+(\.\d+)*$")


def die(msg, code=2):
    print("track-pins: " + msg, file=sys.stderr)
    sys.exit(code)


def vkey(v):
    return tuple(int(p) for p in v.split("."))


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.names = []
        self._in_a = False

    def handle_starttag(self, tag, attrs):
        self._in_a = tag == "a"

    def handle_endtag(self, tag):
        self._in_a = False

    def handle_data(self, data):
        if self._in_a and data.strip():
            self.names.append(data.strip())


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def versions(index, project):
    """{version: True} of the wheels of `project` on a PEP 503 index."""
    url = index.rstrip("/") + "/" + normalize(project) + "/"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            text = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return set()
        die("%s: HTTP %s" % (url, e.code))
    except (urllib.error.URLError, OSError) as e:
        die("%s: %s" % (url, e))
    parser = Links()
    parser.feed(text)
    out = set()
    for f in parser.names:
        if not f.endswith(".whl"):
            continue
        parts = f[: -len(".whl")].split("-")
        if len(parts) >= 5 and normalize(parts[0]) == normalize(project):
            out.add(parts[1])
    return out


def split_local(v):
    """2.11.0+rocm7.14.0 -> ("2.11.0", "7.14.0"); None when not that shape."""
    base, _, local = v.partition("+")
    if not local.startswith("rocm") or not RELEASE.match(base) or not RELEASE.match(local[4:]):
        return None
    return base, local[4:]


def by_rocm(vs):
    out = {}
    for v in vs:
        s = split_local(v)
        if s:
            out.setdefault(s[1], set()).add(s[0])
    return out


def resolve(index, gfx):
    torch = by_rocm(versions(index, "torch"))
    device = by_rocm(versions(index, "amd-torch-device-" + gfx))
    vision = by_rocm(versions(index, "torchvision"))
    audio = by_rocm(versions(index, "torchaudio"))
    sdk = {v for v in versions(index, "rocm-sdk-device-" + gfx) if RELEASE.match(v)}
    releases = sorted(set(torch) | set(device) | sdk, key=vkey, reverse=True)
    incomplete = []
    for rocm in releases:
        torches = sorted(torch.get(rocm, ()), key=vkey, reverse=True)
        if not torches:
            incomplete.append({"rocm": rocm, "torch": None, "missing": ["torch"]})
            continue
        for t in torches:
            minor = vkey(t)[1]
            tv = sorted(
                (v for v in vision.get(rocm, ()) if vkey(v)[:2] == (0, minor + 15)),
                key=vkey,
                reverse=True,
            )
            missing = []
            if t not in device.get(rocm, ()):
                missing.append("amd-torch-device-" + gfx)
            if not tv:
                missing.append("torchvision 0.%d" % (minor + 15))
            if t not in audio.get(rocm, ()):
                missing.append("torchaudio")
            if rocm not in sdk:
                missing.append("rocm-sdk-device-" + gfx)
            if missing:
                incomplete.append({"rocm": rocm, "torch": t, "missing": missing})
                continue
            return {
                "rocm": rocm,
                "torch": t,
                "torchvision": tv[0],
                "torchaudio": t,
            }, incomplete
    return None, incomplete


def newest_vllm(repo):
    try:
        out = subprocess.run(
            ["git", "ls-remote", "--tags", repo],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        die("git ls-remote --tags %s: %s" % (repo, getattr(e, "stderr", "") or e))
    commits = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        tag = ref[len("refs/tags/"):]
        peeled = tag.endswith("^{}")
        tag = tag[:-3] if peeled else tag
        if re.match(r"^v\d+\.\d+\.\d+$", tag) and (peeled or tag not in commits):
            commits[tag] = sha
    if not commits:
        die("%s has no vX.Y.Z release tag" % repo)
    tag = max(commits, key=lambda t: vkey(t[1:]))
    return {"tag": tag, "commit": commits[tag]}


def update(path, pins):
    with open(path) as f:
        text = f.read()
    new = text
    rocm = pins["rocm"]
    for key, value in [
        ("ROCM_VERSION", rocm),
        ("TORCH_VERSION", pins["torch"]),
        ("TORCHVISION_VERSION", pins["torchvision"]),
        ("TORCHAUDIO_VERSION", pins["torchaudio"]),
        ("RCCL_TAG", "therock-" + ".".join(rocm.split(".")[:2])),
    ]:
        new = re.sub(r'(?m)^%s = "[^"]*"' % key, '%s = "%s"' % (key, value), new)
    new = re.sub(
        r'(?m)^(url = "[^"]*-)\d+(\.\d+)*(\.tar\.gz")',
        lambda m: m.group(1) + rocm + m.group(3),
        new,
    )
    vllm = pins.get("vllm")
    if vllm:
        new = re.sub(
            r'(\[git\.VLLM\]\nrepo = "[^"]*"\ncommit = ")[0-9a-f]{40}("\ntag = ")[^"]*"',
            lambda m: m.group(1) + vllm["commit"] + m.group(2) + vllm["tag"] + '"',
            new,
        )
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=DEFAULT_INDEX)
    ap.add_argument("--gfx", default="gfx1151")
    ap.add_argument("--vllm-repo", default=DEFAULT_VLLM)
    ap.add_argument("--update", nargs="+", default=[], metavar="FILE")
    a = ap.parse_args()
    if not re.match(r"^gfx[0-9a-f]+$", a.gfx):
        die("--gfx %r is not a gfx target (gfx1151)" % a.gfx)
    chosen, incomplete = resolve(a.index, a.gfx)
    doc = {"index": a.index, "gfx": a.gfx, "set": chosen, "incomplete": incomplete}
    if chosen is None:
        print(json.dumps(doc, indent=2))
        die("no complete %s set on %s" % (a.gfx, a.index), 1)
    doc["vllm"] = newest_vllm(a.vllm_repo)
    pins = dict(chosen, vllm=doc["vllm"])
    doc["changed"] = [p for p in a.update if update(p, pins)]
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()

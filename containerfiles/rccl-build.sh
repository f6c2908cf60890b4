#!/bin/bash
# The image's RCCL, into OUT_DIR: librccl.so.1, librccl.so.1.sha256 and
# rccl.env (RCCL_SOURCE, RCCL_TAG, RCCL_COMMIT, RCCL_SHA256), which the
# runtime stage and the labels use.
#
# Usage: rccl-build.sh stock|patched OUT_DIR
#   stock    the ROCm SDK's own librccl ($ROCM_PATH/lib/librccl.so.1), copied
#            as is: AMD built it from ROCm/rocm-systems at RCCL_TAG.
#   patched  RCCL built here from $RCCL_REPO at the tag RCCL_TAG (the same
#            ROCm release as the runtime, so the same ABI), with
#            $PATCHES/*.patch applied by git am, for gfx1151, with
#            -DFAULT_INJECTION=OFF (ROCm/TheRock issue #7903: the 7.14
#            packages' fault injection slows multi-node collectives of
#            64-512 MB). When RCCL_COMMIT is set, the tag must be that commit.
# Either way the library must pass rccl-markers.sh (gfx1151 code objects,
# the NET/IB transport) or nothing is written.
# Environment: ROCM_PATH (/opt/rocm), RCCL_TAG, RCCL_REPO, RCCL_COMMIT,
# RCCL_SUBDIR (projects/rccl), PATCHES (/src/patches/rccl), GFX (gfx1151).
set -euo pipefail
me=rccl-build
here=$(cd "$(dirname "$0")" && pwd)
usage() { echo "$me: $1" >&2; echo "usage: $me stock|patched OUT_DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage "give the RCCL choice and the output folder"
choice=$1 out=$2
rocm=${ROCM_PATH:-/opt/rocm}
tag=${RCCL_TAG:?$me: RCCL_TAG (the rocm-systems tag of the ROCm release, therock-7.14) is not set}
gfx=${GFX:-gfx1151}
commit=-

case $choice in
  stock)
    src="$rocm/lib/librccl.so.1"
    [ -e "$src" ] || { echo "$me: the ROCm SDK at $rocm has no lib/librccl.so.1" >&2; exit 1; }
    lib=$(readlink -f "$src")
    ;;
  patched)
    repo=${RCCL_REPO:?$me: RCCL_REPO is not set}
    subdir=${RCCL_SUBDIR:-projects/rccl}
    patches=${PATCHES:-/src/patches/rccl}
    work=$(mktemp -d)
    git init -q "$work/src"
    git -C "$work/src" remote add origin "$repo"
    git -C "$work/src" sparse-checkout set "$subdir"
    git -C "$work/src" fetch -q --depth 1 --filter=blob:none origin "refs/tags/$tag:refs/tags/$tag"
    git -C "$work/src" -c advice.detachedHead=false checkout -q "refs/tags/$tag"
    commit=$(git -C "$work/src" rev-parse HEAD)
    echo "$me: $repo $tag is $commit"
    if [ -n "${RCCL_COMMIT:-}" ] && [ "$RCCL_COMMIT" != "$commit" ]; then
      echo "$me: $tag is $commit, not RCCL_COMMIT=$RCCL_COMMIT (was the tag moved?)" >&2
      exit 1
    fi
    for p in "$patches"/*.patch; do
      [ -e "$p" ] || continue
      echo "$me: applying ${p##*/}"
      git -C "$work/src" -c user.name=halobox -c user.email=halobox@localhost am -q "$p"
    done
    cmake -S "$work/src/$subdir" -B "$work/build" \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER="$rocm/bin/hipcc" \
      -DROCM_PATH="$rocm" \
      -DGPU_TARGETS="$gfx" \
      -DAMDGPU_TARGETS="$gfx" \
      -DBUILD_TESTS=OFF \
      -DFAULT_INJECTION=OFF \
      -DCMAKE_INSTALL_PREFIX="$work/install" \
      -DCMAKE_INSTALL_LIBDIR=lib
    cmake --build "$work/build" --parallel "$(nproc)"
    cmake --install "$work/build"
    lib=$(readlink -f "$work/install/lib/librccl.so.1")
    ;;
  *) usage "RCCL must be stock or patched, not '$choice'" ;;
esac

bash "$here/rccl-markers.sh" "$lib" "$gfx"
mkdir -p "$out"
cp "$lib" "$out/librccl.so.1"
sha=$(sha256sum "$out/librccl.so.1" | cut -d' ' -f1)
echo "$sha  librccl.so.1" >"$out/librccl.so.1.sha256"
printf 'RCCL_SOURCE=%s\nRCCL_TAG=%s\nRCCL_COMMIT=%s\nRCCL_SHA256=%s\n' "$choice" "$tag" "$commit" "$sha" >"$out/rccl.env"
echo "$me: RCCL $choice ($tag, commit $commit), sha256 $sha"

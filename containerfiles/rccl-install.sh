#!/bin/bash
# Puts the chosen RCCL in the image, after the ABI gate says every library
# that links librccl can load it.
#
# Usage: rccl-install.sh RCCL_DIR ROOT...
# RCCL_DIR holds what rccl-build.sh wrote (librccl.so.1, rccl.env). The
# consumers are the libraries under ROOT... that link librccl
# (rccl-consumers.sh: libtorch_hip.so and the rest).
#   stock    nothing is replaced: every librccl file under ROOT... (ROCm's and
#            the ones the torch wheels bring) must pass the gate as it is.
#   patched  the gate runs on the built library BEFORE any librccl is
#            replaced; only when it passes is it copied over every librccl
#            file under ROOT..., then every copy must be that file and every
#            librccl link must lead to one.
# The gate failing stops the build with the missing symbols named (exit 1).
set -euo pipefail
me=rccl-install
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $me RCCL_DIR ROOT..." >&2; exit 2; }
dir=$1
shift
[ -r "$dir/rccl.env" ] && [ -f "$dir/librccl.so.1" ] \
  || { echo "$me: $dir has no librccl.so.1 and rccl.env from rccl-build.sh" >&2; exit 2; }
source=$(sed -n 's/^RCCL_SOURCE=//p' "$dir/rccl.env")
chosen="$dir/librccl.so.1"

mapfile -t consumers < <(bash "$here/rccl-consumers.sh" "$@")
[ "${#consumers[@]}" -gt 0 ] || exit 1
mapfile -t copies < <(find "$@" -xdev -name 'librccl.so*' -type f ! -path "$chosen" | sort)
echo "$me: RCCL $source; ${#consumers[@]} librccl consumer(s), ${#copies[@]} librccl file(s) under $*"

case $source in
  stock)
    for lib in "${copies[@]}"; do
      bash "$here/rccl-abi-check.sh" "${consumers[@]}" -- "$lib"
    done
    ;;
  patched)
    bash "$here/rccl-abi-check.sh" "${consumers[@]}" -- "$chosen"
    for lib in "${copies[@]}"; do
      cp -v "$chosen" "$lib"
    done
    want=$(sha256sum "$chosen" | cut -d' ' -f1)
    others=$(find "$@" -xdev -name 'librccl.so*' -type f -exec sha256sum {} + | awk -v w="$want" '$1 != w')
    [ -z "$others" ] || { echo "$me: librccl copies that are not the patched build: $others" >&2; exit 1; }
    ;;
  *) echo "$me: $dir/rccl.env says RCCL_SOURCE=$source, not stock or patched" >&2; exit 2 ;;
esac
dangling=$(find "$@" -xdev -name 'librccl.so*' -type l ! -exec test -e {} \; -print)
[ -z "$dangling" ] || { echo "$me: librccl links that lead nowhere: $dangling" >&2; exit 1; }

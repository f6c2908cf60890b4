#!/bin/bash
# Every device-code guard of RCCL that lists the RDNA3 targets must list
# gfx1151 too, or gfx1151 takes the other branch: in src/device/common.h that
# branch reads HW_REG_HW_ID, which LLVM rejects on GFX10+ (with COLLTRACE on,
# the default, the build fails); in src/include/rccl_float8.h it picks the FP8
# type the RDNA3 targets avoid.
#
# Usage: gfx1151-guards.sh SRC_DIR
# Finds every preprocessor line under SRC_DIR that names __gfx1100__,
# __gfx1101__ and __gfx1102__. Lines that also name __gfx1151__ are fine; in
# lines that do not, ` || defined(__gfx1151__)` is added after
# `defined(__gfx1102__)` and the change is printed. A guard that names
# __gfx1100__ in any other shape, or spans several lines, stops the build:
# it needs a person to decide. Runs after patches/rccl/*.patch.
set -euo pipefail
src=${1:?usage: gfx1151-guards.sh SRC_DIR}
[ -d "$src" ] || { echo "gfx1151-guards: $src is not a folder" >&2; exit 2; }

checked=0 fixed=0 bad=0
while IFS= read -r -d '' f; do
  while IFS=: read -r n line; do
    checked=$((checked + 1))
    case $line in
      *__gfx1151__*) continue ;;
    esac
    case $line in
      *'\') echo "gfx1151-guards: $f:$n: guard continues on the next line; check it by hand: $line" >&2
            bad=$((bad + 1)); continue ;;
    esac
    case $line in
      *'defined(__gfx1100__)'*'defined(__gfx1101__)'*'defined(__gfx1102__)'*)
        sed -i "${n}s/defined(__gfx1102__)/defined(__gfx1102__) || defined(__gfx1151__)/" "$f"
        echo "gfx1151-guards: $f:$n: added __gfx1151__: $(sed -n "${n}p" "$f")"
        fixed=$((fixed + 1)) ;;
      *) echo "gfx1151-guards: $f:$n: names __gfx1100__ but not in the defined(__gfx1100__) || ... || defined(__gfx1102__) shape; check it by hand: $line" >&2
         bad=$((bad + 1)) ;;
    esac
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*(el)?if.*__gfx1100__' "$f" || true)
done < <(find "$src" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cuh' -o -name '*.cu' -o -name '*.cc' -o -name '*.cpp' \) -print0 | sort -z)

echo "gfx1151-guards: $checked RDNA3 guard(s) in $src, $fixed given __gfx1151__, $bad to check by hand"
[ "$bad" -eq 0 ]

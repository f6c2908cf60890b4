#!/bin/bash
# Lists every shared library under DIR... that links librccl (a DT_NEEDED
# entry librccl.so*), one path a line, sorted: the consumers the RCCL ABI
# gate (rccl-abi-check.sh) checks a librccl against. librccl itself is not
# listed. Exit 0 with at least one consumer, 1 with none (the gate would
# check nothing), 2 on a usage error. Uses readelf from binutils.
#
# Usage: rccl-consumers.sh DIR...
set -euo pipefail
me=rccl-consumers
[ $# -gt 0 ] || { echo "usage: $me DIR..." >&2; exit 2; }
command -v readelf >/dev/null || { echo "$me: readelf not found: install binutils" >&2; exit 2; }
for d in "$@"; do
  [ -d "$d" ] || { echo "$me: $d is not a folder" >&2; exit 2; }
done
found=0
while IFS= read -r -d '' f; do
  case ${f##*/} in librccl.so*) continue ;; esac
  if readelf -d "$f" 2>/dev/null | grep -q 'NEEDED.*\[librccl\.so'; then
    printf '%s\n' "$f"
    found=$((found + 1))
  fi
done < <(find "$@" -xdev -type f -name '*.so*' -print0 | sort -z)
if [ "$found" -eq 0 ]; then
  echo "$me: no library under $* links librccl" >&2
  exit 1
fi

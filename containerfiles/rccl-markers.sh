#!/bin/bash
# Does this librccl carry what a Strix Halo cluster needs? Device code for
# the GPU target (default gfx1151) and RCCL's InfiniBand/RoCE transport
# (its `NET/IB` log strings: without it RCCL falls back to TCP sockets).
#
# Usage: rccl-markers.sh LIBRCCL [GFX_TARGET]
# Code objects are counted as offload-bundle entries (one per target: the
# target id also sits in each code object's `amdhsa.target` metadata, so
# string hits count every one twice). Bundles are read where they are:
# uncompressed (`__CLANG_OFFLOAD_BUNDLE__`) in the file as is, compressed
# (`CCOB`, versions 1-3 of LLVM's format, zstd) unpacked with zstd; an entry
# is for GFX_TARGET when its id ends in `amdgcn-amd-amdhsa--GFX_TARGET`
# (optionally `:feature` after). A magic whose header does not fit (`CCOB`
# as an immediate in a bundle reader's own x86 code) is "not a bundle"; a
# real header that cannot be unpacked (zlib, no zstd) is "unreadable".
# Prints the counts; exit 0 when both are there, 1 naming what is missing,
# 2 on a usage error.
set -euo pipefail
me=rccl-markers
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $me LIBRCCL [GFX_TARGET]" >&2; exit 2; }
lib=$1
gfx=${2:-gfx1151}
case $gfx in gfx[0-9]*) ;; *) echo "$me: $gfx is not a gfx target (gfx1151)" >&2; exit 2 ;; esac
[ -f "$lib" ] && [ -r "$lib" ] || { echo "$me: $lib: no such readable file" >&2; exit 2; }
target="amdgcn-amd-amdhsa--$gfx"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() { { grep -a -o -F -- "$1" || true; } | wc -l; }
u16() { od -An -tu2 -j "$2" -N2 "$1" | tr -d ' '; }
hex4() { od -An -tx1 -j "$2" -N4 "$1" | tr -d ' '; }

# The entry ids of the offload bundle that starts the bytes on stdin (its
# first 64 KiB hold the header), one a line; exit 1 when they are not one:
# the magic, then a u64 count (1-4096), then per entry u64 offset, u64 size,
# u64 id length (1-1024) and the printable id.
ids() {
  head -c 65536 | od -An -v -tu1 | awk '
    BEGIN { for (c = 32; c < 127; c++) ord[sprintf("%c", c)] = c }
    { for (i = 1; i <= NF; i++) b[n++] = $i + 0 }
    function u64(p,   v, k) { v = 0; for (k = 7; k >= 0; k--) v = v * 256 + b[p + k]; return v }
    END {
      m = "__CLANG_OFFLOAD_BUNDLE__"
      if (n < 32) exit 1
      for (i = 0; i < 24; i++) if (b[i] != ord[substr(m, i + 1, 1)]) exit 1
      count = u64(24)
      if (count < 1 || count > 4096) exit 1
      p = 32
      for (e = 0; e < count; e++) {
        if (p + 24 > n) exit 1
        len = u64(p + 16)
        if (len < 1 || len > 1024 || p + 24 + len > n) exit 1
        id = ""
        for (k = 0; k < len; k++) {
          c = b[p + 24 + k]
          if (c < 32 || c > 126) exit 1
          id = id sprintf("%c", c)
        }
        out[e] = id
        p += 24 + len
      }
      for (e = 0; e < count; e++) print out[e]
    }'
}

objects=0 all=0 with=0 compressed=0 plain=0 notb=0 unread=0
# tally IDS-FILE: one bundle's entries into the counts.
tally() {
  local n
  n=$(grep -c -E -- "amdgcn-amd-amdhsa--$gfx(:|\$)" "$1" || true)
  objects=$((objects + n))
  [ "$n" -eq 0 ] || with=$((with + 1))
  all=$((all + $(grep -c -F -- amdgcn-amd-amdhsa "$1" || true)))
}

# Uncompressed bundles in the file as is.
while IFS=: read -r off _; do
  { tail -c +$((off + 1)) "$lib" | head -c 65536 >"$tmp/head"; } 2>/dev/null || true
  if ids <"$tmp/head" >"$tmp/ids"; then
    plain=$((plain + 1))
    tally "$tmp/ids"
  else
    notb=$((notb + 1))
  fi
done < <(grep -a -o -b -F __CLANG_OFFLOAD_BUNDLE__ "$lib" || true)

# Compressed bundles: CCOB, u16 version, u16 method (0 zlib, 1 zstd), then
# the sizes and a hash (20, 24 or 32 bytes of header in all), then the frame.
while IFS=: read -r off _; do
  version=$(u16 "$lib" $((off + 4)))
  method=$(u16 "$lib" $((off + 6)))
  case $version in
    1) header=20 ;;
    2) header=24 ;;
    3) header=32 ;;
    *) notb=$((notb + 1)); continue ;;
  esac
  case $method in
    1) [ "$(hex4 "$lib" $((off + header)))" = 28b52ffd ] || { notb=$((notb + 1)); continue; } ;;
    0) unread=$((unread + 1)); continue ;;
    *) notb=$((notb + 1)); continue ;;
  esac
  compressed=$((compressed + 1))
  if ! command -v zstd >/dev/null; then
    unread=$((unread + 1))
    continue
  fi
  # Only the header is unpacked: zstd stops when head has read it.
  { tail -c +$((off + header + 1)) "$lib" | zstd -dcq | head -c 65536 >"$tmp/head"; } 2>/dev/null || true
  if ids <"$tmp/head" >"$tmp/ids"; then
    tally "$tmp/ids"
  else
    unread=$((unread + 1))
  fi
done < <(grep -a -o -b -F CCOB "$lib" || true)

ib=$(count NET/IB <"$lib")
echo "$me: $lib: $objects $gfx code object(s) in $with of $((compressed + plain)) offload bundle(s) ($compressed compressed, $plain uncompressed; $all code object(s) for any GPU target), $unread unreadable, $notb bundle magic(s) not a bundle, $ib NET/IB marker(s)"
# Fault injection (reported, not a failure; `halobox check` WARNs on it):
# RCCL compiles the RCCL_INJECT_FAULTS knob in only with -DFAULT_INJECTION=ON,
# and RCCL_IB_FAULT_INJECTION is the net-ib gate of ROCm/rocm-systems PR 8512
# (with PR 8484: the multi-node fix for TheRock issue 7903).
fi_knob=$(count RCCL_INJECT_FAULTS <"$lib")
fi_gate=$(count RCCL_IB_FAULT_INJECTION <"$lib")
if [ "$fi_knob" -eq 0 ] && [ "$fi_gate" -eq 0 ]; then
  echo "$me: $lib: no fault injection compiled in (the multi-node slowdown of TheRock issue 7903 cannot occur)"
elif [ "$fi_gate" -gt 0 ]; then
  echo "$me: $lib: fault injection compiled in, with the net-ib gate RCCL_IB_FAULT_INJECTION (the multi-node fix)"
else
  echo "$me: $lib: fault injection compiled in without the net-ib gate: multi-node collectives of 64-512 MB run slow (TheRock issue 7903)"
fi
bad=0
if [ "$objects" -eq 0 ]; then
  echo "$me: $lib has no $gfx code objects ($target)$([ "$unread" -eq 0 ] || echo "; $unread compressed bundle(s) could not be read (zlib, or no zstd installed)")" >&2
  bad=1
fi
if [ "$ib" -eq 0 ]; then
  echo "$me: $lib has no NET/IB transport (built without InfiniBand/RoCE support?)" >&2
  bad=1
fi
exit "$bad"

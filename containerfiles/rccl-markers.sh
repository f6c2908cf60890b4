#!/bin/bash
# Does this librccl carry what a Strix Halo cluster needs? Device code for
# the GPU target (default gfx1151) and RCCL's InfiniBand/RoCE transport
# (its `NET/IB` log strings: without it RCCL falls back to TCP sockets).
#
# Usage: rccl-markers.sh LIBRCCL [GFX_TARGET]
# Code objects are found by their offload-bundle target id
# (`amdgcn-amd-amdhsa--gfx1151`), in the file as is and inside compressed
# bundles (`CCOB` header, zstd; versions 1-3 of LLVM's format), which are
# unpacked with zstd. Prints the counts; exit 0 when both are there, 1
# naming what is missing, 2 on a usage error.
set -euo pipefail
me=rccl-markers
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $me LIBRCCL [GFX_TARGET]" >&2; exit 2; }
lib=$1
gfx=${2:-gfx1151}
case $gfx in gfx[0-9]*) ;; *) echo "$me: $gfx is not a gfx target (gfx1151)" >&2; exit 2 ;; esac
[ -f "$lib" ] && [ -r "$lib" ] || { echo "$me: $lib: no such readable file" >&2; exit 2; }
target="amdgcn-amd-amdhsa--$gfx"

count() { { grep -a -o -F -- "$1" || true; } | wc -l; }
u16() { od -An -tu2 -j "$2" -N2 "$1" | tr -d ' '; }

objects=$(count "$target" <"$lib")
bundles=0 unread=0
while IFS=: read -r off _; do
  bundles=$((bundles + 1))
  version=$(u16 "$lib" $((off + 4)))
  method=$(u16 "$lib" $((off + 6)))
  case $version in
    1) header=20 ;;
    2) header=24 ;;
    3) header=32 ;;
    *) unread=$((unread + 1)); continue ;;
  esac
  if [ "$method" != 1 ] || ! command -v zstd >/dev/null; then
    unread=$((unread + 1))
    continue
  fi
  # zstd stops with an error at the end of the frame (what follows is not
  # zstd); what it unpacked before is what is counted.
  n=$( { tail -c +$((off + header + 1)) "$lib" | zstd -dcq 2>/dev/null || true; } | count "$target")
  objects=$((objects + n))
done < <(grep -a -o -b -F CCOB "$lib" || true)

ib=$(count NET/IB <"$lib")
echo "$me: $lib: $objects $gfx code object(s) ($bundles compressed bundle(s), $unread unreadable), $ib NET/IB marker(s)"
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
  echo "$me: $lib has no $gfx code objects ($target)$([ "$unread" -eq 0 ] || echo "; $unread compressed bundle(s) could not be read: is zstd installed?")" >&2
  bad=1
fi
if [ "$ib" -eq 0 ]; then
  echo "$me: $lib has no NET/IB transport (built without InfiniBand/RoCE support?)" >&2
  bad=1
fi
exit "$bad"

#!/bin/bash
# The RCCL ABI gate: does LIBRCCL define every nccl*/rccl* symbol the
# consumers need? A librccl that lacks one makes the consumer fail to load
# (`import torch`: "libtorch_hip.so: undefined symbol: ncclCommResume").
#
# Usage: rccl-abi-check.sh CONSUMER.so... -- LIBRCCL.so
# Needed: the nccl*/rccl* symbols undefined in the consumers' dynamic symbol
# tables. Defined: the ones LIBRCCL exports (dynamic, defined). Symbol
# versions (`@NCCL_2`) are ignored. Exit 0 when every needed symbol is
# defined, 1 naming each missing one, 2 on a usage error or a file nm cannot
# read. Uses nm from binutils.
set -euo pipefail
me=rccl-abi-check
usage() {
  echo "$me: $1" >&2
  echo "usage: $me CONSUMER.so... -- LIBRCCL.so" >&2
  exit 2
}

consumers=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  consumers+=("$1")
  shift
done
[ $# -gt 0 ] || usage "no -- before the librccl to check"
shift
[ "${#consumers[@]}" -gt 0 ] || usage "no consumer library before --"
[ $# -eq 1 ] || usage "give exactly one librccl after -- (got $#)"
lib=$1
command -v nm >/dev/null || { echo "$me: nm not found: install binutils" >&2; exit 2; }
for f in "${consumers[@]}" "$lib"; do
  [ -f "$f" ] && [ -r "$f" ] || usage "$f: no such readable file"
done

# nm -D prints `ADDR TYPE NAME` (defined) or `U NAME` (undefined): the name
# is the last field; drop any @VERSION / @@VERSION suffix.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
symbols() { # nm-option file >list
  if ! nm -D "$1" "$2" >"$tmp/nm" 2>"$tmp/err"; then
    echo "$me: nm cannot read $2 as a shared library: $(head -n 3 "$tmp/err")" >&2
    exit 2
  fi
  awk 'NF { n = $NF; sub(/@.*/, "", n); if (n ~ /^(nccl|rccl)/) print n }' "$tmp/nm"
}

: >"$tmp/needed"
for c in "${consumers[@]}"; do
  symbols --undefined-only "$c" >>"$tmp/needed"
done
sort -u -o "$tmp/needed" "$tmp/needed"
symbols --defined-only "$lib" | sort -u >"$tmp/defined"
comm -23 "$tmp/needed" "$tmp/defined" >"$tmp/missing"
n_needed=$(wc -l <"$tmp/needed")

if [ -s "$tmp/missing" ]; then
  echo "$me: $lib lacks $(wc -l <"$tmp/missing") of the $n_needed nccl*/rccl* symbol(s) ${consumers[*]} need:" >&2
  sed 's/^/  /' "$tmp/missing" >&2
  exit 1
fi
echo "$me: $lib defines all $n_needed nccl*/rccl* symbol(s) ${consumers[*]} need"

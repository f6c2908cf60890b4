#!/bin/bash
# Is this HIP the one of the ROCm release the image pins? HIP is numbered on
# its own: ROCm 7.x shipped HIP 7.x, but ROCm 10.0.0 ships HIP 7.15 (AMD's
# rocm-bindings-core 10.0.0, rocm/version.py: HIP_VERSION_NAME
# "7.15.26333-0000000"), so ROCm's major.minor says nothing about HIP's.
# HIP_VERSION is the HIP major.minor of the pinned ROCm (images/*.toml).
#
# Usage: hip-version.sh HIP_VERSION WHAT=VERSION...
#   WHAT=VERSION  a HIP version and where it was read
#                 (hipconfig=7.14.26200-0000000, torch=7.14.26200-0000000)
# Exit 0 when every VERSION's major.minor is HIP_VERSION, 1 naming each that
# is not, 2 on a usage error.
set -euo pipefail
me=hip-version
usage() { echo "$me: $1" >&2; echo "usage: $me HIP_VERSION WHAT=VERSION..." >&2; exit 2; }
[ $# -ge 2 ] || usage "give the HIP major.minor and at least one WHAT=VERSION"
want=$1
shift
[[ $want =~ ^[0-9]+\.[0-9]+$ ]] || usage "HIP_VERSION must be major.minor (7.14), not '$want'"
bad=0
for arg in "$@"; do
  [[ $arg == *=* ]] || usage "'$arg' is not WHAT=VERSION"
  what=${arg%%=*}
  version=${arg#*=}
  if [[ $version =~ ^([0-9]+\.[0-9]+)(\.|$) ]] && [ "${BASH_REMATCH[1]}" = "$want" ]; then
    echo "$me: $what is HIP $version (HIP $want)"
  else
    echo "$me: $what is HIP '$version', not HIP $want (the HIP of the pinned ROCm release: HIP_VERSION in images/*.toml)" >&2
    bad=1
  fi
done
exit "$bad"

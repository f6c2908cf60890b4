#!/bin/sh
# Prints the version of rdma-core (libibverbs and its providers, irdma's
# among them) on this system: the upstream release rdma-core-build.sh
# installed over the distribution's (its version in
# $RDMA_CORE_VERSION_FILE, default /opt/halobox/rdma-core.version), else the
# package manager's: `rdma-core 57.0 (rpm)`. With MIN, exit 1 when it is older than MIN (the E810's irdma gave
# RCCL "Unknown completion" errors with rdma-core 50; 62 is the version the
# public image proved). Exit 1 when no rdma-core is installed, 2 on a usage
# error. POSIX sh.
#
# Usage: rdma-core-version.sh [MIN]
set -eu
me=rdma-core-version
[ $# -le 1 ] || { echo "usage: $me [MIN]" >&2; exit 2; }
min=${1:-}
case $min in '' | [0-9]*) ;; *) echo "$me: MIN must be a version number (62.0), not '$min'" >&2; exit 2 ;; esac
v='' how=''
built=${RDMA_CORE_VERSION_FILE:-/opt/halobox/rdma-core.version}
if [ -s "$built" ]; then
  v=$(head -n 1 "$built")
  how="built from upstream"
elif command -v rpm >/dev/null 2>&1 && v=$(rpm -q --qf '%{VERSION}' libibverbs 2>/dev/null); then
  how=rpm
elif command -v dpkg-query >/dev/null 2>&1 && v=$(dpkg-query -W -f '${Version}' libibverbs1 2>/dev/null); then
  how=dpkg
  v=${v#*:}
  v=${v%%-*}
else
  v=
fi
[ -n "$v" ] || { echo "$me: no rdma-core (libibverbs) package is installed" >&2; exit 1; }
echo "rdma-core $v ($how)"
[ -n "$min" ] || exit 0
# Compare major.minor numerically.
older() { # a b: a < b
  a1=${1%%.*} b1=${2%%.*}
  a2=${1#"$a1"}; a2=${a2#.}; a2=${a2%%.*}
  b2=${2#"$b1"}; b2=${b2#.}; b2=${b2%%.*}
  [ "${a1:-0}" -lt "${b1:-0}" ] || { [ "${a1:-0}" -eq "${b1:-0}" ] && [ "${a2:-0}" -lt "${b2:-0}" ]; }
}
if older "$v" "$min"; then
  echo "$me: rdma-core $v is older than $min" >&2
  exit 1
fi

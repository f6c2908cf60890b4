#!/usr/bin/env bash
# Builds the release files of halobox VERSION into dist/ (or $HALOBOX_DIST):
#   halobox-VERSION-x86_64-linux.tar.gz    the binary, shell completions, man
#                                          pages, LICENSE and INSTALL
#   halobox-VERSION-1.x86_64.rpm           from packaging/halobox.spec
#   *.sha256                               one per file, for `sha256sum -c`
# The binary is linked against glibc 2.28 with cargo-zigbuild (zig from the
# ziglang wheel), so it runs on every Fedora, RHEL 8+, Debian 10+ and Ubuntu
# 20.04+; the script refuses a binary that needs a newer glibc symbol. Needs a
# Rust toolchain, python3 with venv, rpmbuild (Debian/Ubuntu: apt-get install
# rpm) and objdump. No Rust is needed to use what it makes.
#
#   bash scripts/release.sh 0.1.0          # VERSION must match Cargo.toml
#
# Environment: HALOBOX_ZIG_VENV (default /opt/halobox-zig: the venv with
# cargo-zigbuild and ziglang, made once per pinned version pair),
# CARGO_TARGET_DIR (default target/release-zig, away from the debug builds),
# SOURCE_DATE_EPOCH (the build date `--version` prints; default now).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_ZIGBUILD_VERSION=0.24.1
ZIGLANG_VERSION=0.15.2
GLIBC=2.28
TRIPLE=x86_64-unknown-linux-gnu

die() { printf 'release.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf '==> %s\n' "$*" >&2; }

[ $# -eq 1 ] || die "usage: scripts/release.sh VERSION (e.g. $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1))"
version=${1#v}
crate_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ "$version" = "$crate_version" ] ||
  die "VERSION $version is not Cargo.toml's version $crate_version: set version = \"$version\" in Cargo.toml (and commit) first"
spec_version=$(sed -n 's/^Version: *//p' packaging/halobox.spec)
[ "$spec_version" = "$version" ] ||
  die "packaging/halobox.spec says Version: $spec_version: set it to $version (as Cargo.toml) first"
need() { command -v "$1" >/dev/null || die "$1 not found: $2"; }
need cargo "install Rust (https://rustup.rs)"
need python3 "apt-get install python3 python3-venv"
need rpmbuild "apt-get install rpm (Fedora: dnf install rpm-build)"
need objdump "apt-get install binutils"

# --- cargo-zigbuild and zig, in a venv made once per version pair ------------
venv=${HALOBOX_ZIG_VENV:-/opt/halobox-zig}
key="cargo-zigbuild==$CARGO_ZIGBUILD_VERSION ziglang==$ZIGLANG_VERSION"
if [ "$(cat "$venv/.halobox-key" 2>/dev/null)" != "$key" ]; then
  python3 -c 'import ensurepip, venv' 2>/dev/null || die "python3 has no venv module: apt-get install python3-venv"
  log "installing $key into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086 # $key is two requirement words
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install -q --no-input $key
  echo "$key" >"$venv/.halobox-key"
fi

# --- the binary -----------------------------------------------------------------
target=${CARGO_TARGET_DIR:-target/release-zig}
case "$target" in /*) ;; *) target=$PWD/$target ;; esac
log "building halobox $version for $TRIPLE.$GLIBC (cargo zigbuild --release, niced)"
PATH="$venv/bin:$PATH" CARGO_TARGET_DIR="$target" \
  nice -n 15 cargo zigbuild --release --locked --quiet --target "$TRIPLE.$GLIBC" >&2
bin=$target/$TRIPLE/release/halobox
[ -x "$bin" ] || die "cargo zigbuild made no $bin"
newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
[ -n "$newest" ] || die "objdump -T found no GLIBC symbol in $bin"
[ "$(printf '%s\n%s\n' "$newest" "$GLIBC" | sort -V | tail -n1)" = "$GLIBC" ] ||
  die "$bin needs GLIBC_$newest, newer than $GLIBC: it would not run on older distributions"
"$bin" --version | grep -q "^halobox $version " || die "$bin --version does not say $version"

# --- the tarball ----------------------------------------------------------------
dist=${HALOBOX_DIST:-dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
name=halobox-$version-x86_64-linux
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/$name
mkdir -p "$stage/completions" "$stage/man"
install -m 0755 "$bin" "$stage/halobox"
"$bin" completions bash >"$stage/completions/halobox.bash"
"$bin" completions zsh >"$stage/completions/_halobox"
"$bin" completions fish >"$stage/completions/halobox.fish"
"$bin" man --out-dir "$stage/man" >/dev/null
install -m 0644 LICENSE "$stage/LICENSE"
install -m 0644 packaging/INSTALL "$stage/INSTALL"
mtime=@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
# Modes set here, not left to the builder's umask (at umask 0 the completions,
# man pages and folders would be 0666/0777): folders and the binary 0755,
# every other file 0644.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
  --mode='u=rwX,go=rX' -C "$work" -czf "$dist/$name.tar.gz" "$name"

# --- the RPM (the spec repackages the tarball, as a COPR build would) -----------
top=$work/rpmbuild
mkdir -p "$top/SOURCES"
cp "$dist/$name.tar.gz" "$top/SOURCES/"
log "rpmbuild -bb packaging/halobox.spec"
# brp-compress (man pages gzipped, as Fedora does) needs bash's `read -d`;
# Debian's rpm runs it with /bin/sh.
rpmbuild -bb --quiet --define "_topdir $top" \
  --define "__brp_compress bash %{_rpmconfigdir}/brp-compress %{?_prefix}" \
  packaging/halobox.spec >&2 ||
  die "rpmbuild failed (see above)"
rpm=$(find "$top/RPMS" -name "halobox-$version-*.x86_64.rpm" | head -n1)
[ -n "$rpm" ] || die "rpmbuild made no halobox-$version-*.x86_64.rpm"
cp "$rpm" "$dist/"

# --- checksums ------------------------------------------------------------------
(cd "$dist" && for f in "$name.tar.gz" "$(basename "$rpm")"; do sha256sum "$f" >"$f.sha256"; done)
for f in "$name.tar.gz" "$name.tar.gz.sha256" "$(basename "$rpm")" "$(basename "$rpm").sha256"; do
  echo "$dist/$f"
done

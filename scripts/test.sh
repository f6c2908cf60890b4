#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what the tests need (as root,
# with apt-get) when it is missing, then runs format, lint and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '==> %s\n' "$*"; }

# Debian packages whose commands the tests use as independent witnesses of
# the live host (ip -json addr, ethtool) or as tools to detect.
need_pkgs=()
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v ethtool >/dev/null || need_pkgs+=(ethtool)
command -v iperf3 >/dev/null || need_pkgs+=(iperf3)
# The bench tests: two network namespaces with an sshd each, and the real
# perftest binaries (which fail here with "no device", as they should).
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || need_pkgs+=(openssh-client)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)
command -v ib_write_lat >/dev/null || need_pkgs+=(perftest)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing ${need_pkgs[*]}; run as root or install them: sudo apt-get install ${need_pkgs[*]}" >&2
    exit 1
  fi
  log "installing ${need_pkgs[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  log "adding clippy and rustfmt"
  rustup component add clippy rustfmt
fi

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
log "cargo test"
INSTA_UPDATE=no cargo test --locked

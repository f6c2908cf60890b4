#!/usr/bin/env bash
# The whole serving path, live, by hand: runs tests/serve_e2e.rs (vLLM) and
# tests/llama_e2e.rs (llama.cpp), where the steps and every assertion live
# (harness: tests/common/serve.rs; on test nodes of this
# machine that each run their own podman or dockerd: refresh, cluster up,
# bad input, serve --detach, status, logs, a greedy completion, bench
# serving, stop, the faults, cluster down, and the tokens compared with the
# server alone on one node). Read the test's doc for each case.
#
# usage (as root): scripts/serve-e2e.sh [NAME...]
#   NAME  one of their tests, or part of its name (default: all):
#           podman_nodes_serve_identical_tokens_and_name_a_lost_worker
#           docker_nodes_serve_identical_tokens_for_another_shape
#           llama_cpp_podman_nodes_random_gguf_identical_and_faults_named
#           llama_cpp_three_docker_nodes_smollm2_identical
#         e.g. `llama_cpp` runs both llama.cpp cases.
# Needs the engines of scripts/engines/start.sh; makes scripts/vllm-venv.sh's
# venv and scripts/llama-cpp.sh's build when missing. SERVE_E2E_KEEP=1 keeps the nodes
# after a failure, to look at them; HALOBOX_LLAMA_CPP: the llama.cpp folder
# (default /opt/halobox-llama-cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
for a in "$@"; do
  case "$a" in
  -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "error: $a: the cases are tests now; name one (scripts/serve-e2e.sh --help lists them)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces and starts engines)" >&2; exit 1; }
bash scripts/vllm-venv.sh /opt/halobox-vllm >&2
llama=${HALOBOX_LLAMA_CPP:-/opt/halobox-llama-cpp}
[ -x "$llama/bin/llama-server" ] || bash scripts/llama-cpp.sh "$llama" >&2
exec cargo test --locked --test serve_e2e --test llama_e2e -- --nocapture "$@"

#!/usr/bin/env bash
# Installs the Debian packages hfuse needs to build and test; silent when everything is present.
set -euo pipefail

PACKAGES=(
  cmake g++ make
  libhalide14-0-dev   # Halide 14: JIT, generators, autoscheduler plugins
  libeigen3-dev       # reference evaluator (GEMM, im2col convolution)
  nlohmann-json3-dev  # model and plan files
  libcli11-dev        # command-line parsing
  libgtest-dev        # tests
  libbenchmark-dev    # bench/
  libdnnl-dev         # bench/: oneDNN, the peer on convolutions
  libonnx-dev         # ONNX import: onnx/onnx_pb.h, libonnx_proto (its CMake package)
  libprotobuf-dev     # ONNX import: the protobuf runtime ONNX's messages use
  graphviz            # `dot`: plan drawings (hfuse plan --dot), which the CLI tests render
)
# With --peers, also what the Python tools need, none of it to build or test: bench/pytorch_peer.py
# (PyTorch frozen, issue 6), tools/onnx_acceptance.py and tools/make_onnx_models.py (torchvision's nets
# exported to ONNX), tools/make_reference_data.py; and ONNX Runtime for bench/ort_peer.js and
# bench/dev_networks.py: Node.js from Debian, then onnxruntime-node (bench/package.json) from npm.
PEERS=0
if [[ ${1:-} == "--peers" ]]; then
  PEERS=1
  PACKAGES+=(python3-numpy python3-torch python3-torchvision python3-onnx nodejs)
elif [[ $# -gt 0 ]]; then
  echo "usage: tools/install_deps.sh [--peers]" >&2
  exit 2
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Debian's npm is its own package; some nodejs builds (NodeSource's) bring npm along instead.
if [[ $PEERS -eq 1 ]] && ! command -v npm >/dev/null; then
  missing+=(npm)
fi

# onnxruntime-node into bench/node_modules (not committed), without its install script: that
# downloads from elsewhere, and the package already ships the Linux x64 libonnxruntime.so.
install_ort() {
  [[ $PEERS -eq 1 ]] || return 0
  local bench
  bench="$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench" && pwd)"
  [[ -d $bench/node_modules/onnxruntime-node ]] && return 0
  echo "hfuse: installing onnxruntime-node into $bench/node_modules"
  npm install --ignore-scripts --no-package-lock --no-audit --no-fund --prefix "$bench" >/dev/null
}

if [[ ${#missing[@]} -eq 0 ]]; then
  install_ort
  exit 0
fi

echo "hfuse: installing missing packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "hfuse: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_ort

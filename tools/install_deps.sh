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
)
# With --peers, also what the Python tools need, none of it to build or test: bench/pytorch_peer.py
# (PyTorch frozen, issue 6), tools/onnx_acceptance.py and tools/make_onnx_models.py (torchvision's nets
# exported to ONNX), tools/make_reference_data.py.
if [[ ${1:-} == "--peers" ]]; then
  PACKAGES+=(python3-numpy python3-torch python3-torchvision python3-onnx)
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
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "hfuse: installing missing packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "hfuse: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# README command 1: install what is missing, build (Release) into build/, run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target hfuse_cli
build/bin/hfuse demo

#!/usr/bin/env bash
# The README's "How fast" tables, measured in one go on this machine:
#   networks.md  the development networks: hfuse beside ONNX Runtime and PyTorch frozen, checked against
#                PyTorch, timed interleaved in rounds (bench/dev_networks.py)
#   kernels.md   the bundled convolution workloads: hfuse beside oneDNN, interleaved repetitions
#                (build/bin/hfuse_bench, tabled by bench/plot.py)
# and machine.txt (the CPU as lscpu names it, its widest vectors, hfuse's version and the checkout).
# Needs the peers and the networks, neither of which the build or the tests need:
#   tools/install_deps.sh --peers && /usr/bin/python3 tools/make_dev_networks.py
# Usage: bench/summary.sh [OUT_DIR (default: summary)] [--rounds N (default 3)] [--threads T (default 2)]
# About 15 minutes on 2 Zen 3 cores; keep the machine otherwise idle.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT=summary
ROUNDS=3
THREADS=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench/summary.sh: unknown option $1" >&2; exit 2 ;;
    *) OUT=$1; shift ;;
  esac
done
HFUSE_BIN=${HFUSE_BIN:-$ROOT/build/bin}
for tool in "$HFUSE_BIN/hfuse" "$HFUSE_BIN/hfuse_bench"; do
  [[ -x $tool ]] || { echo "bench/summary.sh: $tool is missing: build first (tools/setup_and_demo.sh)" >&2; exit 1; }
done
mkdir -p "$OUT"
{
  echo "$(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p')" \
       "model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) CPUs," \
       "$(grep -q avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')"
  "$HFUSE_BIN/hfuse" --version | sed -n 1p   # the binary's own version and source hash
  echo "checkout $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' (modified)')"
  echo "threads $THREADS"
} > "$OUT/machine.txt"

/usr/bin/python3 "$ROOT/bench/dev_networks.py" --hfuse "$HFUSE_BIN/hfuse" --threads "$THREADS" --rounds "$ROUNDS" \
  --md "$OUT/networks.md" --json "$OUT/networks.json" --svg "$OUT/networks.svg"

"$HFUSE_BIN/hfuse_bench" --threads="$THREADS" \
  --benchmark_filter='^(conv_bn_relu|conv3x3_bn_relu|conv_bias_relu_maxpool|resnet_block|dwconv_bn_relu|mobilenet_v2_block)(_b8)?/(hfuse_fused|onednn)/' \
  --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_out="$OUT/kernels.json" --benchmark_out_format=json > /dev/null
python3 "$ROOT/bench/plot.py" "$OUT/kernels.json" > "$OUT/kernels.md"

cat "$OUT/machine.txt" "$OUT/networks.md" "$OUT/kernels.md"

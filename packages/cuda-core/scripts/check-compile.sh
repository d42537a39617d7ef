#!/usr/bin/env bash
# Compiles the given .cu / .cc files of csrc/ on their own (object files in a private temp folder), to check them
# without touching the shared build/ folder. Usage: scripts/check-compile.sh csrc/kernels/rope.cu csrc/binding/ops_elementwise.cc
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
napi_inc=$(node -p "require('node-api-headers').include_dir")
addon_inc=$(node -p "require('node-addon-api').include_dir")
cuda_inc=/usr/local/cuda/include
status=0
for f in "$@"; do
  case "$f" in
    *.cu) if ! nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Xptxas=-v \
            -c "$f" -o "$out/$(basename "$f").o" >"$out/log" 2>&1; then status=1; fi
          grep -vE "^ptxas info    : (Compiling|Compile time|Function properties)" "$out/log" || true ;;
    *.cc) g++ -std=c++17 -fPIC -Wall -Wextra -Wno-unused-parameter -DNAPI_VERSION=8 -DNAPI_CPP_EXCEPTIONS \
            -I"$napi_inc" -I"$addon_inc" -I"$cuda_inc" -c "$f" -o "$out/$(basename "$f").o" || status=$? ;;
    *) echo "skipping $f (not .cu or .cc)" ;;
  esac
done
exit $status

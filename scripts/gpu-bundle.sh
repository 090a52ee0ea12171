#!/usr/bin/env bash
# Gathers the GPU checks' programs (scripts/gpu-check.sh) and the shared libraries they need that
# a bare CUDA machine lacks, into one folder and an archive of it (OUT_DIR.tar.xz) to copy there:
#
#   scripts/gpu-bundle.sh [OUT_DIR]     (default .gpu-bundle, which git ignores)
#
# There: tar xJf .gpu-bundle.tar.xz -C DIR && scripts/gpu-check.sh DIR/.gpu-bundle
#
# Left out: the C library and compiler runtime (every machine has them) and the CUDA libraries
# (cuBLAS, cuFFT, NVRTC), which must come from the GPU machine's own toolkit, matching its driver.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/.gpu-bundle}
rm -rf "$out"
mkdir -p "$out/lib" "$out/tests" "$out/bench" "$out/bin"
# Laid out like the build tree, which scripts/gpu-check.sh and bench/peers/run.py expect.
programs=""
for program in tests/cuda_tests tests/compiler_tests bench/gpu_eager_ops bench/eddy_peers bin/eddy; do
  cp "$here/build/$program" "$out/$program"
  strip --strip-debug "$out/$program"
  programs="$programs $here/build/$program"
done
ldd $programs | awk '/=> \// { print $1, $3 }' | sort -u |
  grep -v -E '^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^ ]*)\.so|^lib(cublas|cublasLt|cufft|nvrtc|cuda)\.so' |
  while read -r name path; do cp -L "$path" "$out/lib/$name"; done
tar cf - -C "$(dirname "$out")" "$(basename "$out")" | xz -T0 -6 > "$out.tar.xz"
du -sh "$out" "$out.tar.xz"

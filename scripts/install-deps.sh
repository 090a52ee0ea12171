#!/usr/bin/env bash
# Installs every system package eddy needs to build and test, from Debian's archive.
# Idempotent: when everything is present it only checks and exits.
set -euo pipefail

packages=(
  build-essential   # g++ with C++20 and OpenMP (libgomp)
  cmake
  ninja-build
  ccache
  libeigen3-dev     # vectorised elementwise math
  libopenblas-openmp-dev  # GEMM, on OpenMP threads (see docs/dependencies.md)
  libdnnl-dev       # oneDNN's float32 GEMM for large products (see docs/dependencies.md)
  libfftw3-dev      # FFTs on the CPU (float and double, OpenMP threads)
  pkg-config
  nlohmann-json3-dev  # safetensors headers
  libyaml-cpp-dev   # YAML problem configs (keeps line and column marks for errors)
  libhdf5-dev       # results and datasets
  libhdf5-openmpi-dev  # the same, written by several ranks together (parallel HDF5, with MPI)
  libvtk9-dev       # ParaView files through VTK's writers
  libcli11-dev      # the eddy command line
  libboost-dev      # Sobol' sequences for PINN collocation points (header-only Boost.Random)
  libpcre2-dev      # the tokenizer's word pattern (Unicode letter and number classes)
  libgtest-dev      # tests
  libbenchmark-dev  # bench/
  python3-venv      # the .venv for the Python package and its tests
  python3-dev       # Python headers for the eddy extension module
  libdlpack-dev     # DLPack structs for zero-copy tensor exchange from Python
  libopenmpi-dev    # distributed training (src/eddy/dist/); optional at build time
  libfftw3-mpi-dev  # the distributed (slab) FFT of src/eddy/dist/, float and double; needed with MPI
  openmpi-bin       # mpirun, for the `mpi` tests and cluster runs
  fortunes          # the text corpus of the language-model example (docs/lm.md)
  clang             # `make fuzz` only: libFuzzer harnesses need clang (docs/fuzzing.md)
  libclang-rt-14-dev  # `make fuzz` only: libFuzzer and the sanitizer runtimes for clang 14
  libomp-14-dev     # `make fuzz` only: OpenMP for clang (it has no libgomp support)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all system packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The project's Python environment, from PyPI.
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/sync-venv.sh"
sync_venv "$root/.venv" "$root/tests/python/requirements.txt" install-deps

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
  libfftw3-dev      # FFTs on the CPU (float and double, OpenMP threads)
  pkg-config
  nlohmann-json3-dev  # safetensors headers
  libgtest-dev      # tests
  libbenchmark-dev  # bench/
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all system packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

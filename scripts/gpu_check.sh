#!/usr/bin/env bash
# The GPU checks of issue 26 as one prepared run, for a lent GPU machine (budget: 15 minutes in
# all). Builds what is missing (the gpu-labelled tests and bench_gpu only), then runs
#   ctest -L gpu            the CUDA kernels against float64 references and bit-invariance, the
#                           raw NCCL / CUDA IPC layers, and (with a CUDA LibTorch) the nccl /
#                           cuda_ipc weight-sync transports end to end
#   build/bench/bench_gpu   each kernel vs cuBLAS / device copy bandwidth at M = 1 ... 4096, NCCL
#                           broadcast vs device copy (with 2+ GPUs)
# and writes everything into the output folder:
#   scripts/gpu_check.sh [OUT_DIR]     (default: $OUT, else ./gpu_check_out)
# Files: nvidia-smi.txt, configure.txt, build.txt, ctest.txt, ctest.xml, bench_gpu.txt,
# bench_gpu.json, summary.txt. Exit status: 0 when the build, every gpu test and the bench
# succeeded on a GPU; 1 when something failed; 2 when everything ran but no GPU was visible (every
# gpu test skipped, nothing measured): not a pass.
#
# Build directory: $LOCKSTEP_GPU_BUILD (default build/). When it has no CMakeCache.txt it is
# configured here, which needs the project's dependencies (scripts/setup.sh) and nvcc; pass
# -DTorch_DIR=... through LOCKSTEP_CMAKE_ARGS to build against a CUDA LibTorch (then
# gpu_transports_test runs the transports instead of skipping).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-$root/gpu_check_out}}
build=${LOCKSTEP_GPU_BUILD:-$root/build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root" || exit 1
start=$(date +%s)
status=0
note() { echo "[gpu_check] $*" | tee -a "$out/summary.txt"; }
# Builds on a shared development machine take its build lock; a lent GPU machine has none.
lock=()
command -v flock >/dev/null 2>&1 && lock=(flock /tmp/lockstep_build.lock)
: > "$out/summary.txt"

{ nvidia-smi || echo "nvidia-smi failed: no GPU visible"; } > "$out/nvidia-smi.txt" 2>&1
note "GPUs: $(nvidia-smi -L 2>/dev/null | grep -c '^GPU') ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
note "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  # shellcheck disable=SC2086  # LOCKSTEP_CMAKE_ARGS is a list of words on purpose
  if ! timeout 300 "${lock[@]}" cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      ${LOCKSTEP_CMAKE_ARGS:-} > "$out/configure.txt" 2>&1; then
    note "configure failed (see configure.txt)"
    exit 1
  fi
else
  timeout 120 "${lock[@]}" cmake "$build" > "$out/configure.txt" 2>&1 || true
fi
grep "lockstep CUDA:" "$out/configure.txt" | tee -a "$out/summary.txt"

targets=(kernels_cuda_test gpu_transfer_test bench_gpu)
# The transports test needs a CUDA LibTorch to do anything but skip; build it only then (it pulls
# in the whole model library).
if grep -q "LibTorch CUDA ON" "$out/configure.txt"; then targets+=(gpu_transports_test); fi
if ! timeout 420 "${lock[@]}" cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" \
    > "$out/build.txt" 2>&1; then
  note "build failed (see build.txt; tail below)"
  tail -20 "$out/build.txt" | tee -a "$out/summary.txt"
  exit 1
fi
note "built ${targets[*]} after $(( $(date +%s) - start )) s"

# Tests of targets not built here are listed by ctest as *_NOT_BUILT: leave them out.
(cd "$build" && timeout 240 ctest -L gpu -E '_NOT_BUILT' --output-on-failure --timeout 120 \
   --output-junit "$out/ctest.xml") > "$out/ctest.txt" 2>&1 || status=1
grep -E "\((Failed|Timeout|Not Run|SEGFAULT)\)" "$out/ctest.txt" >> "$out/summary.txt"
note "ctest -L gpu: $(grep -E 'tests passed' "$out/ctest.txt" || echo 'did not finish')"

timeout 300 "$build/bench/bench_gpu" --json "$out/bench_gpu.json" > "$out/bench_gpu.txt" 2>&1 \
  || { status=1; note "bench_gpu failed or timed out (see bench_gpu.txt)"; }
cat "$out/bench_gpu.txt" >> "$out/summary.txt"
num_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [[ $status -eq 0 && $num_gpus -eq 0 ]]; then
  status=2
  note "NO GPU visible: every gpu test skipped and bench_gpu measured nothing"
fi
note "finished in $(( $(date +%s) - start )) s, status $status"
exit $status

#!/usr/bin/env bash
# Sets up (Debian packages, configure, build), fetches the reference tokenizers, and runs the
# whole test suite with CTest. Tests labelled `gpu` are skipped on machines without a GPU.
#   scripts/test.sh                 everything
#   scripts/test.sh -L unit         extra arguments go to ctest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
scripts/setup.sh
scripts/fetch_tokenizers.sh
# Test-only tools (the quick start does not need them): headless Chromium renders the HTML
# report in orchestrator_run_dir_test's ReportTest.RendersInHeadlessChromium, which fails, never
# skips, without it.
test_packages=(chromium)
missing=()
for p in "${test_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "[test] installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
exclude=()
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "[test] no GPU found: skipping tests labelled gpu"
  exclude=(-LE gpu)
fi
cd build
# ctest runs two tests at a time on two cores; a service a test starts without --threads would
# otherwise take every core (--threads 0 is the machine's physical cores) and spin on the other
# test's. Tests that compare thread counts set them explicitly.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
status=0
ctest --output-on-failure --timeout 900 -j "${LOCKSTEP_TEST_JOBS:-2}" "${exclude[@]}" "$@" || status=$?
echo "[test] finished in $(( $(date +%s) - start )) s"
exit $status

#!/usr/bin/env bash
# Sets up (Debian packages, configure, build) and runs the default job, configs/demo.toml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
# The demo: a tiny model learns addition by SFT then GRPO, with bit-exact parity checked on
# every step; results in runs/demo/ (summary.json, metrics.jsonl).
build/lockstep run configs/demo.toml

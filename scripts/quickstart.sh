#!/usr/bin/env bash
# Sets up (Debian packages, configure, build) and runs the default job. For now the default job
# creates a tiny Qwen3 model in runs/quickstart/model and samples from it through the paged KV
# cache; later it becomes the RL demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
model=runs/quickstart/model
build/lockstep init-model --arch qwen3 --preset tiny --seed 1 --out "$model"
build/lockstep tokenize --tokenizer "$model" "Hello, lockstep!"
build/lockstep forward --model "$model" --tokens 72,101,108,108,111 --tokens 257,117,115,101,114 \
  --continue 16 --temperature 0.8 --seed 1

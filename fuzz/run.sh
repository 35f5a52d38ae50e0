#!/usr/bin/env bash
# `make fuzz`: runs every libFuzzer harness of fuzz/ for FUZZ_SECONDS each (default 60), starting
# from its committed corpus, then merges what was new into fuzz/corpus/NAME (minimised: only
# inputs that add coverage are kept). A crash, leak, timeout or sanitizer report stops with the
# reproducing input left in FUZZ_BUILD/fuzz-artifacts/ and a non-zero exit. While a harness runs,
# its progress (seconds of SECONDS, inputs so far) goes to stderr (scripts/progress.sh).
#
#   bash fuzz/run.sh FUZZ_BUILD [SECONDS] [NAME...]
set -uo pipefail
build=$(cd "${1:?usage: fuzz/run.sh FUZZ_BUILD [SECONDS] [NAME...]}" && pwd)
seconds=${2:-60}
shift 2 2>/dev/null || shift $#
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$root"/fuzz/fuzz_*.c; do n=${f##*/fuzz_}; names+=("${n%.c}"); done
fi
source "$root/scripts/progress.sh"

# Waits for harness `pid`, showing the seconds run of this harness and of the whole run (a bar on
# a terminal, a line every BRIGADE_PROGRESS_INTERVAL seconds otherwise) with the inputs run so far
# from libFuzzer's log; returns the harness's exit status.
watch_harness() {
  local pid=$1 name=$2 log=$3 start inputs
  start=$(date +%s)
  while kill -0 "$pid" 2>/dev/null; do
    inputs=$(grep -ao '^#[0-9]*' "$log" 2>/dev/null | tail -1)
    progress_show "fuzz_$name ($((harness + 1)) of ${#names[@]})" $(($(date +%s) - start)) "$seconds" s "$start" \
      "${inputs:+${inputs#\#} inputs}"
    sleep 1
  done
  progress_end
  wait "$pid"
}

artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
status=0
harness=-1
for name in "${names[@]}"; do
  harness=$((harness + 1))
  exe=$build/fuzz_$name corpus=$root/fuzz/corpus/$name scratch=$build/fuzz-scratch/$name
  [ -x "$exe" ] || { echo "fuzz: $exe not built (configure with -DBRIGADE_FUZZ=ON and CC=clang)" >&2; exit 1; }
  mkdir -p "$corpus" "$scratch"
  echo "== fuzz_$name: ${seconds}s from $(ls "$corpus" | wc -l) corpus inputs"
  # Inputs up to 64 KiB (tokenizer.json files are tens of KiB); 2 GiB of memory; 10 s per input.
  "$exe" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name-" "$scratch" "$corpus" >"$build/fuzz-$name.log" 2>&1 &
  if ! watch_harness $! "$name" "$build/fuzz-$name.log"; then
    echo "fuzz_$name FAILED: see $build/fuzz-$name.log and $artifacts/" >&2
    tail -n 30 "$build/fuzz-$name.log" >&2
    status=1
    continue
  fi
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)|#[0-9]+ *DONE' "$build/fuzz-$name.log" | tail -3
  # Keep only what adds coverage to the committed corpus.
  "$exe" -merge=1 -max_len=65536 "$corpus" "$scratch" >>"$build/fuzz-$name.log" 2>&1 || status=1
  rm -rf "$scratch"
done
exit $status

#!/usr/bin/env bash
# Time to first output of `brigade forward --ipu-config` started without and with the executable
# cache (executable_cache_dir), the file cache warm for both; each start run N times, the best
# and the median wall-clock milliseconds until the outputs' line is printed.
# usage: bench/exe_cache_start.sh BRIGADE MODEL INPUTS.safetensors IPU_CONFIG [N]
set -euo pipefail
brigade=$1 model=$2 inputs=$3 cfg=$4 n=${5:-5}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
# milliseconds until stdout shows the outputs' line
first_output_ms() {
  local t0 line
  t0=$(date +%s%N)
  while IFS= read -r line; do
    case $line in logits* | last_hidden_state* | start_logits*) echo $((($(date +%s%N) - t0) / 1000000)); break ;; esac
  done < <("$brigade" forward --model "$model" --inputs "$inputs" --output "$cache/out.st" --ipu-config "$cfg" \
    --ipu-config-overrides "executable_cache_dir=$1" 2>/dev/null)
  wait
}
stats() { sort -n | awk '{a[NR]=$1} END {printf "best %d ms, median %d ms", a[1], a[int((NR+1)/2)]}'; }
first_output_ms disabled >/dev/null # warms the file cache
first_output_ms "$cache/ec" >/dev/null # writes the entry
# alternating, so both see the same machine load
for i in $(seq "$n"); do
  echo "u $(first_output_ms disabled)"
  echo "c $(first_output_ms "$cache/ec")"
done >"$cache/times"
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
un=$(awk '$1 == "u" {print $2}' "$cache/times" | stats)
ca=$(awk '$1 == "c" {print $2}' "$cache/times" | stats)
mu=$(awk '$1 == "u" {print $2}' "$cache/times" | median)
mc=$(awk '$1 == "c" {print $2}' "$cache/times" | median)
echo "uncached start: $un"
echo "cached start:   $ca"
awk -v u="$mu" -v c="$mc" 'BEGIN {printf "median ratio:   %.1fx\n", u / c}'

#!/usr/bin/env bash
# Writes a safetensors file of forward inputs without Python: input_ids I64 [B, T] with ids
# (7 * i + 3) mod MAX_ID, and optionally labels (= input_ids) and an attention_mask of ones with
# the last position of row 0 masked.
# usage: make-inputs.sh OUT.safetensors B T MAX_ID [labels] [mask] [i32]
set -euo pipefail
out=$1 b=$2 t=$3 max_id=$4
shift 4
labels=0 mask=0 dtype=I64 width=8
for opt in "$@"; do
  case $opt in
    labels) labels=1 ;;
    mask) mask=1 ;;
    i32) dtype=I32 width=4 ;;
    *) echo "make-inputs.sh: unknown option $opt" >&2; exit 2 ;;
  esac
done

n=$((b * t))
bytes=$((n * width))
# little-endian bytes of an integer as printf escapes
le() {
  local v=$1 w=$2 s=""
  for ((k = 0; k < w; k++)); do s+=$(printf '\\x%02x' $(((v >> (8 * k)) & 255))); done
  printf '%s' "$s"
}
ids=""
for ((i = 0; i < n; i++)); do ids+=$(le $(((7 * i + 3) % max_id)) $width); done
maskdata=""
if ((mask)); then
  for ((i = 0; i < n; i++)); do maskdata+=$(le $((i == t - 1 ? 0 : 1)) $width); done
fi

entries=() off=0
add() { entries+=("\"$1\":{\"dtype\":\"$dtype\",\"shape\":[$b,$t],\"data_offsets\":[$off,$((off + bytes))]}"); off=$((off + bytes)); }
add input_ids
((labels)) && add labels
((mask)) && add attention_mask
header="{$(IFS=,; echo "${entries[*]}")}"
while (( ${#header} % 8 )); do header+=" "; done

{
  printf "$(le ${#header} 8)"
  printf '%s' "$header"
  printf "$ids"
  ((labels)) && printf "$ids"
  ((mask)) && printf "$maskdata"
} > "$out"

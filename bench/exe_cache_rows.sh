#!/usr/bin/env bash
# `make bench`'s executable-cache rows (bench/run.sh runs this): time to first output of
# `brigade forward --ipu-config` on GPT-2 small (random weights, 2 devices, layers 6/6), started
# without and with executable_cache_dir (bench/exe_cache_start.sh: alternating starts, warm file
# cache, medians), for F32 weights with a 1x8 batch and with a 4x16 batch in 4 micro-batches, and
# F16 weights with 4x16. Prints "REPORT ..." rows and one "GOAL PASS|FAIL: ..." line (every row
# >= 3x), which bench/report.py puts into results.md.
#
#   bash bench/exe_cache_rows.sh BUILD_DIR PYTHON
set -uo pipefail
build=${1:?usage: bash bench/exe_cache_rows.sh BUILD_DIR PYTHON}
py=${2:?usage: bash bench/exe_cache_rows.sh BUILD_DIR PYTHON}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
brigade=$build/brigade
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The models and inputs: transformers' GPT-2 small configuration, saved as F32 and as F16.
"$py" - "$tmp" 2>"$tmp/py.err" <<'PYEOF' || { echo "FAILED: writing the models: $(tail -3 "$tmp/py.err")"; exit 1; }
import sys, torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel
out = sys.argv[1]
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config())
model.save_pretrained(f"{out}/f32")
model.half().save_pretrained(f"{out}/f16")
g = torch.Generator().manual_seed(1)
for rows, cols in ((1, 8), (4, 16)):
    save_file({"input_ids": torch.randint(0, 50257, (rows, cols), generator=g)}, f"{out}/in{rows}x{cols}.safetensors")
PYEOF
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [6, 6]}' >"$tmp/one.json"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [6, 6], "inference_device_iterations": 4}' \
    >"$tmp/four.json"

ok_all=true
parts=()
row() { # NAME MODEL INPUTS CONFIG
    local out ratio
    out=$(bash "$root/bench/exe_cache_start.sh" "$brigade" "$tmp/$2" "$tmp/$3" "$tmp/$4" 5 2>&1) ||
        { echo "FAILED: exe_cache_start.sh $1: $out"; ok_all=false; parts+=("$1 failed"); return; }
    ratio=$(echo "$out" | sed -n 's/^median ratio: *\([0-9.]*\)x$/\1/p')
    echo "REPORT executable cache, GPT-2 small $1, time to first output: $(echo "$out" | tr '\n' ';' | sed 's/  */ /g')"
    awk -v r="$ratio" 'BEGIN { exit !(r >= 3) }' || ok_all=false
    parts+=("$1 ${ratio}x")
}
row "F32 1x8" f32 in1x8.safetensors one.json
row "F32 4x16" f32 in4x16.safetensors four.json
row "F16 4x16" f16 in4x16.safetensors four.json
verdict=FAIL
$ok_all && verdict=PASS
echo "GOAL $verdict: a cached start of forward on GPT-2 small >= 3x faster to first output than an uncached one: $(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g') (medians of 5 alternating starts)"

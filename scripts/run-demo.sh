#!/usr/bin/env bash
# The main job (for now): a fresh tiny GPT-2, one forward pass with labels; prints the logits'
# shape and the loss. With random weights the loss sits near ln(vocab) = ln(256) = 5.55.
set -euo pipefail
brigade=${1:-build/brigade}
work=${BRIGADE_DEMO_DIR:-build/demo}
mkdir -p "$work"
here=$(dirname "$0")

"$brigade" init --arch gpt2 --layers 4 --hidden 128 --heads 4 --vocab 256 --positions 64 --seed 1 --output "$work/model"
bash "$here/make-inputs.sh" "$work/inputs.safetensors" 4 32 256 labels mask
"$brigade" forward --model "$work/model" --inputs "$work/inputs.safetensors" --output "$work/outputs.safetensors"

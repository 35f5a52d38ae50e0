#!/usr/bin/env bash
# The main job: train a small GPT-2 from scratch, pipelined over 2 devices, on a task brigade
# generates itself (reverse a word: "pipe>epip."), then show what it learned and write its report
# (report.html in the trained folder).
set -euo pipefail
brigade=${1:-build/brigade}
work=${BRIGADE_DEMO_DIR:-build/demo}
mkdir -p "$work"

cat >"$work/ipu_config.json" <<'JSON'
{
  "ipus_per_replica": 2,
  "layers_per_ipu": [2, 2],
  "gradient_accumulation_steps": 4,
  "replication_factor": 1,
  "device_iterations": 1,
  "output_mode": "all"
}
JSON

"$brigade" init --arch gpt2 --layers 4 --hidden 128 --heads 4 --vocab 256 --positions 16 --seed 1 \
  --output "$work/model"
"$brigade" train --model "$work/model" --ipu-config "$work/ipu_config.json" --data builtin:reverse \
  --output "$work/trained" --steps 600 --micro-batch-size 8 --lr 2e-3 --warmup-steps 40 \
  --max-grad-norm 1.0 --seed 1 --log "$work/train.jsonl" --trace "$work/trace.json"
# The run's plots: falling loss, lr, tokens/s, the pipeline's Gantt chart, memory per device.
"$brigade" report "$work/trained" --log "$work/train.jsonl" --trace "$work/trace.json"

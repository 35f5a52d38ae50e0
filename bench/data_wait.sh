#!/usr/bin/env bash
# The share of step time the devices wait for data, with and without the host data loader's
# workers, on a generated text file tokenized up front (20000 lines, rows of 64 tokens). Each run's
# trace gives, per step, the host's wait for its batch ("data N" without workers, where the host
# fills it; "data wait N" with them) against the step ("step N"); the first step is left out (its
# batch can only be made after the run starts). Prints one "data wait:" line per model and worker
# count (not RESULT lines: bench/report.py's table is of throughput).
#
#   bash bench/data_wait.sh BUILD_DIR [WORKERS...]     (default workers: 0 1 2)
set -euo pipefail
build=$(cd "${1:?usage: bash bench/data_wait.sh BUILD_DIR [WORKERS...]}" && pwd)
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
brigade=$build/brigade
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A causal LM (GPT-2, generate_gpt2's tokenizer) and a masked LM (BERT, whose masks are drawn for
# every step's rows), both 2 layers 64 wide over 2 pipeline stages.
"$brigade" init --arch gpt2 --layers 2 --hidden 64 --heads 2 --vocab 1001 --positions 64 --seed 1 --output "$tmp/clm" >/dev/null
cp "$root/tests/fixtures/generate_gpt2/tokenizer.json" "$tmp/clm/"
"$brigade" init --arch bert --layers 2 --hidden 64 --heads 2 --vocab 1405 --positions 64 --seed 1 --output "$tmp/mlm" >/dev/null
cp "$root/tests/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/mlm/"
words=(the devices wait for data when host prepares every batch between steps while workers fill ahead)
for i in $(seq 1 20000); do echo "${words[i % 15]} ${words[i * 7 % 15]} ${words[i * 11 % 15]} line $i of text."; done \
    >"$tmp/text.txt"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 4, "device_iterations": 4}' \
    >"$tmp/ipu.json"

for model in clm mlm; do
    for w in ${*:-0 1 2}; do
        "$brigade" train --model "$tmp/$model" --ipu-config "$tmp/ipu.json" --data "$tmp/text.txt" --sequence-length 64 \
            --micro-batch-size 8 --steps 40 --lr 1e-4 --dataloader-workers "$w" --output "$tmp/out$w" \
            --overwrite-output --trace "$tmp/trace.json" --quiet
        python3 - "$tmp/trace.json" "$model" "$w" <<'PY'
import json, re, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = {}
for e in events:
    m = re.fullmatch(r"(step|data|data wait) (\d+)", e.get("name", ""))
    if m and e.get("ph") == "X":
        spans.setdefault(m.group(1), {})[int(m.group(2))] = e["dur"]
steps = sorted(s for s in spans["step"] if s > 1)
wait_kind = "data wait" if "data wait" in spans else "data"
wait = sum(spans[wait_kind][s] for s in steps)
total = sum(spans["step"][s] for s in steps)
print(f"data wait: model={sys.argv[2]} workers={sys.argv[3]} steps={len(steps)} "
      f"step_ms={total / len(steps) / 1000:.2f} wait_ms={wait / len(steps) / 1000:.3f} "
      f"wait_share={100 * wait / total:.3f}%")
PY
    done
done

#!/usr/bin/env bash
# brigade train --dataloader-workers N: bad values refused with one line; a run on tokenized text
# with 2 workers logs the same losses and writes the same weights, byte for byte, as one without
# (also when resumed);
# its trace has the host's "data wait N" per step and the workers' "prepare step N" on tracks of
# their own ("data loader K"), where a run without workers has "data N".
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
fix=$(dirname "$0")/fixtures

model=$fix/generate_gpt2 # a small GPT-2 with a tokenizer.json
for _ in $(seq 1 60); do echo "the devices wait for data when the host prepares every batch between steps"; done >"$tmp/text.txt"
cat >"$tmp/ipu.json" <<'JSON'
{"gradient_accumulation_steps": 2, "device_iterations": 2}
JSON
run_train() { "$brigade" train --model "$model" --ipu-config "$tmp/ipu.json" --data "$tmp/text.txt" --sequence-length 16 \
  --micro-batch-size 2 --steps 6 --lr 1e-3 --seed 4 --quiet "$@"; }

# ---- bad values: one line, nothing trained ----
expect_fail "--dataloader-workers -1" 1 "--dataloader-workers -1 is not in [0, 64]" run_train --output "$tmp/bad" \
  --dataloader-workers -1
expect_fail "--dataloader-workers 65" 1 "--dataloader-workers 65 is not in [0, 64]" run_train --output "$tmp/bad" \
  --dataloader-workers 65
expect_fail "--dataloader-workers abc" 2 "--dataloader-workers expects an integer" run_train --output "$tmp/bad" \
  --dataloader-workers abc
[[ ! -e $tmp/bad ]] && ok || bad "a refused --dataloader-workers still wrote $tmp/bad"

# ---- the same run with and without workers ----
expect_ok "train without workers" run_train --output "$tmp/w0" --log "$tmp/w0.jsonl" --trace "$tmp/w0.json"
expect_ok "train with 2 workers" run_train --output "$tmp/w2" --log "$tmp/w2.jsonl" --trace "$tmp/w2.json" \
  --dataloader-workers 2
strip() { sed -E 's/, "tokens_per_s": [^,}]*//' "$1"; }
if [[ -s $tmp/w0.jsonl ]] && diff <(strip "$tmp/w0.jsonl") <(strip "$tmp/w2.jsonl") >/dev/null; then ok; else
  bad "the logs differ: $(diff <(strip "$tmp/w0.jsonl") <(strip "$tmp/w2.jsonl") | head -4)"
fi
# output_mode's default logs the last step of each host call of device_iterations (2) steps.
(($(wc -l <"$tmp/w2.jsonl") == 3)) && ok || bad "the log has $(wc -l <"$tmp/w2.jsonl") lines, wanted 3"
cmp -s "$tmp/w0/model.safetensors" "$tmp/w2/model.safetensors" && ok || bad "the weights differ with workers"

# ---- a resumed run's workers start at its first step (a constant schedule: a resume keeps the
# original run's schedule length) ----
expect_ok "train 6 steps" run_train --output "$tmp/c6" --lr-schedule constant
run_train --output "$tmp/c4" --lr-schedule constant --steps 4 --dataloader-workers 3 >/dev/null 2>&1 || bad "train 4 steps"
expect_ok "resume to 6 with workers" run_train --output "$tmp/c4" --lr-schedule constant --resume "$tmp/c4" \
  --overwrite-output --dataloader-workers 3
[[ -d $tmp/c4/checkpoint-4 && -d $tmp/c4/checkpoint-6 ]] && ok || bad "no checkpoint-4 and -6: $(ls "$tmp/c4")"
cmp -s "$tmp/c6/model.safetensors" "$tmp/c4/model.safetensors" && ok || bad "a resumed run with workers trained otherwise"

# ---- the trace ----
events() { grep -cE "\"name\": \"$2\"" "$1"; }
n=$(events "$tmp/w2.json" "data wait [1-6]")
((n == 6)) && ok || bad "trace with workers: $n 'data wait N' spans, wanted 6"
n=$(events "$tmp/w2.json" "prepare step [1-6]")
((n == 6)) && ok || bad "trace with workers: $n 'prepare step N' spans, wanted 6"
grep -qE '"name": "data loader [12]"' "$tmp/w2.json" && ok || bad "trace with workers: no 'data loader K' track"
n=$(events "$tmp/w2.json" "data [1-6]")
((n == 0)) && ok || bad "trace with workers: $n 'data N' spans"
n=$(events "$tmp/w0.json" "data [1-6]")
((n == 6)) && ok || bad "trace without workers: $n 'data N' spans, wanted 6"
n=$(events "$tmp/w0.json" "(data wait|prepare step) [0-9]+")
((n == 0)) && ok || bad "trace without workers: $n loader spans"

finish

#!/usr/bin/env bash
# brigade train end to end: pipelined run, log lines, checkpoint folder, resume, bad input.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
cat >"$tmp/ipu.json" <<'JSON'
{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 2, "output_mode": "all",
 "optimum_version": "1.6.1", "transformers_version": "4.29.2"}
JSON
run_train() { "$brigade" train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse --rows 64 \
  --micro-batch-size 2 --lr 1e-3 --lr-schedule constant --seed 4 "$@"; }

if run_train --steps 6 --output "$tmp/out" --log "$tmp/log.jsonl" >"$tmp/stdout.txt" 2>&1; then ok; else bad "train: $(cat "$tmp/stdout.txt")"; fi
grep -q 'Layer 1             --> IPU 1' "$tmp/stdout.txt" && ok || bad "no device allocation in: $(cat "$tmp/stdout.txt")"
grep -q 'pipeline efficiency' "$tmp/stdout.txt" && ok || bad "no summary"
(($(grep -c '"step": ' "$tmp/log.jsonl") == 6)) && ok || bad "log lines: $(cat "$tmp/log.jsonl")"
grep -q '^{"step": 6, "loss": [0-9.e+-]*, "lr": [0-9.e+-]*, "grad_norm": [0-9][0-9.e+-]*, "tokens_per_s": ' "$tmp/log.jsonl" && ok || bad "log format: $(tail -1 "$tmp/log.jsonl")"
for f in config.json model.safetensors optimizer.safetensors trainer_state.json ipu_config.json; do
  [[ -f $tmp/out/$f ]] && ok || bad "checkpoint lacks $f"
done
grep -qE '"global_step":\s*6' "$tmp/out/trainer_state.json" && ok || bad "trainer_state: $(cat "$tmp/out/trainer_state.json")"

# The trained folder is a model again: forward and generate run on it.
bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in.st" 1 8 256 labels
"$brigade" forward --model "$tmp/out" --inputs "$tmp/in.st" --output "$tmp/o.st" >/dev/null && ok || bad "forward on the checkpoint"
out=$("$brigade" generate --model "$tmp/out" --prompt "abc>" --max-new-tokens 4) && [[ ${out:0:4} == "abc>" && ${#out} == 8 ]] && ok || bad "generate: '$out'"

# device_iterations = 3 steps per host call; output_mode decides what each call reports.
run_train --steps 6 --output "$tmp/di" --quiet --log "$tmp/final.jsonl" --ipu-config-overrides "device_iterations=3,output_mode=final" >/dev/null 2>&1 || bad "device_iterations run"
(($(grep -c '"loss"' "$tmp/final.jsonl") == 2)) && grep -q '"step": 3,' "$tmp/final.jsonl" && grep -q '"step": 6,' "$tmp/final.jsonl" && ok || bad "output_mode final: $(cat "$tmp/final.jsonl")"
run_train --steps 6 --output "$tmp/di" --quiet --log "$tmp/sum.jsonl" --ipu-config-overrides "device_iterations=3,output_mode=sum" >/dev/null 2>&1 || bad "device_iterations run"
awk -F'"loss": ' 'NR==FNR { split($2, a, ","); all[FNR] = a[1]; next } { split($2, b, ","); sums[FNR] = b[1] }
  END { s1 = all[1] + all[2] + all[3]; s2 = all[4] + all[5] + all[6]; d1 = s1 - sums[1]; d2 = s2 - sums[2];
        exit !(d1 < 1e-5 && d1 > -1e-5 && d2 < 1e-5 && d2 > -1e-5) }' "$tmp/log.jsonl" "$tmp/sum.jsonl" && ok || bad "output_mode sum: $(cat "$tmp/sum.jsonl")"

# Fewer micro-batches than stages: a warning with the bubble, not an error; pinned threads work.
err=$(run_train --steps 1 --output "$tmp/w" --quiet --pin-devices --ipu-config-overrides "gradient_accumulation_steps=1" 2>&1 >/dev/null) && ok || bad "bubble run failed: $err"
grep -q "warning: gradient_accumulation_steps (1) is less than the 2 pipeline stages" <<<"$err" && ok || bad "no bubble warning: $err"

# Intra-op threads per device: settable, and a bad count is refused.
run_train --steps 2 --output "$tmp/thr" --quiet --threads-per-device 2 >/dev/null 2>&1 && ok || bad "--threads-per-device 2"
expect_fail threads any "threads-per-device -1" run_train --steps 1 --output "$tmp/thr2" --threads-per-device -1

# Inference as a pipeline (inference_* attributes): the loss of one forward pass agrees.
cat >"$tmp/infer.json" <<'JSON'
{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_device_iterations": 2,
 "inference_replication_factor": 2}
JSON
bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in4.st" 4 8 256 labels mask
single=$("$brigade" forward --model "$tmp/out" --inputs "$tmp/in4.st" --output "$tmp/o1.st" | awk '{print $NF}')
piped=$("$brigade" forward --model "$tmp/out" --inputs "$tmp/in4.st" --output "$tmp/o2.st" --ipu-config "$tmp/infer.json" | tail -1 | awk '{print $NF}')
awk -v a="$single" -v b="$piped" 'BEGIN { d = a - b; exit !(d < 2e-6 && d > -2e-6) }' && ok || bad "pipelined forward loss $piped vs $single"
bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in3.st" 3 8 256
expect_fail batch-size any "must be a multiple of inference_device_iterations (2) x inference_replication_factor (2) = 4" \
  "$brigade" forward --model "$tmp/out" --inputs "$tmp/in3.st" --output "$tmp/o3.st" --ipu-config "$tmp/infer.json"

# Resume: 3 steps, then 3 more from the checkpoint, equal the 6-step run's weights bit for bit.
run_train --steps 3 --output "$tmp/half" --quiet >/dev/null 2>&1 || bad "first half"
if run_train --steps 6 --output "$tmp/half" --resume "$tmp/half" --quiet 2>"$tmp/err.txt"; then ok; else bad "resume: $(cat "$tmp/err.txt")"; fi
cmp -s "$tmp/out/model.safetensors" "$tmp/half/model.safetensors" && ok || bad "resumed weights differ from the uninterrupted run"

# The schedule table brigade plan prints is the one training runs.
out=$("$brigade" plan --model "$tmp/m" --ipu-config "$tmp/ipu.json" --schedule 1f1b 2>&1) && ok || bad "plan --schedule: $out"
grep -q '^stage 0: F0 F1 B0 B1$' <<<"$out" && grep -q '^stage 1: F0 B0 F1 B1$' <<<"$out" && ok || bad "schedule table: $out"
"$brigade" plan --model "$tmp/m" --ipu-config "$tmp/ipu.json" --schedule gpipe --json | grep -q '"kind":.*"gpipe"' && ok || bad "plan --schedule --json"

# Bad input: one line, non-zero exit.
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 2, "bogus_key": 1}' >"$tmp/badkey.json"
expect_fail bogus-key any "bogus_key" "$brigade" train --model "$tmp/m" --ipu-config "$tmp/badkey.json" --data builtin:reverse --output "$tmp/x" --steps 1
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 2]}' >"$tmp/badlayers.json"
expect_fail bad-layers any "layers_per_ipu" "$brigade" train --model "$tmp/m" --ipu-config "$tmp/badlayers.json" --data builtin:reverse --output "$tmp/x" --steps 1
expect_fail memory any "device 0 (stage 0 of every replica) needs about" run_train --steps 1 --output "$tmp/x" --device-memory 64KiB
expect_fail dataset any "unknown built-in dataset 'nope'" run_train --steps 1 --output "$tmp/x" --data builtin:nope
expect_fail optimizer any "unknown optimizer" run_train --steps 1 --output "$tmp/x" --optimizer adafactor
# A checkpoint resumed with a different optimizer or batch layout is refused, naming the mismatch.
expect_fail resume-optimizer any "holds adamw state, this run uses sgd" run_train --steps 8 --output "$tmp/x2" --resume "$tmp/half" --optimizer sgd
expect_fail resume-layout any "was written with 4 rows per step, this run uses 8" run_train --steps 8 --output "$tmp/x2" --resume "$tmp/half" --micro-batch-size 4
expect_fail resume-missing any "trainer_state.json" run_train --steps 8 --output "$tmp/x2" --resume "$tmp/nowhere"
[[ -e $tmp/x ]] && bad "output folder written by a failed run" || ok

finish

#!/usr/bin/env bash
# brigade train --precision: the flags, the log's loss_scale and skipped fields, a half model
# saved with its torch_dtype that forward loads, automatic loss scaling from the IPUConfig, and
# bad values refused before anything is written.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
run_train() { "$brigade" train --model "$tmp/m" --data builtin:reverse --rows 32 --micro-batch-size 4 --lr 1e-3 \
  --lr-schedule constant --seed 4 --quiet "$@"; }

# 16.16 with a static scale: every line carries it, the model is saved in F16.
expect_ok "16.16" run_train --steps 3 --precision 16.16 --loss-scaling 1024 --output "$tmp/h" --log "$tmp/h.jsonl"
(($(grep -c '"loss_scale": 1024' "$tmp/h.jsonl") == 3)) && ok || bad "loss_scale in: $(cat "$tmp/h.jsonl")"
grep -q '"skipped"' "$tmp/h.jsonl" && bad "a static scale skipped a step: $(cat "$tmp/h.jsonl")" || ok
grep -qE '"torch_dtype":\s*"float16"' "$tmp/h/config.json" && ok || bad "config.json: $(grep dtype "$tmp/h/config.json")"
python3 - "$tmp/h/model.safetensors" <<'PY' && ok || bad "model.safetensors is not all F16"
import json, struct, sys
f = open(sys.argv[1], "rb")
n = struct.unpack("<Q", f.read(8))[0]
h = json.loads(f.read(n))
sys.exit(0 if {v["dtype"] for k, v in h.items() if k != "__metadata__"} == {"F16"} else 1)
PY
bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in.st" 1 8 256 labels
expect_ok "forward on the half model" "$brigade" forward --model "$tmp/h" --inputs "$tmp/in.st" --output "$tmp/o.st"
# A 32.32 run logs no loss_scale.
expect_ok "32.32" run_train --steps 2 --output "$tmp/f" --log "$tmp/f.jsonl"
grep -q '"loss_scale"' "$tmp/f.jsonl" && bad "loss_scale without loss scaling" || ok
# The summary says what one micro-batch held: half in 16.16, whose activations are fp16 (a model
# wide enough for the MiB printed to one decimal to show it: about 4 against 2).
mb() { sed -n 's/.*one micro-batch \([0-9.]*\) MiB.*/\1/p' "$1" | head -1; }
"$brigade" init --arch gpt2 --layers 2 --hidden 128 --heads 2 --vocab 256 --positions 16 --seed 2 \
  --output "$tmp/wide" >/dev/null || bad "init wide"
for p in 32.32 16.16; do
  "$brigade" train --model "$tmp/wide" --data builtin:reverse --rows 32 --micro-batch-size 8 --seed 4 --steps 1 \
    --precision $p --output "$tmp/s$p" >"$tmp/s$p.txt" 2>&1 || bad "$p summary run: $(tail -2 "$tmp/s$p.txt")"
done
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if 0 < b <= 0.6 * a else 1)" \
  "$(mb "$tmp/s32.32.txt")" "$(mb "$tmp/s16.16.txt")" 2>/dev/null && ok ||
  bad "one micro-batch: $(mb "$tmp/s16.16.txt") MiB in 16.16, $(mb "$tmp/s32.32.txt") in 32.32"
# auto_loss_scaling from the IPUConfig, started where fp16 overflows: skipped steps are logged
# and the scale halves at each.
cat >"$tmp/ipu.json" <<'JSON'
{"auto_loss_scaling": true, "optimum_version": "1.6.1"}
JSON
expect_ok "auto" run_train --steps 8 --precision FP16.32 --ipu-config "$tmp/ipu.json" --loss-scaling 4194304 \
  --output "$tmp/a" --log "$tmp/a.jsonl"
grep -q '"loss_scale": 4194304, "skipped": true' "$tmp/a.jsonl" && ok || bad "no skipped first step: $(head -2 "$tmp/a.jsonl")"
grep -qE '"skipped_steps":\s*[1-9]' "$tmp/a/checkpoint-8/trainer_state.json" && ok || bad "skipped_steps not saved"
tail -1 "$tmp/a.jsonl" | grep -q '"skipped"' && bad "still skipping at the end: $(cat "$tmp/a.jsonl")" || ok
# Bad values: one line, exit 1, no output folder.
expect_fail "bad precision" 1 "is not one of 32.32, 16.32, 16.16, bf16.32, bf16.16" run_train --steps 1 --precision fp8 --output "$tmp/x1"
expect_fail "negative scale" 1 "--loss-scaling must be a positive scale" run_train --steps 1 --loss-scaling -2 --output "$tmp/x2"
expect_fail "both rounding flags" 1 "contradict each other" run_train --steps 1 --precision 16.16 --stochastic-rounding \
  --no-stochastic-rounding --output "$tmp/x3"
for d in x1 x2 x3; do [[ -e $tmp/$d ]] && bad "$d was created" || ok; done
# A static scale that overflows fp16 every step stops at the first with the scale named.
expect_fail "overflowing scale" 1 "with the loss scaled by 1.09951e+12 the gradients overflowed" \
  run_train --steps 2 --precision 16.16 --loss-scaling 1099511627776 --output "$tmp/x4"

# forward --precision: products in bf16 / fp16 (fp32 sums), on one device or as the IPUConfig's
# inference pipeline (the same bytes with brigade's kernels), not float32's outputs; .16 refused.
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1]}' >"$tmp/stages.json"
exact=1
[[ $("$brigade" --version) == *"gemm: openblas"* ]] && exact=0
expect_ok "forward 32.32" "$brigade" forward --model "$tmp/m" --inputs "$tmp/in.st" --output "$tmp/f32.st"
for p in bf16.32 16.32; do
  expect_ok "forward $p" "$brigade" forward --model "$tmp/m" --inputs "$tmp/in.st" --output "$tmp/f-$p.st" \
    --precision $p
  expect_ok "forward $p piped" "$brigade" forward --model "$tmp/m" --inputs "$tmp/in.st" --output "$tmp/p-$p.st" \
    --precision $p --ipu-config "$tmp/stages.json"
  cmp -s "$tmp/f32.st" "$tmp/f-$p.st" && bad "forward $p wrote float32's outputs" || ok
  ((exact == 0)) || { cmp -s "$tmp/f-$p.st" "$tmp/p-$p.st" && ok || bad "forward $p: the pipeline's outputs differ"; }
done
expect_fail "forward bf16.16" 1 "--precision bf16.16 keeps half master weights, which only training has" \
  "$brigade" forward --model "$tmp/m" --inputs "$tmp/in.st" --output "$tmp/x5.st" --precision bf16.16
expect_fail "forward bad precision" 1 "is not one of 32.32" \
  "$brigade" forward --model "$tmp/m" --inputs "$tmp/in.st" --output "$tmp/x6.st" --precision fp8
for f in x5.st x6.st; do [[ -e $tmp/$f ]] && bad "$f was written" || ok; done
finish

#!/usr/bin/env bash
# brigade config and brigade plan: output, exit codes and one-line reasons.
set -uo pipefail
brigade=$1
root=$(cd "$(dirname "$0")/.." && pwd)
fix="$root/tests/fixtures/ipu_configs"
gpt2="$root/tests/fixtures/gpt2_tiny"
source "$root/tests/shell_util.sh"

# ---- config show / validate ----
expect_out show-bert '"layers_per_ipu": [' "$brigade" config show "$fix/bert-large-ipu"
[[ $(grep -c '^  "' "$tmp/out.txt") == 31 ]] && ok || bad "show printed $(grep -c '^  "' "$tmp/out.txt") attributes"
grep -q '"inference_ipus_per_replica": 4,' "$tmp/out.txt" && ok || bad "derived inference_ipus_per_replica missing"
grep -q 'transformers_version' "$tmp/out.txt" && bad "show kept transformers_version" || ok
cp "$tmp/out.txt" "$tmp/shown.json"
expect_out show-again '"seed": 42' "$brigade" config show "$tmp/shown.json"
cmp -s "$tmp/out.txt" "$tmp/shown.json" && ok || bad "show of show output differs"

expect_out show-gpt2-derived '"inference_matmul_proportion": 0.2,' "$brigade" config show "$fix/gpt2-small-ipu.json"
grep -q '^warning: .*`replicated_tensor_sharding` is not used' "$tmp/err.txt" && ok || bad "no warning on stderr"
expect_out show-inference '"mode": "inference"' "$brigade" config show "$fix/gpt2-small-ipu.json" --mode inference
grep -q '"batch_size_factor": 4,' "$tmp/out.txt" && ok || bad "inference view lacks batch_size_factor 4"
expect_out show-overrides '"device_iterations": 8,' "$brigade" config show "$fix/trainer-test.json" \
  --overrides "layers_per_ipu=[1 2 3 4],device_iterations=8"
expect_out show-deprecated '"replication_factor": 2,' "$brigade" config show "$fix/deprecated-keys.json"
grep -q '^warning: .*"enable_half_first_order_momentum" parameter is deprecated' "$tmp/err.txt" && ok || bad "no deprecation warning"

expect_out validate-ok 'valid' "$brigade" config validate "$fix/bert-large-ipu" --layers 24
expect_out validate-wildcard 'valid' "$brigade" config validate "$fix/trainer-test.json" --layers 7 --mode training
# One judgement of a placement: an IPU left without a layer is refused by validate, plan and train
# alike, in the same words.
echo '{"layers_per_ipu": [-1, -1, -1], "ipus_per_replica": 3}' >"$tmp/empty-ipu.json"
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --output "$tmp/two" >/dev/null || bad init
why="layers_per_ipu=[-1, -1, -1] places [0, 0, 2] layers on the 3 IPUs of this 2-layer model, which leaves IPU 1 with no block to run"
expect_fail empty-ipu-validate 1 "$why" "$brigade" config validate "$tmp/empty-ipu.json" --layers 2
expect_fail empty-ipu-plan 1 "$why" "$brigade" plan --model "$tmp/two" --ipu-config "$tmp/empty-ipu.json"
expect_fail empty-ipu-train 1 "$why" "$brigade" train --model "$tmp/two" --ipu-config "$tmp/empty-ipu.json" \
  --data builtin:reverse --rows 8 --steps 1 --output "$tmp/never"
[[ -e $tmp/never ]] && bad "train wrote an output before refusing the placement" || ok
expect_fail validate-layers 1 'layers_per_ipu does not define the correct number of layers' \
  "$brigade" config validate "$fix/bert-large-ipu" --layers 12
expect_fail validate-matmul 1 'matmul_proportion=[0.1, 0.15, 0.15] should use the same number of IPUs as ipus_per_replica=4' \
  "$brigade" config validate "$fix/invalid/matmul-length.json"
expect_fail validate-unknown 1 'unknown argument: layer_per_ipu=[2, 2]' "$brigade" config validate "$fix/invalid/unknown-key.json"
expect_fail validate-type 1 '`gradient_accumulation_steps` must be an int' "$brigade" config validate "$fix/invalid/wrong-type.json"
expect_fail validate-legacy 1 'per-pod-type value' "$brigade" config validate "$fix/legacy-pod-type.json"
expect_fail validate-output-mode 1 "value='last'" "$brigade" config show "$fix/invalid/output-mode.json"
expect_fail validate-syntax 1 'invalid JSON' "$brigade" config validate "$fix/invalid/syntax.json"
expect_fail validate-missing 1 'not a file, a folder or a cached hub id' "$brigade" config validate "$tmp/none.json"
expect_fail override-key 1 "Key foo isn't in the original config dict" \
  "$brigade" config show "$fix/bert-large-ipu" --overrides "foo=1"
expect_fail override-cross 1 'layers_per_ipu=[12, 12] should use the same number of IPUs as ipus_per_replica=4' \
  "$brigade" config validate "$fix/bert-large-ipu" --overrides "layers_per_ipu=[12 12]"
expect_fail bad-mode 1 '`IPUConfig` mode can only take values' "$brigade" config show "$fix/bert-large-ipu" --mode eval
expect_fail no-subcommand 2 "expected 'show CFG' or 'validate CFG'" "$brigade" config
expect_fail bad-subcommand 2 "expected 'show CFG' or 'validate CFG'" "$brigade" config frob "$fix/bert-large-ipu"
expect_out config-help 'validate CFG' "$brigade" config --help

# ---- plan ----
echo '{"layers_per_ipu": [1, 1], "inference_layers_per_ipu": [2], "transformers_version": "4.29.2"}' >"$tmp/two.json"
expect_out plan-text 'Token Embedding     --> IPU 0' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json"
grep -q '^Layer 1             --> IPU 1$' "$tmp/out.txt" && ok || bad "plan lacks 'Layer 1 --> IPU 1'"
grep -q '^Head                --> IPU 1$' "$tmp/out.txt" && ok || bad "plan lacks 'Head --> IPU 1'"
grep -q '^-------------------- Device Allocation --------------------$' "$tmp/out.txt" && ok || bad "no allocation header"
grep -q 'AdamW, two FP32 moments' "$tmp/out.txt" && ok || bad "plan does not name the optimizer state"
grep -qE '^1 +h\.1, head ' "$tmp/out.txt" && ok || bad "device 1 row: $(cat "$tmp/out.txt")"
expect_out plan-json '"layer_ipu":' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8
tr -d ' \t\n' <"$tmp/out.txt" >"$tmp/flat.txt"
grep -qF '"blocks":["embeddings","h.0"]' "$tmp/flat.txt" && ok || bad "json blocks of device 0: $(cat "$tmp/flat.txt")"
grep -qF '"layer_ipu":[0,1]' "$tmp/flat.txt" && ok || bad "json layer_ipu"
grep -qF '"micro_batch_size":2' "$tmp/flat.txt" && ok || bad "json micro_batch_size"
expect_out plan-inference '"ipus_per_replica":	1' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --mode inference
expect_out plan-balance 'balanced: "layers_per_ipu": [' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --balance
expect_out plan-balance-by 'balanced: "layers_per_ipu": [' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" \
  --balance-by compute
expect_fail plan-balance-by-bad 1 "unknown balance goal 'speed' (expected both, compute or memory)" \
  "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --balance-by speed
expect_out plan-overrides 'Layer 1             --> IPU 0' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" \
  --ipu-config-overrides "layers_per_ipu=[2 0]"
expect_fail plan-layers 1 'layers_per_ipu does not define the correct number of layers' \
  "$brigade" plan --model "$gpt2" --ipu-config "$fix/bert-large-ipu"
expect_fail plan-seq 1 'exceeds the model' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --sequence-length 17
expect_fail plan-missing 2 'missing required option --ipu-config' "$brigade" plan --model "$gpt2"
# --precision: a 16-bit compute type adds the products' rounded operands to each device's
# scratch. Device 0 (embeddings, h.0) at 2 x 8 tokens: the largest are the MLP's [32, 128]
# weights (4096 elements) and its [16, 128] activations (2048), 2 bytes each: 12288 bytes.
scratch0() { tr -d ' \t\n' <"$tmp/out.txt" | grep -oE '"scratch_bytes":[0-9]+' | head -1 | cut -d: -f2; }
expect_out plan-fp32 '"scratch_bytes"' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8
fp32=$(scratch0)
expect_out "plan-bf16.32" '"scratch_bytes"' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8 --precision bf16.32
(($(scratch0) - fp32 == 12288)) && ok || bad "plan --precision bf16.32: scratch $(scratch0), fp32 $fp32"
# 16.16 holds its activations in fp16: on top of those, each op widens its operands into fp32
# staging (tests/test_memory_plan.c holds the plan to what a device measures)
expect_out "plan-16.16" '"scratch_bytes"' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8 --precision 16.16
(($(scratch0) - fp32 > 12288)) && ok || bad "plan --precision 16.16: scratch $(scratch0), fp32 $fp32"

expect_fail plan-precision-bad 1 "precision 'fp8' is not one of" \
  "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --precision fp8
# Inference (one device here) takes forward's modes: its products round their operands too, the
# largest the same MLP weights and activations (forward only).
expect_out plan-inference-fp32 '"scratch_bytes"' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8 --mode inference
fp32=$(scratch0)
expect_out plan-inference-bf16 '"scratch_bytes"' "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --json \
  --micro-batch-size 2 --sequence-length 8 --mode inference --precision bf16.32
(($(scratch0) - fp32 == 12288)) && ok || bad "inference plan --precision bf16.32: scratch $(scratch0), fp32 $fp32"
expect_fail plan-precision-inference-16 1 '--precision bf16.16 keeps half master weights' \
  "$brigade" plan --model "$gpt2" --ipu-config "$tmp/two.json" --precision bf16.16 --mode inference
expect_out top-help 'plan' "$brigade" --help

finish

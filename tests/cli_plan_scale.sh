#!/usr/bin/env bash
# brigade plan --ranks R --replicas N --network-gbps B (the scale-out model) without running
# anything: GPT-2 small's 4-stage IPUConfig replicated 64 times on paper, its fields as text and
# JSON, the all-reduce's share growing as the network slows; bad input refused in one line on
# stderr, with a non-zero exit and nothing on stdout. (tests/cli_plan_scale_mpi.sh checks the
# model against measured runs.)
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"
# Graphcore's GPT-2 small layout (tests/fixtures/ipu_configs/gpt2-small-ipu.json) without its
# sharding and off-chip flags, which warn with one replica.
cfg=$tmp/gpt2-small-ipu.json
echo '{"ipus_per_replica": 4, "layers_per_ipu": [0, 4, 4, 4], "gradient_accumulation_steps": 128,
       "recompute_checkpoint_every_layer": true, "replication_factor": 1}' >"$cfg"

# GPT-2 small: its config.json is all plan reads.
mkdir -p "$tmp/gpt2-small"
cat >"$tmp/gpt2-small/config.json" <<'EOF'
{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12,
 "n_positions": 1024, "n_ctx": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-5,
 "activation_function": "gelu_new"}
EOF
plan=("$brigade" plan --model "$tmp/gpt2-small" --ipu-config "$cfg" --sequence-length 128)

# a number from plan's JSON: "key": value
json_number() { sed -n "s/^[[:space:]]*\"$1\":[[:space:]]*\\([0-9.e+-]*\\),*\$/\\1/p" "$2" | head -1; }

# ---- 64 replicas x 4 stages on paper, a replica per host ----
expect_out text-64 "scale-out: 64 replica(s) x 4 stage(s) = 256 devices over 64 rank(s)" \
  "${plan[@]}" --ranks 64 --replicas 64 --network-gbps 10 --ranks-per-host 1 --cores-per-host 4
for field in "step time" "bubble" "all-reduce" "tokens/s"; do
  grep -q "$field" "$tmp/out.txt" && ok || bad "the text lacks '$field': $(tail -3 "$tmp/out.txt")"
done
share_before=0
for gbps in 100 10 1; do
  "${plan[@]}" --ranks 64 --replicas 64 --network-gbps $gbps --ranks-per-host 1 --cores-per-host 4 --json \
    >"$tmp/p.json" 2>"$tmp/err" || { bad "64 replicas at $gbps Gb/s: $(cat "$tmp/err")"; continue; }
  for key in step_s pipeline_s bubble_share all_reduce_s all_reduce_share tokens_per_s; do
    [[ -n $(json_number $key "$tmp/p.json") ]] && ok || bad "--json lacks scale_out.$key"
  done
  [[ $(json_number devices "$tmp/p.json") == 256 ]] && ok || bad "64 x 4 is not 256 devices"
  [[ $(json_number contention "$tmp/p.json") == 1 ]] && ok || bad "4 device threads on 4 cores are contended"
  share=$(json_number all_reduce_share "$tmp/p.json")
  awk -v a="$share_before" -v b="$share" 'BEGIN { exit !(b > a && b < 1) }' && ok ||
    bad "at $gbps Gb/s the all-reduce share $share is not above the faster network's $share_before"
  echo "GPT-2 small, 64 replicas x 4 stages at $gbps Gb/s: all-reduce $(awk -v s="$share" 'BEGIN { printf "%.1f", 100 * s }')% of the step"
  share_before=$share
done

# 64 replicas over 256 ranks (a device each): every pipeline boundary crosses ranks.
"${plan[@]}" --ranks 256 --replicas 64 --ranks-per-host 4 --cores-per-host 4 --json >"$tmp/p.json" 2>"$tmp/err" &&
  [[ $(json_number pipeline_cuts "$tmp/p.json") == 3 ]] && ok || bad "256 ranks: $(cat "$tmp/err") cuts $(json_number pipeline_cuts "$tmp/p.json")"
# --replicas defaults to the config's replication_factor (1); gpipe is modelled too.
"${plan[@]}" --ranks 2 --schedule gpipe --json >"$tmp/p.json" 2>"$tmp/err" &&
  [[ $(json_number replicas "$tmp/p.json") == 1 ]] && grep -q '"schedule":[[:space:]]*"gpipe"' "$tmp/p.json" && ok ||
  bad "--ranks 2 without --replicas: $(cat "$tmp/err")"
# on one host the device threads share its cores: 4 ranks x 4 devices on 2 cores are slowed
"${plan[@]}" --ranks 4 --replicas 4 --cores-per-host 2 --json >"$tmp/p.json" 2>"$tmp/err" &&
  awk -v c="$(json_number contention "$tmp/p.json")" 'BEGIN { exit !(c > 1) }' && ok || bad "no contention on 2 cores"

# ---- bad input: one line, non-zero, nothing on stdout ----
refuse() { # NAME CODE NEEDLE FLAGS...
  local name=$1 code=$2 needle=$3
  shift 3
  expect_fail "$name" "$code" "$needle" "${plan[@]}" "$@"
  "${plan[@]}" "$@" >"$tmp/stdout" 2>/dev/null
  [[ ! -s $tmp/stdout ]] && ok || bad "$name: wrote to stdout: $(head -c 200 "$tmp/stdout")"
}
refuse ranks-0 1 "--ranks must be at least 1, got 0" --ranks 0
refuse ranks-negative 1 "--ranks must be at least 1, got -2" --ranks -2
refuse replicas-0 1 "--replicas must be at least 1, got 0" --ranks 2 --replicas 0
refuse gbps-negative 1 "--network-gbps must be a positive number of Gb/s, got -10" --ranks 2 --network-gbps -10
refuse gbps-zero 1 "--network-gbps must be a positive number" --ranks 2 --network-gbps 0
refuse gbps-garbage 2 "--network-gbps expects a number, got 'fast'" --ranks 2 --network-gbps fast
refuse gbps-inf 1 "--network-gbps must be a positive number" --ranks 2 --network-gbps inf
refuse latency-negative 1 "--network-latency-us must be >= 0" --ranks 2 --network-latency-us -1
refuse cores-0 1 "--cores-per-host must be a positive number" --ranks 2 --cores-per-host 0
refuse other-negative 1 "--other-threads must be a number >= 0" --ranks 2 --other-threads -1
refuse replicas-garbage 2 "--replicas expects an integer, got '2x'" --ranks 2 --replicas 2x
refuse too-many-ranks 1 "9 ranks for 8 devices (2 replicas x 4 stages): every rank needs a device; use at most 8 ranks" \
  --ranks 9 --replicas 2
refuse inference 1 "model training steps" --ranks 2 --mode inference
refuse schedule 1 "unknown pipeline schedule 'zigzag'" --ranks 2 --schedule zigzag
refuse no-trace 1 "cannot open the calibration trace $tmp/none.json" --ranks 2 --calibrate "$tmp/none.json"
echo '{"not": "a trace"}' >"$tmp/bad.json"
refuse not-trace 1 "is not a brigade trace" --ranks 2 --calibrate "$tmp/bad.json"
echo '{"traceEvents": [' >"$tmp/cut.json"
refuse cut-trace 1 "is not a brigade trace" --ranks 2 --calibrate "$tmp/cut.json"

# ---- --calibrate: block times from a one-device training trace ----
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 \
  --output "$tmp/tiny" >/dev/null || bad "init tiny"
echo '{"gradient_accumulation_steps": 2}' >"$tmp/one.json"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "replication_factor": 2, "gradient_accumulation_steps": 2}' \
  >"$tmp/both.json"
"$brigade" train --model "$tmp/tiny" --ipu-config "$tmp/one.json" --data builtin:reverse --rows 32 --micro-batch-size 2 \
  --steps 3 --quiet --trace "$tmp/cal.json" --output "$tmp/cal" >/dev/null 2>"$tmp/err" || bad "trace: $(cat "$tmp/err")"
expect_out calibrated "compute: measured in $tmp/cal.json (block times over 2 steps" \
  "$brigade" plan --model "$tmp/tiny" --ipu-config "$tmp/both.json" --micro-batch-size 2 --ranks 2 --calibrate "$tmp/cal.json"
# a trace of another model, or of a pipelined run, does not calibrate
expect_fail other-model 1 "trace a training run of this model" "${plan[@]}" --ranks 2 --calibrate "$tmp/cal.json"
"$brigade" train --model "$tmp/tiny" --ipu-config "$tmp/both.json" --data builtin:reverse --rows 32 --micro-batch-size 2 \
  --steps 3 --quiet --trace "$tmp/two.json" --output "$tmp/two" >/dev/null 2>"$tmp/err" || bad "trace 2: $(cat "$tmp/err")"
expect_fail pipelined-trace 1 "calibrate with a one-device run" \
  "$brigade" plan --model "$tmp/tiny" --ipu-config "$tmp/both.json" --ranks 2 --calibrate "$tmp/two.json"

finish

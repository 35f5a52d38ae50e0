#!/usr/bin/env bash
# SIGKILL at random moments of a run that checkpoints every step: whatever the moment, every
# checkpoint-N folder left is complete and agrees with itself, and resuming from the newest one
# (or starting again when the kill came before the first) ends with the same weights, bit for bit,
# as the run that was never interrupted. 50 trials, seeded.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
cat >"$tmp/ipu.json" <<'JSON'
{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 2}
JSON
STEPS=8
args=(train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse --rows 64 --micro-batch-size 2
  --lr 1e-3 --seed 4 --steps $STEPS --save-every 1 --quiet)
run_train() { "$brigade" "${args[@]}" "$@"; }

start=$(date +%s%N)
run_train --output "$tmp/ref" >/dev/null 2>&1 || bad "the uninterrupted run failed"
span_ms=$((($(date +%s%N) - start) / 1000000 + 1))

files=(config.json model.safetensors optimizer.safetensors trainer_state.json ipu_config.json)
check_folders() { # OUT: every checkpoint-N is whole, and its trainer state says step N
  local d n
  for d in "$1"/checkpoint-*; do
    [[ -e $d ]] || continue
    n=${d##*/checkpoint-}
    [[ $n =~ ^[0-9]+$ ]] || continue # a temporary of the killed writer; the next start removes it
    for f in "${files[@]}"; do [[ -f $d/$f ]] || { bad "trial $2: $d lacks $f"; return; }; done
    grep -qE "\"global_step\":\s*$n," "$d/trainer_state.json" || { bad "trial $2: $d holds another step"; return; }
  done
  ok
}

RANDOM=20261201
resumed=0 restarted=0
for trial in $(seq 1 50); do
  out=$tmp/t$trial
  # brigade itself in the background (not a function's subshell), so the kill reaches it
  "$brigade" "${args[@]}" --output "$out" >/dev/null 2>&1 &
  pid=$!
  delay_ms=$((RANDOM % span_ms))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  check_folders "$out" "$trial"
  if ls "$out" 2>/dev/null | grep -qE '^checkpoint-[0-9]+$'; then
    resumed=$((resumed + 1))
    run_train --output "$out" --resume "$out" >/dev/null 2>"$tmp/err" || { bad "trial $trial: resume failed: $(cat "$tmp/err")"; continue; }
  else
    restarted=$((restarted + 1))
    run_train --output "$out" >/dev/null 2>"$tmp/err" || { bad "trial $trial: restart failed: $(cat "$tmp/err")"; continue; }
  fi
  cmp -s "$tmp/ref/model.safetensors" "$out/model.safetensors" && ok || bad "trial $trial (killed after ${delay_ms} ms): the resumed weights differ"
  ls "$out" | grep -q '\.tmp\.' && bad "trial $trial: a killed writer's temporary was not removed: $(ls "$out" | tr '\n' ' ')" || ok
  rm -rf "$out"
done
echo "50 kills within ${span_ms} ms of the start: $resumed resumed from a checkpoint, $restarted before the first one"

finish

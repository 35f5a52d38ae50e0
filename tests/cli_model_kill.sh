#!/usr/bin/env bash
# SIGKILL while `brigade init` replaces the model in a folder that already holds another one (of
# other sizes), beside files of its own (a log, a checkpoint folder): whatever the moment, the
# folder's config.json and model.safetensors read as the old pair or the new pair, never one of
# each; the model loads; nothing else in the folder changes; and the next save leaves two plain
# files and no helper. 60 kills at seeded random moments, then one at each point of the
# replacement protocol (BRIGADE_FAULT, see src/io/file_pair.c), and the same points during the
# final save of a resumed `brigade train` whose output folder holds the earlier run's model.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

old_args=(init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 1)
new_args=(init --arch gpt2 --layers 3 --hidden 192 --heads 4 --vocab 1024 --positions 64 --seed 2)
"$brigade" "${old_args[@]}" --output "$tmp/old" >/dev/null || bad "init of the old model"
span_ms=1 # the longest of three runs: kills land anywhere from the start to past the end
for i in 1 2 3; do
  start=$(date +%s%N)
  "$brigade" "${new_args[@]}" --output "$tmp/new" >/dev/null || bad "init of the new model"
  ms=$((($(date +%s%N) - start) / 1000000 + 1))
  ((ms > span_ms)) && span_ms=$ms
done
mkdir -p "$tmp/old/checkpoint-3" && echo '{"step": 3}' >"$tmp/old/checkpoint-3/trainer_state.json"
echo '{"step": 1, "loss": 2.5}' >"$tmp/old/log.jsonl"

# pair DIR: "old", "new" or what is wrong, reading both names as a loader does (through links)
pair() {
  local o n
  o=$( (cmp -s "$1/config.json" "$tmp/old/config.json" && cmp -s "$1/model.safetensors" "$tmp/old/model.safetensors") && echo 1)
  n=$( (cmp -s "$1/config.json" "$tmp/new/config.json" && cmp -s "$1/model.safetensors" "$tmp/new/model.safetensors") && echo 1)
  if [[ -n $o ]]; then echo old
  elif [[ -n $n ]]; then echo new
  elif cmp -s "$1/config.json" "$tmp/new/config.json" || cmp -s "$1/model.safetensors" "$tmp/new/model.safetensors"; then
    echo mixed
  else echo "neither"
  fi
}

# check DIR WHAT [WANT]: a whole pair (WANT old/new when the moment decides it), loadable, the
# folder's other files untouched; $got says which pair
check() {
  got=$(pair "$1")
  if [[ $got != old && $got != new ]]; then bad "$2: the folder holds a $got pair: $(ls -la "$1" | tr '\n' ' ')"; return 1; fi
  if [[ -n ${3:-} && $got != "$3" ]]; then bad "$2: the folder holds the $got pair, expected the $3 one"; return 1; fi
  "$brigade" generate --model "$1" --prompt ab --max-new-tokens 1 >/dev/null 2>"$tmp/err" ||
    { bad "$2: the $got model does not load: $(cat "$tmp/err")"; return 1; }
  cmp -s "$1/log.jsonl" "$tmp/old/log.jsonl" && cmp -s "$1/checkpoint-3/trainer_state.json" "$tmp/old/checkpoint-3/trainer_state.json" ||
    { bad "$2: the folder's other files changed"; return 1; }
  ok
}

# settle DIR WHAT: a save that runs to the end turns what a killed one left into two plain files
settle() {
  "$brigade" "${new_args[@]}" --output "$1" >/dev/null 2>"$tmp/err" || { bad "$2: the next save failed: $(cat "$tmp/err")"; return; }
  [[ $(pair "$1") == new && -f $1/config.json && ! -L $1/config.json && ! -L $1/model.safetensors ]] ||
    { bad "$2: after the next save: $(ls -la "$1" | tr '\n' ' ')"; return; }
  ls -A "$1" | grep -q '\.tmp\.' && { bad "$2: helpers left after the next save: $(ls -A "$1" | tr '\n' ' ')"; return; }
  ok
}

RANDOM=20261202
olds=0 news=0
for trial in $(seq 1 60); do
  out=$tmp/t$trial
  cp -r "$tmp/old" "$out"
  "$brigade" "${new_args[@]}" --output "$out" >/dev/null 2>&1 &
  pid=$!
  delay_ms=$((RANDOM % span_ms))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -KILL $pid 2>/dev/null
  wait $pid 2>/dev/null
  if check "$out" "trial $trial (killed after ${delay_ms} ms)"; then
    [[ $got == old ]] && olds=$((olds + 1)) || news=$((news + 1))
  fi
  settle "$out" "trial $trial"
  rm -rf "$out"
done
echo "60 kills within ${span_ms} ms of the start: $olds left the old pair, $news the new one"

# One kill at each point of the replacement: before the switch the old pair, from it on the new.
points=(staged old-linked pointer-linked pointer linked-first linked switched materialized-first materialized)
want=(old old old old old old new new new)
for i in "${!points[@]}"; do
  out=$tmp/p$i
  cp -r "$tmp/old" "$out"
  BRIGADE_FAULT=${points[$i]} "$brigade" "${new_args[@]}" --output "$out" >/dev/null 2>&1 &
  wait $! 2>/dev/null
  rc=$?
  ((rc == 137)) && ok || bad "BRIGADE_FAULT=${points[$i]}: exit $rc, wanted a kill (137)"
  check "$out" "killed at ${points[$i]}" "${want[$i]}"
  settle "$out" "killed at ${points[$i]}"
  rm -rf "$out"
done

# No old pair: a kill between the two renames leaves the weights alone, never a mixed pair.
mkdir -p "$tmp/fresh"
BRIGADE_FAULT=fresh-between "$brigade" "${new_args[@]}" --output "$tmp/fresh" >/dev/null 2>&1 &
wait $! 2>/dev/null
[[ ! -e $tmp/fresh/config.json ]] && cmp -s "$tmp/fresh/model.safetensors" "$tmp/new/model.safetensors" && ok ||
  bad "fresh-between: $(ls -la "$tmp/fresh" | tr '\n' ' ')"

# The final save of a resumed run over the earlier run's model in OUT (checkpoints beside it).
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1]}' >"$tmp/ipu.json"
targs=(train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse --rows 32 --micro-batch-size 2 --lr 1e-3
  --lr-schedule-steps 4 --seed 4 --quiet) # one schedule, so 2 steps resumed to 4 give the 4-step run
"$brigade" "${targs[@]}" --steps 2 --output "$tmp/run2" >/dev/null 2>&1 || bad "train 2 steps"
"$brigade" "${targs[@]}" --steps 4 --output "$tmp/run4" >/dev/null 2>&1 || bad "train 4 steps"
for i in "${!points[@]}"; do
  out=$tmp/r$i
  cp -r "$tmp/run2" "$out"
  BRIGADE_FAULT=${points[$i]} "$brigade" "${targs[@]}" --steps 4 --output "$out" --resume "$out" >/dev/null 2>&1 &
  wait $! 2>/dev/null
  rc=$?
  # the checkpoints are new folders (no old pair in them): the only replacement is the final model
  ((rc == 137)) && ok || bad "train, BRIGADE_FAULT=${points[$i]}: exit $rc, wanted a kill (137)"
  ref=$tmp/run2
  [[ ${want[$i]} == new ]] && ref=$tmp/run4
  [[ ${points[$i]} == staged ]] && ref=$tmp/run2
  cmp -s "$out/model.safetensors" "$ref/model.safetensors" && cmp -s "$out/config.json" "$ref/config.json" && ok ||
    bad "train killed at ${points[$i]}: the final model is not the ${want[$i]} one"
  "$brigade" "${targs[@]}" --steps 4 --output "$out" --resume "$out" >/dev/null 2>"$tmp/err" ||
    bad "train killed at ${points[$i]}: the resumed run failed: $(cat "$tmp/err")"
  cmp -s "$out/model.safetensors" "$tmp/run4/model.safetensors" && [[ ! -L $out/model.safetensors ]] && ok ||
    bad "train killed at ${points[$i]}: the rerun does not end with the uninterrupted weights as a plain file"
  ls -A "$out" | grep -q '\.tmp\.' && bad "train killed at ${points[$i]}: helpers left: $(ls -A "$out" | tr '\n' ' ')" || ok
  rm -rf "$out"
done

finish

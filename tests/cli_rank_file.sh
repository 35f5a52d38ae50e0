#!/usr/bin/env bash
# --rank-file: which devices each rank runs. Files that cannot be right are refused in one line
# naming the line, before anything is written, by train, forward, embed and pipeline, in one process
# too; under mpirun, non-consecutive placements (each replica's stage 0 on rank 0, stage 1 on
# rank 1; four ranks in scrambled order) run where the file says (each rank's trace names its
# devices) and train to the threads run's weights and optimizer state byte for byte; forward, embed
# and pipeline give its outputs; a file whose ranks or devices are not the run's is refused in one
# line.
# The mpirun part is skipped (with a message) where mpirun or a brigade built with MPI is missing.
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 \
  --output "$tmp/gpt2" >/dev/null || bad "init gpt2"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "replication_factor": 2, "gradient_accumulation_steps": 3}' \
  >"$tmp/both.json"
train_args=(train --model "$tmp/gpt2" --ipu-config "$tmp/both.json" --data builtin:reverse --rows 64
  --micro-batch-size 2 --lr 1e-3 --seed 4 --steps 3 --quiet)

# ---- files that cannot be right: refused by every command that takes the flag ----
bad_file() { # NAME NEEDLE CONTENT: train refuses the file with one line naming NEEDLE, writing nothing
  local name=$1 needle=$2
  printf '%b' "$3" >"$tmp/$name.ranks"
  expect_fail "$name" 1 "$needle" "$brigade" "${train_args[@]}" --rank-file "$tmp/$name.ranks" --output "$tmp/out-$name"
  [[ -e $tmp/out-$name ]] && bad "$name: the refused run created its output folder" || ok
}
bad_file syntax "rank file $tmp/syntax.ranks, line 2: expected 'rank R: DEVICE ...'" '# two ranks\nrank0 0 1\n'
bad_file no-colon "line 1: expected 'rank R: DEVICE ...'" 'rank 0 0 1\n'
bad_file commas "line 1: devices are ids (0 2) or ranges (4-7), apart by spaces" 'rank 0: 0,1\n'
bad_file negative "line 2: devices are ids" 'rank 0: 0\nrank 1: -1\n'
bad_file range "line 1: a range of devices is LOW-HIGH (4-7)" 'rank 0: 0 3-1\n'
bad_file rank-twice "line 3: rank 0 has a line already (line 1)" 'rank 0: 0\nrank 1: 1\nrank 0: 2 3\n'
bad_file device-twice "line 2: device 2 is already on rank 0 (line 1): each device runs on one rank" \
  'rank 0: 0-2\nrank 1: 2 3\n'
bad_file no-devices "line 2: rank 1 has no devices: every rank needs one" 'rank 0: 0 1 2 3\nrank 1: # none\n'
bad_file missing-rank "has no line for rank 1 (it lists ranks up to 2)" 'rank 0: 0 1\nrank 2: 2 3\n'
bad_file missing-device "puts device 2 on no rank (it lists devices up to 3)" 'rank 0: 0 1\nrank 1: 3\n'
bad_file device0 "line 2: device 0 is on rank 1; it must be on rank 0" 'rank 0: 1 2 3\nrank 1: 0\n'
bad_file empty "lists no ranks" '# nothing here\n\n'
expect_fail missing-file 1 "cannot open rank file $tmp/none.ranks" "$brigade" "${train_args[@]}" \
  --rank-file "$tmp/none.ranks" --output "$tmp/out-none"
printf 'rank 0: 0 1\nrank 1: 2 3\n' >"$tmp/halves.ranks"
expect_fail both-flags 1 "--devices-per-rank and --rank-file both place devices: give one" "$brigade" "${train_args[@]}" \
  --rank-file "$tmp/halves.ranks" --devices-per-rank 2 --output "$tmp/out-both"

# forward, embed and pipeline read the file as train does.
bash "$here/../scripts/make-inputs.sh" "$tmp/in.st" 4 8 256 labels mask
fix=$here/fixtures
expect_fail forward 1 "line 3: rank 0 has a line already" "$brigade" forward --model "$tmp/gpt2" --inputs "$tmp/in.st" \
  --output "$tmp/out-forward.st" --rank-file "$tmp/rank-twice.ranks"
[[ -e $tmp/out-forward.st ]] && bad "forward wrote its output with a bad rank file" || ok
expect_fail embed 1 "line 2: device 0 is on rank 1" "$brigade" embed --model "$fix/embed_mean" \
  --input "$fix/embed_mean/sentences.txt" --rank-file "$tmp/device0.ranks"
expect_fail pipeline 1 "line 1: devices are ids" "$brigade" pipeline text-classification \
  --model "$fix/pipeline/text_classification" --text hello --rank-file "$tmp/commas.ranks"

# In one process a good file changes nothing: comments, blank lines, ranges, any order.
"$brigade" "${train_args[@]}" --output "$tmp/threads" >/dev/null 2>"$tmp/err" || bad "threads run: $(cat "$tmp/err")"
printf '# 2 replicas x 2 stages\n\nrank 1: 3 1   # the stage 1s\nrank 0: 2 0\n' >"$tmp/stages.ranks"
"$brigade" "${train_args[@]}" --rank-file "$tmp/stages.ranks" --output "$tmp/one" >/dev/null 2>"$tmp/err" ||
  bad "one process with a rank file: $(cat "$tmp/err")"
cmp -s "$tmp/threads/model.safetensors" "$tmp/one/model.safetensors" && ok || bad "one process: a rank file changed the weights"

# ---- under mpirun ----
source "$here/mpi_util.sh"
if why=$(mpi_missing); then
  echo "skipped the mpirun part: $why"
  finish
  exit
fi
mpi_env

same_training() { # NAME OUT: the weights and the last checkpoint's state are the threads run's
  local f
  for f in model.safetensors checkpoint-3/optimizer.safetensors checkpoint-3/trainer_state.json; do
    cmp -s "$tmp/threads/$f" "$2/$f" || { bad "$1: $f differs from the threads run's"; return; }
  done
  ok
}

placed() { # TRACE: the devices whose threads the rank's trace names, "0 2"
  grep -o '"name": "device [0-9]*' "$1" 2>/dev/null | sed 's/.*device //' | sort -un | paste -sd' '
}
same_placement() { # NAME TRACE DEVICES-OF-RANK-0 DEVICES-OF-RANK-1 ...: each rank ran the file's devices
  local name=$1 trace=$2 r=0 got
  shift 2
  for want in "$@"; do
    got=$(placed "${trace%.json}$( ((r)) && echo ".rank$r").json")
    [[ $got == "$want" ]] && ok || bad "$name: rank $r ran devices '$got', the file says '$want'"
    r=$((r + 1))
  done
}

# Stage 0 of both replicas on rank 0, stage 1 of both on rank 1: every activation crosses ranks.
mpi 2 "${train_args[@]}" --rank-file "$tmp/stages.ranks" --output "$tmp/np2" --trace "$tmp/np2.json" >"$tmp/out.txt" 2>&1 &&
  same_training "stages on ranks" "$tmp/np2" || bad "stages on ranks: $(tail -3 "$tmp/out.txt")"
same_placement "stages on ranks" "$tmp/np2.json" "0 2" "1 3"
printf 'rank 0: 0\nrank 1: 3\nrank 2: 1\nrank 3: 2\n' >"$tmp/scrambled.ranks"
mpi 4 "${train_args[@]}" --rank-file "$tmp/scrambled.ranks" --output "$tmp/np4" --trace "$tmp/np4.json" >"$tmp/out.txt" 2>&1 &&
  same_training "4 ranks scrambled" "$tmp/np4" || bad "4 ranks scrambled: $(tail -3 "$tmp/out.txt")"
same_placement "4 ranks scrambled" "$tmp/np4.json" 0 3 1 2

# forward and embed with the stages file over their 2 x 2 inference layouts.
echo '{"inference_replication_factor": 2, "ipus_per_replica": 2, "layers_per_ipu": [-1]}' >"$tmp/infer.json"
"$brigade" forward --model "$tmp/gpt2" --inputs "$tmp/in.st" --ipu-config "$tmp/infer.json" --output "$tmp/fwd.st" \
  >/dev/null 2>"$tmp/err" || bad "forward threads: $(cat "$tmp/err")"
mpi 2 forward --model "$tmp/gpt2" --inputs "$tmp/in.st" --ipu-config "$tmp/infer.json" --output "$tmp/fwd-np2.st" \
  --rank-file "$tmp/stages.ranks" >"$tmp/out.txt" 2>&1 || bad "forward over 2 ranks: $(tail -3 "$tmp/out.txt")"
cmp -s "$tmp/fwd.st" "$tmp/fwd-np2.st" && ok || bad "forward with a rank file: other outputs"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_replication_factor": 2}' \
  >"$tmp/embed.json"
embed_args=(embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/embed.json" --quiet)
"$brigade" "${embed_args[@]}" >"$tmp/embed.jsonl" 2>"$tmp/err" || bad "embed threads: $(cat "$tmp/err")"
mpi 2 "${embed_args[@]}" --rank-file "$tmp/stages.ranks" >"$tmp/embed-np2.jsonl" 2>"$tmp/err" ||
  bad "embed over 2 ranks: $(tail -3 "$tmp/err")"
cmp -s "$tmp/embed.jsonl" "$tmp/embed-np2.jsonl" && ok || bad "embed with a rank file: other embeddings"

# embed's other rank flags, and pipeline with the rank file.
mpi 2 "${embed_args[@]}" --devices-per-rank 3,1 --timeout 60 >"$tmp/embed-31.jsonl" 2>"$tmp/err" ||
  bad "embed --devices-per-rank 3,1: $(tail -3 "$tmp/err")"
cmp -s "$tmp/embed.jsonl" "$tmp/embed-31.jsonl" && ok || bad "embed --devices-per-rank 3,1: other embeddings"
for i in $(seq 1 8); do echo "{\"text\": \"hello world number $i\"}"; done >"$tmp/texts.jsonl"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1], "inference_replication_factor": 2}' \
  >"$tmp/classify.json"
classify_args=(pipeline text-classification --model "$fix/pipeline/text_classification" --input "$tmp/texts.jsonl"
  --ipu-config "$tmp/classify.json" --batch-size 4)
"$brigade" "${classify_args[@]}" >"$tmp/classify.jsonl" 2>"$tmp/err" || bad "pipeline threads: $(cat "$tmp/err")"
mpi 2 "${classify_args[@]}" --rank-file "$tmp/stages.ranks" >"$tmp/classify-np2.jsonl" 2>"$tmp/err" ||
  bad "pipeline over 2 ranks: $(tail -3 "$tmp/err")"
cmp -s "$tmp/classify.jsonl" "$tmp/classify-np2.jsonl" && ok || bad "pipeline with a rank file: other answers"

# A file whose ranks or devices are not the run's.
expect_mpi_fail() { # NAME NEEDLE NP ARGS...: mpirun fails, and one line says why
  local name=$1 needle=$2 np=$3
  shift 3
  if mpi "$np" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then bad "$name: exit 0"; return; fi
  grep -qF -- "$needle" "$tmp/err.txt" && ok || bad "$name: stderr lacks '$needle': $(head -3 "$tmp/err.txt")"
  (($(grep -c '^brigade' "$tmp/err.txt") == 1)) && ok || bad "$name: not one line: $(cat "$tmp/err.txt")"
}
expect_mpi_fail rank-count "rank file $tmp/scrambled.ranks lists 4 ranks, and mpirun started 2" 2 "${train_args[@]}" \
  --rank-file "$tmp/scrambled.ranks" --output "$tmp/bad-ranks"
printf 'rank 0: 0 2 4\nrank 1: 1 3\n' >"$tmp/five.ranks"
expect_mpi_fail too-many-devices "line 1: device 4, but the run has 4 devices" 2 "${train_args[@]}" \
  --rank-file "$tmp/five.ranks" --output "$tmp/bad-five"
printf 'rank 0: 0\nrank 1: 1\n' >"$tmp/two.ranks"
expect_mpi_fail too-few-devices "places devices 0 to 1, but the run has 4" 2 "${train_args[@]}" \
  --rank-file "$tmp/two.ranks" --output "$tmp/bad-two"
expect_mpi_fail parse-under-mpirun "line 2: device 2 is already on rank 0" 2 "${train_args[@]}" \
  --rank-file "$tmp/device-twice.ranks" --output "$tmp/bad-twice"
for d in bad-ranks bad-five bad-two bad-twice; do
  [[ -e $tmp/$d/model.safetensors ]] && bad "$d: a refused run wrote a model" || ok
done

finish

#!/usr/bin/env bash
# brigade under mpirun: the same command spread over 2 and 4 ranks trains GPT-2, BERT and T5
# pipelined (2 stages), replicated (2 replicas) and both (2 x 2), and its output folder is the
# threads run's byte for byte (the final weights, the last checkpoint's optimizer state and trainer
# state); forward, embed and pipeline --ipu-config give the same outputs; layouts that do not fit the ranks are
# refused in one line; a rank killed mid-run ends mpirun non-zero within seconds, leaving the last
# checkpoint whole, and resuming from it under mpirun ends with the uninterrupted run's weights;
# a rank that hangs is given up after --timeout, with a message naming it.
# Skipped (exit 77) where mpirun or a brigade built with MPI is missing (scripts/deps.sh installs
# Open MPI; CI does).
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"

source "$here/mpi_util.sh"
mpi_require

# ---- three tiny models and their data ----
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 \
  --output "$tmp/gpt2" >/dev/null || bad "init gpt2"
"$brigade" init --arch BertForMaskedLM --layers 2 --hidden 32 --heads 2 --vocab 1405 --positions 32 --seed 2 \
  --output "$tmp/bert" >/dev/null || bad "init bert"
cp "$here/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/bert/"
for i in $(seq 1 40); do echo "the cat sat on the mat and the dog sat on the log number $((i % 5))"; done >"$tmp/corpus.txt"
"$brigade" init --arch T5ForConditionalGeneration --layers 2 --hidden 32 --heads 2 --vocab 512 --seed 1 \
  --output "$tmp/t5" >/dev/null || bad "init t5"
cp "$here/fixtures/tokenizers/unigram_t5/tokenizer.json" "$tmp/t5/"
for i in $(seq 0 31); do echo "{\"source\": \"the cat $i sat on the mat\", \"target\": \"cat $i\"}"; done >"$tmp/s2s.jsonl"

data_args() {
  case $1 in
  gpt2) echo "--data builtin:reverse --rows 64" ;;
  bert) echo "--data $tmp/corpus.txt --sequence-length 16" ;;
  t5) echo "--data $tmp/s2s.jsonl --sequence-length 16 --max-target-length 8" ;;
  esac
}

echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "gradient_accumulation_steps": 2}' >"$tmp/pipeline.json"
echo '{"replication_factor": 2, "gradient_accumulation_steps": 2}' >"$tmp/replicas.json"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "replication_factor": 2, "gradient_accumulation_steps": 3}' \
  >"$tmp/both.json"

train() { # MODEL LAYOUT OUT [mpirun -np N]
  local model=$1 layout=$2 out=$3 np=${4:-}
  local args=(train --model "$tmp/$model" --ipu-config "$tmp/$layout.json" $(data_args "$model") --micro-batch-size 2
    --lr 1e-3 --seed 4 --steps 3 --quiet --log "$out.jsonl" --output "$out")
  if [[ -n $np ]]; then mpi "$np" "${args[@]}"; else "$brigade" "${args[@]}"; fi
}

same_output() { # WHAT REF OUT: the weights, the last checkpoint's state and the log, byte for byte
  local f
  for f in model.safetensors checkpoint-3/optimizer.safetensors checkpoint-3/trainer_state.json; do
    cmp -s "$2/$f" "$3/$f" || { bad "$1: $f differs from the threads run's"; return; }
  done
  # The log's losses, learning rates and norms (not its tokens/s).
  cmp -s <(sed 's/"tokens_per_s": [^,]*,//' "$2.jsonl") <(sed 's/"tokens_per_s": [^,]*,//' "$3.jsonl") ||
    { bad "$1: the log differs: $(diff "$2.jsonl" "$3.jsonl" | head -4)"; return; }
  ok
}

for model in gpt2 bert t5; do
  for layout in pipeline replicas both; do
    ref=$tmp/$model-$layout-threads
    train "$model" "$layout" "$ref" >/dev/null 2>"$tmp/err" || { bad "$model $layout threads: $(cat "$tmp/err")"; continue; }
    nps=(2)
    [[ $layout == both ]] && nps=(2 4)
    for np in "${nps[@]}"; do
      out=$tmp/$model-$layout-np$np
      if train "$model" "$layout" "$out" "$np" >"$tmp/out.txt" 2>&1; then
        same_output "$model $layout over $np ranks" "$ref" "$out"
      else
        bad "$model $layout over $np ranks failed: $(tail -5 "$tmp/out.txt")"
      fi
    done
  done
done

# 16.16: the stages send each other fp16 activations (over MPI, serialised with their dtype) and
# fp32 gradients back; the same bits as the threads run.
for np in threads 2; do
  out=$tmp/gpt2-both-16-$np
  args=(train --model "$tmp/gpt2" --ipu-config "$tmp/both.json" $(data_args gpt2) --micro-batch-size 2 --lr 1e-3
    --seed 4 --steps 3 --quiet --precision 16.16 --log "$out.jsonl" --output "$out")
  if [[ $np == threads ]]; then "$brigade" "${args[@]}"; else mpi "$np" "${args[@]}"; fi >"$tmp/out.txt" 2>&1 ||
    bad "16.16 $np: $(tail -3 "$tmp/out.txt")"
done
same_output "16.16 over 2 ranks" "$tmp/gpt2-both-16-threads" "$tmp/gpt2-both-16-2"

# Uneven spreads of the 2 x 2 layout: 1 + 3 and 3 + 1 devices.
for spread in 1,3 3,1; do
  out=$tmp/gpt2-both-$spread
  mpi 2 train --model "$tmp/gpt2" --ipu-config "$tmp/both.json" $(data_args gpt2) --micro-batch-size 2 --lr 1e-3 \
    --seed 4 --steps 3 --quiet --log "$out.jsonl" --output "$out" --devices-per-rank "$spread" >"$tmp/out.txt" 2>&1 &&
    same_output "--devices-per-rank $spread" "$tmp/gpt2-both-threads" "$out" ||
    bad "--devices-per-rank $spread: $(tail -3 "$tmp/out.txt")"
done

# Messages cut into 4 KiB chunks (as those above 1 GiB are) arrive whole.
out=$tmp/gpt2-both-chunks
BRIGADE_MPI_CHUNK=4096 mpi 2 train --model "$tmp/gpt2" --ipu-config "$tmp/both.json" $(data_args gpt2) --micro-batch-size 2 \
  --lr 1e-3 --seed 4 --steps 3 --quiet --log "$out.jsonl" --output "$out" >"$tmp/out.txt" 2>&1 &&
  same_output "4 KiB chunks" "$tmp/gpt2-both-threads" "$out" || bad "4 KiB chunks: $(tail -3 "$tmp/out.txt")"

# Rank 0 speaks for the run: one progress summary, not one per rank.
mpi 2 train --model "$tmp/gpt2" --ipu-config "$tmp/pipeline.json" $(data_args gpt2) --micro-batch-size 2 --steps 2 \
  --output "$tmp/talk" >"$tmp/out.txt" 2>"$tmp/err.txt"
(($(grep -c '^trained 2 steps' "$tmp/out.txt") == 1)) && ok || bad "summary lines: $(grep -c '^trained' "$tmp/out.txt")"
grep -q 'device 1: busy' "$tmp/out.txt" && ok || bad "rank 0's summary lacks rank 1's device: $(cat "$tmp/out.txt")"

# ---- forward --ipu-config over the ranks ----
bash "$here/../scripts/make-inputs.sh" "$tmp/in.st" 4 8 256 labels mask
echo '{"inference_replication_factor": 2, "ipus_per_replica": 2, "layers_per_ipu": [-1]}' >"$tmp/infer.json"
"$brigade" forward --model "$tmp/gpt2" --inputs "$tmp/in.st" --ipu-config "$tmp/infer.json" --output "$tmp/fwd-threads.st" \
  >/dev/null 2>"$tmp/err" || bad "forward threads: $(cat "$tmp/err")"
for np in 2 4; do
  mpi "$np" forward --model "$tmp/gpt2" --inputs "$tmp/in.st" --ipu-config "$tmp/infer.json" --output "$tmp/fwd-np$np.st" \
    >"$tmp/out.txt" 2>&1 || bad "forward over $np ranks: $(tail -3 "$tmp/out.txt")"
  cmp -s "$tmp/fwd-threads.st" "$tmp/fwd-np$np.st" && ok || bad "forward over $np ranks: other outputs"
done

# embed and pipeline --ipu-config: their inference pipelines spread over the ranks too.
fix=$here/fixtures
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_replication_factor": 2,
       "inference_device_iterations": 3}' >"$tmp/embed.json"
"$brigade" embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/embed.json" \
  >"$tmp/embed-threads.jsonl" 2>"$tmp/err" || bad "embed threads: $(cat "$tmp/err")"
mpi 4 embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/embed.json" \
  >"$tmp/embed-np4.jsonl" 2>"$tmp/err" || bad "embed over 4 ranks: $(tail -3 "$tmp/err")"
cmp -s "$tmp/embed-threads.jsonl" "$tmp/embed-np4.jsonl" && ok || bad "embed over 4 ranks: other embeddings"
for i in $(seq 1 8); do echo "{\"text\": \"hello world number $i\"}"; done >"$tmp/texts.jsonl"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1], "inference_replication_factor": 2}' \
  >"$tmp/classify.json"
classify() { "$@" pipeline text-classification --model "$fix/pipeline/text_classification" --input "$tmp/texts.jsonl" \
  --ipu-config "$tmp/classify.json" --batch-size 4; }
classify "$brigade" >"$tmp/classify-threads.jsonl" 2>"$tmp/err" || bad "pipeline threads: $(cat "$tmp/err")"
classify mpi 2 >"$tmp/classify-np2.jsonl" 2>"$tmp/err" || bad "pipeline over 2 ranks: $(tail -3 "$tmp/err")"
cmp -s "$tmp/classify-threads.jsonl" "$tmp/classify-np2.jsonl" && ok || bad "pipeline over 2 ranks: other answers"

# ---- layouts that do not fit ----
expect_mpi_fail() { # NAME NEEDLE NP ARGS...: mpirun fails, and the host's one line says why
  local name=$1 needle=$2 np=$3
  shift 3
  if mpi "$np" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then bad "$name: exit 0"; return; fi
  grep -qF -- "$needle" "$tmp/err.txt" && ok || bad "$name: stderr lacks '$needle': $(head -3 "$tmp/err.txt")"
  (($(grep -c '^brigade' "$tmp/err.txt") == 1)) && ok || bad "$name: not one line: $(cat "$tmp/err.txt")"
}
small=(train --model "$tmp/gpt2" --ipu-config "$tmp/pipeline.json" $(data_args gpt2) --steps 1 --quiet)
expect_mpi_fail too-many-ranks "3 ranks for 2 devices" 3 "${small[@]}" --output "$tmp/bad1"
expect_mpi_fail spread "--devices-per-rank 1 spreads the 4 devices over 4 ranks, and mpirun started 2" 2 \
  train --model "$tmp/gpt2" --ipu-config "$tmp/both.json" $(data_args gpt2) --steps 1 --quiet --devices-per-rank 1 \
  --output "$tmp/bad2"
expect_mpi_fail spread-list "--devices-per-rank lists 2 ranks with 3 devices" 2 "${small[@]}" --devices-per-rank 1,2 \
  --output "$tmp/bad3"
[[ -e $tmp/bad1/model.safetensors || -e $tmp/bad2/model.safetensors ]] && bad "a refused run wrote a model" || ok

# ---- a rank killed mid-run ----
rank_pid() { # LAUNCHER RANK: the pid of that rank among the launcher's descendants
  local p q
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
    q=$(rank_pid "$p" "$2")
    [[ -n $q ]] && { echo "$q"; return; }
  done
}
# Long enough that the kill lands mid-run however busy the machine is (steps are milliseconds).
STEPS=300
kill_args=(train --model "$tmp/gpt2" --ipu-config "$tmp/pipeline.json" $(data_args gpt2) --micro-batch-size 2 --lr 1e-3
  --seed 4 --steps $STEPS --quiet)
"$brigade" "${kill_args[@]}" --output "$tmp/kill-ref" >/dev/null 2>&1 || bad "the uninterrupted run failed"
# (timeout's 124 says the run outlived the 60 s it may take after the kill, and before it)
timeout 60 mpirun --oversubscribe --bind-to none -np 2 "$brigade" "${kill_args[@]}" --save-every 5 --save-total-limit 2 \
  --output "$tmp/killed" >"$tmp/kill-out.txt" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do # up to 30 s for the first checkpoint
  ls "$tmp/killed" 2>/dev/null | grep -qx "checkpoint-[0-9]*" && break
  sleep 0.05
done
rank1=$(rank_pid $launcher 1)
if [[ -z $rank1 ]]; then
  bad "no rank 1 to kill"
  kill $launcher 2>/dev/null
else
  kill -KILL "$rank1"
  killed_at=$(date +%s%N)
  wait $launcher
  rc=$?
  took_ms=$((($(date +%s%N) - killed_at) / 1000000))
  ((rc != 0)) && ok || bad "mpirun exited 0 after rank 1 was killed"
  ((rc != 124)) && ok || bad "rank 0 was still running 60 s after the start, ${took_ms} ms after rank 1 was killed"
  grep -q 'rank 1' "$tmp/kill-out.txt" && ok || bad "nothing names rank 1: $(tail -5 "$tmp/kill-out.txt")"
  echo "mpirun ended ${took_ms} ms after rank 1 was killed (status $rc)"
  last=$(ls "$tmp/killed" | sed -n 's/^checkpoint-\([0-9]*\)$/\1/p' | sort -n | tail -1)
  if [[ -z $last || $last -ge $STEPS ]]; then
    bad "the kill came too late to test: last checkpoint '$last' of $STEPS"
  else
    for f in config.json model.safetensors optimizer.safetensors trainer_state.json; do
      [[ -f $tmp/killed/checkpoint-$last/$f ]] || bad "checkpoint-$last lacks $f"
    done
    mpi 2 "${kill_args[@]}" --save-every 5 --save-total-limit 2 --resume "$tmp/killed" --output "$tmp/killed" \
      >"$tmp/out.txt" 2>&1 || bad "resuming from checkpoint-$last: $(tail -3 "$tmp/out.txt")"
    cmp -s "$tmp/kill-ref/model.safetensors" "$tmp/killed/model.safetensors" && ok ||
      bad "resumed from checkpoint-$last under mpirun, the weights differ from the uninterrupted run's"
  fi
fi

# ---- a rank that hangs: the others give up after --timeout ----
timeout 60 mpirun --oversubscribe --bind-to none -np 2 "$brigade" "${kill_args[@]}" --timeout 2 --save-every 5 \
  --output "$tmp/hung" >"$tmp/hang-out.txt" 2>&1 &
launcher=$!
for _ in $(seq 1 600); do
  ls "$tmp/hung" 2>/dev/null | grep -qx "checkpoint-[0-9]*" && break
  sleep 0.05
done
rank1=$(rank_pid $launcher 1)
[[ -n $rank1 ]] && kill -STOP "$rank1" || bad "no rank 1 to stop"
stopped_at=$(date +%s%N)
wait $launcher
rc=$?
took_ms=$((($(date +%s%N) - stopped_at) / 1000000))
[[ -n $rank1 ]] && kill -KILL "$rank1" 2>/dev/null
((rc != 0)) && ok || bad "mpirun exited 0 with rank 1 stopped"
((rc != 124)) && ok || bad "a hung rank held the run for 60 s (${took_ms} ms after it was stopped)"
grep -q 'rank 0, device 0 (replica 0, stage 0): no message from device 1 (rank 1) in 2 s' "$tmp/hang-out.txt" && ok ||
  bad "the timeout does not name rank 1: $(grep -v '^-\|^$' "$tmp/hang-out.txt" | head -5)"
echo "a stopped rank 1 was given up after ${took_ms} ms (status $rc)"

finish

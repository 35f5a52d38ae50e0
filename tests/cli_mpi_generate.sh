#!/usr/bin/env bash
# brigade generate under mpirun: the inference layout's devices (inference_layers_per_ipu stages x
# inference_replication_factor replicas) spread over 2 and 4 ranks, each rank running its stages'
# decode units and KV caches, and rank 0 prints output identical to the one-process run's, token
# for token, for GPT-2 and T5 (greedy, seeded sampling, beam search; pipeline, replicas, both;
# uneven --devices-per-rank spreads; T5's encoder split over ranks). A layout that does not fit
# the ranks is refused in one line; a bad prompt is reported in one line, also when only one rank
# has it; a rank killed mid-generate ends mpirun non-zero promptly; a rank that hangs is given up
# after --timeout, naming it.
# Skipped (exit 77) where mpirun or a brigade built with MPI is missing.
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"

source "$here/mpi_util.sh"
mpi_require

# ---- two tiny models, prompts and layouts ----
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 64 --seed 2 \
  --output "$tmp/gpt2" >/dev/null || bad "init gpt2"
"$brigade" init --arch T5ForConditionalGeneration --layers 2 --hidden 32 --heads 2 --vocab 512 --seed 1 \
  --output "$tmp/t5" >/dev/null || bad "init t5"
cp "$here/fixtures/tokenizers/unigram_t5/tokenizer.json" "$tmp/t5/"
for i in $(seq 1 7); do echo "{\"prompt\": \"the cat $i sat on the mat\"}"; done >"$tmp/prompts.jsonl"

echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1]}' >"$tmp/pipeline.json"
echo '{"inference_replication_factor": 2}' >"$tmp/replicas.json"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1], "inference_replication_factor": 2}' \
  >"$tmp/both.json"
# T5's 4 layers: the encoder split over the stages, or the decoder.
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 3]}' >"$tmp/enc-split.json"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [3, 1]}' >"$tmp/dec-split.json"

mode_args() {
  case $1 in
  greedy) echo "" ;;
  sample) echo "--do-sample --seed 5 --top-k 20 --temperature 0.8" ;;
  beams) echo "--num-beams 3 --num-return-sequences 2 --length-penalty 0.6" ;;
  esac
}

gen() { # MODEL LAYOUT MODE [mpirun -np N] [more flags]: the JSON lines on stdout
  local model=$1 layout=$2 mode=$3 np=${4:-}
  shift 4
  local args=(generate --model "$tmp/$model" --input "$tmp/prompts.jsonl" --ipu-config "$tmp/$layout.json"
    --max-new-tokens 6 --batch-size 2 --json --quiet $(mode_args "$mode") "$@")
  if [[ -n $np ]]; then mpi "$np" "${args[@]}"; else "$brigade" "${args[@]}"; fi
}

same() { # NAME REF MODEL LAYOUT MODE NP [flags]: the mpirun run prints REF, byte for byte
  local name=$1 ref=$2
  shift 2
  if ! gen "$@" >"$tmp/out.jsonl" 2>"$tmp/err.txt"; then
    bad "$name failed: $(grep -v '^-\|^$' "$tmp/err.txt" | head -3)"
    return
  fi
  cmp -s "$ref" "$tmp/out.jsonl" && ok || bad "$name: other tokens: $(diff "$ref" "$tmp/out.jsonl" | head -4)"
}

for model in gpt2 t5; do
  for layout in pipeline replicas both; do
    modes=(greedy)
    [[ $layout == both ]] && modes=(greedy sample beams)
    for mode in "${modes[@]}"; do
      ref=$tmp/$model-$layout-$mode.jsonl
      gen "$model" "$layout" "$mode" "" >"$ref" 2>"$tmp/err.txt" || { bad "$model $layout $mode: $(cat "$tmp/err.txt")"; continue; }
      (($(wc -l <"$ref") >= 7)) || bad "$model $layout $mode: $(wc -l <"$ref") lines"
      # 2 x 2 over 2 ranks is a replica per rank (replicas already); over 4, a stage per rank.
      nps=(2)
      [[ $layout == both ]] && nps=(4)
      [[ $layout == both && $mode == greedy ]] && nps=(2 4)
      for np in "${nps[@]}"; do same "$model $layout $mode over $np ranks" "$ref" "$model" "$layout" "$mode" "$np"; done
    done
  done
done
# The placement changes nothing either: the one-process run without --ipu-config gives the same.
"$brigade" generate --model "$tmp/t5" --input "$tmp/prompts.jsonl" --max-new-tokens 6 --batch-size 2 --json --quiet \
  $(mode_args beams) >"$tmp/t5-host.jsonl" 2>/dev/null && cmp -s "$tmp/t5-host.jsonl" "$tmp/t5-both-beams.jsonl" && ok ||
  bad "T5 beams: the one-process pipelined run differs from the host run"

# Uneven spreads of the 2 x 2 layout over 2 ranks: 1 + 3 and 3 + 1 devices.
for spread in 1,3 3,1; do
  same "--devices-per-rank $spread" "$tmp/gpt2-both-sample.jsonl" gpt2 both sample 2 --devices-per-rank "$spread"
done
# T5's encoder output crossing ranks (encoder split), the decoder split the other way, and no KV
# cache (the whole model on the first stage's rank, its logits sent to the other).
for layout in enc-split dec-split; do
  gen t5 "$layout" beams "" >"$tmp/t5-$layout.jsonl" 2>"$tmp/err.txt" || bad "t5 $layout: $(cat "$tmp/err.txt")"
  same "t5 $layout over 2 ranks" "$tmp/t5-$layout.jsonl" t5 "$layout" beams 2
done
gen t5 pipeline greedy "" --no-cache >"$tmp/t5-nocache.jsonl" 2>"$tmp/err.txt" || bad "t5 --no-cache: $(cat "$tmp/err.txt")"
same "t5 --no-cache over 2 ranks" "$tmp/t5-nocache.jsonl" t5 pipeline greedy 2 --no-cache
# Brigade's rank file: both replicas' first stage on rank 0, their second on rank 1.
printf 'rank 0: 0 2\nrank 1: 1 3\n' >"$tmp/stages.ranks"
same "--rank-file" "$tmp/t5-both-beams.jsonl" t5 both beams 2 --rank-file "$tmp/stages.ranks"
# Plain text, --prompt: rank 0 prints once.
"$brigade" generate --model "$tmp/gpt2" --prompt "hello" --max-new-tokens 5 --ipu-config "$tmp/both.json" \
  >"$tmp/prompt-ref.txt" 2>/dev/null || bad "generate --prompt"
mpi 4 generate --model "$tmp/gpt2" --prompt "hello" --max-new-tokens 5 --ipu-config "$tmp/both.json" \
  >"$tmp/prompt-np4.txt" 2>"$tmp/err.txt" || bad "generate --prompt over 4 ranks: $(head -3 "$tmp/err.txt")"
cmp -s "$tmp/prompt-ref.txt" "$tmp/prompt-np4.txt" && (($(wc -l <"$tmp/prompt-np4.txt") == 1)) && ok ||
  bad "generate --prompt over 4 ranks printed: $(cat "$tmp/prompt-np4.txt")"

# ---- refusals: one line from rank 0 ----
expect_mpi_fail() { # NAME NEEDLE NP ARGS...: mpirun fails, and stderr has one brigade line that says why
  local name=$1 needle=$2 np=$3
  shift 3
  if mpi "$np" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"; then bad "$name: exit 0"; return; fi
  grep -qF -- "$needle" "$tmp/err.txt" && ok || bad "$name: stderr lacks '$needle': $(head -3 "$tmp/err.txt")"
  (($(grep -c '^brigade' "$tmp/err.txt") == 1)) && ok || bad "$name: not one line: $(cat "$tmp/err.txt")"
  [[ -s $tmp/out.txt ]] && bad "$name: wrote $(head -c 200 "$tmp/out.txt")" || ok
}
one=(generate --model "$tmp/gpt2" --input "$tmp/prompts.jsonl" --max-new-tokens 3 --quiet)
expect_mpi_fail too-many-ranks "3 ranks for 2 devices" 3 "${one[@]}" --ipu-config "$tmp/pipeline.json"
expect_mpi_fail spread "--devices-per-rank 1 spreads the 4 devices over 4 ranks, and mpirun started 2" 2 \
  "${one[@]}" --ipu-config "$tmp/both.json" --devices-per-rank 1
{ cat "$tmp/prompts.jsonl"; echo '{"prompt": ""}'; } >"$tmp/empty.jsonl"
expect_mpi_fail empty-prompt "line 8: the prompt is empty" 2 generate --model "$tmp/gpt2" --input "$tmp/empty.jsonl" \
  --ipu-config "$tmp/pipeline.json" --quiet
# A prompt that only rank 1 finds bad (its copy of the input differs): that rank says so, once,
# and mpirun ends within seconds, not after the 300 s a rank waits for another.
cp "$tmp/prompts.jsonl" "$tmp/in-0.jsonl"
cp "$tmp/empty.jsonl" "$tmp/in-1.jsonl"
start=$(date +%s)
timeout 60 mpirun --oversubscribe --bind-to none -np 2 bash -c \
  "exec \"$brigade\" generate --model \"$tmp/gpt2\" --input \"$tmp/in-\$OMPI_COMM_WORLD_RANK.jsonl\" \
   --ipu-config \"$tmp/pipeline.json\" --quiet" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
((rc != 0 && rc != 124)) && ok || bad "a bad prompt on rank 1 only: mpirun status $rc"
(($(grep -c '^brigade generate (rank 1): line 8: the prompt is empty' "$tmp/err.txt") == 1)) && ok ||
  bad "a bad prompt on rank 1 only: $(grep -v '^-\|^$' "$tmp/err.txt" | head -5)"
(($(grep -c '^brigade' "$tmp/err.txt") == 1)) && ok || bad "a bad prompt on rank 1 only: not one line: $(cat "$tmp/err.txt")"
echo "a bad prompt on rank 1 only ended mpirun in $(($(date +%s) - start)) s (status $rc)"

# ---- a rank killed mid-generate, a rank that hangs ----
rank_pid() { # LAUNCHER RANK: the pid of that rank among the launcher's descendants
  local p q
  for p in $(pgrep -P "$1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
    q=$(rank_pid "$p" "$2")
    [[ -n $q ]] && { echo "$q"; return; }
  done
}
# 192 prompts of 40 new tokens each, written in waves of 64: the kill comes once the first
# wave is out, and the run is far from done.
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 256 --seed 2 \
  --output "$tmp/long" >/dev/null || bad "init long"
for i in $(seq 1 192); do echo "{\"prompt\": \"prompt $i\"}"; done >"$tmp/long.jsonl"
long=(generate --model "$tmp/long" --input "$tmp/long.jsonl" --ipu-config "$tmp/pipeline.json" --max-new-tokens 40
  --eos-token-id none --batch-size 1 --quiet)
stop_rank1() { # SIGNAL OUT: starts the long run, signals rank 1 after the first wave; sets rc, took_ms, lines
  local sig=$1 out=$2
  shift 2
  timeout 60 mpirun --oversubscribe --bind-to none -np 2 "$brigade" "${long[@]}" "$@" >"$out.txt" 2>"$out.err" &
  local launcher=$! rank1=""
  for _ in $(seq 1 600); do # up to 30 s for the first wave
    [[ -s $out.txt ]] && break
    sleep 0.05
  done
  rank1=$(rank_pid $launcher 1)
  if [[ -z $rank1 ]]; then
    bad "no rank 1 to signal"
    kill $launcher 2>/dev/null
  else
    kill -"$sig" "$rank1"
  fi
  local at=$(date +%s%N)
  wait $launcher
  rc=$?
  took_ms=$((($(date +%s%N) - at) / 1000000))
  [[ -n $rank1 ]] && kill -KILL "$rank1" 2>/dev/null
  lines=$(wc -l <"$out.txt")
}
stop_rank1 KILL "$tmp/killed"
((rc != 0)) && ok || bad "mpirun exited 0 after rank 1 was killed"
((rc != 124)) && ok || bad "rank 0 was still running 60 s after the start, ${took_ms} ms after rank 1 was killed"
((lines < 192)) && ok || bad "the kill came too late to test: all $lines lines out"
grep -q 'rank 1' "$tmp/killed.err" && ok || bad "nothing names rank 1: $(tail -5 "$tmp/killed.err")"
echo "mpirun ended ${took_ms} ms after rank 1 was killed (status $rc, $lines of 192 lines out)"

stop_rank1 STOP "$tmp/hung" --timeout 1
((rc != 0)) && ok || bad "mpirun exited 0 with rank 1 stopped"
((rc != 124)) && ok || bad "a hung rank held the run for 60 s (${took_ms} ms after it was stopped)"
grep -q "rank 0, device 0 (replica 0, stage 0): request [0-9]*: no message from device 1 (rank 1) in 1 s (the step's logits)" \
  "$tmp/hung.err" && ok ||
  bad "the timeout does not name rank 1: $(grep -v '^-\|^$' "$tmp/hung.err" | head -5)"
echo "a stopped rank 1 was given up after ${took_ms} ms (status $rc)"

finish

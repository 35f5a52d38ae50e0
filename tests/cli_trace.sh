#!/usr/bin/env bash
# --trace FILE.json on train, forward, generate, embed and pipeline (a Chrome trace-event file: one event per
# block, micro-batch and direction of a pipelined step; an unwritable path refused before the run
# with one line), and the progress of long commands off a terminal (plain lines at the rate
# BRIGADE_PROGRESS_INTERVAL sets; nothing for short work by default; --quiet silences it) and on
# one (a bar, through script(1) when it is there). test_trace.c reads traces back as JSON.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
fix=$(dirname "$0")/fixtures

# Events of the trace whose name matches the regular expression (one event per line in the file).
events() { grep -cE "\"name\": \"$2\"" "$1"; }

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
cat >"$tmp/ipu.json" <<'JSON'
{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 4}
JSON
run_train() { "$brigade" train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse --rows 64 \
  --sequence-length 16 --lr 1e-3 "$@"; }

# ---- train: 2 steps of 4 blocks x 4 micro-batches, forward and backward ----
expect_ok "train --trace" run_train --steps 2 --output "$tmp/out" --trace "$tmp/train.json" --quiet
head -c 16 "$tmp/train.json" | grep -q '^{"traceEvents": ' && ok || bad "train trace does not start as a trace-event file"
tail -3 "$tmp/train.json" | grep -q '"displayTimeUnit": "ms"' && ok || bad "train trace: no displayTimeUnit"
n=$(events "$tmp/train.json" "forward block [0-3] mb [0-3]")
((n == 32)) && ok || bad "train trace: $n forward events, wanted 2 steps x 4 blocks x 4 micro-batches"
n=$(events "$tmp/train.json" "backward block [0-3] mb [0-3]")
((n == 32)) && ok || bad "train trace: $n backward events, wanted 32"
n=$(grep -E '"name": "send forward mb [0-3] to device 1"' "$tmp/train.json" | grep -cE '"bytes": [1-9]')
((n == 8)) && ok || bad "train trace: $n forward sends with bytes, wanted 8"
for want in 'device 0 \(replica 0, stage 0\)' 'device 1 \(replica 0, stage 1\)' 'host' 'memory device 0' 'memory device 1' \
  'optimizer step' 'all-reduce' 'step 2' 'data 2' 'load model' 'checkpoint 2'; do
  grep -qE "\"name\": \"$want\"" "$tmp/train.json" && ok || bad "train trace lacks '$want'"
done
ls "$tmp"/train.json.tmp.* >/dev/null 2>&1 && bad "train trace left a temporary" || ok

# An unwritable trace is refused before anything runs: one line, exit 1, no output folder.
expect_fail "train --trace in a missing folder" 1 "--trace $tmp/nowhere/t.json" \
  run_train --steps 2 --output "$tmp/refused" --trace "$tmp/nowhere/t.json"
[[ ! -e $tmp/refused ]] && ok || bad "a refused --trace still started the run"
expect_fail "train --trace on a folder" 1 "--trace $tmp" run_train --steps 2 --output "$tmp/refused" --trace "$tmp"

# A run that fails still writes what it did: here a --device-memory budget too small to start.
"$brigade" train --model "$tmp/m" --data builtin:reverse --rows 64 --sequence-length 16 --steps 1 --output "$tmp/oom" \
  --device-memory 64KiB --trace "$tmp/failed.json" --quiet >/dev/null 2>&1 && bad "the 64KiB run trained" || ok
grep -q '"name": "load model"' "$tmp/failed.json" 2>/dev/null && ok || bad "a failed run wrote no trace"

# ---- forward: one host span, or through the inference pipeline micro-batches on both devices ----
cat >"$tmp/infer.json" <<'JSON'
{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_device_iterations": 2}
JSON
bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in4.st" 4 8 256 labels mask
expect_ok "forward --trace" "$brigade" forward --model "$tmp/m" --inputs "$tmp/in4.st" --output "$tmp/o1.st" \
  --trace "$tmp/fwd.json"
n=$(events "$tmp/fwd.json" "forward")
((n == 1)) && ok || bad "forward trace: $n host forward spans"
expect_ok "pipelined forward --trace" "$brigade" forward --model "$tmp/m" --inputs "$tmp/in4.st" --output "$tmp/o2.st" \
  --ipu-config "$tmp/infer.json" --trace "$tmp/fwd_pipe.json"
n=$(events "$tmp/fwd_pipe.json" "forward block [0-3] mb [01]")
((n == 8)) && ok || bad "pipelined forward trace: $n block events, wanted 4 blocks x 2 micro-batches"
n=$(events "$tmp/fwd_pipe.json" "backward block.*")
((n == 0)) && ok || bad "pipelined forward trace: $n backward events"
expect_fail "forward --trace in a missing folder" 1 "--trace $tmp/nowhere/f.json" \
  "$brigade" forward --model "$tmp/m" --inputs "$tmp/in4.st" --output "$tmp/o3.st" --trace "$tmp/nowhere/f.json"
[[ ! -e $tmp/o3.st ]] && ok || bad "a refused --trace still ran forward"

# ---- generate: prefill and decode steps on the host track ----
gpt2=$fix/generate_gpt2
expect_ok "generate --trace" "$brigade" generate --model "$gpt2" --prompt "The quick brown fox" --max-new-tokens 5 \
  --trace "$tmp/gen.json"
n=$(events "$tmp/gen.json" "prefill")
((n == 1)) && ok || bad "generate trace: $n prefill events"
n=$(events "$tmp/gen.json" "decode step [0-9]+")
((n == 4)) && ok || bad "generate trace: $n decode steps, wanted 4 (the fifth token needs no step)"
expect_fail "generate --trace in a missing folder" 1 "--trace $tmp/nowhere/g.json" \
  "$brigade" generate --model "$gpt2" --prompt "x" --trace "$tmp/nowhere/g.json"

# ---- embed: pipelined batches ----
emb=$fix/embed_mean
cat >"$tmp/embed_ipu.json" <<'JSON'
{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1, -1], "ipus_per_replica": 2, "layers_per_ipu": [-1, -1]}
JSON
expect_ok "embed --trace" "$brigade" embed --model "$emb" --input "$emb/sentences.txt" --batch-size 2 \
  --trace "$tmp/embed.json"
n=$(events "$tmp/embed.json" "forward batch [0-9]+")
lines=$(wc -l <"$emb/sentences.txt")
((n == (lines + 1) / 2)) && ok || bad "embed trace: $n batches for $lines lines"
if "$brigade" embed --model "$emb" --input "$emb/sentences.txt" --batch-size 2 --ipu-config "$tmp/embed_ipu.json" \
  --trace "$tmp/embed_pipe.json" >/dev/null 2>"$tmp/err"; then
  n=$(events "$tmp/embed_pipe.json" "forward block [0-9]+ mb [0-9]+")
  ((n > 0)) && ok || bad "pipelined embed trace: no per-block events"
  grep -q '"name": "device 1 (replica 0, stage 1)"' "$tmp/embed_pipe.json" && ok || bad "pipelined embed: no device 1 track"
else
  bad "pipelined embed: $(cat "$tmp/err")"
fi

# ---- pipeline: a task's forward passes, block by block on a 2-stage inference pipeline ----
vit=$fix/image_cls_vit
echo '{"inference_layers_per_ipu": [1, 1]}' >"$tmp/vit_ipu.json"
expect_ok "pipeline --trace" "$brigade" pipeline image-classification --model "$vit" \
  --image "$fix/images/rgb_37x23.png" --ipu-config "$tmp/vit_ipu.json" --trace "$tmp/pipe.json"
n=$(events "$tmp/pipe.json" "forward block [0-9]+ mb [0-9]+")
((n > 0)) && ok || bad "pipeline trace: no per-block events"
grep -q '"name": "device 1 (replica 0, stage 1)"' "$tmp/pipe.json" && ok || bad "pipeline trace: no device 1 track"
expect_fail pipeline-unwritable-trace 1 "--trace $tmp/none/t.json: cannot create" "$brigade" pipeline image-classification \
  --model "$vit" --image "$fix/images/rgb_37x23.png" --trace "$tmp/none/t.json"

# ---- progress off a terminal ----
seq 1 7 | sed 's/^/sentence number /' >"$tmp/seven.txt"
# Short work prints nothing by default (the interval is 10 s).
"$brigade" embed --model "$emb" --input "$tmp/seven.txt" --batch-size 2 >/dev/null 2>"$tmp/err" && [[ ! -s $tmp/err ]] && ok ||
  bad "embed printed on stderr: $(cat "$tmp/err")"
# Interval 0: a line per batch, the total known from the file, then the last line.
BRIGADE_PROGRESS_INTERVAL=0 "$brigade" embed --model "$emb" --input "$tmp/seven.txt" --batch-size 2 >/dev/null 2>"$tmp/err" || bad "embed"
lines_re='^embed: [1-6]/7 lines  [0-9.]+ lines/s  ETA [0-9]+:[0-9][0-9]$'
n=$(grep -cE "$lines_re" "$tmp/err")
((n == 3)) && ok || bad "embed progress: $n lines like '$lines_re' in: $(cat "$tmp/err")"
tail -1 "$tmp/err" | grep -qE '^embed: 7 lines in [0-9]+:[0-9][0-9] \([0-9.]+ lines/s\)$' && ok || bad "embed last line: $(tail -1 "$tmp/err")"
(($(wc -l <"$tmp/err") == 4)) && ok || bad "embed progress: $(wc -l <"$tmp/err") lines"
# stdin: no total, the count and the rate.
BRIGADE_PROGRESS_INTERVAL=0 "$brigade" embed --model "$emb" --batch-size 4 <"$tmp/seven.txt" >/dev/null 2>"$tmp/err" || bad "embed stdin"
head -1 "$tmp/err" | grep -qE '^embed: 4 lines  [0-9.]+ lines/s$' && ok || bad "embed stdin progress: $(cat "$tmp/err")"
# --quiet: nothing.
BRIGADE_PROGRESS_INTERVAL=0 "$brigade" embed --model "$emb" --input "$tmp/seven.txt" --quiet >/dev/null 2>"$tmp/err" &&
  [[ ! -s $tmp/err ]] && ok || bad "embed --quiet printed: $(cat "$tmp/err")"
# generate over a file: prompts.
printf '{"prompt": "one"}\n{"prompt": "two"}\n{"prompt": "three"}\n' >"$tmp/p.jsonl"
BRIGADE_PROGRESS_INTERVAL=0 "$brigade" generate --model "$gpt2" --input "$tmp/p.jsonl" --batch-size 1 --max-new-tokens 2 \
  >/dev/null 2>"$tmp/err" || bad "generate --input"
n=$(grep -cE '^generate: [12]/3 prompts  [0-9.]+ prompts/s  ETA [0-9]+:[0-9][0-9]$' "$tmp/err")
((n == 2)) && ok || bad "generate progress: $(cat "$tmp/err")"
tail -1 "$tmp/err" | grep -qE '^generate: 3 prompts in ' && ok || bad "generate last line: $(tail -1 "$tmp/err")"
# train keeps its own lines off a terminal (the last step's line always among them).
run_train --steps 3 --output "$tmp/lines" >"$tmp/out.txt" 2>&1 || bad "train"
grep -qE '^step 3/3  epoch [0-9.]+  loss [0-9.]+(  ppl [0-9.e+]+)?  lr [0-9.e+-]+  [0-9]+ tokens/s  ETA [0-9]+s$' "$tmp/out.txt" && ok ||
  bad "train progress line: $(grep '^step' "$tmp/out.txt")"

# ---- on a terminal: a bar (script(1) gives the command a pseudo-terminal) ----
if command -v script >/dev/null 2>&1; then
  script -qec "$brigade embed --model $emb --input $tmp/seven.txt --batch-size 7 >/dev/null" "$tmp/typescript" >/dev/null 2>&1
  grep -qaE '\[=+\] 7/7 lines  [0-9.]+ lines/s  ETA 0:00' "$tmp/typescript" && ok || bad "embed bar: $(cat -v "$tmp/typescript")"
  script -qec "$brigade train --model $tmp/m --ipu-config $tmp/ipu.json --data builtin:reverse --rows 64 --sequence-length 16 --steps 2 --output $tmp/bar" \
    "$tmp/typescript" >/dev/null 2>&1
  grep -qaE '\[=+\] 2/2 steps  [0-9.]+ steps/s  ETA 0:00  epoch [0-9.]+  loss [0-9.]+' "$tmp/typescript" && ok ||
    bad "train bar: $(cat -v "$tmp/typescript" | tail -5)"
fi

echo "$passed passed, $failed failed"
((failed == 0))

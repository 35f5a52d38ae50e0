#!/usr/bin/env bash
# brigade train on seq2seq pairs and on SQuAD question answering through the model folder's
# tokenizer: a tiny random T5 (with the Unigram tokenizer fixture) learns {"source", "target"}
# pairs with --source-prefix and --max-target-length and reports its eval loss; a tiny random
# BERT QA model learns answer spans from SQuAD rows cut into windows by --doc-stride; bad data
# files are refused in one line that names the file and the example.
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"

# The first and the mean of the last three logged losses.
first_loss() { grep -m1 '"loss"' "$1" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
last_loss() { grep '"loss"' "$1" | tail -3 | sed 's/.*"loss": \([^,]*\),.*/\1/' | awk '{ s += $1 } END { print s / NR }'; }

# ---- seq2seq: T5ForConditionalGeneration on {"source", "target"} pairs ----
"$brigade" init --arch T5ForConditionalGeneration --layers 2 --hidden 32 --heads 2 --vocab 512 --seed 1 \
  --output "$tmp/t5" >/dev/null || bad "init t5"
cp "$here/fixtures/tokenizers/unigram_t5/tokenizer.json" "$tmp/t5/"
animals=(cat dog fox bird cow pig) places=(mat log box bed hat car)
for i in $(seq 0 63); do
  x=${animals[$((i % 6))]} y=${places[$(((i / 6) % 6))]}
  echo "{\"source\": \"the $x sat on the $y\", \"target\": \"$x $y\"}"
done >"$tmp/s2s.jsonl"
head -16 "$tmp/s2s.jsonl" | sed 's/ sat / lay /' >"$tmp/s2s-eval.jsonl"
train_t5() {
  "$brigade" train --model "$tmp/t5" --source-prefix "summarize: " --sequence-length 16 --max-target-length 8 \
    --micro-batch-size 8 --lr 3e-3 --lr-schedule constant --seed 3 "$@"
}
expect_ok t5-train train_t5 --data "$tmp/s2s.jsonl" --eval-data "$tmp/s2s-eval.jsonl" --epochs 20 --eval-every 80 \
  --log "$tmp/t5.jsonl" --output "$tmp/t5-out"
first=$(first_loss "$tmp/t5.jsonl") last=$(last_loss "$tmp/t5.jsonl")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 4) }' && ok || bad "seq2seq loss $first -> $last"
(($(grep -cE '^\{"step": (80|160), "eval_loss": [0-9.e+-]+, "eval_perplexity": [0-9.e+-]+\}$' "$tmp/t5.jsonl") == 2)) &&
  ok || bad "seq2seq eval lines: $(grep eval "$tmp/t5.jsonl")"
eval_loss=$(grep '"eval_loss"' "$tmp/t5.jsonl" | tail -1 | sed 's/.*"eval_loss": \([^,]*\),.*/\1/')
awk -v a="$first" -v b="$eval_loss" 'BEGIN { exit !(b < a / 4) }' && ok || bad "seq2seq eval loss $eval_loss (first loss $first)"
grep -qE '^step 160: eval loss [0-9.]+, perplexity [0-9.]+$' "$tmp/out.txt" && ok || bad "progress: $(grep eval "$tmp/out.txt")"
[[ -f $tmp/t5-out/tokenizer.json && -f $tmp/t5-out/model.safetensors ]] && ok || bad "the trained T5 folder is incomplete"
# The prefix and the target length change what is trained on: other losses.
train_t5 --data "$tmp/s2s.jsonl" --steps 3 --log "$tmp/t5-a.jsonl" --output "$tmp/t5-a" --quiet >/dev/null 2>&1 || bad "t5 run a"
train_t5 --data "$tmp/s2s.jsonl" --steps 3 --log "$tmp/t5-b.jsonl" --output "$tmp/t5-b" --quiet --source-prefix "" \
  >/dev/null 2>&1 || bad "t5 run b"
[[ $(cut -d, -f2 "$tmp/t5-a.jsonl") != $(cut -d, -f2 "$tmp/t5-b.jsonl") ]] && ok || bad "--source-prefix changed nothing"
# The same pairs as CSV.
{
  echo 'source,target'
  sed 's/{"source": "\(.*\)", "target": "\(.*\)"}/"\1, ""quoted""",\2/' "$tmp/s2s.jsonl"
} >"$tmp/s2s.csv"
expect_ok t5-csv train_t5 --data "$tmp/s2s.csv" --steps 2 --output "$tmp/t5-csv" --log "$tmp/t5-csv.jsonl" --quiet
(($(grep -c '"loss"' "$tmp/t5-csv.jsonl") == 2)) && ok || bad "csv run log: $(cat "$tmp/t5-csv.jsonl")"

printf '{"source": "a b", "target": "a"}\n{"source": "c d"}\n' >"$tmp/notarget.jsonl"
expect_fail s2s-missing 1 "dataset $tmp/notarget.jsonl: line 2: missing field 'target'" \
  train_t5 --data "$tmp/notarget.jsonl" --steps 1 --output "$tmp/bad1"
: >"$tmp/empty.jsonl"
expect_fail s2s-empty 1 "empty.jsonl: no examples in the file" train_t5 --data "$tmp/empty.jsonl" --steps 1 --output "$tmp/bad2"
expect_fail s2s-target-length 1 "--max-target-length 0: give at least 1" \
  train_t5 --data "$tmp/s2s.jsonl" --steps 1 --max-target-length 0 --output "$tmp/bad3"

# ---- question answering: BertForQuestionAnswering on SQuAD ----
"$brigade" init --arch BertForQuestionAnswering --layers 2 --hidden 32 --heads 2 --vocab 1405 --positions 64 --seed 1 \
  --output "$tmp/bert-qa" >/dev/null || bad "init bert qa"
cp "$here/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/bert-qa/"
# Rows as the hub's squad dataset has them; the answer is the animal, wherever the context puts it.
for i in $(seq 0 63); do
  x=${animals[$((i % 6))]} y=${places[$(((i / 6) % 6))]}
  if ((i % 2)); then before="on the $y sat the " after=" and then it slept" question="who sat on the $y"
  else before="the " after=" ran to the $y and then it slept" question="  who ran"; fi
  echo "{\"id\": \"q$i\", \"question\": \"$question\", \"context\": \"$before$x$after\", \"answers\": {\"text\": [\"$x\"], \"answer_start\": [${#before}]}}"
done >"$tmp/qa.jsonl"
head -16 "$tmp/qa.jsonl" >"$tmp/qa-eval.jsonl"
train_qa() {
  "$brigade" train --model "$tmp/bert-qa" --sequence-length 24 --doc-stride 4 --micro-batch-size 8 --lr 2e-3 \
    --lr-schedule constant --seed 3 "$@"
}
expect_ok qa-train train_qa --data "$tmp/qa.jsonl" --eval-data "$tmp/qa-eval.jsonl" --epochs 10 --eval-every 50 \
  --log "$tmp/qa-log.jsonl" --output "$tmp/qa-out"
first=$(first_loss "$tmp/qa-log.jsonl") last=$(last_loss "$tmp/qa-log.jsonl")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 4) }' && ok || bad "question-answering loss $first -> $last"
# 64 contexts of 9 to 11 tokens next to their question: several windows each, so 15 steps an epoch.
(($(grep -c '"loss"' "$tmp/qa-log.jsonl") == 150)) && ok || bad "qa steps: $(grep -c '"loss"' "$tmp/qa-log.jsonl")"
grep -qE '^\{"step": 150, "eval_loss": [0-9.e+-]+\}$' "$tmp/qa-log.jsonl" && ok || bad "qa eval: $(grep eval "$tmp/qa-log.jsonl")"
# SQuAD's own file form, with the default stride too long for short rows said so.
expect_ok qa-squad-json train_qa --data "$here/fixtures/text_data/squad.json" --sequence-length 40 --doc-stride 8 \
  --steps 2 --output "$tmp/qa-json" --quiet
expect_fail qa-stride 1 "data[0].paragraphs[0].qas[0] (id q1): --doc-stride 128 must be less than the 22 context tokens" \
  "$brigade" train --model "$tmp/bert-qa" --data "$here/fixtures/text_data/squad.json" --sequence-length 40 --steps 1 \
  --output "$tmp/bad4"

qa_line() { echo "{\"id\": \"z\", \"question\": \"who\", \"context\": \"the cat sat\", $1}"; }
{ qa_line '"answers": {"text": [], "answer_start": []}'; qa_line '"answers": {"text": ["cat"], "answer_start": [30]}'; } >"$tmp/outside.jsonl"
expect_fail qa-outside 1 "outside.jsonl: line 2: answer_start 30 puts the answer's 3 characters outside the context (11 characters)" \
  train_qa --data "$tmp/outside.jsonl" --steps 1 --micro-batch-size 1 --output "$tmp/bad5"
qa_line '"answers": {"text": ["dog"], "answer_start": [4]}' >"$tmp/mismatch.jsonl"
expect_fail qa-mismatch 1 "mismatch.jsonl: line 1: answer 'dog' is not the context's text at answer_start 4 ('cat')" \
  train_qa --data "$tmp/mismatch.jsonl" --steps 1 --micro-batch-size 1 --output "$tmp/bad6"
echo '{"question": "who", "answers": {"text": [], "answer_start": []}}' >"$tmp/nocontext.jsonl"
expect_fail qa-missing 1 "nocontext.jsonl: line 1: missing field 'context'" \
  train_qa --data "$tmp/nocontext.jsonl" --steps 1 --micro-batch-size 1 --output "$tmp/bad7"
echo '{"version": "v1.1", "data": [{"paragraphs": [{"context": "x", "qas": [{"id": "a1", "answers": []}]}]}]}' >"$tmp/noq.json"
expect_fail qa-missing-json 1 "noq.json: data[0].paragraphs[0].qas[0] (id a1): missing field 'question'" \
  train_qa --data "$tmp/noq.json" --steps 1 --micro-batch-size 1 --output "$tmp/bad8"
: >"$tmp/empty.json"
expect_fail qa-empty-json 1 "empty.json" train_qa --data "$tmp/empty.json" --steps 1 --output "$tmp/bad9"
expect_fail qa-empty 1 "empty.jsonl: no examples in the file" train_qa --data "$tmp/empty.jsonl" --steps 1 --output "$tmp/bad10"
for d in bad1 bad2 bad3 bad4 bad5 bad6 bad7 bad8 bad9 bad10; do [[ -e $tmp/$d ]] && bad "$d written by a failed run"; done
ok

finish

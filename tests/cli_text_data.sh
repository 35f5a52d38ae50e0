#!/usr/bin/env bash
# brigade train on text through the model folder's tokenizer, for the objectives beyond causal LM:
# fine-tuning a BERT classifier on JSONL (and CSV) examples end to end, as the README shows it
# (eval loss and accuracy in the log, the progress line and trainer_state.json; the trained folder
# is a model again), masked-LM training from lines, and bad data files refused in one line that
# names the file and the line.
set -uo pipefail
brigade=$1
here=$(dirname "$0")
source "$here/shell_util.sh"

# ---- the README's flow: a BERT classifier with a tokenizer, JSONL examples, train, evaluate ----
"$brigade" init --arch BertForSequenceClassification --labels 2 --layers 2 --hidden 32 --heads 2 --vocab 1405 \
  --positions 32 --seed 1 --output "$tmp/bert-cls" >/dev/null || bad "init bert"
sed -i 's/LABEL_0/negative/; s/LABEL_1/positive/' "$tmp/bert-cls/config.json" # name the classes
cp "$here/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/bert-cls/"
grep -q '"BertForSequenceClassification"' "$tmp/bert-cls/config.json" && grep -q '"positive":' "$tmp/bert-cls/config.json" &&
  ok || bad "init config: $(cat "$tmp/bert-cls/config.json")"
good=(good great wonderful fine nice happy) poor=(bad awful terrible poor sad boring)
for i in $(seq 0 63); do
  if ((i % 2)); then w=${good[$((i % 6))]}; echo "{\"text\": \"the film was $w and the music was $w\", \"label\": \"positive\"}"
  else w=${poor[$(((i / 6) % 6))]}; echo "{\"text\": \"the film was $w and the music was $w\", \"label\": \"negative\"}"; fi
done >"$tmp/train.jsonl"
head -16 "$tmp/train.jsonl" | sed 's/film/movie/; s/"label": "negative"/"label": 0/' >"$tmp/eval.jsonl"
train_cls() {
  "$brigade" train --model "$tmp/bert-cls" --sequence-length 16 --micro-batch-size 8 --lr 1e-3 \
    --lr-schedule constant --seed 3 "$@"
}
expect_ok train-jsonl train_cls --epochs 20 --data "$tmp/train.jsonl" --eval-data "$tmp/eval.jsonl" --eval-every 80 \
  --log "$tmp/cls.jsonl" --output "$tmp/cls-out"
first=$(grep -m1 '"loss"' "$tmp/cls.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
last=$(grep '"loss"' "$tmp/cls.jsonl" | tail -1 | sed 's/.*"loss": \([^,]*\),.*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 4) }' && ok || bad "classification loss $first -> $last"
# Evaluations: eval loss and accuracy, with transformers' key names, in the log, the progress line
# and log_history; the model learns the task.
(($(grep -cE '^\{"step": (80|160), "eval_loss": [0-9.e+-]+, "eval_accuracy": [0-9.e+-]+\}$' "$tmp/cls.jsonl") == 2)) &&
  ok || bad "eval lines: $(grep eval "$tmp/cls.jsonl")"
accuracy=$(grep '"eval_accuracy"' "$tmp/cls.jsonl" | tail -1 | sed 's/.*"eval_accuracy": \([^}]*\)}/\1/')
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.9) }' && ok || bad "eval accuracy $accuracy"
grep -qE '^step 160: eval loss [0-9.]+, accuracy [0-9.]+$' "$tmp/out.txt" && ok || bad "progress: $(grep eval "$tmp/out.txt")"
grep -q '"eval_accuracy"' "$tmp/cls-out/checkpoint-160/trainer_state.json" && ok || bad "eval_accuracy not in log_history"
grep -q '"eval_perplexity"' "$tmp/cls.jsonl" && bad "a classifier reports perplexity" || ok
for f in config.json model.safetensors tokenizer.json ipu_config.json; do
  [[ -f $tmp/cls-out/$f ]] && ok || bad "the trained folder lacks $f"
done
# The trained folder is a classifier again: tokenize through its tokenizer, run forward on ids.
out=$(echo 'the film was great' | "$brigade" tokenize --model "$tmp/cls-out") && [[ $out == '{"input_ids": [2, '* ]] && ok ||
  bad "tokenize on the trained folder: $out"
bash "$here/../scripts/make-inputs.sh" "$tmp/in.st" 2 8 1405 >/dev/null
"$brigade" forward --model "$tmp/cls-out" --inputs "$tmp/in.st" --output "$tmp/o.st" >/dev/null && ok || bad "forward on the trained folder"
# The same examples as CSV train the same way: RFC 4180 quoting, a header naming the columns.
{
  echo 'text,label'
  sed 's/{"text": "\(.*\)", "label": "\(.*\)"}/"\1, ""quoted""",\2/' "$tmp/train.jsonl"
} >"$tmp/train.csv"
expect_ok train-csv train_cls --data "$tmp/train.csv" --steps 4 --output "$tmp/csv-out" --log "$tmp/csv.jsonl" --quiet
(($(grep -c '"loss"' "$tmp/csv.jsonl") == 4)) && ok || bad "csv run log: $(cat "$tmp/csv.jsonl")"
# A pair of texts ("text_pair") and integer labels.
printf '{"text": "is it good", "text_pair": "yes it is", "label": 1}\n{"text": "is it good", "text_pair": "no", "label": 0}\n' \
  >"$tmp/pairs.jsonl"
expect_ok train-pairs train_cls --data "$tmp/pairs.jsonl" --micro-batch-size 2 --steps 2 --output "$tmp/pair-out" --quiet

# ---- bad data: one line naming the file and the line, exit 1, nothing written ----
printf '{"text": "fine", "label": "positive"}\n{"text": "meh", "label": "happy"}\n' >"$tmp/badlabel.jsonl"
expect_fail bad-label 1 "dataset $tmp/badlabel.jsonl: line 2: label 'happy' is not one of config.json's label2id names (negative, positive)" \
  train_cls --data "$tmp/badlabel.jsonl" --steps 1 --output "$tmp/bad1"
printf '{"text": "fine", "label": 1}\n{"text": "meh"}\n' >"$tmp/nolabel.jsonl"
expect_fail missing-label 1 "nolabel.jsonl: line 2: missing field 'label'" train_cls --data "$tmp/nolabel.jsonl" --steps 1 --output "$tmp/bad2"
printf '{"text": "fine", "label": 2}\n' >"$tmp/range.jsonl"
expect_fail label-range 1 "range.jsonl: line 1: label 2 is outside the model's 2 classes [0, 2)" train_cls --data "$tmp/range.jsonl" --steps 1 --output "$tmp/bad3"
printf 'text,label\nfine,positive\nsaid "no",negative\n' >"$tmp/quote.csv"
expect_fail csv-quote 1 "quote.csv: line 3: a quote inside unquoted field 1" train_cls --data "$tmp/quote.csv" --steps 1 --output "$tmp/bad4"
printf 'text,label\n"open,positive\n' >"$tmp/open.csv"
expect_fail csv-open 1 "open.csv: line 2: a quoted field is not closed before the end of the file" train_cls --data "$tmp/open.csv" --steps 1 --output "$tmp/bad5"
: >"$tmp/empty.jsonl"
expect_fail empty 1 "empty.jsonl: no examples in the file" train_cls --data "$tmp/empty.jsonl" --steps 1 --output "$tmp/bad6"
: >"$tmp/empty.csv"
expect_fail empty-csv 1 "empty.csv: empty CSV file" train_cls --data "$tmp/empty.csv" --steps 1 --output "$tmp/bad7"
expect_fail bad-eval 1 "badlabel.jsonl: line 2" train_cls --data "$tmp/train.jsonl" --eval-data "$tmp/badlabel.jsonl" --steps 1 --output "$tmp/bad8"
for d in bad1 bad2 bad3 bad4 bad5 bad6 bad7 bad8; do [[ -e $tmp/$d ]] && bad "$d written by a failed run"; done
ok

# ---- masked LM: lines of text, masks drawn per step ----
"$brigade" init --arch BertForMaskedLM --layers 2 --hidden 32 --heads 2 --vocab 1405 --positions 32 --seed 2 \
  --output "$tmp/bert-mlm" >/dev/null || bad "init bert masked-lm"
cp "$here/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/bert-mlm/"
for i in $(seq 1 60); do echo "the cat sat on the mat and the dog sat on the log number $((i % 5))"; done >"$tmp/corpus.txt"
head -8 "$tmp/corpus.txt" >"$tmp/corpus-eval.txt"
train_mlm() {
  "$brigade" train --model "$tmp/bert-mlm" --data "$tmp/corpus.txt" --sequence-length 16 --micro-batch-size 8 \
    --lr 2e-3 --lr-schedule constant --seed 5 --quiet "$@"
}
expect_ok mlm train_mlm --epochs 20 --eval-data "$tmp/corpus-eval.txt" --log "$tmp/mlm.jsonl" --output "$tmp/mlm-out"
first=$(grep -m1 '"loss"' "$tmp/mlm.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/')
last=$(grep '"loss"' "$tmp/mlm.jsonl" | tail -3 | sed 's/.*"loss": \([^,]*\),.*/\1/' | awk '{ s += $1 } END { print s / NR }')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a / 2) }' && ok || bad "masked-LM loss $first -> $last"
grep -qE '^\{"step": [0-9]+, "eval_loss": [0-9.e+-]+, "eval_perplexity": [0-9.e+-]+\}$' "$tmp/mlm.jsonl" && ok ||
  bad "masked-LM eval: $(grep eval "$tmp/mlm.jsonl")"
# The same seed draws the same masks: two runs log the same losses.
train_mlm --steps 4 --log "$tmp/mlm-a.jsonl" --output "$tmp/mlm-a" >/dev/null 2>&1 || bad "mlm run a"
train_mlm --steps 4 --log "$tmp/mlm-b.jsonl" --output "$tmp/mlm-b" >/dev/null 2>&1 || bad "mlm run b"
train_mlm --steps 4 --log "$tmp/mlm-c.jsonl" --output "$tmp/mlm-c" --mlm-probability 0.4 >/dev/null 2>&1 || bad "mlm run c"
[[ $(cut -d, -f2 "$tmp/mlm-a.jsonl") == $(cut -d, -f2 "$tmp/mlm-b.jsonl") ]] && ok || bad "the same seed gave other losses"
[[ $(cut -d, -f2 "$tmp/mlm-a.jsonl") != $(cut -d, -f2 "$tmp/mlm-c.jsonl") ]] && ok || bad "--mlm-probability changed nothing"
expect_ok mlm-line-by-line train_mlm --steps 2 --line-by-line --output "$tmp/mlm-lines"
expect_fail mlm-probability 1 "--mlm-probability 1.5: give a number between 0 and 1" train_mlm --steps 1 --mlm-probability 1.5 --output "$tmp/bad9"
printf '\n  \n' >"$tmp/blank.txt"
expect_fail mlm-blank 1 "blank.txt: no examples in the file (every line is blank)" train_mlm --data "$tmp/blank.txt" --line-by-line --steps 1 --output "$tmp/bad10"

# ---- heads brigade prepares no text for say so ----
mkdir -p "$tmp/tok"
cp "$here/fixtures/bert_token/config.json" "$here/fixtures/bert_token/model.safetensors" "$tmp/tok/"
cp "$here/fixtures/tokenizers/bert_uncased/tokenizer.json" "$tmp/tok/"
expect_fail token-classification 1 "not for BertForTokenClassification: give a safetensors file of its inputs and labels" \
  "$brigade" train --model "$tmp/tok" --data "$tmp/corpus.txt" --sequence-length 8 --steps 1 --output "$tmp/bad11" --quiet

finish

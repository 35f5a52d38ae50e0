#!/usr/bin/env bash
# brigade pipeline TASK from the command line: --text / --question --context / --input (a file or
# stdin) give the same results; a question-answering run end to end; bad input is one line on
# stderr, a non-zero exit and nothing on stdout. (Every task against transformers' outputs:
# test_pipeline_tasks.)
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
fix=$(dirname "$0")/fixtures/pipeline

# --text and a one-line --input file print the same line; stdin too.
"$brigade" pipeline text-classification --model "$fix/text_classification" --text "hello world" >"$tmp/a.jsonl" ||
  bad "--text"
echo '{"text": "hello world"}' >"$tmp/in.jsonl"
"$brigade" pipeline text-classification --model "$fix/text_classification" --input "$tmp/in.jsonl" >"$tmp/b.jsonl" ||
  bad "--input"
cmp -s "$tmp/a.jsonl" "$tmp/b.jsonl" && ok || bad "--text and --input differ"
"$brigade" pipeline text-classification --model "$fix/text_classification" --input - <"$tmp/in.jsonl" |
  cmp -s - "$tmp/a.jsonl" && ok || bad "--input - (stdin) differs"
grep -q '^\[{"label": "neutral", "score": 0\.' "$tmp/a.jsonl" && ok || bad "text-classification: $(cat "$tmp/a.jsonl")"

# Question answering end to end: one answer object per question, its text the context's span.
cat >"$tmp/qa.jsonl" <<'EOF'
{"question": "who is coding?", "context": "anna is coding in the morning in berlin"}

{"question": "where is the fox?", "context": "the quick brown fox jumps over the lazy dog in paris"}
EOF
expect_ok "question-answering" "$brigade" pipeline question-answering --model "$fix/question_answering" \
  --input "$tmp/qa.jsonl"
(($(wc -l <"$tmp/out.txt") == 2)) && ok || bad "question-answering: $(cat "$tmp/out.txt")"
grep -q '^{"score": [0-9.e-]*, "start": [0-9]*, "end": [0-9]*, "answer": "' "$tmp/out.txt" && ok ||
  bad "question-answering shape: $(cat "$tmp/out.txt")"
expect_out "--question --context" '"answer": "' "$brigade" pipeline question-answering \
  --model "$fix/question_answering" --question "who is coding?" --context "anna is coding in the morning"
expect_out "--help lists the tasks" "question-answering" "$brigade" pipeline --help
expect_out "--help has the image slot" "image-classification" "$brigade" pipeline --help

# Bad input: one line, exit 1 (runs that fail) or 2 (usage), nothing on stdout.
m=$fix/text_classification
expect_fail "unknown task" 1 "unknown task 'sentiment'" "$brigade" pipeline sentiment --model "$m" --text hi
expect_fail "head does not fit" 1 "is a BertForSequenceClassification: question-answering takes" \
  "$brigade" pipeline question-answering --model "$m" --question a --context b
expect_fail "no mask" 1 "no mask_token ([MASK]) found" "$brigade" pipeline fill-mask --model "$fix/fill_mask" \
  --text "hello world"
printf '{"question": "who?", "context": "anna"}\n{"question": "who?"}\n' >"$tmp/missing.jsonl"
expect_fail "missing field" 1 'line 2: question-answering needs "context"' "$brigade" pipeline question-answering \
  --model "$fix/question_answering" --input "$tmp/missing.jsonl"
out=$("$brigade" pipeline question-answering --model "$fix/question_answering" --input "$tmp/missing.jsonl" 2>/dev/null)
[[ -z $out ]] && ok || bad "missing field: something was written: $out"
printf '{"text": 3}\n' >"$tmp/type.jsonl"
expect_fail "field type" 1 'line 1: "text" must be a string' "$brigade" pipeline text-classification --model "$m" \
  --input "$tmp/type.jsonl"
printf '{"text": "a"\n' >"$tmp/json.jsonl"
expect_fail "bad JSON" 1 "json.jsonl:1" "$brigade" pipeline text-classification --model "$m" --input "$tmp/json.jsonl"
expect_fail "wrong field" 1 'does not take "question"' "$brigade" pipeline text-classification --model "$m" \
  --question a --context b
expect_fail "empty input" 1 "holds no inputs" "$brigade" pipeline text-classification --model "$m" --input /dev/null
expect_fail "bad strategy" 1 "aggregation strategy 'best'" "$brigade" pipeline token-classification \
  --model "$fix/token_classification" --text hi --aggregation-strategy best
expect_fail "no source" 2 "give --input FILE.jsonl" "$brigade" pipeline text-classification --model "$m"
expect_fail "two sources" 2 "give --input FILE.jsonl" "$brigade" pipeline text-classification --model "$m" \
  --text a --input "$tmp/in.jsonl"
expect_fail "task after flags" 2 "give the task first" "$brigade" pipeline --model "$m" text-classification
expect_fail "bad batch" 2 "--batch-size 0" "$brigade" pipeline text-classification --model "$m" --text a --batch-size 0
expect_fail "no model" 1 "nowhere" "$brigade" pipeline text-classification --model "$tmp/nowhere" --text a
finish

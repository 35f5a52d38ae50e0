#!/usr/bin/env bash
# brigade pipeline TASK from the command line: --text / --question --context / --input (a file or
# stdin) give the same results; a question-answering run end to end; image-classification by
# --image and by {"image": PATH} lines; bad input is one line on stderr, a non-zero exit and nothing
# on stdout. (Every task against transformers' outputs: test_pipeline_tasks.)
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
expect_out "--help lists image-classification" "image-classification" "$brigade" pipeline --help

# Image classification: --image and a JSONL file (paths relative to the current directory) print
# the same lines, 2 stages too; a bad file stops the run at its batch, naming the line and the file.
vit=tests/fixtures/image_cls_vit
img=tests/fixtures/images
"$brigade" pipeline image-classification --model "$vit" --image "$img/progressive_77x53.jpg" --top-k 3 \
  >"$tmp/img1.jsonl" || bad "--image"
grep -qx '\[{"label": "tabby cat", "score": 0\.82[0-9]*}, {"label": "espresso", "score": 0\.11[0-9]*}, {"label": "tench", "score": 0\.038[0-9]*}\]' \
  "$tmp/img1.jsonl" && ok || bad "--image: $(cat "$tmp/img1.jsonl")"
printf '{"image": "%s"}\n' "$img/rgb_37x23.png" "$img/progressive_77x53.jpg" "$img/exif6_100x80.jpg" >"$tmp/img.jsonl"
"$brigade" pipeline image-classification --model "$vit" --input "$tmp/img.jsonl" --top-k 3 >"$tmp/img3.jsonl" ||
  bad "image --input"
(($(wc -l <"$tmp/img3.jsonl") == 3)) && sed -n 2p "$tmp/img3.jsonl" | cmp -s - "$tmp/img1.jsonl" && ok ||
  bad "image --input: $(cat "$tmp/img3.jsonl")"
echo '{"inference_layers_per_ipu": [1, 1], "inference_device_iterations": 2}' >"$tmp/two.json"
# Every image is computed on its own, and brigade's GEMM kernels give each element the same bits
# whatever the rows: the pipelined answers are the same bytes. OpenBLAS picks its kernels by
# shape, so there the labels are the same and the scores within 1e-5 (1.4e-6 seen).
same_answers() {
  awk 'function parse(s, L, S,   n, t, p) { split("", L); split("", S); n = 0
         while (match(s, /"label": "[^"]*", "score": [-0-9.e+]*/)) {
           t = substr(s, RSTART, RLENGTH); split(t, p, "\", \"score\": "); L[++n] = p[1]; S[n] = p[2] + 0
           s = substr(s, RSTART + RLENGTH) }
         return n }
       FNR == NR { a[FNR] = $0; n = FNR; next }
       { m = FNR; ka = parse(a[FNR], La, Sa); kb = parse($0, Lb, Sb); if (ka != kb || ka == 0) bad = 1
         for (i = 1; i <= ka; i++) { if (La[i] != Lb[i]) bad = 1; d = Sa[i] - Sb[i]; if (d < 0) d = -d; if (d > 1e-5) bad = 1 } }
       END { exit (bad || n != m) }' "$1" "$2"
}
"$brigade" pipeline image-classification --model "$vit" --input "$tmp/img.jsonl" --top-k 3 --batch-size 1 \
  --ipu-config "$tmp/two.json" >"$tmp/img_piped.jsonl" || bad "image --ipu-config"
if [[ $("$brigade" --version) == *"gemm: openblas"* ]]; then
  same_answers "$tmp/img3.jsonl" "$tmp/img_piped.jsonl" && ok || bad "image --ipu-config differs: $(cat "$tmp/img_piped.jsonl")"
else
  cmp -s "$tmp/img3.jsonl" "$tmp/img_piped.jsonl" && ok || bad "image --ipu-config differs"
fi
# --precision bf16.32: the forward passes' products on bf16 operands (fp32 sums): scores near
# float32's but not them, the same labels where float32's are clearly apart (the first two images;
# the third's top two are 0.51 / 0.47 and swap); pipelined, the same bytes (brigade's kernels).
"$brigade" pipeline image-classification --model "$vit" --input "$tmp/img.jsonl" --top-k 3 --precision bf16.32 \
  >"$tmp/img_bf16.jsonl" || bad "image bf16.32"
cmp -s "$tmp/img3.jsonl" "$tmp/img_bf16.jsonl" && bad "image bf16.32 gave float32's scores" || ok
awk 'FNR == NR { a[FNR] = $0; next } { gsub(/[0-9.e-]+}/, "}", a[FNR]); t = $0; gsub(/[0-9.e-]+}/, "}", t)
     if (FNR <= 2 && t != a[FNR]) bad = 1 } END { exit bad }' "$tmp/img3.jsonl" "$tmp/img_bf16.jsonl" && ok ||
  bad "image bf16.32 labels: $(cat "$tmp/img_bf16.jsonl")"
"$brigade" pipeline image-classification --model "$vit" --input "$tmp/img.jsonl" --top-k 3 --precision bf16.32 \
  --ipu-config "$tmp/two.json" >"$tmp/img_bf16_piped.jsonl" || bad "image bf16.32 --ipu-config"
[[ $("$brigade" --version) == *"gemm: openblas"* ]] || { cmp -s "$tmp/img_bf16.jsonl" "$tmp/img_bf16_piped.jsonl" &&
  ok || bad "image bf16.32 --ipu-config differs"; }
"$brigade" pipeline text-classification --model "$fix/text_classification" --text "hello world" --precision bf16.32 \
  >"$tmp/tc_bf16.jsonl" || bad "text-classification bf16.32"
grep -qx '\[{"label": "neutral", "score": 0\.7[0-9]*}\]' "$tmp/tc_bf16.jsonl" &&
  ! cmp -s "$tmp/a.jsonl" "$tmp/tc_bf16.jsonl" && ok ||
  bad "text-classification bf16.32: $(cat "$tmp/tc_bf16.jsonl") (float32: $(cat "$tmp/a.jsonl"))"
"$brigade" pipeline text-generation --model tests/fixtures/generate_gpt2 --text "The quick" --precision bf16.32 \
  --generate-kwargs '{"max_new_tokens": 8}' \
  >"$tmp/gen_bf16.jsonl" && grep -q '"generated_text"' "$tmp/gen_bf16.jsonl" && ok ||
  bad "text-generation bf16.32: $(cat "$tmp/gen_bf16.jsonl")"
expect_fail "pipeline bf16.16" 1 "--precision bf16.16 keeps half master weights" "$brigade" pipeline \
  text-classification --model "$fix/text_classification" --text hi --precision bf16.16
expect_fail "not an image classifier" 1 "is a BertForSequenceClassification: image-classification takes ViTForImageClassification" \
  "$brigade" pipeline image-classification --model "$fix/text_classification" --image "$img/rgb_37x23.png"
expect_fail "missing image" 1 "input 1: cannot open $tmp/none.png" "$brigade" pipeline image-classification \
  --model "$vit" --image "$tmp/none.png"
printf '{"image": "%s"}\n{"image": "%s"}\n' "$img/rgb_37x23.png" "$vit/pipeline.json" >"$tmp/corrupt.jsonl"
expect_fail "corrupt image" 1 "line 2: $vit/pipeline.json: not a PNG or JPEG" "$brigade" pipeline \
  image-classification --model "$vit" --input "$tmp/corrupt.jsonl"
out=$("$brigade" pipeline image-classification --model "$vit" --input "$tmp/corrupt.jsonl" 2>/dev/null)
[[ -z $out ]] && ok || bad "corrupt image: something was written: $out"
head -c 300 "$img/baseline_64x48.jpg" >"$tmp/cut.jpg"
printf '{"image": "%s"}\n{"image": "%s"}\n' "$img/rgb_37x23.png" "$tmp/cut.jpg" >"$tmp/cut.jsonl"
out=$("$brigade" pipeline image-classification --model "$vit" --input "$tmp/cut.jsonl" --batch-size 1 2>"$tmp/err.txt")
(($? == 1)) && grep -q "line 2: .*cut.jpg" "$tmp/err.txt" && [[ $(wc -l <<<"$out") == 1 ]] && ok ||
  bad "truncated image, batch 1: the lines before it and one error: $out / $(cat "$tmp/err.txt")"
printf '{"text": "hi"}\n' >"$tmp/noimage.jsonl"
expect_fail "no image field" 1 'line 1: image-classification does not take "text"' "$brigade" pipeline \
  image-classification --model "$vit" --input "$tmp/noimage.jsonl"
printf '{}\n' >"$tmp/empty_obj.jsonl"
expect_fail "missing image field" 1 'line 1: image-classification needs "image"' "$brigade" pipeline \
  image-classification --model "$vit" --input "$tmp/empty_obj.jsonl"
printf '{"image": 3}\n' >"$tmp/image_type.jsonl"
expect_fail "image field type" 1 'line 1: "image" must be a string' "$brigade" pipeline image-classification \
  --model "$vit" --input "$tmp/image_type.jsonl"
expect_fail "image and text" 2 "or --image PATH" "$brigade" pipeline image-classification --model "$vit" \
  --image "$img/rgb_37x23.png" --text hi
expect_fail "bad function" 1 "function_to_apply 'relu'" "$brigade" pipeline image-classification --model "$vit" \
  --image "$img/rgb_37x23.png" --function-to-apply relu
expect_fail "image to a text task" 1 'text-classification does not take "image"' "$brigade" pipeline \
  text-classification --model "$fix/text_classification" --image "$img/rgb_37x23.png"

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

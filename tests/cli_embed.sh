#!/usr/bin/env bash
# brigade embed on small sentence-transformers folders (mean + Normalize, CLS, max + Normalize,
# mean * sqrt(len)): the embeddings of each fixture's sentences equal those sentence-transformers'
# pooling gives (tools/embed_fixtures.py), to 1e-5, whatever the batch size; bad input is one line.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
fix=$(dirname "$0")/fixtures

# Largest |a - b| over two files of {"embedding": [...]} lines; "lines" when their shapes differ.
max_diff() {
  awk 'function nums(s) { sub(/^[^[]*\[/, "", s); sub(/\].*$/, "", s); return s }
       FNR == NR { a[FNR] = nums($0); n = FNR; next }
       { $0 = nums($0); m = FNR
         k = split(a[FNR], x, ","); if (split($0, y, ",") != k) { bad = 1 }
         for (i = 1; i <= k; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > worst) worst = d } }
       END { if (bad || n != m) print "lines"; else printf "%.3g\n", worst }' "$1" "$2"
}

for name in embed_mean embed_cls embed_max embed_sqrt; do
  for bs in 1 4 16; do
    "$brigade" embed --model "$fix/$name" --input "$fix/$name/sentences.txt" --batch-size $bs >"$tmp/$name.jsonl" 2>"$tmp/err" ||
      { bad "$name (batch $bs): $(cat "$tmp/err")"; continue; }
    d=$(max_diff "$fix/$name/expected.jsonl" "$tmp/$name.jsonl")
    [[ $d != lines ]] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' && ok || bad "$name (batch $bs): max difference $d"
  done
done
# Normalised embeddings have unit length.
awk '{ sub(/^[^[]*\[/, ""); sub(/\].*$/, ""); k = split($0, x, ","); s = 0; for (i = 1; i <= k; i++) s += x[i] * x[i]
       if (s < 0.99999 || s > 1.00001) exit 1 }' "$tmp/embed_mean.jsonl" && ok || bad "embed_mean: not unit length"
# stdin works the same as --input.
"$brigade" embed --model "$fix/embed_mean" <"$fix/embed_mean/sentences.txt" | cmp -s - "$tmp/embed_mean.jsonl" && ok ||
  bad "stdin and --input differ"

# A plain model folder (no modules.json) is mean-pooled without normalising, as sentence-transformers
# does with one: normalised here, it gives embed_mean's expected vectors.
mkdir -p "$tmp/plain"
cp "$fix/embed_mean/config.json" "$fix/embed_mean/model.safetensors" "$fix/embed_mean/tokenizer.json" "$tmp/plain/"
cp "$fix/embed_mean/sentence_bert_config.json" "$tmp/plain/"
"$brigade" embed --model "$tmp/plain" --input "$fix/embed_mean/sentences.txt" >"$tmp/plain.jsonl" || bad "plain folder"
awk '{ sub(/^[^[]*\[/, ""); sub(/\].*$/, ""); k = split($0, x, ","); s = 0; for (i = 1; i <= k; i++) s += x[i] * x[i]
       s = sqrt(s); line = "{\"embedding\": ["; for (i = 1; i <= k; i++) line = line (i > 1 ? ", " : "") x[i] / s
       print line "]}" }' "$tmp/plain.jsonl" >"$tmp/plain-norm.jsonl"
d=$(max_diff "$fix/embed_mean/expected.jsonl" "$tmp/plain-norm.jsonl")
[[ $d != lines ]] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' && ok || bad "plain folder: max difference $d after normalising"
awk '{ sub(/^[^[]*\[/, ""); sub(/\].*$/, ""); k = split($0, x, ","); s = 0; for (i = 1; i <= k; i++) s += x[i] * x[i]
       if (s > 0.99 && s < 1.01) exit 1 }' "$tmp/plain.jsonl" && ok || bad "plain folder: normalised without a Normalize module"

printf 'fine\n\xff\xfe bad bytes\n' >"$tmp/bad.txt"
expect_fail bad-utf8 1 "line 2" "$brigade" embed --model "$fix/embed_mean" --input "$tmp/bad.txt"
expect_fail batch-size 2 "--batch-size 0 is not in [1, 64]" "$brigade" embed --model "$fix/embed_mean" --batch-size 0
expect_fail no-tokenizer 1 "tokenizer" "$brigade" embed --model "$fix/bert_base" --input "$fix/embed_mean/sentences.txt"
mkdir -p "$tmp/twopool"
cp -r "$fix/embed_mean/." "$tmp/twopool/"
sed -i 's/"pooling_mode_cls_token": false/"pooling_mode_cls_token": true/' "$tmp/twopool/1_Pooling/config.json"
expect_fail two-modes 1 "2 pooling modes are on" "$brigade" embed --model "$tmp/twopool" --input "$fix/embed_mean/sentences.txt"
# Modules and modes brigade does not implement are named, never silently skipped.
mkdir -p "$tmp/weighted" "$tmp/dense" "$tmp/nolist"
cp -r "$fix/embed_mean/." "$tmp/weighted/"
sed -i 's/"pooling_mode_mean_tokens": true/"pooling_mode_mean_tokens": false, "pooling_mode_weightedmean_tokens": true/' \
  "$tmp/weighted/1_Pooling/config.json"
expect_fail weighted-mean 1 "pooling_mode_weightedmean_tokens is not supported" "$brigade" embed --model "$tmp/weighted" \
  --input "$fix/embed_mean/sentences.txt"
cp -r "$fix/embed_mean/." "$tmp/dense/"
sed -i 's/sentence_transformers.models.Normalize/sentence_transformers.models.Dense/' "$tmp/dense/modules.json"
expect_fail dense-module 1 "module type sentence_transformers.models.Dense is not supported" "$brigade" embed \
  --model "$tmp/dense" --input "$fix/embed_mean/sentences.txt"
cp -r "$fix/embed_mean/." "$tmp/nolist/"
echo '{"not": "a list"}' >"$tmp/nolist/modules.json"
expect_fail modules-not-list 1 "expected a list of modules" "$brigade" embed --model "$tmp/nolist" \
  --input "$fix/embed_mean/sentences.txt"
# A head model gives logits, not hidden states, to pool.
mkdir -p "$tmp/head"
cp -r "$fix/embed_mean/." "$tmp/head/"
sed -i 's/"BertModel"/"BertForSequenceClassification"/' "$tmp/head/config.json"
# (loading it reports the newly initialised head first, as from_pretrained does)
err=$("$brigade" embed --model "$tmp/head" --input "$fix/embed_mean/sentences.txt" 2>&1 >/dev/null)
(($? == 1)) && [[ $(tail -1 <<<"$err") == *"gives no last_hidden_state to pool"* ]] && ok || bad "not-encoder: $err"

# --ipu-config: the inference pipeline (two stages; two replicas with two device iterations, the
# last partial batch padded; both with three iterations) gives the one-device embeddings. Every
# row is computed on its own and brigade's GEMM kernels give each element the same bits whatever
# the rows, so they are bit-identical; OpenBLAS picks kernels by shape: there, within 1e-6.
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [-1]}' >"$tmp/stages.json"
echo '{"inference_replication_factor": 2, "inference_device_iterations": 2}' >"$tmp/replicas.json"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_replication_factor": 2,
       "inference_device_iterations": 3}' >"$tmp/both.json"
exact=1
[[ $("$brigade" --version) == *"gemm: openblas"* ]] && exact=0
for name in embed_mean embed_cls embed_max embed_sqrt; do
  "$brigade" embed --model "$fix/$name" --input "$fix/$name/sentences.txt" >"$tmp/one.jsonl" 2>"$tmp/err" ||
    { bad "$name: $(cat "$tmp/err")"; continue; }
  for run in "stages.json" "replicas.json" "replicas.json --batch-size 4" "both.json" "both.json --batch-size 6"; do
    read -r cfg flags <<<"$run"
    # shellcheck disable=SC2086
    "$brigade" embed --model "$fix/$name" --input "$fix/$name/sentences.txt" --ipu-config "$tmp/$cfg" $flags \
      >"$tmp/piped.jsonl" 2>"$tmp/err" || { bad "$name ($run): $(cat "$tmp/err")"; continue; }
    if ((exact)); then
      cmp -s "$tmp/one.jsonl" "$tmp/piped.jsonl" && ok || bad "$name ($run): not the one-device embeddings"
    else
      d=$(max_diff "$tmp/one.jsonl" "$tmp/piped.jsonl")
      [[ $d != lines ]] && awk -v d="$d" 'BEGIN { exit !(d <= 1e-6) }' && ok || bad "$name ($run): max difference $d"
    fi
  done
done
echo '{"inference_ipus_per_replica": 4, "inference_layers_per_ipu": [-1]}' >"$tmp/four.json"
expect_fail more-stages-than-layers 1 "leaves IPU 1 with no block to run" "$brigade" embed --model "$fix/embed_mean" \
  --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/four.json"
expect_fail batch-not-divisible 1 "--batch-size 5: the batch dimension (5) must be a multiple of inference_device_iterations (2) x inference_replication_factor (2) = 4" \
  "$brigade" embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/replicas.json" --batch-size 5
expect_fail batch-too-large 1 "= 128 lines per batch at least, more than the 64" "$brigade" embed --model "$fix/embed_mean" \
  --input "$fix/embed_mean/sentences.txt" --ipu-config "$tmp/replicas.json" \
  --ipu-config-overrides "inference_replication_factor=8,inference_device_iterations=16"
# --precision bf16.32: products on bf16 operands with fp32 sums; near sentence-transformers' float32
# vectors, not them, and the pipeline's the same bytes as one device's (brigade's kernels).
"$brigade" embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --precision bf16.32 \
  >"$tmp/bf16.jsonl" 2>"$tmp/err" || bad "bf16.32: $(cat "$tmp/err")"
d=$(max_diff "$fix/embed_mean/expected.jsonl" "$tmp/bf16.jsonl")
[[ $d != lines ]] && awk -v d="$d" 'BEGIN { exit !(d > 0 && d <= 1e-2) }' && ok || bad "bf16.32: max difference $d"
"$brigade" embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" --precision bf16.32 \
  --ipu-config "$tmp/stages.json" >"$tmp/bf16-piped.jsonl" 2>"$tmp/err" || bad "bf16.32 piped: $(cat "$tmp/err")"
((exact == 0)) || { cmp -s "$tmp/bf16.jsonl" "$tmp/bf16-piped.jsonl" && ok || bad "bf16.32: the pipeline differs"; }
expect_fail bf16-16 1 "--precision bf16.16 keeps half master weights" "$brigade" embed --model "$fix/embed_mean" \
  --input "$fix/embed_mean/sentences.txt" --precision bf16.16
expect_fail bad-override 1 "bogus" "$brigade" embed --model "$fix/embed_mean" --input "$fix/embed_mean/sentences.txt" \
  --ipu-config "$tmp/stages.json" --ipu-config-overrides "bogus=1"

finish

#!/usr/bin/env bash
# brigade generate: transformers' tokens through the CLI (the committed GPT-2 and T5 fixtures),
# --input JSONL, --json, batching, beams, seeded sampling, byte-level models, and bad input.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
gpt2=tests/fixtures/generate_gpt2
t5=tests/fixtures/generate_t5

# The new ids of a fixture case's sequence s (its row minus the padded prompt, pad fill cut after
# the first eos the case stops on), from cases.json, as "1, 2, 3".
expected_ids() { python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1] + "/cases.json"))
case = next(c for c in doc["cases"] if c["name"] == sys.argv[2])
s = int(sys.argv[3])
per = len(case["sequences"]) // len(case["prompts"])
width = max(len(p) for p in case["prompt_ids"])
row = case["sequences"][s][1:] if "t5" in sys.argv[1] else case["sequences"][s][width:]
eos = case["kwargs"].get("eos_token_id", -1)
eos = set(eos if isinstance(eos, list) else [eos])
out = []
for t in row:
    out.append(t)
    if t in eos:
        break
print(", ".join(map(str, out)))
EOF
}

json_field() { python3 -c 'import json,sys; print(", ".join(map(str, json.loads(sys.stdin.readline())[sys.argv[1]])))' "$1"; }

# Greedy, one prompt: the ids transformers generated.
want=$(expected_ids $gpt2 greedy_one 0)
got=$("$brigade" generate --model $gpt2 --prompt "The quick brown fox jumps over" --max-new-tokens 12 --json | json_field generated_ids)
[[ $got == "$want" ]] && ok || bad "greedy: '$got' != '$want'"
# Without the cache: the same.
got=$("$brigade" generate --model $gpt2 --prompt "The quick brown fox jumps over" --max-new-tokens 12 --json --no-cache |
  json_field generated_ids)
[[ $got == "$want" ]] && ok || bad "greedy --no-cache: '$got' != '$want'"
# In a half compute type (the products' operands rounded, the steps reading half weights): 12 new
# ids, and a .16 mode refused (a forward pass keeps the weights as loaded).
got=$("$brigade" generate --model $gpt2 --prompt "The quick brown fox jumps over" --max-new-tokens 12 --json \
  --precision bf16.32 | json_field generated_ids)
[[ $(tr -cd , <<<"$got" | wc -c) == 11 ]] && ok || bad "greedy bf16.32: '$got'"
expect_fail gen-bf16.16 1 "--precision bf16.16 keeps half master weights" "$brigade" generate --model $gpt2 \
  --prompt hi --precision bf16.16
# The plain output is the prompt and its continuation, one line.
expect_out plain "The quick brown fox jumps over" "$brigade" generate --model $gpt2 --prompt "The quick brown fox jumps over"
(($(wc -l <"$tmp/out.txt") == 1)) && ok || bad "plain output: $(cat "$tmp/out.txt")"

# --input: a batch of three prompts (left-padded together), blank lines skipped, extra keys ignored.
printf '{"prompt": "Hello world"}\n\n{"prompt": "The quick brown fox jumps over", "id": 7}\n   \n{"prompt": "a"}\n' >"$tmp/in.jsonl"
"$brigade" generate --model $gpt2 --input "$tmp/in.jsonl" --max-new-tokens 10 --eos-token-id 298 --json >"$tmp/batch.jsonl" 2>"$tmp/err.txt" ||
  bad "generate --input: $(cat "$tmp/err.txt")"
(($(wc -l <"$tmp/batch.jsonl") == 3)) && ok || bad "3 prompts, $(wc -l <"$tmp/batch.jsonl") lines"
for s in 0 1 2; do
  want=$(expected_ids $gpt2 greedy_eos $s)
  got=$(sed -n "$((s + 1))p" "$tmp/batch.jsonl" | json_field generated_ids)
  [[ $got == "$want" ]] && ok || bad "batch row $s: '$got' != '$want'"
done
grep -q '^{"prompt": "Hello world", "generated_ids": \[717, 250, 431, 298\], "text": ' "$tmp/batch.jsonl" && ok ||
  bad "json line: $(head -1 "$tmp/batch.jsonl")"
# One prompt per batch gives the same tokens.
"$brigade" generate --model $gpt2 --input "$tmp/in.jsonl" --max-new-tokens 10 --eos-token-id 298 --json --batch-size 1 >"$tmp/b1.jsonl" &&
  cmp -s "$tmp/batch.jsonl" "$tmp/b1.jsonl" && ok || bad "--batch-size 1 differs"

# Beam search: 4 beams, length_penalty 0.6, two sequences per prompt, best first, as transformers.
"$brigade" generate --model $gpt2 --input "$tmp/in.jsonl" --max-new-tokens 10 --num-beams 4 --length-penalty 0.6 \
  --eos-token-id 298 --num-return-sequences 2 --json >"$tmp/beam.jsonl" 2>"$tmp/err.txt" || bad "beam: $(cat "$tmp/err.txt")"
(($(wc -l <"$tmp/beam.jsonl") == 6)) && ok || bad "beam lines: $(cat "$tmp/beam.jsonl")"
for s in 0 1 2 3 4 5; do
  want=$(expected_ids $gpt2 beam4_lp06 $s)
  got=$(sed -n "$((s + 1))p" "$tmp/beam.jsonl" | json_field generated_ids)
  [[ $got == "$want" ]] && ok || bad "beam sequence $s: '$got' != '$want'"
done
grep -q '"score": -' "$tmp/beam.jsonl" && ok || bad "beam lines carry no score"

# T5: the encoder input is the prompt, the output the decoder's tokens.
printf '{"prompt": "The quick brown fox jumps over"}\n{"prompt": "a"}\n{"prompt": "Line 12 of the story: once upon a time"}\n' >"$tmp/t5.jsonl"
"$brigade" generate --model $t5 --input "$tmp/t5.jsonl" --max-new-tokens 10 --num-beams 4 --eos-token-id 256 --json >"$tmp/t5.out" 2>"$tmp/err.txt" ||
  bad "t5: $(cat "$tmp/err.txt")"
for s in 0 1 2; do
  want=$(expected_ids $t5 beam4_lp1 $s)
  got=$(sed -n "$((s + 1))p" "$tmp/t5.out" | json_field generated_ids)
  [[ $got == "$want" ]] && ok || bad "t5 beam sequence $s: '$got' != '$want'"
done

# Sampling: the same seed gives the same text run to run and in any batch size; another seed differs.
sample() { "$brigade" generate --model $gpt2 --input "$tmp/in.jsonl" --do-sample --temperature 1.3 --top-k 40 --top-p 0.9 \
  --max-new-tokens 12 --eos-token-id none --json "$@"; }
sample --seed 5 >"$tmp/s1" && sample --seed 5 >"$tmp/s2" && sample --seed 5 --batch-size 2 >"$tmp/s3" && sample --seed 6 >"$tmp/s4" ||
  bad "sampling runs failed"
cmp -s "$tmp/s1" "$tmp/s2" && ok || bad "seed 5 twice differs"
cmp -s "$tmp/s1" "$tmp/s3" && ok || bad "seed 5 with --batch-size 2 differs"
cmp -s "$tmp/s1" "$tmp/s4" && bad "seeds 5 and 6 gave the same samples" || ok
(($(wc -l <"$tmp/s1") == 3)) && ok || bad "sampling lines: $(cat "$tmp/s1")"
sample --seed 5 --num-return-sequences 2 >"$tmp/s5" && (($(wc -l <"$tmp/s5") == 6)) && ok || bad "2 samples per prompt"

# A byte-level model (no tokenizer): the prompt's bytes, and an --ipu-config whose placement fits.
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 3 --output "$tmp/bytes" >/dev/null || bad init
out=$("$brigade" generate --model "$tmp/bytes" --prompt "abc" --max-new-tokens 5) && [[ ${out:0:3} == abc ]] && ok || bad "bytes: '$out'"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "inference_layers_per_ipu": [1, 1]}' >"$tmp/ipu.json"
out2=$("$brigade" generate --model "$tmp/bytes" --prompt "abc" --max-new-tokens 5 --ipu-config "$tmp/ipu.json") &&
  [[ $out2 == "$out" ]] && ok || bad "--ipu-config changed the output: '$out2' vs '$out'"
s1=$("$brigade" generate --model "$tmp/bytes" --prompt "abc" --max-new-tokens 8 --do-sample --seed 9 --json) &&
  s2=$("$brigade" generate --model "$tmp/bytes" --prompt "abc" --max-new-tokens 8 --do-sample --seed 9 --json --ipu-config "$tmp/ipu.json") &&
  [[ $s1 == "$s2" ]] && ok || bad "sampling with --ipu-config: '$s2' vs '$s1'"
# Many prompts as requests in flight over 2 stages x 2 replicas: the lines of one device, in order.
printf '{"prompt": "p%d q"}\n' 1 2 3 4 5 6 7 >"$tmp/many.jsonl"
echo '{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_replication_factor": 2}' >"$tmp/ipu2x2.json"
for extra in "" "--do-sample --seed 4" "--num-beams 2" "--num-beams 2 --precision bf16.32" "--precision 16.32"; do
  # shellcheck disable=SC2086
  a=$("$brigade" generate --model "$tmp/bytes" --input "$tmp/many.jsonl" --max-new-tokens 6 --batch-size 2 --json $extra) &&
    b=$("$brigade" generate --model "$tmp/bytes" --input "$tmp/many.jsonl" --max-new-tokens 6 --batch-size 2 --json $extra \
      --ipu-config "$tmp/ipu2x2.json") && [[ -n $a && $a == "$b" ]] && ok ||
    bad "pipelined requests ($extra) differ: '$b' vs '$a'"
done

# Bad input: one line on stderr naming the problem, nothing generated.
expect_fail both 2 "give one of --prompt TEXT and --input FILE.jsonl" "$brigade" generate --model $gpt2 --prompt a --input "$tmp/in.jsonl"
expect_fail neither 2 "give one of --prompt TEXT and --input FILE.jsonl" "$brigade" generate --model $gpt2
expect_fail no-file 1 "cannot open $tmp/none.jsonl" "$brigade" generate --model $gpt2 --input "$tmp/none.jsonl"
printf '{"prompt": "a"}\n{"text": "b"}\n' >"$tmp/bad.jsonl"
expect_fail no-prompt-key 1 "bad.jsonl:2: expected an object with a string \"prompt\"" "$brigade" generate --model $gpt2 --input "$tmp/bad.jsonl"
printf 'plain text\n' >"$tmp/plain.jsonl"
expect_fail not-json 1 "plain.jsonl:1" "$brigade" generate --model $gpt2 --input "$tmp/plain.jsonl"
printf '\n\n' >"$tmp/empty.jsonl"
expect_fail empty 1 "holds no prompts" "$brigade" generate --model $gpt2 --input "$tmp/empty.jsonl"
long=$(python3 -c 'print(" ".join(["word"] * 80))')
printf '{"prompt": "a"}\n{"prompt": "%s"}\n' "$long" >"$tmp/long.jsonl"
expect_fail long-prompt 1 "line 2: the prompt is 81 tokens and the model takes at most 64 positions: no room for a new token" \
  "$brigade" generate --model $gpt2 --input "$tmp/long.jsonl" --json
[[ -z $("$brigade" generate --model $gpt2 --input "$tmp/long.jsonl" 2>/dev/null) ]] && ok || bad "long prompt: output before the error"
expect_fail long-bytes 1 "the prompt is 16 tokens (bytes) and the model takes at most 16 positions" \
  "$brigade" generate --model "$tmp/bytes" --prompt 0123456789abcdef
expect_fail beams-0 1 "num_beams 0: give 1 to 1024" "$brigade" generate --model $gpt2 --prompt a --num-beams 0
expect_fail returns 1 "num_return_sequences 3 needs sampling or beam search" "$brigade" generate --model $gpt2 --prompt a --num-return-sequences 3
expect_fail returns-beams 1 "num_return_sequences 5 is more than num_beams 4" \
  "$brigade" generate --model $gpt2 --prompt a --num-beams 4 --num-return-sequences 5
expect_fail early 1 "--early-stopping 'maybe': give true, false or never" "$brigade" generate --model $gpt2 --prompt a --early-stopping maybe
expect_fail eos 1 "--eos-token-id '5000'" "$brigade" generate --model $gpt2 --prompt a --eos-token-id 5000
expect_fail eos-list 1 "--eos-token-id '3,x'" "$brigade" generate --model $gpt2 --prompt a --eos-token-id 3,x
expect_fail top-p 1 "top_p 1.5: give a number in [0, 1]" "$brigade" generate --model $gpt2 --prompt a --do-sample --top-p 1.5
expect_fail temperature 1 "temperature 0: give a positive number" "$brigade" generate --model $gpt2 --prompt a --do-sample --temperature 0
expect_fail max-new 1 "--max-new-tokens 0: give at least 1" "$brigade" generate --model $gpt2 --prompt a --max-new-tokens 0
expect_fail batch-size 2 "--batch-size 0 is not in [1, 256]" "$brigade" generate --model $gpt2 --prompt a --batch-size 0
expect_fail not-generative 1 "generate needs GPT2LMHeadModel or T5ForConditionalGeneration" \
  "$brigade" generate --model tests/fixtures/bert_base --prompt a
echo '{"ipus_per_replica": 3, "inference_layers_per_ipu": [-1, -1, -1]}' >"$tmp/empty-ipu.json"
expect_fail ipu-placement 1 "leaves IPU 1 with no block to run" \
  "$brigade" generate --model "$tmp/bytes" --prompt abc --ipu-config "$tmp/empty-ipu.json"
mkdir -p "$tmp/badgen" && cp $gpt2/config.json $gpt2/model.safetensors $gpt2/tokenizer.json "$tmp/badgen/"
echo '{"suppress_tokens": [1]}' >"$tmp/badgen/generation_config.json"
expect_fail gen-config 1 "'suppress_tokens' is set and brigade's generate does not implement it" \
  "$brigade" generate --model "$tmp/badgen" --prompt a

finish

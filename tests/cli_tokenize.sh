#!/usr/bin/env bash
# brigade tokenize / detokenize: JSON lines out for lines in, flags, round trips, and one-line
# errors with exit codes for bad usage, bad files and bad input.
set -uo pipefail
brigade=$1
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/tests/shell_util.sh"
fx="$root/tests/fixtures/tokenizers"
bert="$fx/bert_uncased"
gpt2="$fx/gpt2_bpe"

# One JSON line per input line (an empty line still gets its special tokens).
printf 'Hello world\n\nCafé 中文\n' >"$tmp/in.txt"
expect_ok tokenize "$brigade" tokenize --model "$bert" --input "$tmp/in.txt"
(($(wc -l <"$tmp/out.txt") == 3)) && ok || bad "tokenize: $(wc -l <"$tmp/out.txt") lines for 3"
grep -qxF '{"input_ids": [2, 593, 322, 3], "tokens": ["[CLS]", "hello", "world", "[SEP]"], "offsets": [[0, 0], [0, 5], [6, 11], [0, 0]], "attention_mask": [1, 1, 1, 1]}' "$tmp/out.txt" && ok || bad "tokenize line 1: $(head -1 "$tmp/out.txt")"
sed -n 2p "$tmp/out.txt" | grep -qxF '{"input_ids": [2, 3], "tokens": ["[CLS]", "[SEP]"], "offsets": [[0, 0], [0, 0]], "attention_mask": [1, 1]}' && ok || bad "empty line: $(sed -n 2p "$tmp/out.txt")"
# Offsets count code points: "中" is character 5 of "Café 中文", not byte 6.
sed -n 3p "$tmp/out.txt" | grep -qF '"tokens": ["[CLS]", "cafe", "中", "文", "[SEP]"], "offsets": [[0, 0], [0, 4], [5, 6], [6, 7], [0, 0]]' && ok || bad "code point offsets: $(sed -n 3p "$tmp/out.txt")"

# stdin, --no-special-tokens, truncation.
expect_out stdin '"input_ids": [593, 322]' bash -c "printf 'Hello world\n' | '$brigade' tokenize --model '$bert' --no-special-tokens"
expect_out truncation '"input_ids": [2, 593, 322, 3]' bash -c "printf 'Hello world, how are you\n' | '$brigade' tokenize --model '$bert' --max-length 4 --truncation"
expect_out gpt2 '"tokens": ["Hello", "Ġworld", "Ġ", "<|endoftext|>"], "offsets": [[0, 5], [5, 11], [11, 12], [12, 25]]' bash -c "printf 'Hello world <|endoftext|>\n' | '$brigade' tokenize --model '$gpt2'"
expect_out gpt2-vocab-files '"input_ids": [905, 414]' bash -c "printf 'Hello world\n' | '$brigade' tokenize --model '$fx/gpt2_files'"

# detokenize: tokenize's lines or bare id arrays; special tokens kept unless skipped.
expect_out detokenize '{"text": "[CLS] hello world [SEP]"}' bash -c "printf 'Hello world\n' | '$brigade' tokenize --model '$bert' | '$brigade' detokenize --model '$bert'"
expect_out skip-special '{"text": "hello world"}' bash -c "printf '[2, 593, 322, 3]\n' | '$brigade' detokenize --model '$bert' --skip-special-tokens"
# Quotes, backslashes and tabs survive the JSON round trip byte for byte.
expect_out round-trip '{"text": "tab\there \"quote\" \\ back"}' bash -c "printf 'tab\there \"quote\" \\\\ back\n' | '$brigade' tokenize --model '$gpt2' | '$brigade' detokenize --model '$gpt2'"

# A hub id found in the local Hugging Face cache, as --model takes for models.
snap="$tmp/hub/models--org--tok/snapshots/0123abc"
mkdir -p "$snap" "$tmp/hub/models--org--tok/refs"
cp "$bert/tokenizer.json" "$snap/"
printf '0123abc' >"$tmp/hub/models--org--tok/refs/main"
expect_out hub-id '"input_ids": [2, 593, 322, 3]' bash -c "printf 'Hello world\n' | HF_HUB_CACHE='$tmp/hub' '$brigade' tokenize --model org/tok"

# Usage errors (exit 2) and failures (exit 1), each a one-line message.
expect_fail no-model 2 "missing required option --model" "$brigade" tokenize
expect_fail max-length-alone 2 "--truncation and --max-length" "$brigade" tokenize --model "$bert" --max-length 8
expect_fail missing-folder 1 "$tmp/nope" "$brigade" tokenize --model "$tmp/nope"
mkdir -p "$tmp/empty"
expect_fail empty-folder 1 "has no tokenizer.json, vocab.txt or vocab.json + merges.txt" "$brigade" tokenize --model "$tmp/empty"
expect_fail missing-input 1 "cannot open $tmp/none.txt" "$brigade" tokenize --model "$bert" --input "$tmp/none.txt"
mkdir -p "$tmp/badjson" "$tmp/badtype"
printf '{"model": {"type": "WordPiece", "vocab": {' >"$tmp/badjson/tokenizer.json"
expect_fail malformed-json 1 "badjson/tokenizer.json" "$brigade" tokenize --model "$tmp/badjson"
printf '{"normalizer": {"type": "Sparkle"}, "model": {"type": "BPE", "vocab": {}, "merges": []}}' >"$tmp/badtype/tokenizer.json"
expect_fail unknown-type 1 "unknown normalizer type 'Sparkle'" "$brigade" tokenize --model "$tmp/badtype"
printf 'fine\nbad \xff byte\n' >"$tmp/badutf8.txt"
expect_fail bad-utf8 1 "line 2: the text is not valid UTF-8 (bad byte 0xff at byte offset 4)" "$brigade" tokenize --model "$bert" --input "$tmp/badutf8.txt"
printf '[2, 593]\nnot json\n' >"$tmp/badids.txt"
expect_fail detok-bad-line 1 "line 2" "$brigade" detokenize --model "$bert" --input "$tmp/badids.txt"
printf '[2, -1]\n' >"$tmp/negid.txt"
expect_fail detok-bad-id 1 "id 1 is not an integer" "$brigade" detokenize --model "$bert" --input "$tmp/negid.txt"

finish

#!/usr/bin/env bash
# The CLI on good and bad input: exit codes, one-line reasons, nothing written on failure.
set -uo pipefail
brigade=$1
root=$(cd "$(dirname "$0")/.." && pwd)
mkinputs="$root/scripts/make-inputs.sh"
source "$root/tests/shell_util.sh"

m="$tmp/model"
expect_ok init "$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 4 --vocab 50 --positions 16 --seed 3 --output "$m"
[[ -f $m/config.json && -f $m/model.safetensors ]] && ok || bad "init wrote no files"

bash "$mkinputs" "$tmp/in.st" 2 8 50 labels mask
expect_ok forward "$brigade" forward --model "$m" --inputs "$tmp/in.st" --output "$tmp/out.st"
grep -q 'logits \[2, 8, 50\]  loss ' "$tmp/out.txt" && ok || bad "forward output: $(cat "$tmp/out.txt")"
bash "$mkinputs" "$tmp/in32.st" 2 8 50 i32
expect_ok forward-i32 "$brigade" forward --model "$m" --inputs "$tmp/in32.st" --output "$tmp/out32.st"

# Usage errors.
expect_fail no-command any "unknown command" "$brigade" frobnicate
expect_fail missing-flag any "missing required option --output" "$brigade" forward --model "$m" --inputs "$tmp/in.st"
expect_fail unknown-flag any "unknown option '--bogus'" "$brigade" forward --bogus 1
expect_fail bad-int any "--layers expects an integer" "$brigade" init --arch gpt2 --layers two --hidden 32 --heads 4 --vocab 50 --positions 16 --output "$tmp/x"
expect_fail bad-heads any "divisible by n_head" "$brigade" init --arch gpt2 --layers 1 --hidden 30 --heads 4 --vocab 50 --positions 16 --output "$tmp/x"
expect_fail init-unknown-arch 1 "--arch Bogus is not a registered architecture or model type (GPT2LMHeadModel" "$brigade" init \
  --arch Bogus --layers 1 --hidden 16 --heads 2 --vocab 50 --positions 16 --output "$tmp/x"
expect_fail init-needs-vocab 1 "--arch BertForMaskedLM needs --vocab" "$brigade" init --arch bert --layers 1 --hidden 16 --heads 2 \
  --positions 16 --output "$tmp/x"
expect_fail init-needs-image 1 "--arch ViTForImageClassification needs --image-size" "$brigade" init --arch vit --layers 1 \
  --hidden 16 --heads 2 --output "$tmp/x"

# Missing files.
expect_fail no-model any "$tmp/nope" "$brigade" forward --model "$tmp/nope" --inputs "$tmp/in.st" --output "$tmp/o.st"
expect_fail no-inputs any "missing.st" "$brigade" forward --model "$m" --inputs "$tmp/missing.st" --output "$tmp/o.st"

# Out-of-range token id: the inputs hold ids up to 99 for a 50-token vocabulary.
bash "$mkinputs" "$tmp/big.st" 2 8 100
expect_fail token-range any "input_ids[0][7] = 52 is out of range [0, 50)" "$brigade" forward --model "$m" --inputs "$tmp/big.st" --output "$tmp/o.st"
[[ -e $tmp/o.st ]] && bad "output written on failure" || ok

# Bad tensor name, dtype and shape (same-length edits of the header keep the file valid).
sed 's/"labels"/"lab_ls"/' "$tmp/in.st" >"$tmp/name.st"
expect_fail tensor-name any "unexpected input tensor 'lab_ls'" "$brigade" forward --model "$m" --inputs "$tmp/name.st" --output "$tmp/o.st"
sed 's/"attention_mask":{"dtype":"I64"/"attention_mask":{"dtype":"F64"/' "$tmp/in.st" >"$tmp/dtype.st"
expect_fail tensor-dtype any "F64" "$brigade" forward --model "$m" --inputs "$tmp/dtype.st" --output "$tmp/o.st"
# An output that is a device is written in place, never replaced by a regular file.
if [ -w /dev/full ]; then
    expect_fail output-full any "/dev/full" "$brigade" forward --model "$m" --inputs "$tmp/in.st" --output /dev/full
    [ -c /dev/full ] && ok || bad "forward --output /dev/full replaced the device"
fi
expect_ok output-null "$brigade" forward --model "$m" --inputs "$tmp/in.st" --output /dev/null
[ -c /dev/null ] && ok || bad "forward --output /dev/null replaced the device"
mkdir -p "$tmp/outdir"
expect_fail output-dir any "is a directory" "$brigade" forward --model "$m" --inputs "$tmp/in.st" --output "$tmp/outdir"
sed 's/"labels":{"dtype":"I64","shape":\[2,8\]/"labels":{"dtype":"I64","shape":[8,2]/' "$tmp/in.st" >"$tmp/shape.st"
expect_fail tensor-shape any "labels has shape [8, 2]" "$brigade" forward --model "$m" --inputs "$tmp/shape.st" --output "$tmp/o.st"
bash "$mkinputs" "$tmp/long.st" 1 17 50
expect_fail too-long any "takes at most 16" "$brigade" forward --model "$m" --inputs "$tmp/long.st" --output "$tmp/o.st"

# A config.json with a missing field.
cp -r "$m" "$tmp/nolayer"
grep -v '"n_layer"' "$m/config.json" >"$tmp/nolayer/config.json"
expect_fail missing-field any "config.json: missing field 'n_layer'" "$brigade" forward --model "$tmp/nolayer" --inputs "$tmp/in.st" --output "$tmp/o.st"

# Corrupted, truncated and oversized safetensors files.
cp -r "$m" "$tmp/trunc"
size=$(stat -c %s "$m/model.safetensors")
head -c $((size - 4)) "$m/model.safetensors" >"$tmp/trunc/model.safetensors"
expect_fail truncated any "model.safetensors" "$brigade" forward --model "$tmp/trunc" --inputs "$tmp/in.st" --output "$tmp/o.st"
cp -r "$m" "$tmp/huge"
printf '\x01\xe1\xf5\x05\x00\x00\x00\x00{}' >"$tmp/huge/model.safetensors"
expect_fail oversized any "header too large" "$brigade" forward --model "$tmp/huge" --inputs "$tmp/in.st" --output "$tmp/o.st"
cp -r "$m" "$tmp/garbage"
head -c 4096 /dev/urandom >"$tmp/garbage/model.safetensors"
expect_fail corrupted any "model.safetensors" "$brigade" forward --model "$tmp/garbage" --inputs "$tmp/in.st" --output "$tmp/o.st"
expect_fail bad-inputs-file any "in-trunc" bash -c "head -c 20 '$tmp/in.st' > '$tmp/in-trunc.st'; '$brigade' forward --model '$m' --inputs '$tmp/in-trunc.st' --output '$tmp/o.st'"
[[ -e $tmp/o.st ]] && bad "output written on failure" || ok

# The version and the kernels in use; help for one command; an unknown one in help is an error.
expect_out version "brigade 0.1.0 (gemm: " "$brigade" --version
expect_out help-cmd "usage: brigade train" "$brigade" help train
expect_fail help-unknown 2 "unknown command 'bogus'" "$brigade" help bogus

finish

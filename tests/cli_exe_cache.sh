#!/usr/bin/env bash
# The executable cache (IPUConfig executable_cache_dir) of brigade forward: a second start says it
# hit and gives the same bits; truncated, corrupt, foreign and stale entries (other weights,
# IPUConfig, shapes, BRIGADE_ISA, --precision) are each one warning, then rebuilt with the same
# outputs as an uncached run; "" and "disabled" do nothing; a folder that cannot be made warns and
# runs uncached.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
inputs() { bash "$(dirname "$0")/../scripts/make-inputs.sh" "$@"; }
inputs "$tmp/in.st" 4 8 256
inputs "$tmp/in6.st" 4 6 256
cat >"$tmp/ipu.json" <<JSON
{"inference_ipus_per_replica": 2, "inference_layers_per_ipu": [1, 1], "inference_device_iterations": 2,
 "executable_cache_dir": "$tmp/ec"}
JSON
entry() { ls "$tmp"/ec/forward-*.brgexe 2>/dev/null | head -1; }

# fwd NAME OUT [INPUTS] [overrides...]: forward through the pipeline; stderr in $tmp/NAME.err.
fwd() {
  local name=$1 out=$2 in=${3:-$tmp/in.st}
  shift 3 2>/dev/null || shift $#
  "$brigade" forward --model "$tmp/m" --inputs "$in" --output "$out" --ipu-config "$tmp/ipu.json" "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || bad "$name: $(cat "$tmp/$name.err")"
}
uncached() { fwd "$1" "$2" "${3:-$tmp/in.st}" --ipu-config-overrides "executable_cache_dir=disabled${4:+,$4}"; }
same() { cmp -s "$1" "$2" && ok || bad "$3: outputs differ from the uncached run"; }
hit() { grep -q "executable cache hit" "$tmp/$1.err" && ok || bad "$1: no cache hit: $(cat "$tmp/$1.err")"; }
# rebuilt NAME NEEDLE: exactly one warning naming NEEDLE, the entry written again.
rebuilt() {
  local w
  w=$(grep -c "warning" "$tmp/$1.err")
  ((w == 1)) && grep -q "warning: executable cache entry .* is $2.*: rebuilding it" "$tmp/$1.err" && ok ||
    bad "$1: wanted one warning about '$2': $(cat "$tmp/$1.err")"
  grep -q "executable cache hit" "$tmp/$1.err" && bad "$1: a bad entry was used" || ok
  grep -q "executable cache entry written" "$tmp/$1.err" && ok || bad "$1: entry not rewritten"
}

uncached ref "$tmp/ref.st"
grep -q "executable cache" "$tmp/ref.err" && bad "disabled: $(cat "$tmp/ref.err")" || ok
fwd first "$tmp/o1.st"
grep -q "executable cache entry written" "$tmp/first.err" && ok || bad "first: $(cat "$tmp/first.err")"
[[ -n $(entry) ]] && ok || bad "no entry in $tmp/ec"
fwd second "$tmp/o2.st"
hit second
same "$tmp/o2.st" "$tmp/ref.st" second
same "$tmp/o1.st" "$tmp/ref.st" first
cmp -s "$tmp/first.out" "$tmp/second.out" && ok || bad "stdout (placement, outputs) differs on a hit"

# Damaged entries: each detected, said in one line, rebuilt; the run after it hits again.
damage() { # damage NAME NEEDLE COMMAND...
  local name=$1 needle=$2
  shift 2
  "$@"
  fwd "$name" "$tmp/$name.st"
  rebuilt "$name" "$needle"
  same "$tmp/$name.st" "$tmp/ref.st" "$name"
  fwd "$name-again" "$tmp/$name-again.st"
  hit "$name-again"
}
flip() { printf '\x5a' | dd of="$(entry)" bs=1 seek="$1" conv=notrunc status=none; }
size() { stat -c %s "$(entry)"; }
damage payload "corrupt (checksum mismatch)" flip $(($(size) - 100))
damage table "corrupt" flip 4200
damage truncated "truncated" truncate -s $(($(size) - 64)) "$(entry)"
damage short "truncated" truncate -s 20 "$(entry)"
damage magic "not an entry (wrong magic)" flip 0
damage version "of another format version" flip 8
damage header "corrupt (header checksum mismatch)" flip 40

# Stale entries: what the key covers changed.
touch -d '2001-01-01' "$tmp/m/model.safetensors"
fwd stale-weights "$tmp/sw.st"
rebuilt stale-weights "stale (the weights files"
same "$tmp/sw.st" "$tmp/ref.st" stale-weights
"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 9 --output "$tmp/m" >/dev/null || bad init2
uncached ref9 "$tmp/ref9.st"
fwd new-weights "$tmp/nw.st"
rebuilt new-weights "stale (the weights files"
same "$tmp/nw.st" "$tmp/ref9.st" new-weights
cmp -s "$tmp/nw.st" "$tmp/ref.st" && bad "new weights gave the old outputs" || ok
fwd new-weights-again "$tmp/nw2.st"
hit new-weights-again
same "$tmp/nw2.st" "$tmp/ref9.st" new-weights-again

uncached ref-ipu "$tmp/ref-ipu.st" "$tmp/in.st" "inference_device_iterations=4"
fwd stale-ipu "$tmp/si.st" "$tmp/in.st" --ipu-config-overrides "inference_device_iterations=4"
rebuilt stale-ipu "stale (the IPUConfig changed)"
same "$tmp/si.st" "$tmp/ref-ipu.st" stale-ipu

fwd back-ipu "$tmp/b1.st" # the entry of the default run again: one part of the key changes at a time
uncached ref6 "$tmp/ref6.st" "$tmp/in6.st"
fwd stale-shapes "$tmp/ss.st" "$tmp/in6.st"
rebuilt stale-shapes "stale (the input shapes changed)"
same "$tmp/ss.st" "$tmp/ref6.st" stale-shapes

fwd back-shapes "$tmp/b2.st"
other_isa=scalar
[[ ${BRIGADE_ISA:-} == scalar ]] && other_isa=avx2
BRIGADE_ISA=$other_isa uncached ref-isa "$tmp/ref-isa.st"
BRIGADE_ISA=$other_isa fwd stale-isa "$tmp/sa.st"
rebuilt stale-isa "stale (the CPU features"
same "$tmp/sa.st" "$tmp/ref-isa.st" stale-isa
BRIGADE_ISA=$other_isa fwd isa-again "$tmp/sa2.st"
hit isa-again

# --precision bf16.32 (that ISA still: one part of the key at a time): another entry's start.
BRIGADE_ISA=$other_isa fwd ref-bf16 "$tmp/ref-bf16.st" "$tmp/in.st" --precision bf16.32 \
  --ipu-config-overrides "executable_cache_dir=disabled"
BRIGADE_ISA=$other_isa fwd stale-precision "$tmp/sp.st" "$tmp/in.st" --precision bf16.32
rebuilt stale-precision "stale (the precision"
same "$tmp/sp.st" "$tmp/ref-bf16.st" stale-precision
BRIGADE_ISA=$other_isa fwd precision-again "$tmp/sp2.st" "$tmp/in.st" --precision bf16.32
hit precision-again
same "$tmp/sp2.st" "$tmp/ref-bf16.st" precision-again

# Off: "" and "disabled" write nothing and say nothing.
rm -rf "$tmp/ec"
for off in disabled ""; do
  fwd "off-$off" "$tmp/off.st" "$tmp/in.st" --ipu-config-overrides "executable_cache_dir=$off"
  [[ -e $tmp/ec ]] && bad "executable_cache_dir='$off' made $tmp/ec" || ok
  grep -q "executable" "$tmp/off-$off.err" && bad "off '$off': $(cat "$tmp/off-$off.err")" || ok
  same "$tmp/off.st" "$tmp/ref9.st" "off-$off"
done

# A folder that cannot be made: one warning, an uncached run with the same outputs.
touch "$tmp/file"
fwd unwritable "$tmp/uw.st" "$tmp/in.st" --ipu-config-overrides "executable_cache_dir=$tmp/file/ec"
(($(wc -l <"$tmp/unwritable.err") == 1)) && grep -q "warning: executable_cache_dir '$tmp/file/ec' is not usable" \
  "$tmp/unwritable.err" && ok || bad "unwritable: $(cat "$tmp/unwritable.err")"
same "$tmp/uw.st" "$tmp/ref9.st" unwritable

# A model that cannot be read: its one error line, no entry.
rm -rf "$tmp/ec"
expect_fail "missing model" any "$tmp/nope" "$brigade" forward --model "$tmp/nope" --inputs "$tmp/in.st" \
  --output "$tmp/nope.st" --ipu-config "$tmp/ipu.json"
ls "$tmp"/ec/*.brgexe >/dev/null 2>&1 && bad "an entry for a missing model" || ok
[[ -e $tmp/nope.st ]] && bad "missing model: an output was written" || ok

# A half checkpoint: the entry holds the widened F32 weights; a hit gives the same bits.
"$brigade" train --model "$tmp/m" --data builtin:reverse --rows 8 --micro-batch-size 4 --steps 1 --precision 16.16 \
  --quiet --output "$tmp/h" >/dev/null 2>&1 || bad "train 16.16"
half() { "$brigade" forward --model "$tmp/h" --inputs "$tmp/in.st" --output "$1" --ipu-config "$tmp/ipu.json" \
  --ipu-config-overrides "executable_cache_dir=$2" 2>"$tmp/half.err" >/dev/null || bad "half: $(cat "$tmp/half.err")"; }
half "$tmp/h0.st" disabled
half "$tmp/h1.st" "$tmp/ec"
half "$tmp/h2.st" "$tmp/ec"
hit half
same "$tmp/h1.st" "$tmp/h0.st" half-first
same "$tmp/h2.st" "$tmp/h0.st" half-hit
ls "$tmp"/ec/*.tmp.* >/dev/null 2>&1 && bad "temporaries left in $tmp/ec" || ok

# SIGKILL at moments after the outputs' line, while the start writes its entry: the next start
# finds a whole entry or none (a hit or a fresh write, never a warning) and gives the uncached
# outputs.
"$brigade" init --arch gpt2 --layers 2 --hidden 256 --heads 4 --vocab 32768 --positions 16 --seed 3 --output "$tmp/big" >/dev/null || bad init-big
big() { "$brigade" forward --model "$tmp/big" --inputs "$tmp/in.st" --output "$1" --ipu-config "$tmp/ipu.json" \
  --ipu-config-overrides "executable_cache_dir=$2" >/dev/null 2>"$tmp/big.err"; }
big "$tmp/big0.st" disabled || bad "big: $(cat "$tmp/big.err")"
killed_mid_write=0
for delay in 0 0.002 0.005 0.01 0.02 0.04 0.08 0.16; do
  rm -rf "$tmp/ec" "$tmp/big.out"
  "$brigade" forward --model "$tmp/big" --inputs "$tmp/in.st" --output "$tmp/bigk.st" --ipu-config "$tmp/ipu.json" \
    --ipu-config-overrides "executable_cache_dir=$tmp/ec" >"$tmp/big.out" 2>/dev/null &
  pid=$!
  for _ in $(seq 2000); do grep -q '^logits' "$tmp/big.out" 2>/dev/null && break; sleep 0.005; done
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  ls "$tmp/ec" 2>/dev/null | grep -q '\.tmp\.' && killed_mid_write=$((killed_mid_write + 1))
  big "$tmp/bigk.st" "$tmp/ec" || bad "after a kill at +${delay}s: $(cat "$tmp/big.err")"
  grep -q warning "$tmp/big.err" && bad "after a kill at +${delay}s: $(cat "$tmp/big.err")" || ok
  same "$tmp/bigk.st" "$tmp/big0.st" "after a kill at +${delay}s"
done
echo "kills that left a temporary (mid-write): $killed_mid_write of 8"
finish

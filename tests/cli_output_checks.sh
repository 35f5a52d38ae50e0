#!/usr/bin/env bash
# brigade train checks its output before the first step: a folder that holds files brigade did not
# write is refused (unless --overwrite-output), so is an output that is a file or one of the
# run's inputs; a file system without room for a checkpoint is refused up front; one that fills
# up part-way ends the run with a clear error and leaves the newest checkpoint whole; a run whose
# replicas cannot fit in the machine's memory does not start.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
trap 'umount "$tmp/tiny" "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
run_train() { "$brigade" train --model "$tmp/m" --data builtin:reverse --rows 64 --micro-batch-size 2 --steps 2 --quiet "$@"; }

mkdir -p "$tmp/mine"
echo "my notes" >"$tmp/mine/notes.txt"
expect_fail foreign-files 1 "already holds 'notes.txt', which brigade did not write" run_train --output "$tmp/mine"
[[ -z $(ls "$tmp/mine" | grep -v notes.txt) ]] && ok || bad "something was written into the refused folder: $(ls "$tmp/mine")"
expect_ok overwrite-output run_train --output "$tmp/mine" --overwrite-output
[[ -f $tmp/mine/notes.txt && -d $tmp/mine/checkpoint-2 ]] && ok || bad "overwrite-output: $(ls "$tmp/mine")"
# A folder of an earlier run is fine: only brigade's files (and the run's log) are there.
expect_ok log-inside run_train --output "$tmp/run" --log "$tmp/run/train.jsonl"
expect_ok earlier-run run_train --output "$tmp/run" --log "$tmp/run/train.jsonl" --resume "$tmp/run" --steps 3
expect_ok new-parents run_train --output "$tmp/a/b/c"
echo x >"$tmp/file"
expect_fail output-file 1 "exists and is not a folder" run_train --output "$tmp/file"
expect_fail output-is-model 1 "is the --model folder" run_train --output "$tmp/m"

# Small file systems (tmpfs, where this machine lets the test mount one).
mkdir -p "$tmp/tiny" "$tmp/small"
if mount -t tmpfs -o size=256k tmpfs "$tmp/tiny" 2>/dev/null; then
  expect_fail no-room 1 "free, and a checkpoint of this model takes about" run_train --output "$tmp/tiny"
  # init on a full disk: a clear error and no folder left holding half a model.
  expect_fail init-full 1 "No space left on device" "$brigade" init --arch gpt2 --layers 2 --hidden 128 --heads 2 \
    --vocab 1024 --positions 16 --output "$tmp/tiny/new"
  [[ -e $tmp/tiny/new ]] && bad "init left a partial folder: $(ls "$tmp/tiny/new")" || ok
  umount "$tmp/tiny"
  # Room for a few checkpoints, not for all of them: the run stops at the full disk with one line;
  # the checkpoints written before are whole and no temporary is left.
  mount -t tmpfs -o size=2m tmpfs "$tmp/small"
  expect_fail disk-full 1 "No space left on device" run_train --output "$tmp/small" --steps 20 --save-every 1
  n=0
  for d in "$tmp/small"/checkpoint-*; do
    [[ -d $d ]] || continue
    [[ ${d##*/} =~ ^checkpoint-[0-9]+$ ]] || { bad "a temporary was left: $d"; continue; }
    for f in config.json model.safetensors optimizer.safetensors trainer_state.json; do [[ -f $d/$f ]] || bad "$d lacks $f"; done
    n=$((n + 1))
  done
  ((n >= 1)) && ok || bad "no complete checkpoint before the disk filled: $(ls "$tmp/small")"
  newest=$(cd "$tmp/small" && ls -d checkpoint-* | sort -t- -k2 -n | tail -1)
  bash "$(dirname "$0")/../scripts/make-inputs.sh" "$tmp/in.st" 1 8 256 labels
  "$brigade" forward --model "$tmp/small/$newest" --inputs "$tmp/in.st" --output "$tmp/o.st" >/dev/null && ok ||
    bad "the newest checkpoint before the full disk does not load"
  umount "$tmp/small"
else
  echo "note: cannot mount a tmpfs here; the small-file-system checks are skipped"
fi

# Replicas that cannot all fit in this machine's memory (no --device-memory budget given).
echo '{"replication_factor": 100000}' >"$tmp/huge.json"
expect_fail machine-memory 1 "of memory: lower replication_factor" run_train --output "$tmp/huge" --ipu-config "$tmp/huge.json" \
  --micro-batch-size 1 --rows 100000

finish

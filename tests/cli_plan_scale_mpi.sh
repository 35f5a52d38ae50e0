#!/usr/bin/env bash
# brigade plan --ranks R against measured runs: a tiny GPT-2, 2 replicas x 2 stages, trained
# under `mpirun -np 2` (a replica per rank) and `-np 4` (a device per rank, the pipeline cut
# between ranks), and the step time plan predicts from a one-device calibration trace of the same
# model. The ranks' device threads share this machine's cores (oversubscribed: 4 device threads
# on 2 cores), which plan reads and counts, as it counts other work running meanwhile
# (--other-threads: the cores /proc/stat finds busy before and after the run while the script
# sleeps).
#
# In `make test` (no argument after brigade) the runs and the predictions must work and give
# positive step times, but they are not compared: tests carry no timing thresholds. `make bench`
# runs it with --goal, which prints the comparison as the goal line "plan --ranks within 25% of
# measured: PASS|FAIL" (and exits 1 on FAIL).
# Skipped (exit 77) where mpirun or a brigade built with MPI is missing.
set -uo pipefail
brigade=$1
goal=false
[[ ${2:-} == --goal ]] && goal=true
here=$(dirname "$0")
source "$here/shell_util.sh"

source "$here/mpi_util.sh"
mpi_require

"$brigade" init --arch gpt2 --layers 2 --hidden 64 --heads 2 --vocab 256 --positions 32 --seed 2 \
  --output "$tmp/gpt2" >/dev/null || bad "init gpt2"
echo '{"gradient_accumulation_steps": 4}' >"$tmp/one.json"
echo '{"ipus_per_replica": 2, "layers_per_ipu": [-1], "replication_factor": 2, "gradient_accumulation_steps": 4}' \
  >"$tmp/both.json"
MB=4 SEQ=32 STEPS=40
# Under the sanitizers every load and store is checked and the MPI library's calls are
# intercepted, a cost no block trace of a one-device run shows in the same proportion: there the
# runs and the prediction are made (so they must work) but not compared.
sanitized=false
ldd "$brigade" 2>/dev/null | grep -q 'libasan\|libubsan' && sanitized=true && STEPS=6
# the reference kernels take 30 times as long a step: fewer steps keep the test short
[[ ${BRIGADE_GEMM:-} == ref ]] && STEPS=12
# what the comparison needs, the lower quartile of many steps; without it a few steps show it works
if ! $goal && ((STEPS > 8)); then STEPS=8; fi
train_args=(--model "$tmp/gpt2" --data builtin:reverse --rows 512 --micro-batch-size $MB --lr 1e-3 --seed 4 --quiet)

# The log's tokens_per_s counts every token since the start: step k ended k x tokens-per-step /
# tokens_per_s after it. The lower quartile of the steps after the first (which first touches
# memory): the steps the rest of the machine left alone, as plan's calibration counts its blocks.
quick_step_s() { # LOG TOKENS_PER_STEP
  awk -v per_step="$2" '{
      match($0, /"step": [0-9]+/); k = substr($0, RSTART + 8, RLENGTH - 8)
      match($0, /"tokens_per_s": [0-9.e+]+/); tps = substr($0, RSTART + 16, RLENGTH - 16)
      ended = k * per_step / tps
      if (NR > 1) printf "%.9f\n", ended - before
      before = ended }' "$1" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 3) / 4)] }'
}

# The cores other work keeps busy now: /proc/stat's busy share of half a second in which this
# test sleeps, times the cores (a sampled count of running threads misses the short-lived
# processes of a test suite or a build).
others_running() {
  local t0 t1
  t0=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  sleep 0.5
  t1=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
  awk -v a="$t0" -v b="$t1" -v cores="$(nproc)" 'BEGIN { split(a, x, " "); split(b, y, " ")
    total = y[2] - x[2]; printf "%.2f\n", (total > 0 ? cores * (y[1] - x[1]) / total : 0) }'
}

# One device, traced: the calibration.
"$brigade" train "${train_args[@]}" --ipu-config "$tmp/one.json" --steps 8 --trace "$tmp/cal.json" \
  --log "$tmp/cal.jsonl" --output "$tmp/cal" >/dev/null 2>"$tmp/err" || bad "calibration run: $(cat "$tmp/err")"

# One run under mpirun: its step time ($measured) and plan's prediction ($predicted).
measure() { # NP
  local np=$1 log=$tmp/np$1.jsonl
  rm -rf "$log" "$tmp/np$np"
  local before after
  before=$(others_running)
  timeout 120 mpirun --oversubscribe --bind-to none -np "$np" "$brigade" train "${train_args[@]}" \
    --ipu-config "$tmp/both.json" --steps $STEPS --log "$log" --output "$tmp/np$np" >"$tmp/out.txt" 2>&1 ||
    { bad "mpirun -np $np: $(tail -3 "$tmp/out.txt")"; return 1; }
  after=$(others_running)
  # what other work keeps running meanwhile shares the cores too: as much as before and after
  others=$(awk -v a="$before" -v b="$after" 'BEGIN { print (a + b) / 2 }')
  measured=$(quick_step_s "$log" $((MB * SEQ * 4 * 2)))
  # The ranks of one host talk through shared memory: a network of memory speed, microseconds.
  "$brigade" plan --model "$tmp/gpt2" --ipu-config "$tmp/both.json" --micro-batch-size $MB --sequence-length $SEQ \
    --ranks "$np" --network-gbps 40 --network-latency-us 5 --other-threads "$others" --calibrate "$tmp/cal.json" \
    --json >"$tmp/plan.json" 2>"$tmp/err" || { bad "plan --ranks $np: $(cat "$tmp/err")"; return 1; }
  predicted=$(sed -n 's/^[[:space:]]*"step_s":[[:space:]]*\([0-9.e+-]*\),*$/\1/p' "$tmp/plan.json" | head -1)
  [[ -n $measured && -n $predicted ]] || { bad "-np $np: no step time ('$measured', '$predicted')"; return 1; }
}

apart=()
within_25_percent() { awk -v m="$1" -v p="$2" 'BEGIN { d = (p - m) / m; exit !(d <= 0.25 && d >= -0.25) }'; }

positive() { awk -v v="$1" 'BEGIN { exit !(v > 0 && v < 1e6) }'; }

if ! $goal || $sanitized; then
  for np in 2 4; do
    measure $np || continue
    echo "mpirun -np $np, 2 replicas x 2 stages: measured ${measured}s a step, plan predicts ${predicted}s (not compared)"
    positive "$measured" && positive "$predicted" && ok || bad "-np $np: step times '$measured' / '$predicted'"
  done
  finish
  exit
fi

for np in 2 4; do
  # Other work that comes and goes during a run is not what was counted before and after it: a
  # run outside the bound is measured again, up to three times in all.
  seen=""
  for attempt in 1 2 3; do
    measure $np || continue 2
    seen="$seen ${measured}s (${others} cores busy with other work, ${predicted}s predicted)"
    within_25_percent "$measured" "$predicted" && break
  done
  echo "mpirun -np $np, 2 replicas x 2 stages: measured step(s)$seen"
  within_25_percent "$measured" "$predicted" && ok || apart+=("-np $np:$seen")
done

# The control: the calibration's one-device run again. A machine whose speed changed meanwhile
# (its cores shared with other work this test cannot see, a container's neighbours) makes a
# comparison say nothing: then a miss is reported, not failed.
if ((${#apart[@]})); then
  "$brigade" train "${train_args[@]}" --ipu-config "$tmp/one.json" --steps 8 --log "$tmp/control.jsonl" \
    --output "$tmp/control" >/dev/null 2>"$tmp/err" || bad "control run: $(cat "$tmp/err")"
  before=$(quick_step_s "$tmp/cal.jsonl" $((MB * SEQ * 4)))
  after=$(quick_step_s "$tmp/control.jsonl" $((MB * SEQ * 4)))
  if within_25_percent "$before" "$after" && within_25_percent "$after" "$before"; then
    for miss in "${apart[@]}"; do bad "plan's predictions and the runs' steps are more than 25% apart: $miss"; done
    echo "plan --ranks within 25% of measured (mpirun -np 2 and 4): FAIL"
  else
    echo "skipped: the one-device step took ${before}s before the runs and ${after}s after: the machine's speed" \
      "changed, so the misses (${apart[*]}) say nothing of the model"
    echo "plan --ranks within 25% of measured (mpirun -np 2 and 4): FAIL (not judged: the machine's speed changed)"
    ((failed == 0)) && exit 77
  fi
fi
((${#apart[@]})) || echo "plan --ranks within 25% of measured (mpirun -np 2 and 4): PASS"
finish

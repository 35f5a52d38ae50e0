#!/usr/bin/env bash
# `make bench`'s scale-out rows (bench/run.sh runs this):
#   - a 2-stage GPT-2 small pipeline (6/6 layers, 8 micro-batches of 1 x 128 tokens, 1F1B) run
#     as threads of one process and as `mpirun -np 2` (a stage per rank), alternating, BENCH_ROUNDS
#     rounds: the efficiency of the 2-rank run is its tokens/s over the threads run's (median of
#     the per-round ratios);
#   - plan's scale-out model against measured mpirun runs (tests/cli_plan_scale_mpi.sh --goal).
# Prints "GOAL PASS|FAIL: ..." and "REPORT ..." lines, which bench/report.py puts into results.md
# (and "SCALE" lines per round, for the log).
#
#   bash bench/scale_out.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: bash bench/scale_out.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
brigade=$build/brigade
rounds=${BENCH_ROUNDS:-3}

if ! command -v mpirun >/dev/null 2>&1 || [[ $("$brigade" --version) == *"mpi: none"* ]]; then
    echo "REPORT 2-rank pipeline efficiency: not measured (no mpirun, or brigade built without MPI)"
    echo "GOAL FAIL: plan --ranks within 25% of measured (mpirun -np 2 and 4): not measured (no MPI)"
    exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$brigade" init --arch gpt2 --layers 12 --hidden 768 --heads 12 --vocab 50257 --positions 128 --seed 1 \
    --output "$tmp/gpt2" >/dev/null || { echo "FAILED: brigade init"; exit 1; }
echo '{"ipus_per_replica": 2, "layers_per_ipu": [6, 6], "gradient_accumulation_steps": 8}' >"$tmp/pipe2.json"
args=(--model "$tmp/gpt2" --ipu-config "$tmp/pipe2.json" --data builtin:reverse --rows 256 --micro-batch-size 1
    --steps 4 --lr 1e-4 --seed 3 --quiet)

last_tokens_per_s() { sed -n 's/.*"tokens_per_s": \([0-9.e+]*\).*/\1/p' "$1" | tail -1; }

ratios=()
for round in $(seq 1 "$rounds"); do
    rm -rf "$tmp/threads" "$tmp/ranks"
    "$brigade" train "${args[@]}" --log "$tmp/threads.jsonl" --output "$tmp/threads" >/dev/null 2>"$tmp/err" ||
        { echo "FAILED: threads run: $(cat "$tmp/err")"; exit 1; }
    mpirun --oversubscribe --bind-to none -np 2 "$brigade" train "${args[@]}" --log "$tmp/ranks.jsonl" \
        --output "$tmp/ranks" >/dev/null 2>"$tmp/err" || { echo "FAILED: mpirun -np 2: $(tail -3 "$tmp/err")"; exit 1; }
    threads=$(last_tokens_per_s "$tmp/threads.jsonl")
    ranks=$(last_tokens_per_s "$tmp/ranks.jsonl")
    cmp -s "$tmp/threads/model.safetensors" "$tmp/ranks/model.safetensors" ||
        { echo "FAILED: the 2-rank run's weights differ from the threads run's"; exit 1; }
    ratio=$(awk -v r="$ranks" -v t="$threads" 'BEGIN { printf "%.3f", r / t }')
    ratios+=("$ratio")
    echo "SCALE round=$round threads_tokens_per_s=$threads ranks_tokens_per_s=$ranks efficiency=$ratio"
done
sorted=$(printf '%s\n' "${ratios[@]}" | sort -g)
median=$(echo "$sorted" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
spread=$(echo "$sorted" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }')
echo "REPORT 2-rank pipeline efficiency (GPT-2 small, 2 stages 6/6, 8 micro-batches of 1x128, mpirun -np 2 against the same IPUConfig as threads of one process): ${median} of the threads run's tokens/s (${spread} over $rounds rounds), weights identical"

out=$(bash "$root/tests/cli_plan_scale_mpi.sh" "$brigade" --goal 2>&1)
echo "$out" | grep -v '^ok\|passed,' | sed 's/^/  /'
line=$(echo "$out" | grep 'plan --ranks within 25%' | tail -1)
case $line in
*": PASS"*) echo "GOAL PASS: ${line%: PASS}" ;;
"") echo "GOAL FAIL: plan --ranks within 25% of measured (mpirun -np 2 and 4): the check did not run" ;;
*) echo "GOAL FAIL: ${line%%: FAIL*}${line#*: FAIL}" ;;
esac

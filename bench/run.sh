#!/usr/bin/env bash
# `make bench`: brigade against PyTorch on GPT-2 training and inference, on this machine.
#
#   bash bench/run.sh BUILD_DIR
#
# Measures the fp32 FMA peak, then runs brigade_bench and bench/bench_torch.py on the same
# workloads, alternating between the two per workload so that load from other users of a shared
# machine hits both alike; then PyTorch once more with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# unset (in that command only), and the GEMM microbenchmark. bench/report.py prints the table,
# the brigade/PyTorch ratios and one PASS/FAIL line per goal, and writes bench/results.md.
#
# Environment: BENCH_GEMM=0 skips the GEMM microbenchmark; BENCH_TORCH_UNSET=0 skips the PyTorch
# rerun with the OpenBLAS variables unset. Timings are noisy on a shared machine: read the
# numbers as +-10%.
set -euo pipefail

build=${1:?usage: bash bench/run.sh BUILD_DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$build" && pwd)
venv=$root/tools/.venv
py=$venv/bin/python

cmake --build "$build" --target brigade_bench brigade_bench_gemm -j "$(nproc 2>/dev/null || echo 2)" >/dev/null

if [ ! -x "$py" ]; then
    echo "creating the Python environment in $venv (PyTorch + transformers; first run only)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$root/tools/requirements.txt"
fi

log=$build/bench.log
: >"$log"
failed=0
run() { # run a command, show its output, keep it in the log; a failure is reported, not fatal
    local rc=0
    "$@" >"$log.part" 2>&1 || rc=$?
    grep -v -e '^\[transformers\]' -e 'Warning' "$log.part" | tee -a "$log" || true
    rm -f "$log.part"
    if [ "$rc" != 0 ]; then
        echo "FAILED (exit status $rc): $*" | tee -a "$log"
        failed=1
    fi
}

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
run "$build/brigade_bench" --peak-only
peak1=$(sed -n 's/^RESULT impl=peak .*peak1=\([0-9.]*\).*/\1/p' "$log" | tail -1)
peak2=$(sed -n 's/^RESULT impl=peak .*peak2=\([0-9.]*\).*/\1/p' "$log" | tail -1)
peaks=(--peak1 "${peak1:-0}" --peak2 "${peak2:-0}")

for model in small tiny; do
    for mode in train infer; do
        for bt in 4x64 8x128; do
            echo "== $model $mode $bt: brigade, then PyTorch"
            run "$build/brigade_bench" --no-peak "${peaks[@]}" --model "$model" --mode "$mode" --bt "$bt"
            run "$py" "$root/bench/bench_torch.py" "${peaks[@]}" --model "$model" --mode "$mode" --bt "$bt"
        done
    done
done

if [ "${BENCH_TORCH_UNSET:-1}" != 0 ]; then
    echo "== PyTorch, GPT-2 small, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
    run env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" "$root/bench/bench_torch.py" "${peaks[@]}" \
        --model small --env-tag openblas-unset
fi

if [ "${BENCH_GEMM:-1}" != 0 ]; then
    echo "== GEMM, single thread (GFLOP/s; OpenBLAS as this environment configures it)"
    run "$build/brigade_bench_gemm" --quick
fi

"$py" "$root/bench/report.py" "$log" "$root/bench/results.md"
exit "$failed"

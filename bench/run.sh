#!/usr/bin/env bash
# `make bench`: brigade against PyTorch on GPT-2, BERT-base, ViT-base and T5-small training and
# inference, on this machine.
#
#   bash bench/run.sh BUILD_DIR
#
# Measures the fp32 FMA peak (three times), then runs brigade_bench and bench/bench_torch.py on the
# same workloads in BENCH_ROUNDS rounds (default 3): in each round every workload runs brigade then
# PyTorch back to back, so load from other users of a shared machine hits both alike, and the
# report judges the median of the per-round ratios. PyTorch runs eager with the default and the
# fused AdamW, and torch.compile (at 2 threads; each compile costs tens of seconds on 2 cores).
# Then the peak RSS of GPT-2 small training 4x64, one workload per process (brigade 1dev, PyTorch
# t2, t2-fused, t2-compile), the peak three times more (the report takes the highest of all six),
# PyTorch once more with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (in that command only), and
# the GEMM microbenchmark. bench/report.py prints the table, the brigade/PyTorch ratios and one
# PASS/FAIL line per goal, and writes bench/results.md.
#
# Environment: BENCH_ROUNDS=N rounds; BENCH_MODELS="small tiny bert-base vit-base t5-small" (the
# default) selects models; BENCH_TORCH_COMPILE_THREADS=1,2 compiles at both thread counts (default
# 2); BENCH_RSS=0 skips the RSS runs (BENCH_RSS=1 runs them even when BENCH_MODELS leaves out
# small); BENCH_GEMM=0 skips the GEMM microbenchmark;
# BENCH_TORCH_UNSET=0 skips the PyTorch rerun with the OpenBLAS variables unset; BENCH_DECODE=0 skips
# the decode rows (GPT-2 small and tiny greedy generation, batches 1 and 8, 128 + 128 tokens, with
# the streaming bandwidth their bound uses); BENCH_PRECISION=0 skips GPT-2 small's bf16.32 training
# rows (1dev and 1dev2t, both shapes); BENCH_DATA_WAIT=0 skips bench/data_wait.sh; BENCH_SCALE=0 skips
# bench/scale_out.sh (the 2-rank pipeline's efficiency, plan --ranks against mpirun runs); BENCH_CACHE=0
# skips bench/exe_cache_rows.sh (forward's time to first output with and without the executable cache).
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
say() { echo "$*" | tee -a "$log"; }
run() { # run a command, show its output live, keep it in the log; a failure is logged, not fatal
    { "$@" 2>&1 || echo "FAILED (exit status $?): $*"; } |
        { grep --line-buffered -v -e '^\[transformers\]' -e 'Warning' || true; } | tee -a "$log"
}

rounds=${BENCH_ROUNDS:-3}
# Marks the RESULT lines of one command with its round, for the report's pairing.
in_round() {
    local r=$1
    shift
    run "$@" | tee "$log.last"
    { grep '^RESULT ' "$log.last" || true; } | sed "s/\$/ round=$r/" >>"$log.rounds"
}

say "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
for _ in 1 2 3; do run "$build/brigade_bench" --peak-only; done
# The workloads' own share lines use the best peak so far; the report recomputes every share
# against the best of all the measurements.
peak1=$(sed -n 's/^RESULT impl=peak .*peak1=\([0-9.]*\).*/\1/p' "$log" | sort -g | tail -1)
peak2=$(sed -n 's/^RESULT impl=peak .*peak2=\([0-9.]*\).*/\1/p' "$log" | sort -g | tail -1)
peaks=(--peak1 "${peak1:-0}" --peak2 "${peak2:-0}")

models=${BENCH_MODELS:-small tiny bert-base vit-base t5-small}
compile_threads=${BENCH_TORCH_COMPILE_THREADS:-2}
: >"$log.rounds"
# Progress over the rounds' workloads (a bar on a terminal, a line now and then otherwise; on
# stderr, so the log keeps the results): each model's shapes x train/infer, and its decode.
source "$root/scripts/progress.sh"
workloads=0
for model in $models; do
    case $model in small | tiny) workloads=$((workloads + 4 + (${BENCH_DECODE:-1} != 0))) ;; *) workloads=$((workloads + 2)) ;; esac
done
workloads=$((workloads * rounds)) workloads_done=0 bench_start=$(date +%s)
workload_done() {
    workloads_done=$((workloads_done + 1))
    progress_show "bench" "$workloads_done" "$workloads" workloads "$bench_start" "$1"
}
for round in $(seq 1 "$rounds"); do
    for model in $models; do
        bts="4x64 8x128"
        # torch.compile costs tens of seconds a workload; the tiny model is in no goal.
        variants=eager,fused,compile
        case $model in
            small | tiny) ;;
            *) bts=default ;;
        esac
        [ "$model" = tiny ] && variants=eager,fused
        for mode in train infer; do
            for bt in $bts; do
                # Both pipeline splits run for GPT-2 small training (the goal judges the balanced one);
                # elsewhere the 6/6 split is shown at 4x64 only, to keep the run within minutes. BERT,
                # ViT and T5 run without pipelines.
                configs=all
                [ "$bt" = 8x128 ] && [ "$model/$mode" != small/train ] && configs=1dev,1dev2t,rep2,pipe2bal
                [ "$bt" = default ] && configs=1dev,1dev2t,rep2
                say "== round $round/$rounds: $model $mode $bt: brigade, then PyTorch (at ${SECONDS} s)"
                in_round "$round" "$build/brigade_bench" --no-peak "${peaks[@]}" --model "$model" --mode "$mode" \
                    --bt "$bt" --config "$configs"
                # bf16.32 training beside fp32's (the precision goal pairs them by round), and 16.16.
                if [ "$model/$mode" = small/train ] && [ "${BENCH_PRECISION:-1}" != 0 ]; then
                    in_round "$round" "$build/brigade_bench" --no-peak "${peaks[@]}" --model small --mode train \
                        --bt "$bt" --config 1dev,1dev2t --precision bf16.32
                    # 16.16 on one device: its activation memory against fp32's (act_mib).
                    in_round "$round" "$build/brigade_bench" --no-peak "${peaks[@]}" --model small --mode train \
                        --bt "$bt" --config 1dev --precision 16.16
                fi
                # The same training traced (the tracing goal pairs it with the untraced 1dev row).
                if [ "$model/$mode/$bt" = small/train/4x64 ]; then
                    in_round "$round" "$build/brigade_bench" --no-peak "${peaks[@]}" --model small --mode train \
                        --bt 4x64 --config 1dev --trace "$build/bench-trace.json"
                fi
                in_round "$round" "$py" "$root/bench/bench_torch.py" "${peaks[@]}" --model "$model" --mode "$mode" \
                    --bt "$bt" --variants "$variants" --compile-threads "$compile_threads"
                workload_done "round $round: $model $mode $bt"
            done
        done
    done
    # Greedy decode with the KV cache (GPT-2 only): brigade measures the streaming bandwidth in the
    # same process, then batches 1 and 8 at 1 and 2 threads; PyTorch's generate() on the same shapes.
    if [ "${BENCH_DECODE:-1}" != 0 ]; then
        for model in $models; do
            case $model in small | tiny) ;; *) continue ;; esac
            say "== round $round/$rounds: $model decode: brigade, then PyTorch (at ${SECONDS} s)"
            in_round "$round" "$build/brigade_bench" --no-peak --model "$model" --mode decode
            # the same in bf16.32: the steps read bf16 copies of the weights (shown beside fp32's)
            if [ "${BENCH_PRECISION:-1}" != 0 ]; then
                in_round "$round" "$build/brigade_bench" --no-peak --model "$model" --mode decode --precision bf16.32
            fi
            in_round "$round" "$py" "$root/bench/bench_torch.py" --model "$model" --mode decode
            workload_done "round $round: $model decode"
        done
    fi
done

# Peak RSS needs one workload per process: each run below is a fresh process (env=rss keeps these
# rows out of the rounds' table and ratios).
rss_default=0
[[ " $models " == *" small "* ]] && rss_default=1
if [ "${BENCH_RSS:-$rss_default}" != 0 ]; then
    say "== peak RSS, GPT-2 small train 4x64, one workload per process: brigade 1dev, PyTorch t2, t2-fused, t2-compile"
    in_round 1 "$build/brigade_bench" --no-peak "${peaks[@]}" --model small --mode train --bt 4x64 --config 1dev \
        --env-tag rss
    for one in t2 t2-fused t2-compile; do
        in_round 1 "$py" "$root/bench/bench_torch.py" "${peaks[@]}" --model small --mode train --bt 4x64 --one "$one" \
            --env-tag rss
    done
fi
for _ in 1 2 3; do run "$build/brigade_bench" --peak-only; done

if [ "${BENCH_TORCH_UNSET:-1}" != 0 ] && [[ " $models " == *" small "* ]]; then
    say "== PyTorch, GPT-2 small 4x64, with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
    in_round 1 env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" "$root/bench/bench_torch.py" "${peaks[@]}" \
        --model small --bt 4x64 --variants eager --env-tag openblas-unset
fi

if [ "${BENCH_GEMM:-1}" != 0 ]; then
    say "== GEMM, single thread, GFLOP/s: our kernels against OpenBLAS as this environment configures it"
    run "$build/brigade_bench_gemm" --quick
    say "== GEMM, single thread, GFLOP/s: our kernels against OpenBLAS with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset"
    run env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/brigade_bench_gemm" --quick
fi

if [ "${BENCH_DATA_WAIT:-1}" != 0 ]; then
    say "== share of step time the devices wait for data, without and with --dataloader-workers (bench/data_wait.sh)"
    run bash "$root/bench/data_wait.sh" "$build"
fi

if [ "${BENCH_CACHE:-1}" != 0 ]; then
    say "== executable cache: time to first output of forward, uncached against cached (bench/exe_cache_rows.sh)"
    run bash "$root/bench/exe_cache_rows.sh" "$build" "$py"
fi

if [ "${BENCH_SCALE:-1}" != 0 ]; then
    say "== scale-out: a 2-rank pipeline against the threads run, plan --ranks against measured runs (bench/scale_out.sh)"
    run bash "$root/bench/scale_out.sh" "$build"
fi

progress_end
say "== all measurements done after ${SECONDS} s"
# The log keeps what was shown; the round-tagged RESULT lines replace the untagged copies.
grep -v '^RESULT impl=\(brigade\|torch\|bandwidth\)' "$log" >"$log.report"
cat "$log.rounds" >>"$log.report"
"$py" "$root/bench/report.py" "$log.report" "$root/bench/results.md"
if grep -q '^FAILED' "$log"; then exit 1; fi

#!/usr/bin/env bash
# make bench's plumbing: brigade_bench prints RESULT lines that bench/report.py parses, and the
# report's goal verdicts fall on the right side of each threshold. Runs the tiny model for one
# step (no timing is judged), then feeds the report hand-written lines just above and just below
# every goal. Skipped (exit 77) without python3, which only `make bench` needs.
#
#   bash tests/bench_report.sh BRIGADE_BENCH
set -uo pipefail

bench=${1:?usage: bench_report.sh BRIGADE_BENCH}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
source "$root/tests/shell_util.sh"

# A real run: every configuration prints one RESULT line the report turns into a table row.
"$bench" --no-peak --peak1 100 --peak2 200 --model tiny --mode train --bt 4x64 --config 1dev,pipe2bal \
    --steps 1 --warmup 1 >"$tmp/run.log" 2>&1 || bad "brigade_bench exited with $?: $(tail -3 "$tmp/run.log")"
for cfg in 1dev pipe2bal; do
    grep -q "^RESULT impl=brigade model=tiny mode=train bt=4x64 config=$cfg .*tokens_per_s=" "$tmp/run.log" && ok ||
        bad "no RESULT line for $cfg"
done
python3 "$root/bench/report.py" "$tmp/run.log" "$tmp/run.md" >/dev/null 2>&1 || bad "report.py failed on a real run"
grep -q '^| tiny | train | 4x64 | brigade | pipe2bal | 2 |' "$tmp/run.md" && ok || bad "no pipe2bal row in the table"
[ "$(grep -c '^- FAIL: .*not measured' "$tmp/run.md")" -ge 3 ] && ok || bad "goals without GPT-2 small rows should be 'not measured'"

# Hand-written lines: $1 scales every brigade number against its threshold (above or below).
synthetic() {
    local above=$1 f
    [ "$above" = 1 ] && f=(400 0.61 0.81 1000) || f=(396 0.59 0.79 996)
    cat <<EOF
RESULT impl=peak isa=avx512 peak1=100 peak2=200
RESULT impl=brigade model=small mode=train bt=4x64 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[0]} gflops=1 peak_share=${f[1]} pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512
RESULT impl=brigade model=small mode=train bt=8x128 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=${f[0]} gflops=1 peak_share=${f[1]} pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512
RESULT impl=brigade model=small mode=train bt=4x64 config=pipe2bal cores=2 threads=1 ms_per_step=1 tokens_per_s=1 gflops=1 peak_share=0.1 pipe_eff=${f[2]} ideal=0.8889 steps=1 params=1 gemm=avx512
RESULT impl=brigade model=small mode=train bt=8x128 config=pipe2bal cores=2 threads=1 ms_per_step=1 tokens_per_s=1 gflops=1 peak_share=0.1 pipe_eff=${f[2]} ideal=0.8889 steps=1 params=1 gemm=avx512
RESULT impl=brigade model=small mode=infer bt=4x64 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[3]} gflops=1 peak_share=0.5 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512
RESULT impl=torch model=small mode=train bt=4x64 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=199 gflops=1 peak_share=0.2
RESULT impl=torch model=small mode=train bt=4x64 config=t1 cores=1 threads=1 ms_per_step=1 tokens_per_s=120 gflops=1 peak_share=0.2
RESULT impl=torch model=small mode=train bt=8x128 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=199 gflops=1 peak_share=0.2
RESULT impl=torch model=small mode=infer bt=4x64 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=499 gflops=1 peak_share=0.2
EOF
}
for above in 1 0; do
    synthetic $above >"$tmp/s$above.log"
    python3 "$root/bench/report.py" "$tmp/s$above.log" "$tmp/s$above.md" >/dev/null 2>&1 ||
        { bad "report.py failed on the synthetic lines"; continue; }
    want=PASS other=FAIL
    [ "$above" = 0 ] && want=FAIL other=PASS
    n=$(grep -c "^- $want: " "$tmp/s$above.md")
    [ "$n" = 4 ] && ok || bad "expected 4 $want verdicts, got $n: $(grep -E '^- (PASS|FAIL)' "$tmp/s$above.md")"
    grep -q "^- $other: " "$tmp/s$above.md" && bad "unexpected $other verdict" || ok
done
grep -q '2.01× (brigade rep2 400.0 vs PyTorch 199.0 tokens/s)' "$tmp/s1.md" && ok || bad "training ratio line"
grep -q '91.1% of ideal 88.9%' "$tmp/s1.md" && ok || bad "pipeline line"

finish

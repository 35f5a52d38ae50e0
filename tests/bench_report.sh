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
"$bench" --no-peak --model tiny --mode train --bt 4x64 --config 1dev --steps 1 --warmup 1 --precision bf16.32 \
    >"$tmp/half.log" 2>&1 || bad "brigade_bench --precision exited with $?: $(tail -3 "$tmp/half.log")"
grep -q "^RESULT impl=brigade model=tiny mode=train bt=4x64 config=1dev .* precision=bf16.32" "$tmp/half.log" && ok ||
    bad "no precision=bf16.32 in the RESULT line"
# the bf16 products' kernel: one of brg_gemm_half's (it depends on the CPU); none in fp32
grep -q " half_gemm=\(amxbf16\|avx512bf16\|avx512\|avx2\|openblas\|ref\) " "$tmp/half.log" && ok ||
    bad "no half_gemm kernel in the bf16.32 RESULT line: $(grep '^RESULT' "$tmp/half.log")"
grep -q " half_gemm=none " "$tmp/run.log" && ok || bad "fp32 RESULT lines do not say half_gemm=none"
"$bench" --no-peak --model tiny --mode train --precision fp8 >"$tmp/bad.log" 2>&1 && bad "--precision fp8 accepted" ||
    { grep -q "is not one of 32.32" "$tmp/bad.log" && ok || bad "--precision fp8: $(cat "$tmp/bad.log")"; }
cat "$tmp/half.log" >>"$tmp/run.log"
python3 "$root/bench/report.py" "$tmp/run.log" "$tmp/run.md" >/dev/null 2>&1 || bad "report.py failed on a real run"
grep -q 'simd=[a-z0-9]* ' "$tmp/run.log" && ok || bad "RESULT lines do not name the element-wise kernels"
grep -q '^| tiny | train | 4x64 | brigade | pipe2bal | 2 |' "$tmp/run.md" && ok || bad "no pipe2bal row in the table"
[ "$(grep -c '^- FAIL: .*not measured' "$tmp/run.md")" -ge 3 ] && ok || bad "goals without GPT-2 small rows should be 'not measured'"

# A real decode run, a few tokens of the tiny model: the bandwidth and decode RESULT lines, and
# the report's decode table (no speed is judged).
"$bench" --no-peak --model tiny --mode decode --config 1dev --prompt 8 --new-tokens 3 --bw-mib 64 \
    >"$tmp/dec.log" 2>&1 || bad "brigade_bench --mode decode exited with $?: $(tail -3 "$tmp/dec.log")"
[ "$(grep -c '^RESULT impl=bandwidth kind=bandwidth threads=[12] gbps=[0-9.]* ' "$tmp/dec.log")" = 2 ] && ok ||
    bad "no bandwidth RESULT lines for 1 and 2 threads"
# The decode rows' peak RSS is their generate's (the tiny model and its buffers, about 30 MiB), not
# the 64 MiB bandwidth buffers'. Under AddressSanitizer the shadow memory alone is larger (about
# 190 MiB), so an instrumented build checks only that the field is there.
rss=$(sed -n 's/^RESULT impl=brigade model=tiny mode=decode bt=1x8 .* peak_rss_mb=\([0-9]*\).*/\1/p' "$tmp/dec.log")
if grep -q __asan_init "$bench"; then
    [ -n "$rss" ] && ok || bad "the batch-1 decode row has no peak RSS"
else
    [ -n "$rss" ] && [ "$rss" -lt 64 ] && ok || bad "the batch-1 decode row's peak RSS is ${rss:-missing} MiB, not its generate's"
fi
grep -q '^RESULT impl=brigade model=tiny mode=decode-requests bt=4x1x8 config=1dev .*tokens_per_s=[0-9.]* .*bw_gbps=[1-9][0-9.]* bw_when=around ' \
    "$tmp/dec.log" && ok || bad "no decode-requests RESULT line with the bandwidth around it"
for b in 1 8; do
    grep -q "^RESULT impl=brigade model=tiny mode=decode bt=${b}x8 config=1dev .*batch=$b .*prefill_ms=[0-9.]* .*decode_tokens_per_s=[0-9.]* .*bytes_per_token=[0-9]* .*bw_gbps=[0-9.]* bw_when=around bw_start_gbps=[0-9.]* bw_bound_tokens_per_s=[0-9.]* " \
        "$tmp/dec.log" && ok || bad "no decode RESULT line for batch $b"
done
python3 "$root/bench/report.py" "$tmp/dec.log" "$tmp/dec.md" >/dev/null 2>&1 || bad "report.py failed on a decode run"
grep -q '^| tiny | 8x8+3 | brigade | 1dev | 1 | ' "$tmp/dec.md" && ok || bad "no decode row in the table"
[ "$(grep -c '^- FAIL: GPT-2 small .*decode.*not measured' "$tmp/dec.md")" = 4 ] && ok ||
    bad "decode goals without GPT-2 small rows should be 'not measured'"

# Hand-written lines, two rounds: $1 = 1 puts every brigade number just above its goal, 0 just
# below. The peak is measured three times: the report must take the highest. One row claims more
# than the peak (a busy moment during the peak measurement): it must be dropped, not win a ratio.
# The RSS goal reads only the one-workload processes (rss=fresh, here in run.sh's env=rss runs):
# a later measurement's peak so far (rss=cumulative) would pass it either way, and the env=rss
# rows' speed would pass every GPT-2 small training ratio, so neither may count.
synthetic() {
    local above=$1 f r m bf
    [ "$above" = 1 ] && f=(400 71 142 0.81 1000 171 690 151 401) || f=(396 69 138 0.79 996 169 710 149 399)
    # bf16.32 training against fp32's 100 tokens/s: above both thresholds (1.6x with AVX512_BF16,
    # 1.15x without) or below both, so the verdict does not depend on this machine's CPU.
    [ "$above" = 1 ] && bf=161 || bf=114
    # decode requests on 2 stages against one device's 100 tokens/s: 1.61x or 1.59x (goal 1.6x)
    [ "$above" = 1 ] && rq=161 || rq=159
    # traced training against untraced 50 tokens/s: 0.98x or 0.978x (goal: at least 0.98x)
    [ "$above" = 1 ] && tr=49 || tr=48.9
    # 16.16 activation memory against fp32's 100 MiB: 0.55x or 0.551x (goal: at most 0.55x)
    [ "$above" = 1 ] && am=55 || am=55.1
    cat <<EOF
RESULT impl=peak isa=avx512 peak1=50 peak2=90
RESULT impl=peak isa=avx512 peak1=100 peak2=200
RESULT impl=peak isa=avx512 peak1=80 peak2=150
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=99999 gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 peak_rss_mb=${f[6]} rss=fresh env=rss round=1
RESULT impl=torch model=small mode=train bt=4x64 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=1 gflops=1 peak_rss_mb=1000 rss=fresh env=rss round=1
RESULT impl=torch model=small mode=train bt=4x64 config=t2-fused cores=2 threads=2 ms_per_step=1 tokens_per_s=1 gflops=1 peak_rss_mb=1100 rss=fresh env=rss round=1
EOF
    for r in 1 2; do
        cat <<EOF
RESULT impl=brigade model=small mode=train bt=4x64 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[0]} gflops=${f[2]} pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 peak_rss_mb=100 rss=cumulative round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=9000 gflops=150 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=100 gflops=${f[1]} pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 act_mib=200 round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=90 gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 precision=16.16 act_mib=$(python3 -c "print($am * 2)") round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=45 gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 precision=16.16 act_mib=$am round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=1dev2t cores=2 threads=2 ms_per_step=1 tokens_per_s=${f[5]} gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev2t cores=2 threads=2 ms_per_step=1 tokens_per_s=100 gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 precision=32.32 round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=50 gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 precision=32.32 trace=off act_mib=100 round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=$tr gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 precision=32.32 trace=on round=$r
RESULT impl=brigade model=small mode=decode-requests bt=4x1x128 config=1dev cores=1 threads=1 requests=4 new_tokens=128 ms_per_step=1 tokens_per_s=100 gflops=0 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=decode-requests bt=4x1x128 config=pipe2 cores=2 threads=1 requests=4 new_tokens=128 ms_per_step=1 tokens_per_s=$rq gflops=0 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=1dev2t cores=2 threads=2 ms_per_step=1 tokens_per_s=$bf gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 half_gemm=avx512bf16 precision=bf16.32 round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=1dev cores=1 threads=1 ms_per_step=1 tokens_per_s=$bf gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 half_gemm=avx512bf16 precision=bf16.32 round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[0]} gflops=10 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=train bt=4x64 config=pipe2bal cores=2 threads=1 ms_per_step=1 tokens_per_s=1 gflops=1 pipe_eff=${f[3]} ideal=0.8889 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=train bt=8x128 config=pipe2bal cores=2 threads=1 ms_per_step=1 tokens_per_s=1 gflops=1 pipe_eff=${f[3]} ideal=0.8889 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=infer bt=4x64 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[4]} gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=infer bt=8x128 config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[4]} gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=torch model=small mode=train bt=4x64 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=199 gflops=1 peak_rss_mb=5000 rss=fresh round=$r
RESULT impl=torch model=small mode=train bt=4x64 config=t2-compile cores=2 threads=2 ms_per_step=1 tokens_per_s=150 gflops=1 peak_rss_mb=5000 rss=cumulative compile_s=30 optim=fused round=$r
RESULT impl=torch model=small mode=train bt=4x64 config=t1 cores=1 threads=1 ms_per_step=1 tokens_per_s=120 gflops=1 round=$r
RESULT impl=torch model=small mode=train bt=8x128 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=199 gflops=1 round=$r
RESULT impl=torch model=small mode=infer bt=4x64 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=499 gflops=1 round=$r
RESULT impl=torch model=small mode=infer bt=8x128 config=t2 cores=2 threads=2 ms_per_step=1 tokens_per_s=499 gflops=1 round=$r
EOF
        # Decode: batch 1 against 100 tokens/s (1.5x), batch 8 against 200 (2x); the bound is the
        # highest 1-thread bandwidth (21.5 GB/s, not the other round's 15) over 100 MB a token:
        # 215 tokens/s, so 151 is 70.2% of it and 149 69.3%.
        cat <<EOF
RESULT impl=bandwidth kind=bandwidth threads=1 gbps=$([ "$r" = 1 ] && echo 21.5 || echo 15) buffer_mib=1024 round=$r
RESULT impl=bandwidth kind=bandwidth threads=2 gbps=30 buffer_mib=1024 round=$r
RESULT impl=brigade model=small mode=decode bt=1x128 config=1dev cores=1 threads=1 batch=1 prompt=128 new_tokens=128 prefill_ms=50 ms_per_step=1 decode_tokens_per_s=${f[7]} tokens_per_s=${f[7]} gflops=1 bytes_per_token=100000000 bw_gbps=15 bw_bound_tokens_per_s=150 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=decode bt=1x128 config=1dev cores=1 threads=1 batch=1 prompt=128 new_tokens=128 prefill_ms=50 ms_per_step=1 decode_tokens_per_s=300 tokens_per_s=300 gflops=1 bytes_per_token=50000000 bw_gbps=15 bw_bound_tokens_per_s=300 params=1 gemm=avx512 precision=bf16.32 round=$r
RESULT impl=brigade model=small mode=decode bt=1x128 config=1dev2t cores=2 threads=2 batch=1 prompt=128 new_tokens=128 prefill_ms=40 ms_per_step=1 decode_tokens_per_s=140 tokens_per_s=140 gflops=1 bytes_per_token=100000000 bw_gbps=30 bw_bound_tokens_per_s=300 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=decode bt=8x128 config=1dev cores=1 threads=1 batch=8 prompt=128 new_tokens=128 prefill_ms=300 ms_per_step=1 decode_tokens_per_s=${f[8]} tokens_per_s=${f[8]} gflops=1 bytes_per_token=20000000 bw_gbps=15 bw_bound_tokens_per_s=750 params=1 gemm=avx512 round=$r
RESULT impl=torch model=small mode=decode bt=1x128 config=t1 cores=1 threads=1 batch=1 prompt=128 new_tokens=128 prefill_ms=80 ms_per_step=1 decode_tokens_per_s=100 tokens_per_s=100 gflops=1 bytes_per_token=100000000 params=1 peak_rss_mb=900 rss=fresh env=default round=$r
RESULT impl=torch model=small mode=decode bt=1x128 config=t2 cores=2 threads=2 batch=1 prompt=128 new_tokens=128 prefill_ms=60 ms_per_step=1 decode_tokens_per_s=90 tokens_per_s=90 gflops=1 bytes_per_token=100000000 params=1 round=$r
RESULT impl=torch model=small mode=decode bt=8x128 config=t2 cores=2 threads=2 batch=8 prompt=128 new_tokens=128 prefill_ms=400 ms_per_step=1 decode_tokens_per_s=200 tokens_per_s=200 gflops=1 bytes_per_token=20000000 params=1 round=$r
EOF
        for m in bert-base vit-base t5-small; do
            cat <<EOF
RESULT impl=brigade model=$m mode=train bt=default config=rep2 cores=2 threads=1 ms_per_step=1 tokens_per_s=${f[7]} gflops=1 pipe_eff=1 ideal=1 steps=1 params=1 gemm=avx512 round=$r
RESULT impl=torch model=$m mode=train bt=default config=t2-compile cores=2 threads=2 ms_per_step=1 tokens_per_s=100 gflops=1 compile_s=20 round=$r
RESULT impl=torch model=$m mode=train bt=default config=t2-fused cores=2 threads=2 ms_per_step=1 tokens_per_s=90 gflops=1 optim=foreach round=$r
EOF
        done
    done
}
for above in 1 0; do
    synthetic $above >"$tmp/s$above.log"
    python3 "$root/bench/report.py" "$tmp/s$above.log" "$tmp/s$above.md" >/dev/null 2>&1 ||
        { bad "report.py failed on the synthetic lines"; continue; }
    n=$(grep -c "^- PASS: " "$tmp/s$above.md")
    want=16
    [ "$above" = 0 ] && want=0
    [ "$n" = "$want" ] && ok || bad "expected $want PASS verdicts, got $n: $(grep -E '^- (PASS|FAIL)' "$tmp/s$above.md")"
    grep -q '^- FAIL: .*not measured' "$tmp/s$above.md" && bad "a goal is 'not measured'" || ok
    grep -q 'above 100% of the measured peak' "$tmp/s$above.md" && ok || bad "the row above the peak is not flagged"
    grep -q '9000' "$tmp/s$above.md" && bad "the row above the peak is reported" || ok
done
grep -q '4x64: 2.01× (2.01–2.01) over 2 round(s)' "$tmp/s1.md" && ok || bad "training ratio line: $(grep 'training tokens' "$tmp/s1.md")"
grep -q '1.71× (1.71–1.71) over 2 round(s)' "$tmp/s1.md" && ok || bad "threads line: $(grep '2 threads' "$tmp/s1.md")"
grep -q '4x64: 71.0% (71.0–71.0) of the cores' "$tmp/s1.md" && ok || bad "peak share against the best peak: $(grep 'FMA peak of' "$tmp/s1.md")"
grep -q '4x64: 91.1% (91.1–91.1) of ideal 88.9%' "$tmp/s1.md" && ok || bad "pipeline line: $(grep 'pipeline,' "$tmp/s1.md")"
grep -q 'highest of 3 measurements' "$tmp/s1.md" && ok || bad "peak line"
grep -q 'Tracing on costs .*: traced/untraced 0.980× (0.980–0.980) over 2 round(s)' "$tmp/s1.md" && ok ||
    bad "tracing line: $(grep 'Tracing on' "$tmp/s1.md")"
"$bench" --no-peak --model tiny --mode train --bt 4x64 --config 1dev --steps 1 --warmup 1 --trace "$tmp/t.json" \
    >"$tmp/traced.log" 2>&1 && grep -q ' trace=on' "$tmp/traced.log" && python3 -c "import json,sys; json.load(open(sys.argv[1]))" \
    "$tmp/t.json" && ok || bad "brigade_bench --trace: $(tail -2 "$tmp/traced.log")"
grep -q '4 requests in flight .*: 1.61× (1.61–1.61) over 2 round(s) (last: 161.0 vs 100.0 tokens/s)' "$tmp/s1.md" && ok ||
    bad "requests line: $(grep 'requests in flight' "$tmp/s1.md")"
grep -q 'bf16.32 training tokens/s .*4x64: 1dev2t 1.61× (1.61–1.61); 8x128: 1dev 1.61× (1.61–1.61)' "$tmp/s1.md" && ok ||
    bad "precision line: $(grep 'bf16.32 training' "$tmp/s1.md")"
grep -q 'bf16.32 training tokens/s .*; bf16 products on avx512bf16;' "$tmp/s1.md" && ok ||
    bad "the precision line does not name the bf16 kernel: $(grep 'bf16.32 training' "$tmp/s1.md")"
grep -q '^| small | train | 8x128 | brigade | 1dev bf16.32 | 1 |' "$tmp/s1.md" && ok || bad "no bf16.32 row in the table"
grep -q '16.16 activation memory .*: 4x64: 0.550x (55.0 MiB against 100.0); 8x128: 0.550x (110.0 MiB against 200.0)' \
    "$tmp/s1.md" && ok || bad "activation memory line: $(grep '16.16 activation' "$tmp/s1.md")"
grep -q ' act_mib=[0-9.]*' "$tmp/half.log" && ok || bad "no act_mib in the training RESULT line"
grep -q '690 vs 1000 MiB (PyTorch t2), 0.69×' "$tmp/s1.md" && ok || bad "RSS line: $(grep 'Peak RSS of' "$tmp/s1.md")"
grep -q 'bert-base training .* 1.51× (1.51–1.51) over 2 round(s) (best round: brigade rep2 151.0 vs PyTorch t2-compile' \
    "$tmp/s1.md" && ok || bad "BERT line: $(grep 'bert-base training' "$tmp/s1.md")"
grep -q 'batch 1 (128-token prompts, 128 new tokens), >= 1.5x .*: 1.51× (1.51–1.51) over 2 round(s) (best round: brigade 1dev 151.0 vs PyTorch t1 100.0' \
    "$tmp/s1.md" && ok || bad "decode batch-1 line: $(grep 'decode, batch 1' "$tmp/s1.md")"
grep -q 'batch 8 (128-token prompts, 128 new tokens), >= 2.0x .*: 2.00× (2.00–2.00) over 2 round(s)' "$tmp/s1.md" && ok ||
    bad "decode batch-8 line: $(grep 'decode, batch 8' "$tmp/s1.md")"
grep -q 'bandwidth bound .*: 70.2% (70.2–70.2) over 2 round(s) (last: 1dev 151.0 of 215.0 tokens/s, 100.0 MB/token)' \
    "$tmp/s1.md" && ok || bad "bound line: $(grep 'bandwidth bound' "$tmp/s1.md")"
grep -q '^| small | 1x128+128 | brigade | 1dev | 1 | 50.0 | 151.0 (151.0–151.0) | 100.0 | 215.0 | 70.2% |' "$tmp/s1.md" &&
    ok || bad "decode table row: $(grep '1x128+128 | brigade | 1dev |' "$tmp/s1.md")"
grep -q 'bf16.32 decode (weights read as bf16) against fp32.s, paired by round: batch 1 1dev 1.99× (1.99–1.99)' \
    "$tmp/s1.md" && ok || bad "bf16 decode line: $(grep 'bf16.32 decode' "$tmp/s1.md")"
grep -q "Streaming bandwidth at the runs' starts (highest of 4 measurements): 1 thread(s) 21.5 GB/s, 2 thread(s) 30.0 GB/s" \
    "$tmp/s1.md" && ok || bad "bandwidth line"
# A row that carries the bandwidth measured around its generate is held to that, not to the run's
# highest: 2 threads read 40 GB/s at the start, 20 around the row (bound 200 tokens/s at 100 MB a
# token), so 150 tokens/s is 75.0% of its bound and 37.5% of the run's highest.
for r in 1 2; do
    cat <<EOF
RESULT impl=bandwidth kind=bandwidth threads=2 gbps=40 buffer_mib=1024 round=$r
RESULT impl=brigade model=small mode=decode bt=1x128 config=1dev2t cores=2 threads=2 batch=1 prompt=128 new_tokens=128 prefill_ms=40 ms_per_step=1 decode_tokens_per_s=150 tokens_per_s=150 gflops=1 bytes_per_token=100000000 bw_gbps=20 bw_when=around bw_start_gbps=40 bw_bound_tokens_per_s=200 params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=decode-requests bt=4x1x128 config=1dev cores=1 threads=1 requests=4 new_tokens=128 ms_per_step=1 tokens_per_s=100 gflops=0 bw_gbps=25 bw_when=around params=1 gemm=avx512 round=$r
RESULT impl=brigade model=small mode=decode-requests bt=4x1x128 config=pipe2 cores=2 threads=1 requests=4 new_tokens=128 ms_per_step=1 tokens_per_s=135 gflops=0 bw_gbps=35 bw_when=around params=1 gemm=avx512 round=$r
EOF
done >"$tmp/around.log"
python3 "$root/bench/report.py" "$tmp/around.log" "$tmp/around.md" >/dev/null 2>&1 || bad "report.py failed on around rows"
grep -q 'PASS: GPT-2 small batch-1 decode >= 70% of the memory-bandwidth bound .*: 75.0% (75.0–75.0) over 2 round(s) (last: 1dev2t 150.0 of 200.0 tokens/s' \
    "$tmp/around.md" && ok || bad "around bound line: $(grep 'bandwidth bound' "$tmp/around.md")"
grep -q '^| small | 1x128+128 | brigade | 1dev2t | 2 | 40.0 | 150.0 (150.0–150.0) | 100.0 | 200.0 | 75.0% | 37.5% |' \
    "$tmp/around.md" && ok || bad "around table row: $(grep '1x128+128 | brigade' "$tmp/around.md")"
# The request rows' bandwidths around them (35 GB/s for the pipeline's two threads, 25 for one)
# explain the pipeline's gain.
grep -q "FAIL: .*4 requests in flight .*: 1.35× (1.35–1.35) over 2 round(s) (last: 135.0 vs 100.0 tokens/s; two threads read 1.40× (1.40–1.40) one thread's streaming bandwidth around these runs)" \
    "$tmp/around.md" && ok || bad "requests line with bandwidths: $(grep 'requests in flight' "$tmp/around.md")"
# Table: compile time and the foreach fallback in the notes, a peak so far marked, the RSS-only
# runs in their own table and not among the rounds.
grep -q '^| small | train | 4x64 | torch | t2-compile | 2 | .* | 5000 † | 2 | compile 30.0 s (30.0–30.0) |$' "$tmp/s1.md" && ok ||
    bad "compile row: $(grep 't2-compile' "$tmp/s1.md" | head -1)"
grep -q '^| vit-base | train | default | torch | t2-fused | .* | foreach AdamW' "$tmp/s1.md" && ok || bad "foreach note"
grep -q '^| small | train | 4x64 | brigade | 1dev | 690 | 99999.0 |$' "$tmp/s1.md" && ok || bad "fresh RSS table"
[ "$(grep -c '99999' "$tmp/s1.md")" = 1 ] && ok || bad "an RSS-only run is in the main table or a ratio"

finish

#!/usr/bin/env bash
# Progress of the long scripts (scripts/progress.sh, used by make fuzz and make bench): plain lines
# with count, total and ETA off a terminal, a bar rewritten in place on one; fuzz/run.sh showing a
# harness's seconds and inputs while it runs (a stand-in harness, so no clang is needed).
set -uo pipefail
source "$(dirname "$0")/shell_util.sh"
root=$(cd "$(dirname "$0")/.." && pwd)

# Plain lines: label, done/total unit, ETA from the rate so far, the extra text. Started 100 s
# before (as this shell's clock says): 2 of 3 done leave 100 * 1 / 2 = 50 s, and 50 still if the
# clock ticks to 101 s before progress_show reads it.
out=$(BRIGADE_PROGRESS_INTERVAL=0 bash -c "source '$root/scripts/progress.sh'; \
  progress_show work 2 3 s \$((\$(date +%s) - 100)) 'x y'; progress_show work 4 4 s \$(date +%s)" 2>&1 >/dev/null)
[[ $(sed -n 1p <<<"$out") == "work: 2/3 s ETA 0:50  x y" ]] && ok || bad "plain line: '$(sed -n 1p <<<"$out")'"
[[ $(sed -n 2p <<<"$out") == "work: 4/4 s" ]] && ok || bad "last line: '$(sed -n 2p <<<"$out")'"
# Rate-limited: within the interval only the first and the last line.
out=$(BRIGADE_PROGRESS_INTERVAL=60 bash -c "source '$root/scripts/progress.sh'; s=\$(date +%s); \
  for i in 1 2 3 4; do progress_show w \$i 4 steps \$s; done" 2>&1 >/dev/null)
[[ $(wc -l <<<"$out") == 2 && $out == *"w: 4/4 steps"* ]] && ok || bad "rate limit: '$out'"
# A terminal (a pty through script(1), where there is one): a bar, rewritten with \r.
if command -v script >/dev/null; then
  script -qec "bash -c \"source '$root/scripts/progress.sh'; progress_show w 1 4 steps \\\$(date +%s); progress_end\"" \
    /dev/null >"$tmp/tty.txt" 2>&1
  grep -q $'\r\[======>                 \] 1/4 steps' "$tmp/tty.txt" && ok || bad "no bar on a terminal: $(cat -v "$tmp/tty.txt")"
fi

# fuzz/run.sh on a stand-in harness that runs 3 s and logs libFuzzer's '#N' lines.
mkdir -p "$tmp/build" "$tmp/root/fuzz/corpus/fake" "$tmp/root/scripts"
cp "$root/fuzz/run.sh" "$tmp/root/fuzz/" && cp "$root/scripts/progress.sh" "$tmp/root/scripts/"
cat >"$tmp/build/fuzz_fake" <<'SH'
#!/usr/bin/env bash
for a in "$@"; do [[ $a == -merge=1 ]] && exit 0; done
for i in 1 2 3; do echo "#${i}000	pulse  cov: 10 ft: 10"; sleep 1; done
echo "stat::number_of_executed_units: 3000"
SH
chmod +x "$tmp/build/fuzz_fake"
BRIGADE_PROGRESS_INTERVAL=0 bash "$tmp/root/fuzz/run.sh" "$tmp/build" 3 fake >"$tmp/fuzz.out" 2>"$tmp/fuzz.err" && ok ||
  bad "run.sh failed: $(cat "$tmp/fuzz.err")"
grep -qE '^fuzz_fake \(1 of 1\): [0-9]/3 s' "$tmp/fuzz.err" && ok || bad "no progress lines: $(cat "$tmp/fuzz.err")"
grep -qE '^fuzz_fake \(1 of 1\): [12]/3 s ETA 0:0[0-9]  [123]000 inputs' "$tmp/fuzz.err" && ok ||
  bad "no ETA and inputs: $(cat "$tmp/fuzz.err")"
grep -q 'stat::number_of_executed_units: 3000' "$tmp/fuzz.out" && ok || bad "the harness's stats: $(cat "$tmp/fuzz.out")"
finish

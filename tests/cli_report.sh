#!/usr/bin/env bash
# brigade report OUT: a tiny GPT-2 trained pipelined over 2 devices with --log and --trace, then
# its report.html: well-formed (Python's HTML parser over the page, its XML parser over every
# <svg>), self-contained (no scripts, nothing fetched), every plot drawn in its box; the Gantt
# chart has a row per device and one bar per (block, micro-batch, direction) of the step, as the
# trace has them; the loss line has a point per step. Without a trace the trace's plots are
# notes naming --trace; without --log the checkpoint's history is drawn. --svg writes the plots
# alone. Bad input: one line, exit 1, no report written (an older one kept as it was).
# Skipped (77) without python3, which the checks of the page need.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
command -v python3 >/dev/null || { echo "skipped: python3 not found (the page's checks parse it with Python)"; exit 77; }

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
cat >"$tmp/ipu.json" <<'JSON'
{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 4}
JSON
steps=6
expect_ok "train --trace --log" "$brigade" train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse \
  --rows 64 --sequence-length 16 --lr 1e-3 --steps $steps --eval-data builtin:reverse --eval-every 3 --output "$tmp/out" \
  --log "$tmp/train.jsonl" --trace "$tmp/trace.json" --quiet

# ---- the whole report ----
expect_out "report" "wrote $tmp/out/report.html: 7 plots" "$brigade" report "$tmp/out" --log "$tmp/train.jsonl" \
  --trace "$tmp/trace.json" --device-memory 4MiB --svg "$tmp/svg"

# check_page FILE DRAWN... : the page parses, has no scripts or fetches, each listed plot drawn
# (the others notes); prints what the Gantt chart and the loss line hold.
check_page() {
  python3 - "$@" <<'PY'
import html.parser, re, sys, xml.etree.ElementTree as ET
path, drawn = sys.argv[1], set(sys.argv[2:])
page = open(path, encoding="utf-8").read()
problems = []
class Page(html.parser.HTMLParser):
    VOID = {"meta", "br", "img", "hr", "input", "link"}
    def __init__(self):
        super().__init__(); self.stack = []; self.plots = {}
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "iframe", "object", "embed", "link", "img"): problems.append(f"<{tag}> on the page")
        for k, v in a.items():
            if k in ("src", "href") or k.startswith("on"): problems.append(f"attribute {k}={v}")
        if "data-plot" in a: self.plots[a["data-plot"]] = a
        if tag not in self.VOID: self.stack.append(tag)
    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID: self.stack.pop()
    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag: problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else: self.stack.pop()
p = Page(); p.feed(page); p.close()
if p.stack: problems.append(f"unclosed: {p.stack}")
if re.search(r"url\(|@import|https?://(?!www\.w3\.org/2000/svg)", page): problems.append("the page refers to something outside")
want = {"loss", "lr", "throughput", "busy", "gantt", "memory", "placement"}
if set(p.plots) != want: problems.append(f"plot boxes {sorted(p.plots)}")
for name, a in p.plots.items():
    if (a["data-drawn"] == "yes") != (name in drawn): problems.append(f"plot {name} drawn={a['data-drawn']}")
svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
if len(svgs) != len(drawn): problems.append(f"{len(svgs)} <svg> elements for {len(drawn)} drawn plots")
ns = "{http://www.w3.org/2000/svg}"
bars, loss_points = [], 0
for s in svgs:
    try: root = ET.fromstring(s)
    except ET.ParseError as e: problems.append(f"an <svg> is not well-formed XML: {e}"); continue
    if root.get("id") == "gantt":
        rows = sorted(r.get("data-device") for r in root.iter(ns + "rect") if r.get("class") == "row")
        bars = [(r.get("data-device"), r.get("data-block"), r.get("data-mb"), r.get("data-direction"))
                for r in root.iter(ns + "rect") if (r.get("class") or "").startswith("bar ")]
        print("rows", " ".join(rows))
    if root.get("id") == "loss":
        for pl in root.iter(ns + "polyline"):
            if pl.get("class") == "series loss": loss_points += len(pl.get("points").split())
for b in sorted(set(bars)): print("bar", *b, bars.count(b))
print("loss_points", loss_points)
for x in problems: print("PROBLEM", x)
PY
}

all="loss lr throughput busy gantt memory placement"
check_page "$tmp/out/report.html" $all >"$tmp/page.txt" 2>&1 || bad "page check crashed: $(cat "$tmp/page.txt")"
grep -q PROBLEM "$tmp/page.txt" && bad "report.html: $(grep PROBLEM "$tmp/page.txt")" || ok
grep -qx "rows 0 1" "$tmp/page.txt" && ok || bad "Gantt rows: $(grep rows "$tmp/page.txt")"
# One bar per (device, block, micro-batch, direction): device 0 holds blocks 0-1 (embeddings,
# layer 0), device 1 blocks 2-3 (layer 1, head); 4 micro-batches each way.
expected=$(for d in 0 1; do for b in $((2 * d)) $((2 * d + 1)); do for m in 0 1 2 3; do
  for dir in backward forward; do echo "bar $d $b $m $dir 1"; done; done; done; done | sort)
got=$(grep '^bar ' "$tmp/page.txt" | sort)
[[ $got == "$expected" ]] && ok || bad "Gantt bars: $(diff <(echo "$expected") <(echo "$got") | head -20)"
# The trace says the same of the step shown (the last): its compute events inside step 6's span.
python3 - "$tmp/trace.json" >"$tmp/trace_bars.txt" <<'PY' || bad "reading the trace"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
step = max((e for e in ev if e["ph"] == "X" and e["name"].startswith("step ")), key=lambda e: e["ts"])
for e in ev:
    if e["ph"] == "X" and e.get("cat") == "compute" and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]:
        print("bar", e["tid"], e["args"]["block"], e["args"]["micro_batch"], e["args"]["direction"], 1)
PY
[[ $(sort "$tmp/trace_bars.txt") == "$got" ]] && ok || bad "the Gantt chart is not the trace's last step"
grep -qx "loss_points $steps" "$tmp/page.txt" && ok || bad "loss line: $(grep loss_points "$tmp/page.txt"), wanted $steps"
grep -q 'class="budget"' "$tmp/out/report.html" && ok || bad "no budget line on the memory plot"
grep -q 'eval loss' "$tmp/out/report.html" && ok || bad "no eval loss series"
# --svg: each plot alone, standalone XML.
for p in $all; do
  python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(r.tag != '{http://www.w3.org/2000/svg}svg')" \
    "$tmp/svg/$p.svg" 2>/dev/null && ok || bad "--svg: $p.svg missing or not an SVG document"
done

# --step: another step of the trace.
expect_ok "report --step 2" "$brigade" report "$tmp/out" --log "$tmp/train.jsonl" --trace "$tmp/trace.json" --step 2
grep -q 'Pipeline step 2 per device' "$tmp/out/report.html" && ok || bad "--step 2: the Gantt chart is not step 2's"

# ---- missing data: notes in place of plots ----
expect_out "report without a trace" "3 plots, notes in place of the others" "$brigade" report "$tmp/out" --log "$tmp/train.jsonl"
check_page "$tmp/out/report.html" loss lr throughput >"$tmp/page.txt" 2>&1
grep -q PROBLEM "$tmp/page.txt" && bad "report without a trace: $(grep PROBLEM "$tmp/page.txt")" || ok
n=$(grep -c '<p class="note">[^<]*pass --trace FILE.json' "$tmp/out/report.html")
((n == 4)) && ok || bad "report without a trace: $n notes naming --trace, wanted 4"
# Without --log: the newest checkpoint's log_history (loss and lr; no tokens/s there).
expect_ok "report from the checkpoint" "$brigade" report "$tmp/out"
check_page "$tmp/out/report.html" loss lr >"$tmp/page.txt" 2>&1
grep -q PROBLEM "$tmp/page.txt" && bad "report from the checkpoint: $(grep PROBLEM "$tmp/page.txt")" || ok
grep -qx "loss_points $steps" "$tmp/page.txt" && ok || bad "checkpoint history: $(grep loss_points "$tmp/page.txt")"
grep -q 'trainer_state.json (log_history)' "$tmp/out/report.html" && ok || bad "the page does not say where the log came from"

# ---- bad input: one line, exit 1, the report as it was ----
echo "an older report" >"$tmp/out/report.html"
expect_fail "missing folder" 1 "$tmp/nowhere" "$brigade" report "$tmp/nowhere"
[[ ! -e $tmp/nowhere ]] && ok || bad "a missing folder was created"
expect_fail "a file for OUT" 1 "is not a folder" "$brigade" report "$tmp/train.jsonl"
{ head -2 "$tmp/train.jsonl"; echo 'step 3 loss 2.5'; } >"$tmp/bad.jsonl"
expect_fail "a log line that is not JSON" 1 "bad.jsonl line 3" "$brigade" report "$tmp/out" --log "$tmp/bad.jsonl"
echo '[1, 2]' >"$tmp/array.jsonl"
expect_fail "a log line that is not an object" 1 "line 1: not a JSON object" "$brigade" report "$tmp/out" --log "$tmp/array.jsonl"
echo '{"loss": 1}' >"$tmp/nostep.jsonl"
expect_fail "a log line without a step" 1 "step" "$brigade" report "$tmp/out" --log "$tmp/nostep.jsonl"
expect_fail "a missing log" 1 "cannot open --log" "$brigade" report "$tmp/out" --log "$tmp/none.jsonl"
echo '{"events": []}' >"$tmp/not_trace.json"
expect_fail "a trace that is not a trace" 1 "not a Chrome trace-event file" "$brigade" report "$tmp/out" --trace "$tmp/not_trace.json"
echo '{"traceEvents": [{"name": "x"}]}' >"$tmp/no_ph.json"
expect_fail "trace events without ph" 1 "event 0 is not a trace event" "$brigade" report "$tmp/out" --trace "$tmp/no_ph.json"
head -c 300 "$tmp/trace.json" >"$tmp/cut.json"
expect_fail "a cut trace" 1 "cut.json" "$brigade" report "$tmp/out" --trace "$tmp/cut.json"
expect_fail "a step the trace lacks" 1 "--step 99: the trace" "$brigade" report "$tmp/out" --trace "$tmp/trace.json" --step 99
expect_fail "--step without a trace" 1 "--step needs --trace" "$brigade" report "$tmp/out" --step 2
expect_fail "a bad budget" 1 "lots" "$brigade" report "$tmp/out" --device-memory lots
expect_fail "--svg on a file" 1 "$tmp/train.jsonl" "$brigade" report "$tmp/out" --svg "$tmp/train.jsonl"
[[ $(cat "$tmp/out/report.html") == "an older report" ]] && ok || bad "a failed report replaced report.html"
ls "$tmp"/out/report.html.tmp.* >/dev/null 2>&1 && bad "a temporary was left behind" || ok
expect_fail "no folder" 2 "brigade report OUT" "$brigade" report
expect_fail "an unknown flag" 2 "--colour" "$brigade" report "$tmp/out" --colour red

finish

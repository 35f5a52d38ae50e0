#!/usr/bin/env bash
# report.html in a real browser: a tiny GPT-2 trained over 2 devices with --log and --trace, its
# report opened in headless Chromium (Debian's chromium, which scripts/deps.sh installs), and the
# screenshot read back (a PNG decoder of Python's standard library: zlib, no packages) to check
# that every plot rendered: in each plot's box (the page gives each a fixed place, written on it
# as data-x/y/w/h) ink and colour, in each Gantt row coloured bars, and the gap between boxes
# blank. Skipped (77) where chromium or python3 is not installed.
# BRIGADE_REPORT_SCREENSHOT=FILE.png keeps the screenshot.
set -uo pipefail
brigade=$1
source "$(dirname "$0")/shell_util.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "skipped: chromium is not installed (scripts/deps.sh installs it; apt-get install chromium)"
  exit 77
fi
command -v python3 >/dev/null || { echo "skipped: python3 not found (it reads the screenshot)"; exit 77; }

"$brigade" init --arch gpt2 --layers 2 --hidden 32 --heads 2 --vocab 256 --positions 16 --seed 2 --output "$tmp/m" >/dev/null || bad init
echo '{"ipus_per_replica": 2, "layers_per_ipu": [1, 1], "gradient_accumulation_steps": 4}' >"$tmp/ipu.json"
expect_ok train "$brigade" train --model "$tmp/m" --ipu-config "$tmp/ipu.json" --data builtin:reverse --rows 64 \
  --sequence-length 16 --lr 1e-3 --steps 8 --eval-data builtin:reverse --eval-every 4 --output "$tmp/out" \
  --log "$tmp/train.jsonl" --trace "$tmp/trace.json" --quiet
expect_ok report "$brigade" report "$tmp/out" --log "$tmp/train.jsonl" --trace "$tmp/trace.json" --device-memory 2MiB

# Root needs --no-sandbox; a profile of its own keeps the run from touching $HOME.
shot=$tmp/shot.png
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
  --force-device-scale-factor=1 --user-data-dir="$tmp/profile" --window-size=1280,1420 \
  --screenshot="$shot" "file://$tmp/out/report.html" >"$tmp/chromium.log" 2>&1
[[ -s $shot ]] && ok || { bad "chromium wrote no screenshot: $(tail -3 "$tmp/chromium.log")"; finish; exit; }
[[ -n ${BRIGADE_REPORT_SCREENSHOT:-} ]] && cp "$shot" "$BRIGADE_REPORT_SCREENSHOT"

python3 - "$shot" "$tmp/out/report.html" >"$tmp/pixels.txt" 2>&1 <<'PY'
import re, struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                sys.exit(f"unexpected PNG format: depth {depth}, colour type {color}, interlace {interlace}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

w, h, bpp, rows = read_png(sys.argv[1])
page = open(sys.argv[2], encoding="utf-8").read()

def region(x0, y0, x1, y1):
    """Share of pixels with ink (not white) and with colour (not grey) in [x0, x1) x [y0, y1)."""
    ink = colour = total = 0
    for y in range(max(0, int(y0)), min(h, int(y1))):
        r = rows[y]
        for x in range(max(0, int(x0)), min(w, int(x1))):
            px = r[x * bpp:x * bpp + 3]
            total += 1
            if min(px) < 230: ink += 1
            if max(px) - min(px) > 60: colour += 1
    return ink / max(total, 1), colour / max(total, 1)

problems = []
boxes = re.findall(r'data-plot="(\w+)" data-drawn="(\w+)" data-x="(\d+)" data-y="(\d+)" data-w="(\d+)" data-h="(\d+)"', page)
if len(boxes) != 7:
    problems.append(f"{len(boxes)} plot boxes on the page")
for name, drawn, x, y, bw, bh in boxes:
    x, y, bw, bh = int(x), int(y), int(bw), int(bh)
    if x + bw > w or y + bh > h:
        problems.append(f"{name}: its box is outside the {w}x{h} screenshot")
        continue
    ink, colour = region(x + 4, y + 4, x + bw - 4, y + bh - 4)
    print(f"{name}: ink {100 * ink:.1f}%, colour {100 * colour:.2f}%")
    if drawn != "yes": problems.append(f"{name}: not drawn")
    if ink < 0.02: problems.append(f"{name}: blank ({100 * ink:.2f}% ink)")
    if colour < 0.002: problems.append(f"{name}: no coloured marks ({100 * colour:.3f}%)")
# Each Gantt row (its rect, at its place in the gantt box) holds coloured bars.
gx, gy = [int(v) for v in re.search(r'data-plot="gantt" data-drawn="yes" data-x="(\d+)" data-y="(\d+)"', page).groups()]
gantt = re.search(r'<svg[^>]*id="gantt".*?</svg>', page, re.S).group(0)
rows_found = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="[^"]*" class="row" data-device="(\d+)"', gantt)
if len(rows_found) != 2: problems.append(f"{len(rows_found)} Gantt rows")
for rx, ry, rw, rh, d in rows_found:
    x0, y0 = gx + 1 + float(rx), gy + 1 + float(ry)
    _, colour = region(x0, y0, x0 + float(rw), y0 + float(rh))
    print(f"gantt row device {d}: colour {100 * colour:.1f}%")
    if colour < 0.005: problems.append(f"Gantt row of device {d}: {100 * colour:.2f}% bars")
# The gap between the two columns of boxes is page background: the measure sees blank as blank.
ink, _ = region(633, 100, 647, 380)
if ink > 0: problems.append(f"the gap between boxes has ink ({100 * ink:.2f}%)")
for p in problems: print("PROBLEM", p)
PY
rc=$?
((rc == 0)) && ok || bad "reading the screenshot: $(tail -3 "$tmp/pixels.txt")"
grep -q PROBLEM "$tmp/pixels.txt" && bad "screenshot: $(grep PROBLEM "$tmp/pixels.txt")" || ok
cat "$tmp/pixels.txt"
finish

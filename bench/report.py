"""Turns the RESULT lines of a bench/run.sh log into the comparison table, the brigade/PyTorch
ratios and the goal verdicts; prints them and writes them as Markdown.

    python bench/report.py BUILD/bench.log bench/results.md
"""

import datetime
import os
import platform
import re
import sys

# The streaming-bandwidth measurements (RESULT impl=bandwidth lines), filled by parse().
BANDWIDTH = []
GOAL_FLAGS = ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16", "avx512_vnni", "amx_bf16", "avx2", "fma")


# Lines other bench scripts print whole (bench/scale_out.sh): "GOAL PASS|FAIL: ..." verdicts and
# "REPORT ..." measurements.
SCRIPT_GOALS, SCRIPT_REPORTS = [], []


def parse(path):
    rows, peaks, gemm_lines, gemm_backend = [], [], [], None
    simd_level = [None]
    in_gemm = False
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("RESULT "):
                kv = dict(item.split("=", 1) for item in line.split()[1:])
                if kv["impl"] == "peak":
                    peaks.append(kv)
                elif kv["impl"] == "bandwidth":
                    BANDWIDTH.append(kv)
                else:
                    kv.setdefault("round", "1")
                    rows.append(kv)
                    gemm_backend = kv.get("gemm", gemm_backend)
                    if "simd" in kv:
                        simd_level[0] = kv["simd"]
            elif line.startswith("GOAL "):
                SCRIPT_GOALS.append(line[5:])
            elif line.startswith("REPORT "):
                SCRIPT_REPORTS.append(line[7:])
            elif line.startswith("== GEMM"):
                in_gemm = True
                gemm_lines.append(line[3:])
            elif in_gemm and line.startswith("=="):
                in_gemm = False
            elif in_gemm:
                gemm_lines.append(line)
    return rows, peaks, gemm_lines, (gemm_backend, simd_level[0])


def best_peak(peaks):
    """The FMA peak is measured several times, before and after the workloads: the highest is the
    one least disturbed by other users of the machine (nothing runs faster than the real peak)."""
    if not peaks:
        return {}
    best = {"isa": peaks[-1].get("isa", "?"), "n": len(peaks)}
    for k in ("peak1", "peak2"):
        best[k] = max(float(p.get(k, 0)) for p in peaks)
    return best


def apply_peak(rows, peak):
    """Each row's share of the peak of the cores it used, against the best peak; a share above 100%
    means the peak was measured in a busy moment: the row is marked, and no goal uses it."""
    for r in rows:
        p = peak.get("peak1" if r["cores"] == "1" else "peak2", 0.0)
        r["peak_share"] = float(r["gflops"]) / p if p else 0.0
        r["bad"] = r["peak_share"] > 1.0


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def spread(xs, fmt="{:.2f}", unit=""):
    """"median (min-max)" of several rounds; the median alone for one."""
    m = fmt.format(median(xs)) + unit
    return m if len(xs) < 2 else f"{m} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def machine_line():
    model, flags = "unknown CPU", []
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        m = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        model = m.group(1).strip() if m else model
        fam = re.search(r"^cpu family\s*:\s*(\d+)$", text, re.M)
        mod = re.search(r"^model\s*:\s*(\d+)$", text, re.M)
        if fam and mod:  # a VM often hides the marketing name; family/model still identify the core
            model += f" (family {fam.group(1)}, model {mod.group(1)})"
        m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
        have = set(m.group(1).split()) if m else set()
        flags = [x for x in GOAL_FLAGS if x in have]
    except OSError:
        pass
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return f"{model}, {os.cpu_count()} cores, {platform.machine()}, flags: {' '.join(flags) or 'n/a'}; {date}"


def fnum(x, digits=1):
    return f"{float(x):.{digits}f}"


def key(r):
    return (r["model"], r["mode"], r["bt"])


def config_of(r):
    half = "" if r.get("precision", "32.32") == "32.32" else f" {r['precision']}"
    traced = " traced" if r.get("trace") == "on" else ""
    return r["config"] + half + traced + ("" if r.get("env", "default") == "default" else f" ({r['env']})")


def is_half_run(r):
    """A --precision row other than fp32, or a traced one: shown in the table, judged only by the
    precision and tracing goals."""
    return r.get("precision", "32.32") != "32.32" or r.get("trace") == "on"


def trace_goals(brig, extra):
    """A traced GPT-2 small training run against the same untraced one, paired by round: tracing on
    costs at most 2% of tokens/s (off, every hook is one predictable branch, so it costs less)."""
    ratios = []
    for rnd in rounds_of(brig):
        plain = best_in_round(brig, ("small", "train", "4x64"), rnd, pick=lambda r: r["config"] == "1dev")
        traced = best_in_round(extra, ("small", "train", "4x64"), rnd,
                               pick=lambda r: r["config"] == "1dev" and r.get("trace") == "on")
        if plain and traced:
            ratios.append(float(traced["tokens_per_s"]) / float(plain["tokens_per_s"]))
    text = "Tracing on costs <= 2% of GPT-2 small training tokens/s (4x64, 1dev; off costs one branch per hook)"
    if not ratios:
        return [f"FAIL: {text}: not measured"]
    return [f"{'PASS' if median(ratios) >= 0.98 else 'FAIL'}: {text}: traced/untraced "
            f"{spread(ratios, '{:.3f}', '×')} over {len(ratios)} round(s)"]


def is_rss_run(r):
    """bench/run.sh's one-workload-per-process runs for the RSS goal: not part of the rounds."""
    return r.get("env") == "rss"


def rss_cell(rs):
    """Peak RSS: the median over rounds; a process's peak so far (not this row's own) is marked."""
    vals = [float(r["peak_rss_mb"]) for r in rs if "peak_rss_mb" in r]
    if not vals:
        return ""
    own = all(r.get("rss") == "fresh" for r in rs if "peak_rss_mb" in r)
    return f"{median(vals):.0f}" + ("" if own else " †")


def notes_of(rs):
    r = rs[0]
    notes = []
    if r.get("optim") == "foreach":
        notes.append("foreach AdamW (no fused CPU AdamW)")
    cs = [float(x["compile_s"]) for x in rs if "compile_s" in x]
    if cs:
        notes.append(f"compile {spread(cs, '{:.1f}', ' s')}")
    return "; ".join(notes)


def table(brig, torch):
    """One row per configuration: the median of its rounds, min-max beside tokens/s."""
    groups = {}
    for r in brig + torch:
        groups.setdefault((r["impl"],) + key(r) + (config_of(r),), []).append(r)
    lines = ["| model | mode | B×T | impl | config | cores | ms/step | tokens/s (min–max) | GFLOP/s | % peak | "
             "pipeline eff. (ideal) | peak RSS MiB | rounds | notes |",
             "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (impl, model, mode, bt, cfg), rs in groups.items():
        good = [r for r in rs if not r["bad"]]
        if not good:
            lines.append(f"| {model} | {mode} | {bt} | {impl} | {cfg} | {rs[0]['cores']} | | | | "
                         f"measurement error: above 100% of the measured peak | | | {len(rs)} | |")
            continue
        f = lambda field: [float(r[field]) for r in good]
        pipe = ""
        if impl == "brigade":
            pipe = f"{100 * median(f('pipe_eff')):.1f}% ({100 * float(good[0]['ideal']):.1f}%)"
        flagged = f", {len(rs) - len(good)} above 100% of peak dropped" if len(good) < len(rs) else ""
        lines.append(f"| {model} | {mode} | {bt} | {impl} | {cfg} | {rs[0]['cores']} | "
                     f"{median(f('ms_per_step')):.1f} | {spread(f('tokens_per_s'), '{:.1f}')} | "
                     f"{median(f('gflops')):.1f} | {100 * median(f('peak_share')):.1f}% | {pipe} | "
                     f"{rss_cell(good)} | {len(good)}{flagged} | {notes_of(good)} |")
    return lines


def rss_table(rows):
    """The fresh-process runs: one workload per process, so the peak is that workload's own."""
    fresh = [r for r in rows if r.get("rss") == "fresh" and "peak_rss_mb" in r]
    if not fresh:
        return []
    lines = ["| model | mode | B×T | impl | config | peak RSS MiB | tokens/s |", "|---|---|---|---|---|---:|---:|"]
    for r in sorted(fresh, key=lambda r: (key(r), r["impl"], r["config"])):
        lines.append(f"| {r['model']} | {r['mode']} | {r['bt']} | {r['impl']} | {r['config']} | "
                     f"{float(r['peak_rss_mb']):.0f} | {fnum(r['tokens_per_s'])} |")
    return lines


def rounds_of(rows):
    return sorted({r["round"] for r in rows}, key=int)


def best_in_round(rows, k, rnd, field="tokens_per_s", pick=None):
    c = [r for r in rows if key(r) == k and r["round"] == rnd and not r["bad"] and (pick is None or pick(r))]
    return max(c, key=lambda r: float(r[field])) if c else None


def paired_ratios(brig, torch, k, pick_b=None, pick_t=None):
    """brigade's best over PyTorch's best, one ratio per round in which both ran: the two ran
    back to back, so load from other users hits both alike within a round."""
    out = []
    for rnd in rounds_of(brig):
        b, t = best_in_round(brig, k, rnd, pick=pick_b), best_in_round(torch, k, rnd, pick=pick_t)
        if b and t:
            out.append((float(b["tokens_per_s"]) / float(t["tokens_per_s"]), b, t))
    return out


def best_bandwidth():
    """GB/s per thread count: the highest of the run's measurements, the least disturbed by other
    users (as the FMA peak), so a loaded moment cannot lower the bound the decode rows are held to."""
    best = {}
    for b in BANDWIDTH:
        best[b["threads"]] = max(best.get(b["threads"], 0.0), float(b["gbps"]))
    return best


def bound_of(r, best=False):
    """A decode row's bandwidth bound, tokens/s: the bandwidth of its thread count over the bytes a
    decode step reads per token. brigade's rows carry the bandwidth measured right before and after
    their timed generate (bw_when=around, the higher of the two), which is the machine's at the
    time; other rows, and best=True, take the run's highest measurement of that thread count."""
    if not best and r.get("bw_when") == "around" and float(r.get("bw_gbps", 0)) > 0:
        bw = float(r["bw_gbps"])
    else:
        bw = best_bandwidth().get(r["threads"], float(r.get("bw_gbps", 0)))
    return bw * 1e9 / float(r["bytes_per_token"]) if bw > 0 else 0.0


def decode_table(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["bt"], r["impl"], config_of(r)), []).append(r)
    lines = ["| model | B×prompt+new | impl | config | threads | prefill ms | decode tokens/s (min–max) | "
             "MB read/token | bound tokens/s | % of bound | % of the run's best bound | peak RSS MiB | rounds |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, bt, impl, cfg), rs in groups.items():
        f = lambda field: [float(r[field]) for r in rs]
        bounds, best = [bound_of(r) for r in rs], bound_of(rs[0], best=True)
        tps = median(f("tokens_per_s"))
        shares = [float(r["tokens_per_s"]) / b for r, b in zip(rs, bounds)] if all(bounds) else []
        share = f"{100 * median(shares):.1f}%" if shares else ""
        of_best = f"{100 * tps / best:.1f}%" if best else ""
        lines.append(f"| {model} | {bt}+{rs[0]['new_tokens']} | {impl} | {cfg} | {rs[0]['threads']} | "
                     f"{median(f('prefill_ms')):.1f} | {spread(f('tokens_per_s'), '{:.1f}')} | "
                     f"{median(f('bytes_per_token')) * 1e-6:.1f} | {median(bounds):.1f} | {share} | {of_best} | "
                     f"{rss_cell(rs)} | {len(rs)} |")
    return lines


def decode_goals(brig, torch):
    """Cached greedy decode of GPT-2 small (128-token prompts, 128 new tokens): the paired ratios
    against generate() at batch 1 and 8, and batch 1's share of the bandwidth bound."""
    verdicts = []
    for bt, need in (("1x128", 1.5), ("8x128", 2.0)):
        rs = paired_ratios(brig, torch, ("small", "decode", bt))
        if not rs:
            verdicts.append(f"FAIL: GPT-2 small cached decode, batch {bt.split('x')[0]}, >= {need}x transformers' "
                            "generate tokens/s: not measured")
            continue
        ratios = [x[0] for x in rs]
        _, b, t = max(rs, key=lambda x: x[0])
        verdicts.append(f"{'PASS' if median(ratios) >= need else 'FAIL'}: GPT-2 small cached decode, batch "
                        f"{bt.split('x')[0]} (128-token prompts, 128 new tokens), >= {need}x transformers' generate "
                        f"tokens/s (median of paired ratios): {spread(ratios, unit='×')} over {len(rs)} round(s) "
                        f"(best round: brigade {b['config']} {fnum(b['tokens_per_s'])} vs PyTorch {t['config']} "
                        f"{fnum(t['tokens_per_s'])} tokens/s)")
    shares, best = [], None
    for rnd in rounds_of(brig):
        b = best_in_round(brig, ("small", "decode", "1x128"), rnd)
        if b and bound_of(b) > 0:
            shares.append(float(b["tokens_per_s"]) / bound_of(b))
            best = b
    text = ("GPT-2 small batch-1 decode >= 70% of the memory-bandwidth bound (bytes read per token over the "
            "streaming bandwidth of the same thread count, measured around the timed generate)")
    if not shares:
        verdicts.append(f"FAIL: {text}: not measured")
    else:
        verdicts.append(f"{'PASS' if median(shares) >= 0.7 else 'FAIL'}: {text}: "
                        f"{spread([100 * x for x in shares], '{:.1f}', '%')} over {len(shares)} round(s) (last: "
                        f"{best['config']} {fnum(best['tokens_per_s'])} of {bound_of(best):.1f} tokens/s, "
                        f"{float(best['bytes_per_token']) * 1e-6:.1f} MB/token)")
    return verdicts


def half_decode_lines(decode):
    """bf16.32 decode (the steps reading bf16 weights) against fp32's on the same configuration and
    batch, paired by round: shown, not a goal."""
    brig = [r for r in decode if r["impl"] == "brigade"]
    parts = []
    for bt in ("1x128", "8x128"):
        for cfg in ("1dev", "1dev2t"):
            ratios = []
            for rnd in rounds_of(brig):
                f = best_in_round(brig, ("small", "decode", bt), rnd,
                                  pick=lambda r, c=cfg: r["config"] == c and not is_half_run(r))
                h = best_in_round(brig, ("small", "decode", bt), rnd,
                                  pick=lambda r, c=cfg: r["config"] == c and r.get("precision") == "bf16.32")
                if f and h:
                    ratios.append(float(h["tokens_per_s"]) / float(f["tokens_per_s"]))
            if ratios:
                parts.append(f"batch {bt.split('x')[0]} {cfg} {spread(ratios, unit='×')}")
    if not parts:
        return []
    return ["", "bf16.32 decode (weights read as bf16) against fp32's, paired by round: " + "; ".join(parts) + "."]


def request_goals(requests):
    """GPT-2 small decode, requests in flight on a 2-stage pipeline against the same requests on one
    device, paired by round."""
    ratios, scaling, last = [], [], None
    for rnd in rounds_of(requests):
        one = best_in_round(requests, ("small", "decode-requests", "4x1x128"), rnd, pick=lambda r: r["config"] == "1dev")
        two = best_in_round(requests, ("small", "decode-requests", "4x1x128"), rnd, pick=lambda r: r["config"] == "pipe2")
        if one and two:
            ratios.append(float(two["tokens_per_s"]) / float(one["tokens_per_s"]))
            last = (one, two)
            if float(one.get("bw_gbps", 0)) > 0 and float(two.get("bw_gbps", 0)) > 0:
                scaling.append(float(two["bw_gbps"]) / float(one["bw_gbps"]))
    text = ("GPT-2 small decode, 4 requests in flight (128-token prompts, 128 new tokens) on a 2-stage pipeline >= 1.6x "
            "the same requests on one device")
    if not ratios:
        return [f"FAIL: {text}: not measured"]
    # What bounds the decode part: two stages stream their weights at once, one device alone.
    context = (f"; two threads read {spread(scaling, unit='×')} one thread's streaming bandwidth around these runs"
               if len(scaling) == len(ratios) else "")
    return [f"{'PASS' if median(ratios) >= 1.6 else 'FAIL'}: {text}: {spread(ratios, unit='×')} over {len(ratios)} "
            f"round(s) (last: {fnum(last[1]['tokens_per_s'])} vs {fnum(last[0]['tokens_per_s'])} tokens/s{context})"]


def cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


def precision_goals(brig, half):
    """bf16.32 training against fp32 on the same configuration, paired by round: >= 1.6x where the
    CPU has AVX512_BF16 (vdpbf16ps), >= 1.15x elsewhere (AVX2: half the operand traffic only)."""
    bf16 = cpu_has("avx512_bf16")
    need = 1.6 if bf16 else 1.15
    parts, ok_all = [], True
    kernels = {r["half_gemm"] for r in half if r.get("precision") == "bf16.32" and "half_gemm" in r}
    for bt in ("4x64", "8x128"):
        ratios = []
        for rnd in rounds_of(brig):
            for cfg in ("1dev", "1dev2t"):
                f = best_in_round(brig, ("small", "train", bt), rnd, pick=lambda r, c=cfg: r["config"] == c)
                h = best_in_round(half, ("small", "train", bt), rnd,
                                  pick=lambda r, c=cfg: r["config"] == c and r.get("precision") == "bf16.32")
                if f and h:
                    ratios.append((float(h["tokens_per_s"]) / float(f["tokens_per_s"]), cfg))
        if not ratios:
            ok_all = False
            parts.append(f"{bt}: not measured")
            continue
        best = max(median([x for x, c in ratios if c == cfg]) for cfg in {c for _, c in ratios})
        ok_all &= best >= need
        parts.append(f"{bt}: " + ", ".join(f"{cfg} {spread([x for x, c in ratios if c == cfg], unit='×')}"
                                           for cfg in sorted({c for _, c in ratios})))
    return [f"{'PASS' if ok_all else 'FAIL'}: GPT-2 small bf16.32 training tokens/s >= {need}x fp32's "
            f"({'AVX512_BF16' if bf16 else 'no AVX512_BF16'}"
            f"{'; bf16 products on ' + ', '.join(sorted(kernels)) if kernels else ''}"
            "; median of paired ratios, the better configuration): " +
            "; ".join(parts),
            activation_memory_goal(brig, half)]


def activation_memory_goal(brig, half):
    """16.16 against fp32 on one device: what a micro-batch adds to the device at its peak
    (act_mib: activations, their gradients, kernel scratch), <= 0.55x at every measured shape. The
    bytes do not depend on timing, so any round's pair will do; the worst is judged."""
    parts, ok_all = [], True
    for bt in ("4x64", "8x128"):
        ratios = []
        for rnd in rounds_of(brig):
            f = best_in_round(brig, ("small", "train", bt), rnd, pick=lambda r: r["config"] == "1dev")
            h = best_in_round(half, ("small", "train", bt), rnd,
                              pick=lambda r: r["config"] == "1dev" and r.get("precision") == "16.16")
            if f and h and float(f.get("act_mib", 0)) > 0 and "act_mib" in h:
                ratios.append((float(h["act_mib"]) / float(f["act_mib"]), float(h["act_mib"]), float(f["act_mib"])))
        if not ratios:
            ok_all = False
            parts.append(f"{bt}: not measured")
            continue
        worst = max(ratios)
        ok_all &= worst[0] <= 0.55
        parts.append(f"{bt}: {worst[0]:.3f}x ({worst[1]:.1f} MiB against {worst[2]:.1f})")
    return (f"{'PASS' if ok_all else 'FAIL'}: GPT-2 small 16.16 activation memory per micro-batch <= 0.55x fp32's "
            "(one device; activations, their gradients and kernel scratch at the peak): " + "; ".join(parts))


def goals(brig, torch, rss_rows=()):
    verdicts = []

    def verdict(ok, text):
        verdicts.append(f"{'PASS' if ok else 'FAIL'}: {text}")

    def ratio_goal(model, mode, bts, need, text):
        parts, ok_all = [], True
        for bt in bts:
            rs = paired_ratios(brig, torch, (model, mode, bt))
            if not rs:
                ok_all = False
                parts.append(f"{bt}: not measured")
                continue
            ratios = [x[0] for x in rs]
            ok_all &= median(ratios) >= need
            _, b, t = max(rs, key=lambda x: x[0])
            parts.append(f"{bt}: {spread(ratios, unit='×')} over {len(rs)} round(s) (best round: brigade {b['config']} "
                         f"{fnum(b['tokens_per_s'])} vs PyTorch {t['config']} {fnum(t['tokens_per_s'])} tokens/s)")
        verdict(ok_all, text + ": " + "; ".join(parts))

    ratio_goal("small", "train", ("4x64", "8x128"), 2.0,
               "GPT-2 small training tokens/s >= 2x PyTorch's best (median of paired ratios)")
    ratio_goal("small", "infer", ("4x64", "8x128"), 2.0,
               "GPT-2 small inference tokens/s >= 2x PyTorch's best (median of paired ratios)")
    for model in ("bert-base", "vit-base", "t5-small"):
        ratio_goal(model, "train", ("default",), 1.5, f"{model} training tokens/s >= 1.5x PyTorch's best "
                                                       "(median of paired ratios)")

    # Two intra-op threads on one device against the same device alone, paired by round.
    pairs = []
    for rnd in rounds_of(brig):
        one = best_in_round(brig, ("small", "train", "8x128"), rnd, pick=lambda r: r["config"] == "1dev")
        two = best_in_round(brig, ("small", "train", "8x128"), rnd, pick=lambda r: r["config"] == "1dev2t")
        if one and two:
            pairs.append(float(two["tokens_per_s"]) / float(one["tokens_per_s"]))
    verdict(bool(pairs) and median(pairs) >= 1.7,
            "One device with 2 threads >= 1.7x the same device with 1 thread (GPT-2 small training 8x128): " +
            (f"{spread(pairs, unit='×')} over {len(pairs)} round(s)" if pairs else "not measured"))

    parts, ok_all = [], True
    for bt in ("4x64", "8x128"):
        shares = [float(b["peak_share"]) for rnd in rounds_of(brig)
                  for b in [best_in_round(brig, ("small", "train", bt), rnd, "peak_share")] if b]
        if not shares:
            ok_all = False
            parts.append(f"{bt}: not measured")
            continue
        ok_all &= median(shares) >= 0.7
        parts.append(f"{bt}: {spread([100 * x for x in shares], '{:.1f}', '%')} of the cores' peak")
    verdict(ok_all, "GPT-2 small whole training step >= 70% of the measured FMA peak of the cores used (best "
                    "configuration, optimizer included): " + "; ".join(parts))

    # The ideal m/(m+p-1) assumes equal stages; how unequal they are is the placement's doing
    # (layers_per_ipu), not the pipeline's. So the goal judges the split that evens the stages'
    # compute (`brigade plan --balance-by compute`), as a user sizing layers_per_ipu would; the
    # 6/6 split is reported beside it.
    def pipe_rows(bt, config):
        return [r for r in brig if key(r) == ("small", "train", bt) and r["config"].split("+")[0] == config]

    parts, ok_all = [], True
    for bt in ("4x64", "8x128"):
        c = pipe_rows(bt, "pipe2bal")
        if not c:
            ok_all = False
            parts.append(f"{bt}: not measured")
            continue
        effs = [float(r["pipe_eff"]) / float(r["ideal"]) for r in c]
        ok_all &= median(effs) >= 0.9
        extra = " (with recompute: the plain run did not fit in memory)" if "+recompute" in c[0]["config"] else ""
        parts.append(f"{bt}: {spread([100 * e for e in effs], '{:.1f}', '%')} of ideal "
                     f"{100 * float(c[0]['ideal']):.1f}%{extra}")
    even = [(bt, [float(r["pipe_eff"]) / float(r["ideal"]) for r in pipe_rows(bt, "pipe2")]) for bt in ("4x64", "8x128")]
    note = "".join(f"; layers 6/6 ({bt}): {100 * median(e):.1f}% of ideal" for bt, e in even if e)
    verdict(ok_all, "2-device pipeline, compute-balanced split (GPT-2 small training, m=8) >= 90% of "
                    "m/(m+p-1): " + "; ".join(parts) + note)

    # A process's own peak only (rss=fresh: its first measurement, bench/run.sh runs one workload
    # per process for this); a later measurement's peak_rss_mb may be an earlier workload's.
    rss = [r for r in brig + torch + rss_rows
           if "peak_rss_mb" in r and r.get("rss") == "fresh" and key(r) == ("small", "train", "4x64")]
    b_rss = [float(r["peak_rss_mb"]) for r in rss if r["impl"] == "brigade"]
    t_rss = [float(r["peak_rss_mb"]) for r in rss if r["impl"] == "torch"]
    if b_rss and t_rss:
        tb = min((r for r in rss if r["impl"] == "torch"), key=lambda r: float(r["peak_rss_mb"]))
        verdict(min(b_rss) <= 0.7 * min(t_rss), f"Peak RSS of a GPT-2 small training step (4x64, one workload per "
                                                 f"process) <= 0.7x PyTorch's leanest: {min(b_rss):.0f} vs "
                                                 f"{min(t_rss):.0f} MiB (PyTorch {tb['config']}), "
                                                 f"{min(b_rss) / min(t_rss):.2f}×")
    else:
        verdict(False, "Peak RSS of a GPT-2 small training step <= 0.7x PyTorch's: not measured")
    return verdicts


def main():
    log, out = sys.argv[1], sys.argv[2]
    rows, peaks, gemm_lines, backend = parse(log)
    peak = best_peak(peaks)
    apply_peak(rows, peak)
    rss_rows = [r for r in rows if is_rss_run(r)]
    rows = [r for r in rows if not is_rss_run(r)]
    decode = [r for r in rows if r["mode"] == "decode"]
    requests = [r for r in rows if r["mode"] == "decode-requests"]
    rows = [r for r in rows if r["mode"] not in ("decode", "decode-requests")]
    half = [r for r in rows if r["impl"] == "brigade" and is_half_run(r)]
    brig = [r for r in rows if r["impl"] == "brigade" and not is_half_run(r)]
    torch = [r for r in rows if r["impl"] == "torch"]

    lines = [f"Machine: {machine_line()}", ""]
    if peak:
        lines.append(f"Measured fp32 FMA peak ({peak['isa']} loop, highest of {peak['n']} measurements before and "
                     f"after the workloads): 1 core {fnum(peak['peak1'])} GFLOP/s, 2 cores {fnum(peak['peak2'])} "
                     f"GFLOP/s. Kernels that ran: GEMM {backend[0]}, element-wise {backend[1] or 'not reported'}.")
    lines.append("")
    n_rounds = len(rounds_of(rows)) if rows else 0
    lines.append(f"{n_rounds} round(s): in each, every workload ran brigade then PyTorch back to back; the table "
                 "gives each configuration's median over the rounds (tokens/s min–max beside it), and the goals "
                 "use the median of the per-round brigade/PyTorch ratios. A row above 100% of the measured peak "
                 "is a measurement error (the peak was taken in a busy moment) and is dropped. FLOPs (training; "
                 "a third of it for inference): GPT-2 6N + 6LCT per token; BERT/ViT 6 N_layers + 12LCT per token; "
                 "T5 6 N_enc per source token, 6 (N_dec + VC) per target token, 12LCT attention (6 in the causal "
                 "decoder). Tokens: 128 per BERT row, 197 (196 patches + [CLS]) per ViT image, 128 + 32 per T5 pair; "
                 "shapes (`default`): BERT 4×128, ViT 2 images, T5 4 pairs. Configurations: 1dev "
                 "(one device, one thread), 1dev2t (one device with 2 intra-op threads), rep2 (2 replicas), pipe2 "
                 "(2 stages, layers split 6/6, 8 micro-batches, 1F1B), pipe2bal (the same with the split `brigade "
                 "plan --balance-by compute` proposes: 9/3 for GPT-2 small, whose LM head weighs about 5.5 layers); "
                 "PyTorch t1/t2: torch.set_num_threads(1)/(2), eager with the default AdamW; -fused: "
                 "AdamW(fused=True) (foreach where fused is missing); -compile: torch.compile (inductor) with the "
                 "fused AdamW, compile time excluded from ms/step and shown in notes. Peak RSS: the process's peak "
                 "resident set (getrusage); † marks a process's peak so far, which may be an earlier workload's; "
                 "the RSS goal uses only one-workload processes. Pipeline efficiency = devices' busy time / "
                 "(devices x wall time of the schedules). +recompute: the run did not fit in the memory budget and "
                 "was repeated with recomputation (its extra FLOPs are not counted).")
    lines.append("")
    lines += table(brig + half, torch)
    fresh = rss_table(rss_rows)
    if fresh:
        lines += ["", "Peak RSS, one workload per process (the process's whole peak, imports included):", ""]
        lines += fresh
    if decode:
        bw = best_bandwidth()
        bw_text = ", ".join(f"{t} thread(s) {g:.1f} GB/s" for t, g in sorted(bw.items())) or "not measured"
        lines += ["", "Greedy decode with the KV cache (brigade `brg_generate`, PyTorch `generate(do_sample=False, "
                  "use_cache=True)`, min_new_tokens = max_new_tokens so no row stops early); tokens/s = (new tokens "
                  "- 1) x batch over the decode time (the full generate less a generate of one new token, which is "
                  "the prefill); bound = the streaming read bandwidth over the bytes a step reads per token (every "
                  "weight once, the tied LM head once, plus the batch's KV cache at the mean length). brigade's rows "
                  "take the bandwidth of their thread count measured right before and after their timed generate "
                  "(the higher of the two), PyTorch's the run's highest; the last share column holds every row to "
                  f"the run's highest. Streaming bandwidth at the runs' starts (highest of {len(BANDWIDTH)} "
                  f"measurements): {bw_text}.", ""]
        lines += decode_table(decode)
        lines += half_decode_lines(decode)
    if SCRIPT_REPORTS:
        lines += ["", "Scale-out (bench/scale_out.sh):", ""] + [f"- {r}" for r in SCRIPT_REPORTS]
    lines += ["", "Goals:", ""]
    dec_b = [r for r in decode if r["impl"] == "brigade" and not is_half_run(r)]
    dec_t = [r for r in decode if r["impl"] == "torch"]
    lines += [f"- {v}" for v in goals(brig, torch, rss_rows) + precision_goals(brig, half) +
              trace_goals(brig, half) + decode_goals(dec_b, dec_t) + request_goals(requests) + SCRIPT_GOALS]
    lines.append("")
    if gemm_lines:
        lines += ["GEMM microbenchmark (`brigade_bench_gemm --quick`):", "", "```"]
        lines += [g for g in gemm_lines if g.strip()]
        lines += ["```", ""]

    text = "\n".join(lines)
    print()
    print(text)
    with open(out, "w") as f:
        f.write("# brigade benchmark results\n\n")
        f.write("Written by `make bench` (bench/run.sh) on the machine below.\n\n")
        f.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reads a brigade --trace file with Python's json module (as Perfetto and chrome://tracing must
be able to) and checks a pipelined training run's events: on every device, exactly one
"forward block B mb M" and one "backward block B mb M" per block the device holds, micro-batch
and step; within a micro-batch, forwards in block order and backwards in reverse, a micro-batch's
backward after its forward, micro-batches in order in each direction (as both GPipe and 1F1B run
them); sends and receives carry bytes; a memory counter per device.

    trace_check.py FILE.json --stages S --micro-batches M [--steps N]
"""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--stages", type=int, required=True)
    ap.add_argument("--micro-batches", type=int, required=True)
    ap.add_argument("--steps", type=int, default=1)
    a = ap.parse_args()
    with open(a.trace) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    problems = []
    if doc.get("displayTimeUnit") != "ms":
        problems.append("displayTimeUnit is not ms")
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    passes = collections.defaultdict(list)
    for i, e in enumerate(events):
        if e["ph"] == "X" and e.get("cat") == "compute" and not e["name"].startswith("recompute"):
            passes[e["tid"]].append((e["ts"], i, e))
    devices = sorted(t for t in names if names[t].startswith("device "))
    if len(devices) % a.stages or not devices:
        problems.append(f"{len(devices)} device tracks for {a.stages} stages")
    for tid in devices:
        seq = [e for _, _, e in sorted(passes[tid], key=lambda x: (x[0], x[1]))]
        blocks = sorted({e["args"]["block"] for e in seq})
        count = collections.Counter((e["args"]["block"], e["args"]["micro_batch"], e["args"]["direction"]) for e in seq)
        for b in blocks:
            for m in range(a.micro_batches):
                for d in ("forward", "backward"):
                    if count[(b, m, d)] != a.steps:
                        problems.append(f"{names[tid]}: {count[(b, m, d)]} '{d} block {b} mb {m}' events")
        per_step = len(seq) // a.steps if a.steps else 0
        for s in range(a.steps):
            step = seq[s * per_step:(s + 1) * per_step]
            fw = [(e["args"]["micro_batch"], e["args"]["block"]) for e in step if e["args"]["direction"] == "forward"]
            bw = [(e["args"]["micro_batch"], -e["args"]["block"]) for e in step if e["args"]["direction"] == "backward"]
            if fw != sorted(fw) or bw != sorted(bw):
                problems.append(f"{names[tid]}: step {s + 1} runs micro-batches or blocks out of order")
            pos = {(e["args"]["micro_batch"], e["args"]["direction"], e["args"]["block"]): i for i, e in enumerate(step)}
            for m in range(a.micro_batches):
                if pos.get((m, "backward", blocks[-1]), -1) < pos.get((m, "forward", blocks[-1]), 1 << 30):
                    problems.append(f"{names[tid]}: mb {m}'s backward comes before its forward")
        if not any(e["ph"] == "C" and e["tid"] == tid for e in events):
            problems.append(f"{names[tid]}: no memory counter")
    for e in events:
        if e["ph"] == "X" and e["name"].split(" ")[0] in ("send", "recv") and " mb " in e["name"]:
            if e["args"].get("bytes", 0) <= 0:
                problems.append(f"'{e['name']}' carries no bytes")
    for p in problems:
        print("trace_check:", p, file=sys.stderr)
    print(f"trace_check: {len(events)} events, {len(devices)} devices, {'ok' if not problems else 'FAILED'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

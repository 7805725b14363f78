#!/usr/bin/env python3
"""The chain of eliminations of a dense factorization, link by link, from its Chrome trace.

Reads a trace written by `bench_dense_gpu --trace` (or `bench_dense_ooc --trace`; gzip is fine)
and prints, for each stripe i: its elimination's length, when the adoption of i by another device
started after the elimination ended and how long it took (several GPUs), when the update of
stripe i + 1 whose range ends at i + 1 started and how long it took, the gap from that update to
the elimination of i + 1, and the whole link (end of i's elimination to the start of i + 1's)
with the worker that ran the update; then the medians and means. When eliminations plus links
add up to the factorization's time, the chain bounds the run.
Then the next meta-stripe's updates by a whole meta-stripe after each boundary, and with
--devices D (several GPUs: stripe i and worker elim.Jw on device i mod D, w mod D) each
device's lanes: busy time per worker, per 100 ms how much of it some sweep lane (the workers
from --lookahead-workers on) was busy, and how much of the panels' time ran beside one (the
spans are the host's: a lane waiting for its device counts as busy).
Usage: trace-chain.py TRACE [--devices D] [--lookahead-workers L]
"""
import argparse
import gzip
import json
import re
import statistics
import collections


def main(path, devices=1, lookahead=1):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    elim = {}
    adopt = collections.defaultdict(list)
    updates = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X":
            continue
        args = e.get("args", {})
        worker = names.get((e.get("pid"), e.get("tid")), str(e.get("tid")))
        if e["name"] == "eliminate":
            elim[int(args["stripe"])] = (e["ts"], e["ts"] + e["dur"])
        elif e["name"] == "adopt":
            adopt[int(args["stripe"])].append((e["ts"], e["dur"]))
        elif e["name"] == "update":
            bounds = [int(v) for v in re.findall(r"\d+", args["I"])]
            updates[int(args["J"])].append((e["ts"], e["dur"], bounds[-1], worker, bounds[0]))
    total = sum(b - a for a, b in elim.values())
    print(f"{len(elim)} eliminations, {total / 1e3:.0f} ms in all")
    print("   i  elim_ms adopt_at adopt_ms  upd_at  upd_ms  gap_ms link_ms worker")
    rows = []
    for i in sorted(elim):
        if i + 1 not in elim:
            continue
        end = elim[i][1]
        last = [u for u in updates[i + 1] if u[2] == i + 1]
        upd = max(last, key=lambda u: u[0] + u[1]) if last else None
        ad = [a for a in adopt[i] if a[0] >= end - 1]
        a0 = min((a[0] for a in ad), default=None)
        a1 = max((a[0] + a[1] for a in ad), default=None)
        row = (i, (elim[i][1] - elim[i][0]) / 1e3,
               (a0 - end) / 1e3 if a0 is not None else -1,
               (a1 - a0) / 1e3 if a0 is not None else -1,
               (upd[0] - end) / 1e3 if upd else -1, upd[1] / 1e3 if upd else -1,
               (elim[i + 1][0] - upd[0] - upd[1]) / 1e3 if upd else -1,
               (elim[i + 1][0] - end) / 1e3, upd[3] if upd else "")
        rows.append(row)
        print("%4d %8.1f %8.1f %8.1f %7.1f %7.1f %7.1f %7.1f %s" % row)
    if not rows:
        return
    columns = list(zip(*rows))
    for k, name in [(1, "elimination"), (3, "adoption"), (4, "update start"), (5, "update"),
                    (7, "link")]:
        values = [v for v in columns[k] if v >= 0]
        if values:
            print(f"{name:13s} median {statistics.median(values):.1f} ms, mean "
                  f"{statistics.mean(values):.1f} ms, sum {sum(values):.0f} ms")
    print_range_updates(elim, updates)
    print_lanes(events, names, devices, lookahead)


def print_range_updates(elim, updates):
    """The next meta-stripe's updates by a whole meta-stripe [a, b), from the end of b - 1's
    elimination (the boundary): when each started and ended, beside when J's elimination began."""
    ranges = collections.defaultdict(list)
    for j, ups in updates.items():
        for ts, dur, last, worker, first in ups:
            if last - first > 1:
                ranges[last].append((j, ts, dur, worker, last - first))
    print("updates of the next meta-stripe by a whole one, from the boundary (ms):")
    print("   J   I_end   start     end  J elim at  worker")
    for last in sorted(ranges):
        if last - 1 not in elim:
            continue
        boundary = elim[last - 1][1]
        for j, ts, dur, worker, width in sorted(ranges[last], key=lambda r: r[0]):
            if j < last or j - last >= width:  # the next meta-stripe's only
                continue
            at = (elim[j][0] - boundary) / 1e3 if j in elim else -1
            print("%4d %7d %7.1f %7.1f %10.1f  %s" % (j, last, (ts - boundary) / 1e3,
                                                        (ts + dur - boundary) / 1e3, at, worker))


def union_length(spans):
    total, end = 0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def print_lanes(events, names, devices, lookahead):
    spans = collections.defaultdict(list)  # (device, worker name) -> [(start, end)]
    t0, t1 = None, None
    for e in events:
        if e.get("ph") != "X":
            continue
        worker = names.get((e.get("pid"), e.get("tid")), "")
        if e["name"] == "eliminate":
            key = (int(e["args"]["stripe"]) % devices, "elim.I")
        elif re.fullmatch(r"elim\.J\d+", worker):
            key = (int(worker[6:]) % devices, worker)
        else:
            continue
        spans[key].append((e["ts"], e["ts"] + e["dur"]))
        t0 = e["ts"] if t0 is None else min(t0, e["ts"])
        t1 = e["ts"] + e["dur"] if t1 is None else max(t1, e["ts"] + e["dur"])
    if t0 is None:
        return
    window = 100000
    print(f"lanes, {(t1 - t0) / 1e3:.0f} ms from the first elimination or update to the last:")
    for d in range(devices):
        busy = ", ".join(f"{w} {union_length(s) / 1e3:.0f}" for (dev, w), s in sorted(spans.items())
                         if dev == d)
        sweep = [iv for (dev, w), s in spans.items() if dev == d and w != "elim.I"
                 and int(w[6:]) >= lookahead for iv in s]
        cover = []
        for k in range(int((t1 - t0) // window) + 1):
            lo, hi = t0 + k * window, min(t1, t0 + (k + 1) * window)
            part = [(max(a, lo), min(b, hi)) for a, b in sweep if b > lo and a < hi]
            cover.append(100 * union_length(part) / (hi - lo))
        print(f"  device {d}: busy ms {busy}; some sweep lane busy {union_length(sweep) / 1e3:.0f} ms")
        print("    per 100 ms (%): " + " ".join(f"{c:.0f}" for c in cover))
        panels = spans.get((d, "elim.I"), [])
        beside = sum(union_length([(max(a, p0), min(b, p1)) for a, b in sweep if b > p0 and a < p1])
                     for p0, p1 in panels)
        total = sum(p1 - p0 for p0, p1 in panels)
        if total > 0:
            print(f"    panels: {len(panels)}, {total / 1e3:.0f} ms, {100 * beside / total:.0f}% of "
                  f"it beside a busy sweep lane")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--lookahead-workers", type=int, default=1)
    args = parser.parse_args()
    main(args.trace, args.devices, args.lookahead_workers)

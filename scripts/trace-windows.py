#!/usr/bin/env python3
"""Where a dense factorization's time went, window by window, from its Chrome trace.

Reads a trace written by `bench_dense_gpu --trace` or `bench_dense_ooc --trace` (the engine's
TraceRecorder; gzip is fine) and prints, for the factorization (the master's "triangulation"
span):
  - per window: the J updates in flight on average, elim.I's and the I/O role's busy fractions,
    and with --n the arithmetic rate (each traced update's and panel's flops spread over its
    span; the multipliers of a range's update are not counted, so the rate reads ~10% low);
  - each elimination's wait from the end of its stripe's last update to its start (the chain);
  - for the updates that follow a read of their J, the wait from the read's end to their start,
    and for each write, the time since the J's last update (is the J stream waiting for the disk,
    or the disk for the J stream?);
  - the I/O role's read streams (traces that name each read's place in its stream): how many
    parts a stream reads, the read rate inside streams, the read hook's time (the device's copy
    of A for the residual) and the role's idle gaps between streams.
Usage: trace-windows.py TRACE [--n N] [--stripe-rows S] [--window-ms 100]
"""
import argparse
import collections
import gzip
import json
import re


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def stripe_range(text):
    """An update's I: "5" (the CPU tier, one span a stripe) or "[0, 8)" (the GPU tier)."""
    nums = [int(v) for v in re.findall(r"\d+", text)]
    return (nums[0], nums[0] + 1) if len(nums) == 1 else (nums[0], nums[1])


def spread(windows, begin, duration, amount, width):
    """Adds `amount` to the windows [begin, begin + duration) covers, in proportion."""
    duration = max(duration, 1)
    t = begin
    while t < begin + duration:
        w = int(t // width)
        end = min((w + 1) * width, begin + duration)
        windows[w] += amount * (end - t) / duration
        t = end


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--n", type=int, default=0, help="the matrix order (for the rates)")
    ap.add_argument("--stripe-rows", type=int, default=1024, help="S (for the rates)")
    ap.add_argument("--window-ms", type=float, default=100.0)
    a = ap.parse_args()

    events = load(a.trace)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M"}
    tri = next(e for e in events if e.get("name") == "triangulation")
    t0, wall = tri["ts"], tri["dur"]
    width = a.window_ms * 1e3
    in_flight, elim_busy, io_busy, flops = (collections.defaultdict(float) for _ in range(4))
    eliminations, last_update = {}, collections.defaultdict(float)
    reads, writes, updates = collections.defaultdict(list), [], []
    io_reads, hooks = [], []
    s = a.stripe_rows
    for e in events:
        if e.get("ph") != "X" or not t0 <= e["ts"] <= t0 + wall:
            continue
        begin, dur, args = e["ts"] - t0, e["dur"], e.get("args", {})
        role = names.get(e["tid"], "")
        if e["name"] == "update":
            j = int(args["J"])
            i_begin, i_end = stripe_range(args["I"])
            spread(in_flight, begin, dur, dur, width)
            if a.n:
                spread(flops, begin, dur, 2.0 * s * (i_end - i_begin) * s * (a.n - i_end * s), width)
            last_update[j] = max(last_update[j], begin + dur)
            updates.append((begin, dur, j))
        elif e["name"] == "eliminate":
            i = int(args["stripe"])
            eliminations[i] = begin
            spread(elim_busy, begin, dur, dur, width)
            if a.n:
                m = a.n - i * s
                spread(flops, begin, dur, m * s * s - s**3 / 3.0, width)
        elif role == "io":
            spread(io_busy, begin, dur, dur, width)
            if e["name"] == "read":
                reads[int(args["stripe"])].append(begin + dur)
                if "in stream" in args:
                    k, m = (int(v) for v in args["in stream"].split(" of "))
                    io_reads.append((begin, dur, k, m, int(args["bytes"])))
            elif e["name"] == "read hook":
                hooks.append(dur)
            elif e["name"] == "write":
                writes.append((begin, int(args["stripe"])))

    print(f"factorization {wall / 1e6:.3f} s; windows of {a.window_ms:g} ms:")
    print("  start  updates in flight  elim.I busy  I/O busy" + ("  GFLOP/s" if a.n else ""))
    for w in range(int(wall // width) + 1):
        rate = f"  {flops[w] / (width / 1e6) / 1e9:7.0f}" if a.n else ""
        print(f"  {w * width / 1e6:5.2f} s  {in_flight[w] / width:17.2f}  "
              f"{elim_busy[w] / width:11.2f}  {io_busy[w] / width:8.2f}{rate}")

    waits = sorted((eliminations[i] - last_update[i]) / 1e3 for i in eliminations
                   if i in last_update)
    if waits:
        print(f"eliminations: {len(eliminations)}, wait after the stripe's last update: "
              f"mean {sum(waits) / len(waits):.1f} ms, max {waits[-1]:.1f} ms")

    def quantiles(values):
        values = sorted(values)
        return (f"median {values[len(values) // 2]:.0f} ms, p90 {values[9 * len(values) // 10]:.0f}"
                f" ms ({len(values)})") if values else "none"

    after_read, previous_end = [], {}
    for begin, dur, j in sorted(updates):
        landed = [r for r in reads[j] if r <= begin]
        if landed and (j not in previous_end or max(landed) > previous_end[j]):
            after_read.append((begin - max(landed)) / 1e3)
        previous_end[j] = begin + dur
    print("update after its J's read, wait from the read:", quantiles(after_read))
    since_update = []
    for begin, j in writes:
        ends = [b + d for b, d, jj in updates if jj == j and b + d <= begin]
        if ends:
            since_update.append((begin - max(ends)) / 1e3)
    print("write of a J, time since its last update:", quantiles(since_update))
    if io_reads:
        io_streams(sorted(io_reads), hooks)


def io_streams(io_reads, hooks):
    """The I/O role's read streams: parts per stream, rate inside them, gaps between them."""
    streams = []  # (start, end, parts, bytes)
    for begin, dur, k, m, nbytes in io_reads:
        if k == 1 or not streams:
            streams.append([begin, begin + dur, 0, 0])
        streams[-1][1] = begin + dur
        streams[-1][2] += 1
        streams[-1][3] += nbytes
    sizes = collections.Counter(st[2] for st in streams)
    busy = sum(st[1] - st[0] for st in streams)
    total = sum(st[3] for st in streams)
    gaps = [b[0] - a[1] for a, b in zip(streams, streams[1:])]
    print(f"read streams: {len(streams)}, parts per stream " +
          ", ".join(f"{m} x{c}" for m, c in sorted(sizes.items())) +
          f"; {total / 2**30:.2f} GiB in {busy / 1e6:.3f} s of streams "
          f"({total / busy / 1e3 if busy else 0:.2f} GB/s inside them)")
    if gaps:
        gaps.sort()
        print(f"  gaps between streams: {sum(gaps) / 1e6:.3f} s in all, median "
              f"{gaps[len(gaps) // 2] / 1e3:.1f} ms, max {gaps[-1] / 1e3:.1f} ms")
    if hooks:
        print(f"  read hook (the device's copy of A): {sum(hooks) / 1e6:.3f} s in {len(hooks)}, "
              f"max {max(hooks) / 1e3:.1f} ms")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarises an Nsight Compute report of the one-pass kernel (device-check.sh TRIDIAG_PROFILE=1).

For every profiled launch: grid, duration, occupancy, issue activity and the largest stall
reasons; for chosen launches, the CUDA source lines with the most warp-stall samples.
Usage: ncu-summary.py NCU REPORT OUT_DIR [LAUNCH ...]   (launch indices into the report;
default 1 17 19: with `tridiag_gpu_bench 26 1 quick` these are spike n = 256 random, spike
n = 4096 random and thomas n = 4096 random, each after its warm-up launch).
"""
import csv
import io
import subprocess
import sys


def ncu_csv(ncu, report, *args):
    out = subprocess.run([ncu, "-i", report, "--csv", *args], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"ncu {' '.join(args)} failed: {out.stderr.strip()[:300]}")
        return []
    text = out.stdout[out.stdout.find('"'):]  # skip any banner before the header
    return list(csv.reader(io.StringIO(text)))


def number(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def launches(ncu, report):
    rows = ncu_csv(ncu, report, "--page", "raw")
    if len(rows) < 3:
        return []
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[2:]]  # row 1 holds the units


def print_launch(i, m):
    def get(key):
        return m.get(key, "?")
    name = get("Kernel Name")
    print(f"[{i}] {name[:40]} grid {get('launch__grid_size')} block {get('launch__block_size')} "
          f"regs {get('launch__registers_per_thread')} "
          f"time {get('gpu__time_duration.sum')} ns, dram {get('dram__throughput.avg.pct_of_peak_sustained_elapsed')}%, "
          f"occupancy {get('sm__warps_active.avg.pct_of_peak_sustained_active')}%, "
          f"issue busy {get('sm__inst_issued.avg.pct_of_peak_sustained_active')}%, "
          f"instructions {get('smsp__inst_executed.sum')}")
    stalls = []
    for prefix in ("smsp__average_warps_issue_stalled_", "smsp__pcsamp_warps_issue_stalled_"):
        for k, v in m.items():
            if k.startswith(prefix) and "not_issued" not in k:
                x = number(v)
                if x:
                    stalls.append((x, k[len(prefix):].replace("_per_issue_active.ratio", "")))
        if stalls:
            break
    total = sum(x for x, _ in stalls) or 1.0
    stalls.sort(reverse=True)
    print("     stalls: " + ", ".join(f"{k} {100 * x / total:.0f}%" for x, k in stalls[:8]))


def print_source(ncu, report, index, out_dir):
    rows = ncu_csv(ncu, report, "--page", "source", "--print-source", "cuda",
                   "--launch-skip", str(index), "--launch-count", "1")
    if len(rows) < 2:
        return
    with open(f"{out_dir}/source_{index}.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    head = rows[0]
    sample_col = next((c for c, h in enumerate(head) if h.startswith("Warp Stall Sampling (All")), None)
    line_col = next((c for c, h in enumerate(head) if h in ("#", "Line", "# Line")), 0)
    source_col = next((c for c, h in enumerate(head) if h == "Source"), 1)
    if sample_col is None:
        print(f"launch {index}: no stall-sampling column in {head[:8]}")
        return
    lines = [(number(r[sample_col]) or 0.0, r[line_col], r[source_col].strip()) for r in rows[1:]
             if len(r) > sample_col]
    total = sum(x for x, _, _ in lines) or 1.0
    lines.sort(reverse=True)
    print(f"== launch {index}: source lines by warp-stall samples ({total:.0f} samples)")
    for x, line, src in lines[:30]:
        print(f"  {100 * x / total:5.1f}%  {line:>5}  {src[:110]}")


def main():
    ncu, report, out_dir = sys.argv[1:4]
    picks = [int(a) for a in sys.argv[4:]] or [1, 17, 19]
    for i, m in enumerate(launches(ncu, report)):
        print_launch(i, m)
    for i in picks:
        print_source(ncu, report, i, out_dir)


if __name__ == "__main__":
    main()

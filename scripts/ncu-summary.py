#!/usr/bin/env python3
"""Summarises an Nsight Compute report of the one-pass kernel (device-check.sh TRIDIAG_PROFILE=1).

For every profiled launch: grid, registers, duration, occupancy, instructions and the largest
stall reasons. (Per-line stall samples are in the report itself: open it in the Nsight
Compute GUI; the CLI's source page carries no metrics.)
Usage: ncu-summary.py NCU REPORT
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
    """Each launch's metrics as name -> "value unit" (row 1 of the raw page holds the units)."""
    rows = ncu_csv(ncu, report, "--page", "raw")
    if len(rows) < 3:
        return []
    head, units = rows[0], rows[1]
    return [{h: f"{v} {u}".strip() for h, u, v in zip(head, units, r)} for r in rows[2:]]


def print_launch(i, m):
    def get(key):
        return m.get(key, "(not collected)")
    print(f"[{i}] {get('Kernel Name')[:40]} grid {get('launch__grid_size')} "
          f"block {get('launch__block_size')} regs {get('launch__registers_per_thread')}, "
          f"time {get('gpu__time_duration.sum')}, "
          f"occupancy {get('sm__warps_active.avg.pct_of_peak_sustained_active')}, "
          f"instructions {get('smsp__inst_executed.sum')}")
    stalls = []
    for prefix in ("smsp__average_warps_issue_stalled_", "smsp__pcsamp_warps_issue_stalled_"):
        for k, v in m.items():
            if k.startswith(prefix) and "not_issued" not in k:
                x = number(v.split(" ")[0])
                if x:
                    stalls.append((x, k[len(prefix):].replace("_per_issue_active.ratio", "")))
        if stalls:
            break
    total = sum(x for x, _ in stalls) or 1.0
    stalls.sort(reverse=True)
    print("     stalls: " + ", ".join(f"{k} {100 * x / total:.0f}%" for x, k in stalls[:8]))
    memory = [f"{k} {v}" for k, v in sorted(m.items())
              if any(p in k for p in ("dram__throughput.avg.pct", "l1tex__t_sector_hit_rate.pct",
                                      "mem_local_op", "sm__throughput.avg.pct"))]
    if memory:
        print("     memory: " + ", ".join(memory))
    pipes = []
    for k, v in m.items():
        x = number(v.split(" ")[0])
        if "pipe" in k and "pct_of_peak" in k and x is not None and x >= 5:
            pipes.append((x, k))
    pipes.sort(reverse=True)
    if pipes:
        print("     pipes: " + ", ".join(f"{k} {x:.0f}%" for x, k in pipes[:8]))


def main():
    ncu, report = sys.argv[1:3]
    for i, m in enumerate(launches(ncu, report)):
        print_launch(i, m)


if __name__ == "__main__":
    main()

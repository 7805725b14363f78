#!/usr/bin/env python3
"""Markdown tables of a tridiag_gpu_bench JSON run, as in docs/performance.md.

Usage: bench/tridiag/gpu_tables.py RESULT.json
"""
import json
import sys


def table(case):
    rows = ["| solver | G unknowns/s | roofline | max rel. residual |", "|---|---|---|---|"]
    for name in sorted(k for k, v in case.items() if isinstance(v, dict)):
        r = case[name]
        rows.append(f"| {name} | {r['unknowns_per_s'] / 1e9:.2f} | {100 * r['roofline_fraction']:.1f}% "
                    f"| {r['max_relative_residual']:.1e} |")
    return "\n".join(rows)


def main():
    d = json.load(open(sys.argv[1]))
    print(f"Device: {d['device']}; device-to-device copy: {d['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s "
          f"(bytes read + written); {d['unknowns']} unknowns per case.\n")
    if "one_random_system" in d:
        print("#### One random system of 2^26 unknowns\n")
        print(table(d["one_random_system"]) + "\n")
    for case in d["strided_batches"]:
        print(f"#### {case['systems']} systems of n = {case['n']}, {case['matrix']}\n")
        print(table(case) + "\n")
    c = d.get("chunked_one_system_2GiB_budget")
    if c:
        print("#### One system of 2^26 unknowns through a 2 GiB device budget (transfers included)\n")
        print(f"{c['notes'][-1]}: {c['unknowns_per_s'] / 1e6:.0f} M unknowns/s, relative residual "
              f"{c['relative_residual']:.1e}.")


if __name__ == "__main__":
    main()

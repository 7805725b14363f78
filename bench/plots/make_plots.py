#!/usr/bin/env python3
"""The plots of docs/performance.md, regenerated from the JSON under bench/*/results.

  python3 bench/plots/make_plots.py                 # writes docs/plots/*.png
  python3 bench/plots/make_plots.py --out /tmp/p    # elsewhere
  python3 bench/plots/make_plots.py --list          # the PNGs it writes, one a line

One PNG per headline benchmark (PLOTS below). Each names the result files it reads and the card
or machine they ran on. matplotlib (Debian: python3-matplotlib) with the Agg backend, no network,
no fonts beyond matplotlib's own, no timestamps in the files: the same JSON gives the same PNGs.
A result file that is not valid JSON or lacks a field a plot needs stops the script with exit
status 1 and a message naming the file, rather than drawing a wrong plot. Exit status 2: matplotlib
is missing.
"""
import argparse
import contextlib
import json
import math
import os
import sys

# Result files per plot, relative to --results-root (the repository's bench/). The newest run of
# each headline, as quoted in docs/performance.md.
DENSE_GPU_TIERS = {
    "H100": ["dense_gpu/results/h100_fits_n32768_2026-11-25_lookahead.json",
             "dense_gpu/results/h100_fits_n57344_2026-11-25_lookahead.json",
             "dense_gpu/results/h100_ram_n57344_12GiB_2026-11-25_lookahead.json",
             "dense_gpu/results/h100_ssd_n32768_4GiB_8GiB_2026-11-25.json"],
    "H200": ["dense_gpu/results/h200_fits_n32768_2026-11-26_master.json",
             "dense_gpu/results/h200_ram_n57344_12GiB_2026-11-26_master.json",
             "dense_gpu/results/h200_ram_n57344_12GiB_2026-11-26_lookahead_takes_critical.json",
             "dense_gpu/results/h200_ssd_n49152_4GiB_8GiB_2026-11-26.json"],
}
DENSE_GPU_MULTI = ["dense_gpu/results/h200x4_ram_n57344_12GiB_1gpu_2026-11-29.json",
                   "dense_gpu/results/h200x4_ram_n57344_12GiB_2gpus_2026-11-29.json",
                   "dense_gpu/results/h200x4_ram_n57344_12GiB_4gpus_2026-11-29.json"]
# The runs above skip the DGEMM peer; its rate at the J update shape on an H200 of the pair.
DENSE_GPU_MULTI_DGEMM = "dense_gpu/results/h200x2_ram_n57344_12GiB_1gpu_S1024_2026-11-26.json"
# The same at the "n about 100000" (a pair of H200s, 24 GiB per device).
DENSE_GPU_MULTI_LARGE = ["dense_gpu/results/h200x2_ram_n98304_24GiB_1gpu_2026-11-27.json",
                         "dense_gpu/results/h200x2_ram_n98304_24GiB_2gpus_2026-11-27.json"]
TRIDIAG_GPU = "tridiag/results/gpu_bench_h100_2026-11-24_session4.json"
TRIDIAG_CPU = "tridiag/results/cpu_bench_2cores.json"
STORAGE = "storage/results/h100_host_nvme_run4_same_files.json"
TRANSFER = "storage/results/transfer_2core_n16384_2026-11-26_final_run1.json"
DAEMON_E2E = [("dev VM, 2 cores, CPU", "daemon/results/tridiag_e2e_dev_vm.json"),
              ("H100 host, 1 GPU", "daemon/results/tridiag_e2e_h100.json"),
              ("H200 pair, 1 GPU", "daemon/results/tridiag_e2e_h200x2_1gpu_2026-11-26.json"),
              ("H200 pair, 2 GPUs", "daemon/results/tridiag_e2e_h200x2_2gpus_2026-11-26.json")]
DENSE_OOC_SWEEP = "dense_ooc/results/plot_cache25.json"
DENSE_OOC_N8192 = ["dense_ooc/results/cpu_2cores_n8192_run1.json",
                   "dense_ooc/results/cpu_2cores_n8192_run2.json"]

OOC_STRATEGIES = ["basic", "zigzag", "meta_zigzag"]
STRIPESOLVE_COLORS = ["#2ca02c", "#1f77b4", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2"]
PEER_COLORS = ["#7f7f7f", "#d62728", "#ff7f0e", "#c49c94"]


class ResultError(Exception):
    """A result file that cannot be plotted; the message names the file."""


class Results:
    """Reads result files under one root and keeps which file is being read, for the errors."""

    def __init__(self, root):
        self.root = root

    def load(self, rel):
        path = os.path.join(self.root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except OSError as e:
            raise ResultError(f"{path}: cannot read: {e.strerror}") from e
        except json.JSONDecodeError as e:
            raise ResultError(f"{path}: not valid JSON: {e}") from e

    @contextlib.contextmanager
    def reading(self, rel):
        """Loads `rel` for plotting (the value of the with statement) and turns a missing field or
        a wrong type met while plotting it into a ResultError."""
        path = os.path.join(self.root, rel)
        doc = self.load(rel)
        try:
            yield doc
        except ResultError:
            raise
        except KeyError as e:
            raise ResultError(f"{path}: malformed result: field {e} missing") from e
        except (TypeError, ValueError, IndexError, AttributeError) as e:
            raise ResultError(f"{path}: malformed result: {e}") from e


def num(x, what):
    """A finite, non-negative number from a result, else ValueError (then ResultError)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(f"{what} is {x!r}, not a finite non-negative number")
    return float(x)


def one_doc(d):
    """bench_dense_gpu writes one document, or a list of them when several modes ran."""
    docs = d if isinstance(d, list) else [d]
    docs = [x for x in docs if not x.get("skipped")]
    if len(docs) != 1:
        raise ValueError(f"expected one benchmark document, found {len(docs)}")
    return docs[0]


def card(doc):
    name = doc["device"]["name"]
    return name.replace("NVIDIA ", "").replace(" 80GB HBM3", "")


def bar_labels(ax, bars, fmt="{:.1f}"):
    for b in bars:
        h = b.get_height()
        ax.annotate(fmt.format(h), (b.get_x() + b.get_width() / 2, h), ha="center", va="bottom",
                    fontsize=7, xytext=(0, 1), textcoords="offset points")


def grouped_bars(ax, groups, series, values, colors, fmt="{:.1f}", headroom=1.35):
    """values[s][g] (None: not run); one group of bars per entry of `groups`. The y axis leaves
    `headroom` above the tallest bar for the legend."""
    width = 0.8 / len(series)
    top = max(v for s in series for v in values[s] if v is not None)
    ax.set_ylim(0, headroom * top)
    for i, s in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))
              if values[s][g] is not None]
        ys = [v for v in values[s] if v is not None]
        if xs:
            bar_labels(ax, ax.bar(xs, ys, width, label=s, color=colors[i % len(colors)]), fmt)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)


def captioned(fig, text, bottom=0.04):
    """`fig` with `text` (where its data comes from) along its foot, laid out above it."""
    fig.text(0.01, 0.005, text, fontsize=7, color="#444444", ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def plot_dense_gpu_tiers(res, plt):
    fig, (ax, ax_ssd) = plt.subplots(1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [3, 1.3]})
    groups, vals = [], {"stripesolve factor": [], "cuSOLVER getrf+getrs": [], "DGEMM, J update shape": []}
    ssd_groups, ssd = [], {"measured": [], "disk bound": []}
    files = []
    for card_name, rels in DENSE_GPU_TIERS.items():
        for rel in rels:
            files.append(os.path.basename(rel))
            with res.reading(rel) as doc:
                doc = one_doc(doc)
                for r in doc["runs"]:
                    label = f"{card(doc)}\n{doc['mode']}, n={r['n']}"
                    if doc["mode"] == "ssd":
                        s = r["ssd"]
                        ssd_groups.append(label + "\nfactor.")
                        ssd["measured"].append(num(s["factorization_seconds"], "factorization_seconds"))
                        ssd["disk bound"].append(num(s["factorization_time_bound_seconds"], "bound"))
                        continue
                    groups.append(label)
                    vals["stripesolve factor"].append(
                        num(r["stripesolve"]["tflops_factor"], "stripesolve.tflops_factor"))
                    c = r["cusolver"]
                    vals["cuSOLVER getrf+getrs"].append(
                        None if c.get("skipped") else num(c["tflops"], "cusolver.tflops"))
                    upd = [x for x in r.get("dgemm", []) if x["role"] == "update_shape"]  # absent: --skip dgemm
                    vals["DGEMM, J update shape"].append(
                        num(upd[0]["tflops"], "dgemm.tflops") if upd else None)
    grouped_bars(ax, groups, list(vals), vals,
                 [STRIPESOLVE_COLORS[0], PEER_COLORS[0], "#000000"])
    ax.set_ylabel("TFLOP/s (2/3 n^3 over factor seconds)")
    ax.set_title("Dense LU on the GPU: fits the device / RAM tier")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    grouped_bars(ax_ssd, ssd_groups, list(ssd), ssd, [STRIPESOLVE_COLORS[0], PEER_COLORS[0]])
    ax_ssd.set_ylabel("seconds (lower is better)")
    ax_ssd.set_title("SSD tier: factorization vs disk bound")
    ax_ssd.legend(fontsize=8, loc="upper left")
    ax_ssd.grid(axis="y", alpha=0.3)
    return captioned(fig, "bench/dense_gpu/results/: " + ", ".join(files), 0.05)


def gpu_series(res, files):
    """(GPUs, factor TFLOP/s, n, GiB per device, card) of a list of bench_dense_gpu files."""
    gpus, factor = [], []
    for rel in files:
        with res.reading(rel) as doc:
            doc = one_doc(doc)
            r = doc["runs"][0]
            gpus.append(int(doc["args"].get("gpus", 1)))
            factor.append(num(r["stripesolve"]["tflops_factor"], "stripesolve.tflops_factor"))
            n, budget, host = r["n"], num(r["gpu_memory"], "gpu_memory") / 2**30, card(doc)
    return gpus, factor, n, budget, host


def plot_dense_gpu_multi(res, plt):
    fig, ax = plt.subplots(figsize=(7, 5))
    gpus, factor, n, budget, host = gpu_series(res, DENSE_GPU_MULTI)
    large = gpu_series(res, DENSE_GPU_MULTI_LARGE)
    with res.reading(DENSE_GPU_MULTI_DGEMM) as doc:
        r = one_doc(doc)["runs"][0]
        upd = [x for x in r.get("dgemm", []) if x["role"] == "update_shape"]
        dgemm = num(upd[0]["tflops"], "dgemm.tflops")
    ax.plot(gpus, factor, "o-", color=STRIPESOLVE_COLORS[0],
            label=f"stripesolve factor, n = {n}, {budget:.0f} GiB per device")
    ax.plot(large[0], large[1], "s-", color=STRIPESOLVE_COLORS[1],
            label=f"stripesolve factor, n = {large[2]}, {large[3]:.0f} GiB per device ({large[4]})")
    for xs, ys, dy in ((gpus, factor, -12), (large[0], large[1], 6)):
        for g, f in zip(xs, ys):
            ax.annotate(f"{f:.1f} ({f / ys[0]:.2f}x)", (g, f), textcoords="offset points",
                        xytext=(6, dy), fontsize=8)
    ax.plot(gpus, [g * dgemm for g in gpus], "k--", lw=1,
            label=f"GPUs x one GPU's DGEMM at the J update shape ({dgemm:.1f})")
    ax.plot(gpus, [0.8 * g * dgemm for g in gpus], "k:", lw=1, label="80% of that")
    ax.set_xticks(gpus)
    ax.set_xlabel(f"GPUs ({host})")
    ax.set_ylabel("factor TFLOP/s")
    ax.set_title("Dense LU, RAM tier, against GPUs", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_ylim(0, 1.1 * gpus[-1] * dgemm)
    ax.grid(alpha=0.3)
    return captioned(fig, "bench/dense_gpu/results/: "
                     + ", ".join(os.path.basename(p)
                                 for p in DENSE_GPU_MULTI + DENSE_GPU_MULTI_LARGE)
                     + "; DGEMM from " + os.path.basename(DENSE_GPU_MULTI_DGEMM), 0.05)


TRIDIAG_RANDOM = ["stripesolve thomas strided", "stripesolve spike strided",
                  "cusparse gtsv2StridedBatch", "cusparse gtsvInterleavedBatch lu_pivoting"]
TRIDIAG_DOMINANT = ["stripesolve thomas strided", "stripesolve cr_pcr strided",
                    "stripesolve pcr_thomas strided", "stripesolve spike strided",
                    "cusparse gtsv2StridedBatch", "cusparse gtsvInterleavedBatch thomas"]


def plot_tridiag_gpu(res, plt):
    rel = TRIDIAG_GPU
    with res.reading(rel) as d:
        fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [3, 3, 1.4]})
        for ax, matrix, names, title in [
                (axes[0], "random U(-1,1)", TRIDIAG_RANDOM, "random U(-1,1)"),
                (axes[1], "diagonally dominant", TRIDIAG_DOMINANT, "diagonally dominant")]:
            cases = sorted((c for c in d["strided_batches"] if c["matrix"] == matrix),
                           key=lambda c: c["n"])
            if not cases:
                raise ValueError(f"no strided_batches case for matrix '{matrix}'")
            groups = [f"{c['systems']} x n={c['n']}" for c in cases]
            vals = {s.replace("stripesolve ", "").replace("cusparse ", "cuSPARSE "):
                    [num(c[s]["unknowns_per_s"], s) / 1e9 for c in cases] for s in names}
            n_ours = sum(1 for s in names if s.startswith("stripesolve"))
            colors = STRIPESOLVE_COLORS[:n_ours] + PEER_COLORS
            grouped_bars(ax, groups, list(vals), vals, colors, "{:.0f}")
            roof = [num(c[names[0]]["unknowns_per_s"], "unknowns_per_s") /
                    num(c[names[0]]["roofline_fraction"], "roofline_fraction") / 1e9 for c in cases]
            for g, y in enumerate(roof):
                ax.hlines(y, g - 0.45, g + 0.45, colors="black", linestyles="--", lw=1,
                          label="copy roofline" if g == 0 else None)
            ax.set_title(title)
            ax.set_ylabel("G unknowns/s")
            ax.legend(fontsize=7, ncol=2, loc="upper right")
            ax.grid(axis="y", alpha=0.3)
        one = d["one_random_system"]
        names = sorted(one)
        vals = [num(one[s]["unknowns_per_s"], s) / 1e9 for s in names]
        colors = [STRIPESOLVE_COLORS[i] if s.startswith("stripesolve") else PEER_COLORS[i % 4]
                  for i, s in enumerate(names)]
        bars = axes[2].bar(range(len(names)), vals, color=colors)
        bar_labels(axes[2], bars)
        axes[2].set_xticks(range(len(names)))
        axes[2].set_xticklabels([s.replace("stripesolve ", "").replace("cusparse ", "cuSPARSE ")
                                 for s in names], rotation=30, ha="right", fontsize=7)
        axes[2].set_title(f"one random system, 2^{round(math.log2(d['unknowns']))}")
        axes[2].grid(axis="y", alpha=0.3)
        fig.suptitle(f"Batched tridiagonal solves on the GPU ({d['device']}), "
                     f"{d['unknowns']} unknowns per case, best of 5")
    return captioned(fig, f"bench/{rel}")


# The launch's own choice at each n, from the runs named; a later run's n replaces an earlier one's
# (each n's pair is from one run: the forty-fourth session's from both ends at 96 / 112 / 128 / 256).
TRIDIAG_INTERLEAVED = ["tridiag/results/h200_interleaved_gepp_final_last_of_48_2026-11-30.jsonl",
                       "tridiag/results/h200_interleaved_gepp_twisted_chosen_2026-12-01.json"]
GEPP_OURS = "stripesolve gepp interleaved"
GEPP_PEER = "cusparse gtsvInterleavedBatch lu_pivoting"


def plot_tridiag_interleaved(res, plt):
    """Interleaved batches (issue 19): gepp's launch (its own kernel choice) against cuSPARSE's
    pivoting interleaved solver over n, the ratio above each pair, the copy roofline dashed."""
    by_n, device, unknowns = {}, None, None
    for rel in TRIDIAG_INTERLEAVED:
        with res.reading(rel) as d:
            for c in d["strided_batches"]:
                by_n[c["n"]] = (num(c[GEPP_OURS]["unknowns_per_s"], GEPP_OURS) / 1e9,
                                num(c[GEPP_PEER]["unknowns_per_s"], GEPP_PEER) / 1e9,
                                num(c[GEPP_OURS]["roofline_fraction"], "roofline_fraction"))
            device, unknowns = d["device"], d["unknowns"]
    if not by_n:
        raise ValueError("no cases")
    ns = sorted(by_n)
    groups = [str(n) for n in ns]
    ours = [by_n[n][0] for n in ns]
    peer = [by_n[n][1] for n in ns]
    roof = [by_n[n][0] / by_n[n][2] for n in ns]
    fig, ax = plt.subplots(figsize=(12, 5))
    vals = {"stripesolve gepp (a thread a system; from both ends at 96-256)": ours,
            "cuSPARSE gtsvInterleavedBatch (pivoting)": peer}
    grouped_bars(ax, groups, list(vals), vals, [STRIPESOLVE_COLORS[0], PEER_COLORS[0]],
                 "{:.0f}", headroom=1.3)
    for g, (o, p) in enumerate(zip(ours, peer)):
        ax.annotate(f"{o / p:.2f}x", (g, max(o, p)), xytext=(0, 12), textcoords="offset points",
                    ha="center", fontsize=8, fontweight="bold",
                    color="#d62728" if o / p < 1.5 else "black")
    ax.plot(range(len(groups)), roof, "k--", lw=1, label="copy roofline (40 bytes an unknown)")
    ax.set_xlabel("n (rows a system)")
    ax.set_ylabel("G unknowns/s")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"Interleaved tridiagonal batches, stable, on the GPU ({device})\n"
                 f"2^{round(math.log2(unknowns))} unknowns, U(-1,1), best of 3; "
                 "ratio against cuSPARSE in the same run above each pair (target 1.5x; red below it)",
                 fontsize=10)
    return captioned(fig, "bench/" + ", bench/".join(TRIDIAG_INTERLEAVED))


def plot_tridiag_cpu(res, plt):
    rel = TRIDIAG_CPU
    with res.reading(rel) as d:
        cases = d["cases"]
        algos = ["auto", "thomas", "gepp", "spike", "bondeli", "cr"]
        groups = [f"{c['systems']} x n={c['n']}" for c in cases]
        # Each algorithm ran on the matrix it is meant for: random for the pivoting ones.
        kind = {a: "random" if cases[0]["algorithms"][a]["matrix"].startswith("random")
                else "diag. dominant" for a in algos}
        vals = {f"{a} ({kind[a]})": [num(c["algorithms"][a]["speedup_vs_lapack_loop"], a)
                                     if a in c["algorithms"] else None for c in cases] for a in algos}
        fig, ax = plt.subplots(figsize=(10, 5))
        grouped_bars(ax, groups, list(vals), vals, STRIPESOLVE_COLORS, "{:.1f}")
        ax.axhline(1.0, color="black", ls="--", lw=1, label="LAPACK dgtsv loop")
        ax.set_ylabel("speed-up over a LAPACK dgtsv loop")
        ax.set_title(f"Tridiagonal batches on the CPU, {d['threads']} threads (2-core dev VM), "
                     f"{d['total_unknowns']} unknowns per case")
        ax.legend(fontsize=8, ncol=3)
        ax.grid(axis="y", alpha=0.3)
    return captioned(fig, f"bench/{rel}")


def plot_storage(res, plt):
    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(14, 5.2))
    rel = STORAGE
    with res.reading(rel) as d:
        keys = [("raw_write_gbps", "raw O_DIRECT write"), ("part_write_gbps", "write_part"),
                ("raw_read_gbps", "raw O_DIRECT read, fresh file"),
                ("raw_same_files_one_stream_read_gbps", "raw read, the matrix's files"),
                ("part_read_gbps", "read_part"), ("part_read_pipelined_gbps", "read_parts (streamed)"),
                ("half_part_read_pipelined_gbps", "read_parts, half parts")]
        summary = sorted(d["summary"], key=lambda s: s["paths"])
        groups = [f"{s['paths']} store path{'s' if s['paths'] > 1 else ''}" for s in summary]
        vals = {label: [num(s["median_" + k], k) for s in summary] for k, label in keys}
        colors = [PEER_COLORS[0], STRIPESOLVE_COLORS[0], PEER_COLORS[0], PEER_COLORS[3],
                  STRIPESOLVE_COLORS[1], STRIPESOLVE_COLORS[2], STRIPESOLVE_COLORS[3]]
        grouped_bars(ax, groups, list(vals), vals, colors, "{:.2f}")
        ax.set_ylabel("GB/s, median of reps")
        ax.set_title(f"Stripe parts through MatrixStore, GPU host NVMe, n = {d['n']}")
        ax.legend(fontsize=7, ncol=2, loc="upper left")
        ax.grid(axis="y", alpha=0.3)
    rel_t = TRANSFER
    with res.reading(rel_t) as t:
        runs = t["runs"]
        groups = [r["operation"].replace("_", " ") for r in runs]
        vals = {"measured (best)": [num(r["best_seconds"], "best_seconds") for r in runs],
                "disk bound": [num(r["bound_seconds"], "bound_seconds") for r in runs]}
        grouped_bars(ax_t, groups, list(vals), vals, [STRIPESOLVE_COLORS[0], PEER_COLORS[0]], "{:.2f}")
        ax_t.set_ylabel("seconds (lower is better)")
        ax_t.set_title(f"Matrix import / export / create, {t['matrix_bytes'] / 2**30:.0f} GiB, "
                       f"{t['nproc']}-core VM")
        ax_t.legend(fontsize=8)
        ax_t.grid(axis="y", alpha=0.3)
    return captioned(fig, f"bench/{rel}, bench/{rel_t}")


def plot_daemon_e2e(res, plt):
    groups = []
    vals = {"stripesolve tridiag --out (end to end)": [], "solve reported by the daemon": [],
            "LAPACK dgtsv loop, same host": [], "upload path (before descriptors)": []}
    for label, rel in DAEMON_E2E:
        with res.reading(rel) as d:
            groups.append(f"{label}\n{d['systems']} x n={d['n']}")
            vals["stripesolve tridiag --out (end to end)"].append(
                num(d["command"]["end_to_end_seconds"], "end_to_end_seconds"))
            vals["solve reported by the daemon"].append(num(d["command"]["solve_seconds"], "solve_seconds"))
            vals["LAPACK dgtsv loop, same host"].append(num(d["peer"]["seconds"], "peer.seconds"))
            vals["upload path (before descriptors)"].append(num(d["upload_path"]["seconds"], "upload"))
    fig, ax = plt.subplots(figsize=(11, 5.5))
    grouped_bars(ax, groups, list(vals), vals,
                 [STRIPESOLVE_COLORS[0], STRIPESOLVE_COLORS[1], PEER_COLORS[0], PEER_COLORS[1]], "{:.2f}")
    ax.set_yscale("log")
    ax.set_ylim(0.01, 100)
    ax.set_ylabel("seconds, best run (log scale, lower is better)")
    ax.set_title("Tridiagonal batch through the daemon, end to end (.npy in, .npy out)")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return captioned(fig, "bench/daemon/results/: "
                     + ", ".join(os.path.basename(p) for _, p in DAEMON_E2E))


def plot_dense_ooc(res, plt):
    fig, (ax, ax_n) = plt.subplots(1, 2, figsize=(13, 5))
    rel = DENSE_OOC_SWEEP
    with res.reading(rel) as docs:
        if not isinstance(docs, list) or not docs:
            raise ValueError("expected a list of bench_dense_ooc documents")
        docs = sorted(docs, key=lambda x: x["n"])
        ns = [x["n"] for x in docs]
        for i, s in enumerate(OOC_STRATEGIES):
            pts = [(x["n"], num(r["gflops"], "gflops")) for x in docs for r in x["runs"]
                   if r["strategy"] == s and abs(r["cache_fraction"] - 0.25) < 1e-9 and "gflops" in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=STRIPESOLVE_COLORS[i], label=s)
        ax.plot(ns, [num(x["openblas"]["gflops"], "openblas.gflops") for x in docs], "s--",
                color=PEER_COLORS[0], label="OpenBLAS dgetrf + dgetrs (in RAM)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("n")
        ax.set_ylabel("GFLOP/s, factor + solve")
        ax.set_title(f"Out of core, a quarter of the matrix cached, {docs[0]['cores']} cores")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    groups, vals = [], {s: [] for s in OOC_STRATEGIES}
    vals["OpenBLAS (in RAM)"] = []
    for k, rel in enumerate(DENSE_OOC_N8192):
        with res.reading(rel) as d:
            fractions = sorted({r["cache_fraction"] for r in d["runs"]}, reverse=True)
            for f in fractions:
                groups.append(f"run {k + 1}\ncache {f:g} x A")
                for s in OOC_STRATEGIES:
                    g = [num(r["gflops"], "gflops") for r in d["runs"]
                         if r["strategy"] == s and r["cache_fraction"] == f and "gflops" in r]
                    vals[s].append(max(g) if g else None)
                vals["OpenBLAS (in RAM)"].append(num(d["openblas"]["gflops"], "openblas.gflops"))
            n8192 = d["n"]
    grouped_bars(ax_n, groups, list(vals), vals, STRIPESOLVE_COLORS[:3] + PEER_COLORS, "{:.0f}")
    ax_n.set_ylabel("GFLOP/s, factor + solve")
    ax_n.set_title(f"n = {n8192}: strategies against OpenBLAS, two runs")
    ax_n.legend(fontsize=7, ncol=4, loc="upper center")
    ax_n.grid(axis="y", alpha=0.3)
    return captioned(fig, f"bench/{DENSE_OOC_SWEEP}, "
                     + ", ".join(f"bench/{p}" for p in DENSE_OOC_N8192) + "; 2-core dev VM")


# PNG name -> function; docs/performance.md shows each.
PLOTS = {
    "dense_gpu_tiers.png": plot_dense_gpu_tiers,
    "dense_gpu_two_gpus.png": plot_dense_gpu_multi,
    "tridiag_gpu.png": plot_tridiag_gpu,
    "tridiag_gpu_interleaved.png": plot_tridiag_interleaved,
    "tridiag_cpu.png": plot_tridiag_cpu,
    "storage.png": plot_storage,
    "daemon_tridiag_e2e.png": plot_daemon_e2e,
    "dense_ooc_strategies.png": plot_dense_ooc,
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results-root", default=os.path.join(repo, "bench"),
                   help="folder holding <workload>/results/*.json (default: the repository's bench/)")
    p.add_argument("--out", default=os.path.join(repo, "docs", "plots"), help="where the PNGs go")
    p.add_argument("--list", action="store_true", help="print the PNG names and exit")
    args = p.parse_args()
    if args.list:
        print("\n".join(PLOTS))
        return 0
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"make_plots: matplotlib is missing ({e}); install python3-matplotlib", file=sys.stderr)
        return 2
    # Deterministic output: fixed font and hash salt, no software/date metadata in the PNG.
    matplotlib.rcParams.update({"font.family": "DejaVu Sans", "svg.hashsalt": "stripesolve",
                                "figure.dpi": 100, "savefig.dpi": 100})
    os.makedirs(args.out, exist_ok=True)
    res = Results(args.results_root)
    for name, fn in PLOTS.items():
        try:
            fig = fn(res, plt)
        except ResultError as e:
            print(f"make_plots: {name}: {e}", file=sys.stderr)
            return 1
        path = os.path.join(args.out, name)
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""GFLOP/s of the out-of-core dense solve against n for the three strategies (like 002 Fig 22).

Runs bench_dense_ooc for each n (or reads its JSON outputs with --from-json) and draws a PNG with
matplotlib if it is installed, else gnuplot if installed, else a small built-in PNG rasterizer
(standard library only), so the plot never needs new packages.

  plot_strategies.py --bench build/release/bench/dense_ooc/bench_dense_ooc \
      --n 1024,2048,4096,8192 --cache 0.25 --stripe-rows 256 --out ooc_strategies.png
  plot_strategies.py --from-json run1.json run2.json --cache 0.25 --out ooc_strategies.png
"""
import argparse
import json
import math
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

STRATEGIES = ["basic", "zigzag", "meta_zigzag"]
COLORS = {"basic": (214, 39, 40), "zigzag": (31, 119, 180), "meta_zigzag": (44, 160, 44),
          "openblas": (110, 110, 110)}


def collect(docs, cache):
    """-> {series: [(n, gflops)]} for the runs with the given cache fraction."""
    series = {}
    for d in docs:
        n = d["n"]
        series.setdefault("openblas", []).append((n, d["openblas"]["gflops"]))
        for r in d["runs"]:
            if abs(r["cache_fraction"] - cache) > 1e-9 or "gflops" not in r:
                continue
            series.setdefault(r["strategy"], []).append((n, r["gflops"]))
    return {k: sorted(v) for k, v in series.items()}


def plot_matplotlib(series, title, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, pts in series.items():
        c = tuple(v / 255 for v in COLORS.get(name, (0, 0, 0)))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if name != "openblas" else "s--",
                color=c, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.savefig(out, dpi=100)


def plot_gnuplot(series, title, out):
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for name, pts in series.items():
            path = f"{tmp}/{name}.dat"
            with open(path, "w") as f:
                for n, g in pts:
                    f.write(f"{n} {g}\n")
            r, g, b = COLORS.get(name, (0, 0, 0))
            plots.append(f"'{path}' with linespoints lw 2 lc rgb '#{r:02x}{g:02x}{b:02x}' "
                         f"title '{name}'")
        script = (f"set terminal png size 800,500\nset output '{out}'\nset logscale x 2\n"
                  f"set xlabel 'n'\nset ylabel 'GFLOP/s'\nset title '{title}'\nset grid\n"
                  f"plot " + ", ".join(plots) + "\n")
        subprocess.run(["gnuplot"], input=script.encode(), check=True)


# 5x7 glyphs (rows top to bottom, 5 bits each) for the built-in rasterizer.
FONT = {
    "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14], "2": [14, 17, 1, 2, 4, 8, 31],
    "3": [31, 2, 4, 2, 1, 17, 14], "4": [2, 6, 10, 18, 31, 2, 2], "5": [31, 16, 30, 1, 1, 17, 14],
    "6": [6, 8, 16, 30, 17, 17, 14], "7": [31, 1, 2, 4, 8, 8, 8], "8": [14, 17, 17, 14, 17, 17, 14],
    "9": [14, 17, 17, 15, 1, 2, 12], ".": [0, 0, 0, 0, 0, 12, 12], "/": [0, 1, 2, 4, 8, 16, 0],
    "_": [0, 0, 0, 0, 0, 0, 31], "-": [0, 0, 0, 31, 0, 0, 0], " ": [0] * 7,
    "a": [0, 0, 14, 1, 15, 17, 15], "b": [16, 16, 22, 25, 17, 17, 30], "c": [0, 0, 14, 16, 16, 17, 14],
    "d": [1, 1, 13, 19, 17, 17, 15], "e": [0, 0, 14, 17, 31, 16, 14], "f": [6, 9, 8, 28, 8, 8, 8],
    "g": [0, 15, 17, 17, 15, 1, 14], "h": [16, 16, 22, 25, 17, 17, 17], "i": [4, 0, 12, 4, 4, 4, 14],
    "k": [16, 16, 18, 20, 24, 20, 18], "l": [12, 4, 4, 4, 4, 4, 14], "m": [0, 0, 26, 21, 21, 17, 17],
    "n": [0, 0, 22, 25, 17, 17, 17], "o": [0, 0, 14, 17, 17, 17, 14], "p": [0, 0, 30, 17, 30, 16, 16],
    "r": [0, 0, 22, 25, 16, 16, 16], "s": [0, 0, 14, 16, 14, 1, 30], "t": [8, 8, 28, 8, 8, 9, 6],
    "u": [0, 0, 17, 17, 17, 19, 13], "v": [0, 0, 17, 17, 17, 10, 4], "w": [0, 0, 17, 17, 21, 21, 10],
    "x": [0, 0, 17, 10, 4, 10, 17], "y": [0, 0, 17, 17, 15, 1, 14], "z": [0, 0, 31, 2, 4, 8, 31],
    "A": [14, 17, 17, 17, 31, 17, 17], "B": [30, 17, 17, 30, 17, 17, 30],
    "C": [14, 17, 16, 16, 16, 17, 14], "F": [31, 16, 16, 30, 16, 16, 16],
    "G": [14, 17, 16, 23, 17, 17, 15], "L": [16, 16, 16, 16, 16, 16, 31],
    "O": [14, 17, 17, 17, 17, 17, 14], "P": [30, 17, 17, 30, 16, 16, 16],
    "S": [15, 16, 16, 14, 1, 1, 30], "R": [30, 17, 17, 30, 20, 18, 17],
    "M": [17, 27, 21, 21, 17, 17, 17], "N": [17, 17, 25, 21, 19, 17, 17],
    "D": [28, 18, 17, 17, 17, 18, 28], "E": [31, 16, 16, 30, 16, 16, 31],
    "I": [14, 4, 4, 4, 4, 4, 14], "T": [31, 4, 4, 4, 4, 4, 4], "U": [17, 17, 17, 17, 17, 17, 14], "(": [2, 4, 8, 8, 8, 4, 2], ")": [8, 4, 2, 2, 2, 4, 8],
    "=": [0, 0, 31, 0, 31, 0, 0], ",": [0, 0, 0, 0, 12, 4, 8], ":": [0, 12, 12, 0, 12, 12, 0],
    "%": [24, 25, 2, 4, 8, 19, 3],
}


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c, r=1):
        for dy in range(-r + 1, r):
            for dx in range(-r + 1, r):
                xx, yy = int(x) + dx, int(y) + dy
                if 0 <= xx < self.w and 0 <= yy < self.h:
                    i = (yy * self.w + xx) * 3
                    self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, width=1, dash=0):
        steps = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        for k in range(steps + 1):
            if dash and (k // dash) % 2:
                continue
            t = k / steps
            self.dot(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, c, width)

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s:
            rows = FONT.get(ch, [31, 17, 17, 17, 17, 17, 31])
            for ry, bits in enumerate(rows):
                for rx in range(5):
                    if bits >> (4 - rx) & 1:
                        for sy in range(scale):
                            for sx in range(scale):
                                self.dot(x + rx * scale + sx, y + ry * scale + sy, c)
            x += 6 * scale

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(tag, data):
            return (struct.pack(">I", len(data)) + tag + data +
                    struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")
            f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)))
            f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
            f.write(chunk(b"IEND", b""))


def plot_builtin(series, title, out):
    w, h, left, right, top, bottom = 900, 520, 90, 200, 50, 70
    cv = Canvas(w, h)
    ns = sorted({p[0] for pts in series.values() for p in pts})
    ymax = max(p[1] for pts in series.values() for p in pts) * 1.15
    lx0, lx1 = math.log2(ns[0]), math.log2(ns[-1])
    if lx1 == lx0:
        lx0, lx1 = lx0 - 1, lx1 + 1

    def xy(n, g):
        x = left + (math.log2(n) - lx0) / (lx1 - lx0) * (w - left - right)
        y = h - bottom - g / ymax * (h - top - bottom)
        return x, y
    black, grid = (0, 0, 0), (225, 225, 225)
    for k in range(6):
        g = ymax * k / 5
        _, y = xy(ns[0], g)
        cv.line(left, y, w - right, y, grid)
        cv.text(left - 70, y - 7, f"{g:.1f}")
    for n in ns:
        x, _ = xy(n, 0)
        cv.line(x, top, x, h - bottom, grid)
        cv.text(x - 6 * len(str(n)), h - bottom + 10, str(n))
    cv.line(left, h - bottom, w - right, h - bottom, black, 1)
    cv.line(left, top, left, h - bottom, black, 1)
    cv.text(left + 120, 6, title)
    cv.text((w - right + left) // 2 - 6, h - 28, "n")
    cv.text(left + 6, top - 18, "GFLOP/s")
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = COLORS.get(name, black)
        dash = 6 if name == "openblas" else 0
        for a, b in zip(pts, pts[1:]):
            cv.line(*xy(*a), *xy(*b), c, 2, dash)
        for p in pts:
            cv.dot(*xy(*p), c, 4)
        ly = top + 20 + 28 * i
        cv.line(w - right + 15, ly + 7, w - right + 45, ly + 7, c, 2, dash)
        cv.text(w - right + 52, ly, name, c)
    cv.png(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", help="bench_dense_ooc binary")
    ap.add_argument("--n", default="2048,4096,8192")
    ap.add_argument("--cache", type=float, default=0.25, help="cache fraction to plot")
    ap.add_argument("--stripe-rows", default="256")
    ap.add_argument("--dir", default="/var/tmp/stripesolve-bench-ooc")
    ap.add_argument("--from-json", nargs="*", default=[])
    ap.add_argument("--save-json", help="write the collected bench outputs here")
    ap.add_argument("--out", default="ooc_strategies.png")
    args = ap.parse_args()
    docs = []
    for p in args.from_json:  # one bench output, or a list of them (--save-json)
        d = json.load(open(p))
        docs.extend(d if isinstance(d, list) else [d])
    if args.n and args.from_json:
        keep = {int(n) for n in args.n.split(",")}
        docs = [d for d in docs if d["n"] in keep]
    if not docs:
        if not args.bench:
            sys.exit("need --bench or --from-json")
        for n in args.n.split(","):
            cmd = [args.bench, "--n", n, "--cache", str(args.cache), "--stripe-rows",
                   args.stripe_rows, "--dir", args.dir]
            print("running", " ".join(cmd), file=sys.stderr)
            docs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout))
    if args.save_json:
        json.dump(docs, open(args.save_json, "w"), indent=1)
    series = collect(docs, args.cache)
    title = f"cache {args.cache:.0%} of A, OpenBLAS in RAM"
    try:
        import matplotlib  # noqa: F401
        plot_matplotlib(series, title, args.out)
        how = "matplotlib"
    except ImportError:
        if shutil.which("gnuplot"):
            plot_gnuplot(series, title, args.out)
            how = "gnuplot"
        else:
            plot_builtin(series, title, args.out)
            how = "built-in rasterizer"
    print(f"wrote {args.out} ({how})", file=sys.stderr)


if __name__ == "__main__":
    main()

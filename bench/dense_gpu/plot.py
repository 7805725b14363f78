#!/usr/bin/env python3
"""GFLOP/s against n: stripesolve on the GPU, cuSOLVER and the DGEMM line (bench_dense_gpu JSON).

Reads one or more outputs of bench_dense_gpu (each a JSON document, or a list of them) and draws,
per mode found in them: stripesolve factor + solve (2/3 n^3 + 2 n^2 nrhs over factor +
substitution seconds), cuSOLVER getrf + getrs with A already on the device (same flops), cuBLAS
DGEMM at the J update's shape (m = S, k = S^m S, n - K) and the square 8192^3 DGEMM. matplotlib
when it is installed, else a built-in PNG rasterizer (Python standard library only).

  plot.py results/h100_fits.json results/h100_ram.json results/h100_ssd.json --out dense_gpu.png
"""
import argparse
import json
import math
import struct
import sys
import zlib

PALETTE = [(44, 160, 44), (31, 119, 180), (214, 39, 40), (148, 103, 189), (255, 127, 14),
           (23, 190, 207), (140, 86, 75), (188, 189, 34)]
FIXED = {"cuSOLVER": (110, 110, 110), "DGEMM J update": (0, 0, 0), "DGEMM 8192^3": (160, 160, 160)}


def load(paths):
    docs = []
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        docs.extend(d if isinstance(d, list) else [d])
    return [d for d in docs if not d.get("skipped")]


def collect(docs):
    """-> {series: [(n, gflops)]}; stripesolve per mode, the peers pooled over the runs."""
    series = {}

    def add(name, n, tflops):
        if tflops and tflops > 0:
            series.setdefault(name, {})
            # Several runs of one n (modes, repeats): keep the best.
            series[name][n] = max(series[name].get(n, 0), tflops * 1e3)

    for d in docs:
        mode = d.get("mode", "?")
        square = d.get("dgemm_square", {}).get("tflops")
        for r in d.get("runs", []):
            n = r["n"]
            add(f"stripesolve ({mode})", n, r.get("stripesolve", {}).get("tflops_factor_solve"))
            add("cuSOLVER", n, r.get("cusolver", {}).get("tflops"))
            for line in r.get("dgemm", []):
                if line.get("role") == "update_shape":
                    add("DGEMM J update", n, line.get("tflops"))
            add("DGEMM 8192^3", n, square)
    return {k: sorted(v.items()) for k, v in series.items()}


def colors(series):
    out, k = {}, 0
    for name in sorted(series):
        if name in FIXED:
            out[name] = FIXED[name]
        else:
            out[name] = PALETTE[k % len(PALETTE)]
            k += 1
    return out


def dashed(name):
    return not name.startswith("stripesolve")


def plot_matplotlib(series, title, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = colors(series)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for name, pts in sorted(series.items()):
        c = tuple(v / 255 for v in cols[name])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "s--" if dashed(name) else "o-",
                color=c, label=name)
    ax.set_xscale("log", base=2)
    ns = sorted({p[0] for pts in series.values() for p in pts})
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("n")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


# 5x7 glyphs (rows top to bottom, 5 bits each) for the built-in rasterizer
# (bench/dense_ooc/plot_strategies.py's, with the letters these labels need added).
FONT = {
    "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14], "2": [14, 17, 1, 2, 4, 8, 31],
    "3": [31, 2, 4, 2, 1, 17, 14], "4": [2, 6, 10, 18, 31, 2, 2], "5": [31, 16, 30, 1, 1, 17, 14],
    "6": [6, 8, 16, 30, 17, 17, 14], "7": [31, 1, 2, 4, 8, 8, 8], "8": [14, 17, 17, 14, 17, 17, 14],
    "9": [14, 17, 17, 15, 1, 2, 12], ".": [0, 0, 0, 0, 0, 12, 12], "/": [0, 1, 2, 4, 8, 16, 0],
    "_": [0, 0, 0, 0, 0, 0, 31], "-": [0, 0, 0, 31, 0, 0, 0], " ": [0] * 7,
    "^": [4, 10, 17, 0, 0, 0, 0], "+": [0, 4, 4, 31, 4, 4, 0],
    "a": [0, 0, 14, 1, 15, 17, 15], "b": [16, 16, 22, 25, 17, 17, 30], "c": [0, 0, 14, 16, 16, 17, 14],
    "d": [1, 1, 13, 19, 17, 17, 15], "e": [0, 0, 14, 17, 31, 16, 14], "f": [6, 9, 8, 28, 8, 8, 8],
    "g": [0, 15, 17, 17, 15, 1, 14], "h": [16, 16, 22, 25, 17, 17, 17], "i": [4, 0, 12, 4, 4, 4, 14],
    "j": [2, 0, 6, 2, 2, 18, 12], "k": [16, 16, 18, 20, 24, 20, 18], "l": [12, 4, 4, 4, 4, 4, 14],
    "m": [0, 0, 26, 21, 21, 17, 17], "n": [0, 0, 22, 25, 17, 17, 17], "o": [0, 0, 14, 17, 17, 17, 14],
    "p": [0, 0, 30, 17, 30, 16, 16], "q": [0, 0, 13, 19, 15, 1, 1], "r": [0, 0, 22, 25, 16, 16, 16],
    "s": [0, 0, 14, 16, 14, 1, 30], "t": [8, 8, 28, 8, 8, 9, 6], "u": [0, 0, 17, 17, 17, 19, 13],
    "v": [0, 0, 17, 17, 17, 10, 4], "w": [0, 0, 17, 17, 21, 21, 10], "x": [0, 0, 17, 10, 4, 10, 17],
    "y": [0, 0, 17, 17, 15, 1, 14], "z": [0, 0, 31, 2, 4, 8, 31],
    "A": [14, 17, 17, 17, 31, 17, 17], "B": [30, 17, 17, 30, 17, 17, 30],
    "C": [14, 17, 16, 16, 16, 17, 14], "D": [28, 18, 17, 17, 17, 18, 28],
    "E": [31, 16, 16, 30, 16, 16, 31], "F": [31, 16, 16, 30, 16, 16, 16],
    "G": [14, 17, 16, 23, 17, 17, 15], "H": [17, 17, 17, 31, 17, 17, 17],
    "I": [14, 4, 4, 4, 4, 4, 14], "J": [7, 2, 2, 2, 2, 18, 12], "K": [17, 18, 20, 24, 20, 18, 17],
    "L": [16, 16, 16, 16, 16, 16, 31], "M": [17, 27, 21, 21, 17, 17, 17],
    "N": [17, 17, 25, 21, 19, 17, 17], "O": [14, 17, 17, 17, 17, 17, 14],
    "P": [30, 17, 17, 30, 16, 16, 16], "Q": [14, 17, 17, 17, 21, 18, 13],
    "R": [30, 17, 17, 30, 20, 18, 17], "S": [15, 16, 16, 14, 1, 1, 30],
    "T": [31, 4, 4, 4, 4, 4, 4], "U": [17, 17, 17, 17, 17, 17, 14], "V": [17, 17, 17, 17, 17, 10, 4],
    "W": [17, 17, 17, 21, 21, 21, 10], "X": [17, 17, 10, 4, 10, 17, 17],
    "Y": [17, 17, 10, 4, 4, 4, 4], "Z": [31, 1, 2, 4, 8, 16, 31],
    "(": [2, 4, 8, 8, 8, 4, 2], ")": [8, 4, 2, 2, 2, 4, 8], "=": [0, 0, 31, 0, 31, 0, 0],
    ",": [0, 0, 0, 0, 12, 4, 8], ":": [0, 12, 12, 0, 12, 12, 0], "%": [24, 25, 2, 4, 8, 19, 3],
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
    w, h, left, right, top, bottom = 1000, 560, 100, 290, 50, 70
    cv = Canvas(w, h)
    cols = colors(series)
    ns = sorted({p[0] for pts in series.values() for p in pts})
    top_value = max(p[1] for pts in series.values() for p in pts) * 1.1
    step = 10 ** math.floor(math.log10(top_value / 5))  # round ticks: 1, 2 or 5 x 10^k apart
    step = next(m * step for m in (1, 2, 5, 10) if top_value / (m * step) <= 7)
    ticks = math.ceil(top_value / step)
    ymax = ticks * step
    lx0, lx1 = math.log2(ns[0]), math.log2(ns[-1])
    if lx1 == lx0:
        lx0, lx1 = lx0 - 1, lx1 + 1
    pad = 0.06 * (lx1 - lx0)  # keep the end points off the axes
    lx0, lx1 = lx0 - pad, lx1 + pad

    def xy(n, g):
        x = left + (math.log2(n) - lx0) / (lx1 - lx0) * (w - left - right)
        y = h - bottom - g / ymax * (h - top - bottom)
        return x, y
    black, grid = (0, 0, 0), (225, 225, 225)
    for k in range(ticks + 1):
        g = step * k
        _, y = xy(ns[0], g)
        cv.line(left, y, w - right, y, grid)
        label = f"{g:.0f}"
        cv.text(left - 12 - 12 * len(label), y - 7, label)
    for n in ns:
        x, _ = xy(n, 0)
        cv.line(x, top, x, h - bottom, grid)
        cv.text(x - 6 * len(str(n)), h - bottom + 10, str(n))
    cv.line(left, h - bottom, w - right, h - bottom, black, 1)
    cv.line(left, top, left, h - bottom, black, 1)
    cv.text(left + 20, 6, title)
    cv.text((w - right + left) // 2 - 6, h - 28, "n")
    cv.text(left + 6, top - 18, "GFLOP/s")
    for i, (name, pts) in enumerate(sorted(series.items())):
        c = cols[name]
        dash = 6 if dashed(name) else 0
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
    ap.add_argument("json", nargs="+", help="bench_dense_gpu outputs")
    ap.add_argument("--out", default="dense_gpu.png")
    ap.add_argument("--title", help="default: the device's name")
    ap.add_argument("--builtin", action="store_true", help="skip matplotlib")
    args = ap.parse_args()
    docs = load(args.json)
    if not docs:
        sys.exit("no measurements in the inputs (all skipped?)")
    series = collect(docs)
    if not series:
        sys.exit("no GFLOP/s figures in the inputs")
    title = args.title or "dense solve, " + docs[0].get("device", {}).get("name", "GPU")
    try:
        if args.builtin:
            raise ImportError
        plot_matplotlib(series, title, args.out)
        how = "matplotlib"
    except ImportError:
        plot_builtin(series, title, args.out)
        how = "built-in rasterizer"
    print(f"wrote {args.out} ({how})", file=sys.stderr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The ADI example's final field and its error against e^(x+2y), as one PNG.

  plot_field.py adi_field.npy adi_field.png

The .npy is G x G float64, row j at y = (j + 1) h, column i at x = (i + 1) h, h = 1 / (G + 1)
(examples/adi/adi.h). matplotlib with the Agg backend; no metadata, so reruns give equal files.
"""
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    src, dst = sys.argv[1], sys.argv[2]
    u = np.load(src)
    if u.ndim != 2 or u.shape[0] != u.shape[1]:
        sys.exit(f"plot_field.py: {src}: expected a square field, got shape {u.shape}")
    g = u.shape[0]
    h = 1.0 / (g + 1)
    x = (np.arange(g) + 1) * h
    xx, yy = np.meshgrid(x, x)
    err = u - np.exp(xx + 2 * yy)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.6))
    extent = (h, 1 - h, h, 1 - h)
    im = a.imshow(u, origin="lower", extent=extent, cmap="viridis")
    a.set_title(f"u after ADI, {g} x {g} inner cells")
    fig.colorbar(im, ax=a)
    im = b.imshow(err, origin="lower", extent=extent, cmap="RdBu_r",
                  vmin=-np.abs(err).max(), vmax=np.abs(err).max())
    b.set_title(f"u - e^(x+2y): max |error| {np.abs(err).max():.2e}")
    fig.colorbar(im, ax=b)
    for ax in (a, b):
        ax.set_xlabel("x")
        ax.set_ylabel("y")
    fig.suptitle("Paper 003: u_xx + u_yy = 5 e^(x+2y) by Peaceman-Rachford ADI, tridiagonal batches "
                 "solved by stripesolved", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(dst, dpi=100, metadata={"Software": None})
    print(f"plot written to {dst}")


if __name__ == "__main__":
    main()

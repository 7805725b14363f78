#!/usr/bin/env python3
"""CTest for make_plots.py: every PNG it promises is written and non-empty, and a malformed
result file stops it with a message naming that file.

Exits 77 (CTest's SKIP_RETURN_CODE) with a "SKIPPED" line when matplotlib is missing: the plots
are documentation, the rest of the build does not need them.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "make_plots.py")
RESULTS = os.path.dirname(HERE)  # bench/
EXPECTED = ["dense_gpu_tiers.png", "dense_gpu_two_gpus.png", "tridiag_gpu.png",
            "tridiag_gpu_interleaved.png", "tridiag_cpu.png", "storage.png", "daemon_tridiag_e2e.png",
            "dense_ooc_strategies.png"]
SKIP = 77


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=120)


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"SKIPPED: matplotlib is not installed for {sys.executable} (apt install python3-matplotlib)")
        return SKIP
    listed = run("--list").stdout.split()
    if sorted(listed) != sorted(EXPECTED):
        fail(f"make_plots.py --list gives {listed}, expected {EXPECTED}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plots")
        r = run("--out", out)
        if r.returncode != 0:
            fail(f"make_plots.py exited {r.returncode}: {r.stderr}")
        for name in EXPECTED:
            path = os.path.join(out, name)
            if not os.path.isfile(path) or os.path.getsize(path) == 0:
                fail(f"{name} missing or empty")
            with open(path, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail(f"{name} is not a PNG")
        print(f"ok: {len(EXPECTED)} PNGs written")

        # A truncated result file: exit 1, the file named, no traceback.
        bad_root = os.path.join(tmp, "bench")
        shutil.copytree(RESULTS, bad_root, ignore=shutil.ignore_patterns("*.cc", "*.cu", "*.png"))
        bad = os.path.join(bad_root, "tridiag", "results", "cpu_bench_2cores.json")
        with open(bad, "r+", encoding="utf-8") as f:
            text = f.read()
            f.seek(0)
            f.truncate()
            f.write(text[: len(text) // 2])
        r = run("--results-root", bad_root, "--out", os.path.join(tmp, "bad"))
        if r.returncode != 1 or bad not in r.stderr or "Traceback" in r.stderr:
            fail(f"truncated JSON: exit {r.returncode}, stderr {r.stderr!r}")
        # A field missing: the same.
        with open(bad, "w", encoding="utf-8") as f:
            f.write('{"cases": [{"n": 256}], "threads": 2, "total_unknowns": 1}')
        r = run("--results-root", bad_root, "--out", os.path.join(tmp, "bad"))
        if r.returncode != 1 or bad not in r.stderr or "Traceback" in r.stderr:
            fail(f"missing field: exit {r.returncode}, stderr {r.stderr!r}")
        print("ok: malformed results rejected, naming the file")
    return 0


if __name__ == "__main__":
    sys.exit(main())

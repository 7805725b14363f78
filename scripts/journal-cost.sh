#!/usr/bin/env bash
# The job journal's cost on daemon solves (issue 18, docs/performance.md "Job journal"): the daemon
# logs each journal write at debug level; their sum per job is compared with the job's run time.
# Usage: scripts/journal-cost.sh BUILD_DIR N SOLVES   (e.g. build/dev 4000 3)
set -euo pipefail
B=$1; N=$2; K=$3
D=$(mktemp -d /tmp/ss-cost-XXXXXX)
printf 'log:\n  level: debug\n  file: %s/d.jsonl\n  file_level: debug\n  stderr_format: off\nstore:\n  paths: [%s/store]\n  direct_io: false\n  free_space_reserve: 0\n' "$D" "$D" > "$D/d.yaml"
"$B/daemon/stripesolved" --config "$D/d.yaml" --socket "$D/s" --ram-budget 64MiB & P=$!
trap 'kill $P 2>/dev/null; rm -rf "$D"' EXIT
for i in $(seq 100); do [ -S "$D/s" ] && break; sleep 0.05; done
C="$B/client/stripesolve --socket $D/s -q"
$C matrix create K -n "$N" --seed 3 --stripe-rows 100 >/dev/null
for i in $(seq "$K"); do $C solve K --no-reuse >/dev/null; done
sleep 1.5
python3 - "$D/d.jsonl" <<'PY'
import json, re, sys, collections
j = collections.defaultdict(float); total = {}
for line in open(sys.argv[1]):
    m = json.loads(line).get("msg", "") if line.startswith("{") else line
    r = re.search(r"job (\d+) .*(journaled|stored) in ([0-9.]+) ms", m)
    if r: j[int(r.group(1))] += float(r.group(3))
    r = re.search(r"job (\d+) dense_solve: completed in ([0-9.]+) s", m)
    if r: total[int(r.group(1))] = float(r.group(2)) * 1000
for k in sorted(total):
    print(f"job {k}: run {total[k]:.0f} ms, journal {j[k]:.1f} ms = {100*j[k]/(total[k]+j[k]):.2f}%")
PY

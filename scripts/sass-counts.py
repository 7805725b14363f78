#!/usr/bin/env python3
"""Instruction counts of each CUDA kernel in SASS (cuobjdump -sass output on stdin or in files).

One line a kernel: its name (demangled where c++filt is at hand, the tridiagonal algorithm
spelt out), the instructions, the FP64 ones (DFMA, DMUL, DADD: a Hopper SM sub-partition issues
one warp instruction a cycle and takes an FP64 one every second cycle, so a kernel with more
than twice its FP64 count in instructions is issue-bound), and the most frequent opcodes.
Usage: cuobjdump -sass x.cu.o | scripts/sass-counts.py [--match SUBSTRING]
       scripts/sass-counts.py [--match SUBSTRING] dump.txt ...
"""
import collections
import re
import shutil
import subprocess
import sys

FP64 = ('DFMA', 'DMUL', 'DADD')
ALGORITHMS = {'1': 'thomas', '2': 'cr', '3': 'pcr', '4': 'cr_pcr', '5': 'pcr_thomas',
              '6': 'cr_pcr_thomas'}


def demangle(names):
    if not names or shutil.which('c++filt') is None:
        return {n: n for n in names}
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True,
                         check=False).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def without_parameters(name):
    if not name.endswith(')'):
        return name
    depth = 0
    for k in range(len(name) - 1, -1, -1):
        depth += {')': 1, '(': -1}.get(name[k], 0)
        if depth == 0:
            return name[:k]
    return name


def short(name):
    name = re.sub(r'^void ', '', without_parameters(name))
    name = re.sub(r'\(stripesolve::tridiag::Algorithm\)(\d)',
                  lambda m: ALGORITHMS.get(m.group(1), m.group(0)), name)
    return re.sub(r'stripesolve::tridiag::(gpu::)?(\(anonymous namespace\)::)?(warp::)?', '', name)


def count(lines):
    kernels = collections.OrderedDict()
    current = None
    for line in lines:
        m = re.search(r'Function : (\S+)', line)
        if m:
            current = kernels.setdefault(m.group(1), collections.Counter())
            continue
        m = re.match(r'\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)', line)
        if m and current is not None:
            current[m.group(1)] += 1
    return kernels


def main(argv):
    match = None
    if len(argv) >= 2 and argv[0] == '--match':
        match, argv = argv[1], argv[2:]
    lines = []
    for path in argv or ['-']:
        lines += sys.stdin.readlines() if path == '-' else open(path).readlines()
    kernels = count(lines)
    names = demangle(list(kernels))
    for mangled, ops in kernels.items():
        name = short(names[mangled])
        if match and match not in name:
            continue
        total = sum(ops.values())
        fp64 = sum(ops[o] for o in FP64)
        if total == 0:
            continue
        top = ' '.join(f'{o} {n}' for o, n in ops.most_common(8))
        print(f'{name}: {total} instructions, FP64 {fp64} ({2 * fp64 / total:.2f} of the issue)'
              f'; {top}')


if __name__ == '__main__':
    main(sys.argv[1:])

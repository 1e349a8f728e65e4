#!/usr/bin/env python3
"""perf/cg_funcs.py OUT [N] -- instructions per function of a callgrind output
file (perf/callgrind.sh, FUNCS=1), divided by N (round trips; default 1).

callgrind_annotate names each line of cost by its source file and function,
so a function that LTO built out of inlined code from eight files shows as
eight rows ("rcp/express.c:took", "rcp/chan.h:took", ...), and its
inclusive cost as none of them.  This sums by the function the code ran in
(the symbol: what a call costs, what an inlining moves), and prints

  self and inclusive per function (inclusive: self plus its calls' costs),
  self per function and source file (where inside it the cost comes from),
  the calls between functions (inclusive cost of each caller -> callee).

Reads the format callgrind writes (positions "line" or "instr line",
name compression "(id) name"); needs no valgrind tools.  Session 20's
measure of the chan row (docs/results.md, "Session 20 (chan lane)").
"""
import collections
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: cg_funcs.py CALLGRIND_OUT [N]\n")
        return 2
    path = sys.argv[1]
    n = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    names = {}

    def name(kind, s):
        m = re.match(r"\((\d+)\)(?: (.*))?", s.strip())
        if not m:
            return s.strip()
        key = (kind, m.group(1))
        if m.group(2):
            names[key] = m.group(2)
        return names.get(key, m.group(1))

    self_c = collections.Counter()
    incl = collections.Counter()
    calls = collections.Counter()
    by_file = collections.Counter()
    fn = cfn = cur = None
    in_call = False
    npos = 1
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line or line[0] == "#":
            continue
        if line.startswith("positions:"):
            npos = len(line.split()) - 1
            continue
        if line.startswith("fn="):
            fn = name("fn", line[3:])
            continue
        if line.startswith("fl="):
            cur = name("fl", line[3:])
            continue
        if line.startswith(("fi=", "fe=")):
            cur = name("fl", line[3:])
            continue
        if line.startswith("cfn="):
            cfn = name("fn", line[4:])
            continue
        if line.startswith(("cfi=", "cfl=")):
            name("fl", line[4:])
            continue
        if line.startswith("calls="):
            in_call = True
            continue
        if line[0] in "0123456789+-*":
            parts = line.split()
            if len(parts) <= npos:
                continue
            c = int(parts[npos])
            if in_call:
                incl[fn] += c
                calls[(fn, cfn)] += c
                in_call = False
            else:
                self_c[fn] += c
                incl[fn] += c
                by_file[(fn, (cur or "?").split("/")[-1])] += c
    print("total %.1f" % (sum(self_c.values()) / n))
    print("%-40s %10s %10s" % ("function", "self", "inclusive"))
    for f, c in sorted(incl.items(), key=lambda x: -x[1]):
        if c / n >= 0.5 and self_c[f] + c > 0:
            print("%-40s %10.1f %10.1f" % (f[:40], self_c[f] / n, c / n))
    print("\nself by function and source file")
    for (f, fl), c in sorted(by_file.items(), key=lambda x: -x[1]):
        if c / n >= 1:
            print("%-40s %-24s %8.1f" % (f[:40], fl[:24], c / n))
    print("\ncalls (inclusive cost)")
    for (f, g), c in sorted(calls.items(), key=lambda x: -x[1]):
        if c / n >= 1:
            print("%-32s -> %-32s %8.1f" % (f[:32], g[:32], c / n))
    return 0


if __name__ == "__main__":
    sys.exit(main())

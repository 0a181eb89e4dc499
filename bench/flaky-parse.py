#!/usr/bin/env python3
"""The failed tests in logs of the suite (cargo test output), for bench/flaky.sh.

flaky-parse.py LOG            the failed tests of one log, one per line (BINARY::TEST)
flaky-parse.py --table N LOG...  every test that failed in any log: failures/N, name

A test binary that failed without a failed test line (killed by a signal, did not
build) counts as BINARY::<binary>; a log that ends in a failed step before the tests
(fmt, clippy, a build error) counts as STEP::<what>.
"""
import re
import sys
from collections import Counter

RUNNING = re.compile(r"^\s+Running (?:unittests )?(\S+) \((?:[^)]*/)?deps/([^)]+?)-[0-9a-f]+\)")
FAILED = re.compile(r"^test (.+?) \.\.\. FAILED\s*$")
RERUN = re.compile(r"error: test failed, to rerun pass `([^`]+)`")


def failures(path):
    out = []
    binary = None
    failed_here = False
    saw_tests = False
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    for line in lines:
        m = RUNNING.match(line)
        if m:
            binary = m.group(2)
            failed_here = False
            saw_tests = True
            continue
        m = FAILED.match(line)
        if m and binary:
            out.append(f"{binary}::{m.group(1)}")
            failed_here = True
            continue
        m = RERUN.search(line)
        if m and not failed_here:
            out.append(f"BINARY::{binary or m.group(1)}")
    if not saw_tests:
        text = "\n".join(lines)
        if "Diff in" in text:
            out.append("STEP::cargo fmt")
        elif re.search(r"^error(\[E\d+\])?:", text, re.M):
            out.append("STEP::build or clippy")
    # The same test can print FAILED once and be named again in the summary: once a log.
    return sorted(set(out))


def main(argv):
    if len(argv) >= 2 and argv[0] == "--table":
        runs = int(argv[1])
        counts = Counter()
        for log in argv[2:]:
            counts.update(failures(log))
        if not counts:
            print("  (no test failed)")
        for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {n}/{runs}  {name}")
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for name in failures(argv[0]):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

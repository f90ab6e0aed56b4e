#!/usr/bin/env python3
"""Instructions per iteration of each simulator_bench benchmark, two builds side by side.

On a shared, noisy machine wall-clock pairs of a few milliseconds spread by +-30 %, too much to
tell whether a change costs 5 %. The number of instructions one iteration executes does not
depend on the load: this script runs each benchmark of two simulator_bench builds for exactly one
iteration under valgrind's callgrind (Debian's valgrind package), takes the benchmark function's
inclusive instruction count less the one-time fixture it builds (the study, cost model, lowering
and DAG the timed loop reuses), and prints both counts and their ratio. It answers "does the code
do more work", not "is it faster": cache misses and branch mispredictions are not counted, so a
change that moves memory traffic needs the wall-clock figures as well.

Usage:
    bench/count_instructions.py --base OLD/simulator_bench [--bench build/simulator_bench]
                                [--filter REGEX]

Needs valgrind and callgrind_annotate on the PATH; each benchmark takes a few seconds under it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# A row of callgrind_annotate --inclusive=yes: "  12,345 (1.2%)  file:function [object]".
ROW = re.compile(r"\s*([\d,]+) \([^)]*\)\s+\S*?:(.*?)(?: \[.*\])?$")


def benchmarks(binary, pattern):
    """The benchmark names binary lists that match pattern."""
    out = subprocess.run([binary, "--benchmark_list_tests"], check=True, capture_output=True,
                         text=True).stdout.split()
    return [name for name in out if re.search(pattern, name)]


def iteration_instructions(binary, name, tmp):
    """Instructions of one iteration of benchmark `name`: its function's inclusive count less
    the fixture constructors it calls once."""
    out_file = os.path.join(tmp, "callgrind.out")
    # A minimum time far below one iteration's: Google Benchmark runs exactly one iteration.
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", binary,
                    f"--benchmark_filter=^{re.escape(name)}$",
                    "--benchmark_min_time=0.000000001"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    table = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out_file],
                           check=True, capture_output=True, text=True).stdout
    bench_fn = name.split("/")[0]
    total = fixture = None
    for line in table.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        count, function = int(m.group(1).replace(",", "")), m.group(2)
        if total is None and re.search(rf"\b{bench_fn}\(benchmark::State&\)", function):
            total = count
        if fixture is None and "Fixture::Fixture(" in function:
            fixture = count
    if total is None:
        sys.exit(f"count_instructions: {binary}: no function {bench_fn} in callgrind's table "
                 "(a build without symbols? build with tools/setup)")
    return total - (fixture or 0)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the simulator_bench to compare against")
    ap.add_argument("--bench", default=os.path.join(root, "build", "simulator_bench"))
    ap.add_argument("--filter", default=".", help="benchmarks to count (a regular expression)")
    a = ap.parse_args()
    for tool in ("valgrind", "callgrind_annotate"):
        if not shutil.which(tool):
            sys.exit(f"count_instructions: {tool} not found; install Debian's valgrind package")
    for binary in (a.base, a.bench):
        if not os.access(binary, os.X_OK):
            sys.exit(f"count_instructions: {binary}: not an executable simulator_bench")
    names = [n for n in benchmarks(a.bench, a.filter) if n in benchmarks(a.base, a.filter)]
    if not names:
        sys.exit(f"count_instructions: --filter {a.filter}: no benchmark both builds have matches")
    print(f"{'benchmark':30} {'base (M instr)':>15} {'bench (M instr)':>16} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            base = iteration_instructions(a.base, name, tmp)
            new = iteration_instructions(a.bench, name, tmp)
            print(f"{name:30} {base / 1e6:15.2f} {new / 1e6:16.2f} {new / base:7.3f}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""braid side by side with PP-Schedule-Visualization: the peer in-process (primary) and whole.

The peer is https://github.com/Victarry/PP-Schedule-Visualization, measured at commit 1dd92bf
("Make P2P in warmup/cooldown stage to sync comm.", still its newest on 2026-12-05). Get it with

    git clone https://github.com/Victarry/PP-Schedule-Visualization /tmp/pp-schedule-visualization
    git -C /tmp/pp-schedule-visualization checkout 1dd92bf

Its simulator (src/execution_model.py, src/strategies.py) imports only the Python standard
library; the dashboard around it (dash, hydra) is not needed and not imported here.

    bench/peer_compare.py --peer /tmp/pp-schedule-visualization [--braid build/braid] [--runs 20]
                          [--cases uniform,qwen,sweep]
    bench/peer_compare.py --base /tmp/braid-before [--braid build/braid] --runs 60 --cases qwen

Two figures for the peer in each single-run case (uniform, qwen), each with its ratio to braid:

- "in-process", the PRIMARY figure. This script imports the peer once, into its own process, then
  times only the simulation call: building the ScheduleConfig, generating the 1F1B-interleaved
  schedule, executing it and reading its iteration time, with time.process_time() (CPU time, user
  + system, of this process) and time.perf_counter() (wall) around it, after a gc.collect()
  outside the timing. Python's start-up and the imports (a large share of the peer's whole
  process, more on a loaded machine) are not counted. It prints the best and the median of
  --runs runs; the ratio is the peer's best to braid's best (primary), and median to median
  beside it.
- "whole process", kept beside it as every round before measured: `python3 -c PEER_DRIVER` per
  run, CPU time (user + system, from the child's resource usage) and wall time of the whole
  process, interpreter start-up and imports included; medians of --runs runs and their ratio.

braid is always timed as a whole process (CPU time from the child's resource usage): its own
start-up, reading the study and cluster, the report and the JSON output are all inside its figure,
so the in-process ratio leans towards the peer. Every run of a case times the peer's whole
process, the peer in-process, then braid (paired runs, so load changes hit all three; braid runs
right after another process, as in the rounds before). Without --peer only braid's figures are
printed. The sweep case prints braid's CPU time per configuration. A Release build (tools/setup)
is assumed.

With --base, two braid builds are compared instead (A/B of a change): both are copied into one
temporary folder first (a binary just linked in build/ ran 0.1 ms slower than an identical copy
in /tmp), and which of the two runs first alternates from pair to pair. It prints both medians
and the median of the paired differences (base - braid: positive when braid is faster).
"""
import argparse
import collections
import gc
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# 1F1B-interleaved as the peer models it: 8 devices, 16 stages (2 per device), F = 1, B = 2. The
# same pipeline serves both cases (the peer's run time does not depend on the F and B values).
PEER_PIPELINE = (8, 256, 1.0, 2.0)  # devices, microbatches, forward, backward

# The peer's whole process: start-up, imports and the simulation of peer_simulation() below.
PEER_DRIVER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from src.execution_model import ScheduleConfig
from src.strategies import generate_1f1b_interleave_schedule
config = ScheduleConfig(num_devices=int(sys.argv[2]), num_stages=2 * int(sys.argv[2]),
                        num_batches=int(sys.argv[3]), p2p_latency=0.0,
                        placement_strategy="interleave",
                        op_times={"forward": float(sys.argv[4]), "backward": float(sys.argv[5])})
schedule = generate_1f1b_interleave_schedule(config)
schedule.execute()
print(schedule.get_total_execution_time())
"""

SWEEP = ("sweep --study configs/studies/default.yaml --tp 2,4,8 --pp 2,4 "
         "--seq 2048,3072,4096,6144,8192 --microbatches 32,64,128 --mbs 1,2 "
         "--schedules 1f1b,1f1b-i,zb-h1,zb-v,stp,dualpipe-v --jobs 1").split()


# The two single-run cases, braid's arguments.
CASES = {
    "uniform": ("simulate --unit-costs 1,2,0,0 --schedule 1f1b-i --pp 8 --microbatches 256 "
                "--json").split(),
    "qwen": ("simulate --study configs/studies/qwen2-26.3b-a800x32.yaml --cluster h100x64 --tp 8 "
             "--pp 8 --microbatches 256 --schedule 1f1b-i --json").split(),
}


# The peer as measured: its whole process (a command) and its simulation in this process.
Peer = collections.namedtuple("Peer", "command simulation")


def import_peer(peer_dir):
    """Imports the peer's simulator into this process, once; returns its simulation of
    PEER_PIPELINE as a function giving the iteration time (the steps PEER_DRIVER runs)."""
    sys.path.insert(0, peer_dir)
    import src.execution_model as model  # pylint: disable=import-outside-toplevel
    import src.strategies as strategies  # pylint: disable=import-outside-toplevel
    if not os.path.samefile(os.path.dirname(model.__file__), os.path.join(peer_dir, "src")):
        sys.exit(f"peer_compare: --peer {peer_dir}: imported {model.__file__} instead")
    devices, microbatches, forward, backward = PEER_PIPELINE

    def peer_simulation():
        config = model.ScheduleConfig(num_devices=devices, num_stages=2 * devices,
                                      num_batches=microbatches, p2p_latency=0.0,
                                      placement_strategy="interleave",
                                      op_times={"forward": forward, "backward": backward})
        schedule = strategies.generate_1f1b_interleave_schedule(config)
        schedule.execute()
        return schedule.get_total_execution_time()

    return peer_simulation


def timed_in_process(simulation):
    """Runs simulation() in this process; returns (cpu seconds, wall seconds, its result). The
    garbage of the run before is collected first, outside the timing."""
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = simulation()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return cpu, wall, result


def timed(cmd, cwd):
    """Runs cmd; returns (cpu seconds, wall seconds, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.PIPE).stdout
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out


def median_ms(xs):
    return statistics.median(xs) * 1e3


def best_ms(xs):
    return min(xs) * 1e3


def paired(name, braid_cmd, peer, runs, root):
    """Times braid's whole process and, with a Peer, the peer's whole process and its simulation
    in-process, runs times in turn; prints each with its ratio to braid."""
    braid_cpu, braid_wall = [], []
    whole_cpu, whole_wall = [], []  # the peer's whole process
    inproc_cpu, inproc_wall = [], []  # the peer's simulation in this process (primary)
    for _ in range(runs):
        if peer:
            c, w, _ = timed(peer.command, root)
            whole_cpu.append(c)
            whole_wall.append(w)
            c, w, _ = timed_in_process(peer.simulation)
            inproc_cpu.append(c)
            inproc_wall.append(w)
        c, w, _ = timed(braid_cmd, root)
        braid_cpu.append(c)
        braid_wall.append(w)
    if not peer:
        print(f"{name}: braid {median_ms(braid_cpu):.1f} ms CPU ({median_ms(braid_wall):.1f} ms "
              "wall)", flush=True)
        return
    med = statistics.median
    print(f"{name}, {runs} paired runs:\n"
          f"  braid, whole process: best {best_ms(braid_cpu):.1f} ms, median "
          f"{median_ms(braid_cpu):.1f} ms CPU ({median_ms(braid_wall):.1f} ms wall)\n"
          f"  peer in-process (primary): best {best_ms(inproc_cpu):.1f} ms, median "
          f"{median_ms(inproc_cpu):.1f} ms CPU (best {best_ms(inproc_wall):.1f} ms, median "
          f"{median_ms(inproc_wall):.1f} ms wall), ratio {min(inproc_cpu) / min(braid_cpu):.1f}x "
          f"best to best, {med(inproc_cpu) / med(braid_cpu):.1f}x median to median (CPU)\n"
          f"  peer whole process: median {median_ms(whole_cpu):.1f} ms CPU "
          f"({median_ms(whole_wall):.1f} ms wall), ratio {med(whole_cpu) / med(braid_cpu):.1f}x "
          f"CPU ({med(whole_wall) / med(braid_wall):.1f}x wall), medians", flush=True)


def against_base(name, base_cmd, braid_cmd, runs, root):
    base, new = [], []
    for k in range(runs):
        order = [(base_cmd, base), (braid_cmd, new)]
        for cmd, xs in order if k % 2 == 0 else reversed(order):
            xs.append(timed(cmd, root)[0])
    diff = statistics.median(b - n for b, n in zip(base, new))
    print(f"{name}: base {median_ms(base):.2f} ms CPU, braid {median_ms(new):.2f} ms CPU, "
          f"base - braid {diff * 1e3:+.2f} ms (median of {runs} paired differences)", flush=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", help="checkout of PP-Schedule-Visualization")
    ap.add_argument("--braid", default=os.path.join(root, "build", "braid"))
    ap.add_argument("--base", help="another braid build to compare --braid against (A/B)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sweep-runs", type=int, default=3)
    ap.add_argument("--cases", default="uniform,qwen,sweep",
                    help="comma-separated cases to run: uniform, qwen, sweep (default: all)")
    a = ap.parse_args()
    cases = a.cases.split(",")
    unknown = sorted(set(cases) - {"uniform", "qwen", "sweep"})
    if unknown:
        sys.exit(f"peer_compare: --cases {a.cases}: unknown case {unknown[0]}; "
                 "allowed: uniform, qwen, sweep")
    braid = os.path.abspath(a.braid)
    if a.base:
        with tempfile.TemporaryDirectory() as tmp:
            for label, src in (("base", a.base), ("braid", braid)):
                shutil.copy2(src, os.path.join(tmp, label))
            for case in cases:
                if case not in CASES:
                    sys.exit(f"peer_compare: --cases {a.cases}: --base compares "
                             f"{', '.join(CASES)} only")
                against_base(case, [os.path.join(tmp, "base")] + CASES[case],
                             [os.path.join(tmp, "braid")] + CASES[case], a.runs, root)
        return
    peer = None
    if a.peer:
        if not os.path.isfile(os.path.join(a.peer, "src", "execution_model.py")):
            sys.exit(f"peer_compare: --peer {a.peer}: no src/execution_model.py there; clone "
                     "https://github.com/Victarry/PP-Schedule-Visualization")
        peer_dir = os.path.abspath(a.peer)
        peer = Peer([sys.executable, "-c", PEER_DRIVER, peer_dir]
                    + [f"{x:g}" for x in PEER_PIPELINE], import_peer(peer_dir))
        whole = float(subprocess.run(peer.command, check=True, stdout=subprocess.PIPE,
                                     text=True).stdout)
        inproc = peer.simulation()
        if whole != inproc:
            sys.exit(f"peer_compare: the peer's iteration time {whole:g} (whole process) differs "
                     f"from {inproc:g} (in-process)")
        print(f"peer iteration time (F 1, B 2): {whole:g} (whole process and in-process)")
    uniform = [braid] + CASES["uniform"]
    out = subprocess.run(uniform, cwd=root, check=True, stdout=subprocess.PIPE, text=True).stdout
    print("braid iteration time (uniform 1,2,0,0):", out.split('"iteration_time_s":')[1].split(",")[0])
    if "uniform" in cases:
        paired("uniform 1f1b-i p8 m256", uniform, peer, a.runs, root)
    # Unit level on a real model against the peer's chunk-level run of the same pipeline (its run
    # time does not depend on the F and B values: the same ops in the same order).
    qwen = [braid] + CASES["qwen"]
    if "qwen" in cases:
        paired("qwen2-26.3b tp8 pp8 m256 1f1b-i, unit level", qwen, peer, a.runs, root)
    if "sweep" not in cases:
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv = os.path.join(tmp, "sweep.csv")
        cpus = []
        for _ in range(a.sweep_runs):
            c, _, _ = timed([braid] + SWEEP + ["--csv", csv], root)
            cpus.append(c)
        with open(csv) as f:
            rows = sum(1 for _ in f) - 1
    cpu = statistics.median(cpus)
    print(f"sweep ({rows} rows, --jobs 1): {cpu:.2f} s CPU, {cpu / rows * 1e3:.2f} ms per "
          f"configuration (median of {a.sweep_runs})")


if __name__ == "__main__":
    main()

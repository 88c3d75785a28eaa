#!/usr/bin/env python3
"""Default threads against one thread, quiet and beside a busy process, on the model zoo's steps.

    /usr/bin/python3 python/bench/bench_threads_load.py [--rounds 3] [--blocks 6]
                                                        [--models cnn,resnet,vae,gpt]

Each round starts, per model, one process at LAZYX_NUM_THREADS=1 and one at 2 (the default on
this machine), in alternating order. Each process warms up, then cycles through half-second blocks
(zoo_step.py --toggle) of: lazyx.set_num_threads(1); both threads with LAZYX_ADAPTIVE_THREADS=1
(the default: the pool runs fewer threads while other processes busy the cores); both threads
with it =0 (every thread always). Settings within one process meet the same machine state, which
on this VM varies more between processes than the effects measured. Reported: median step (ms)
over the rounds, and each round's ratios.
"""
import argparse
import os
import subprocess
import sys

from bench_load import load

HERE = os.path.dirname(os.path.abspath(__file__))


def run(pkg, tests, name, threads, blocks):
    e = dict(os.environ, LAZYX_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    args = [sys.executable, os.path.join(HERE, "zoo_step.py"), pkg, tests, "lazyx", name,
            str(blocks), "--toggle"]
    out = subprocess.run(args, env=e, check=True, capture_output=True, text=True).stdout.split()
    return [float(v) for v in out]


def median(xs):
    return sorted(xs)[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--models", default="cnn,resnet,vae,gpt")
    ap.add_argument("--loads", default="quiet,busy")
    a = ap.parse_args()
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(HERE, "..", "..", "build", "python"))
    tests = os.path.join(HERE, "..", "tests")
    print("Step ms, medians over rounds. own: LAZYX_NUM_THREADS=1 process; set1: "
          "set_num_threads(1) in the 2-thread process; adapt: 2 threads, default; fixed: 2 "
          "threads, LAZYX_ADAPTIVE_THREADS=0. Ratios over own 1-thread (over set1), per round.")
    print("model  load  |   own    set1   adapt   fixed | adapt/own (adapt/set1) | fixed/own "
          "(fixed/set1)")
    for kind in a.loads.split(","):
        with load(kind):
            for name in a.models.split(","):
                own, set1, adapt, fixed = [], [], [], []
                for r in range(a.rounds):
                    for threads in ((1, 2) if r % 2 == 0 else (2, 1)):
                        t = run(pkg, tests, name, threads, a.blocks)
                        if threads == 1:
                            own.append(sum(t) / 3)  # one thread: the settings change nothing
                        else:
                            set1.append(t[0])
                            adapt.append(t[1])
                            fixed.append(t[2])

                def ratios(xs):
                    return " ".join("%.2f(%.2f)" % (x / o, x / s) for x, o, s in zip(xs, own, set1))
                print("%-6s %-5s | %6.3f %6.3f %6.3f %6.3f | %s | %s" %
                      (name, kind, median(own), median(set1), median(adapt), median(fixed),
                       ratios(adapt), ratios(fixed)), flush=True)


if __name__ == "__main__":
    main()

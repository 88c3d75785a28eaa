#!/usr/bin/env python3
"""One model of the zoo (python/tests/test_model_zoo.py), bench_transformer.py's layer
("transformer") or bench_torch_device.py's MLPs ("digits_mlp", "wide_mlp"), trained in this
process; run by
bench_models.py and bench_threads_load.py, one fresh process per configuration.

    zoo_step.py PKG TESTS MODE NAME STEPS            prints: median ms, first ms, compiles, fallbacks
    zoo_step.py PKG TESTS lazyx NAME BLOCKS --toggle  prints: 1-thread, adaptive, fixed ms

With --toggle, after the warm-up the process cycles through half-second blocks of three settings:
lazyx.set_num_threads(1); all threads with LAZYX_ADAPTIVE_THREADS=1 (the default; the setting is
read at each program run); all threads with it =0. It prints the median step of each; the first
0.1 s of a block is dropped (the load monitor samples every 0.1 s and runs through the
set_num_threads(1) block before each adaptive one).
"""
import os
import sys
import time

import torch

pkg, tests, mode, name, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
toggle = "--toggle" in sys.argv[6:]
torch.set_num_threads(int(os.environ["LAZYX_NUM_THREADS"]))
sys.path.insert(0, pkg)
sys.path.insert(0, tests)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lazyx  # noqa: E402
import test_model_zoo as z  # noqa: E402
import zoo_models  # noqa: E402

dev = lazyx.device() if mode == "lazyx" else "cpu"
model, opt, loss_fn, data = zoo_models.setup(name, dev)
compiles = 0


def step(i):
    """One training step; returns its seconds and whether it compiled after the warm-up."""
    global compiles
    b = data[i % 4]
    t0 = time.perf_counter()
    loss = z.optimizer_step(name, model, opt, loss_fn, b)
    if mode == "lazyx":
        c0 = lazyx.metrics.counter_value("UncachedCompile") or 0
        lazyx.mark_step()
        if i >= 2:
            compiles += (lazyx.metrics.counter_value("UncachedCompile") or 0) - c0
    loss.item()
    return time.perf_counter() - t0


def median(xs):
    return sorted(xs)[len(xs) // 2]


times = []
for i in range(3 if toggle else steps):
    times.append(step(i))
    if mode == "lazyx" and i == 2:
        lazyx.wait_for_background_compiles()  # steady state: full-tier kernels swapped in
if not toggle:
    fb = sum(lazyx.metrics.fallback_counters().values()) if mode == "lazyx" else 0
    print("%.3f %.3f %d %d" % (median(times[3:]) * 1e3, times[0] * 1e3, compiles, fb))
    sys.exit(0)
# (set_num_threads, LAZYX_ADAPTIVE_THREADS) of each block, in turn.
modes = [(1, "1"), (lazyx.get_max_threads(), "1"), (lazyx.get_max_threads(), "0")]
runs = [[] for _ in modes]
i = 3
for block in range(steps):
    m = block % len(modes)
    lazyx.set_num_threads(modes[m][0])
    os.environ["LAZYX_ADAPTIVE_THREADS"] = modes[m][1]
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        dt = step(i)
        i += 1
        if time.perf_counter() - start > 0.1:  # the pool measures the load meanwhile
            runs[m].append(dt)
assert compiles == 0, "steady steps compiled"
print(" ".join("%.3f" % (median(r) * 1e3) for r in runs))

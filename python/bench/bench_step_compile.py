#!/usr/bin/env python3
"""Compile time of a training step's programs: the digits MLP (Adam, 64-128-64-10, batch 64).

    /usr/bin/python3 python/bench/bench_step_compile.py

Each configuration runs in a fresh process (empty caches) and reports CompileTime of the first
step's program and of the steady step's program (the second differs only in Adam's state).
Baseline: LAZYX_CPU_NO_KERNEL_SHARING=1 with LAZYX_NUM_THREADS=1, i.e. every kernel compiled
again, one at a time, as before kernels were shared and compiled in parallel.
"""
import os
import subprocess
import sys

CHILD = r"""
import sys, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import lazyx
dev = lazyx.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64),
                      nn.ReLU(), nn.Linear(64, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
x = torch.randn(64, 64).to(dev); y = torch.randint(0, 10, (64,)).to(dev)
lazyx.mark_step()
lazyx.metrics.clear_all()
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    lazyx.mark_step()
d = lazyx.metrics.metric_data("CompileTime")
print(" ".join("%.1f" % (s / 1e6) for s in d[2]))
"""


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(here, "..", "..", "build", "python"))
    configs = [("baseline: no sharing, 1 thread", {"LAZYX_CPU_NO_KERNEL_SHARING": "1",
                                                   "LAZYX_NUM_THREADS": "1"}),
               ("shared kernels, 1 thread", {"LAZYX_NUM_THREADS": "1"}),
               ("shared kernels, 2 threads", {"LAZYX_NUM_THREADS": "2"})]
    base = None
    for name, env in configs:
        e = dict(os.environ)
        e.pop("LAZYX_CPU_NO_KERNEL_SHARING", None)
        e.update(env)
        e["LAZYX_CACHE_DIR"] = ""  # no persistent compile cache: every run compiles
        runs = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", CHILD, pkg], env=e, check=True,
                                 capture_output=True, text=True).stdout.split()
            runs.append([float(v) for v in out])
        med = [sorted(r[i] for r in runs)[1] for i in range(2)]
        total = sum(med)
        base = base or total
        print("%-32s first step %7.1f ms  steady step %7.1f ms  total %7.1f ms  %.2fx faster"
              % (name, med[0], med[1], total, base / total))


if __name__ == "__main__":
    main()

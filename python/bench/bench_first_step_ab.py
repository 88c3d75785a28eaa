#!/usr/bin/env python3
"""The first training step of two lazyx builds, alternating: compile time and step time.

    /usr/bin/python3 python/bench/bench_first_step_ab.py OLD_PYTHON_DIR NEW_PYTHON_DIR
        [--model digits|transformer] [--reps 5]

OLD/NEW_PYTHON_DIR are build/python folders of two builds (for example a worktree of an older
commit). Every run is a fresh process without a persistent compile cache, at 1 and 2 threads,
quiet and beside a spinning process this script starts; the two builds alternate run by run.
Printed per configuration and build: the median (and range) of the first step's compile
(CompileTime) and, for the transformer, of the first step itself and of steps 2 and 3.
"""
import argparse
import os
import subprocess
import sys

from bench_load import load

CHILD = r"""
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import lazyx
model_name = sys.argv[2]
dev = lazyx.device()
torch.manual_seed(0)
if model_name == "digits":
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64),
                          nn.ReLU(), nn.Linear(64, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.randn(64, 64).to(dev); y = torch.randint(0, 10, (64,)).to(dev)
    loss_fn = lambda: F.cross_entropy(model(x), y)
else:
    model = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 64, 256).to(dev)
    loss_fn = lambda: model(x).square().mean()
lazyx.mark_step()
lazyx.metrics.clear_all()
times = []
for _ in range(3):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    opt.step()
    lazyx.mark_step()
    loss.item()
    times.append((time.perf_counter() - t0) * 1e3)
compile_ms = lazyx.metrics.metric_data("CompileTime")[2][0] / 1e6
print(compile_ms, *times)
"""


def summary(rows):
    """Median (range) of the compile, of the first step, and of steps 2 and 3."""
    def med(i):
        v = sorted(r[i] for r in rows)
        return "%.1f (%.1f-%.1f)" % (v[len(v) // 2], v[0], v[-1])
    return "%s | %s | %s, %s" % (med(0), med(1), med(2), med(3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--model", choices=["digits", "transformer"], default="digits")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    builds = [("old", os.path.abspath(a.old)), ("new", os.path.abspath(a.new))]
    print("| load | threads | build | first step's compile ms | first step ms | steps 2, 3 ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind in ["quiet", "busy"]:
        with load(kind):
            for threads in ["1", "2"]:
                res = {name: [] for name, _ in builds}
                for _ in range(a.reps):
                    for name, pkg in builds:
                        env = dict(os.environ, LAZYX_NUM_THREADS=threads, LAZYX_CACHE_DIR="")
                        out = subprocess.run([sys.executable, "-c", CHILD, pkg, a.model], env=env,
                                             check=True, capture_output=True, text=True).stdout
                        res[name].append([float(v) for v in out.split()])
                for name, _ in builds:
                    print("| %s | %s | %s | %s |" % (kind, threads, name, summary(res[name])),
                          flush=True)

if __name__ == "__main__":
    main()

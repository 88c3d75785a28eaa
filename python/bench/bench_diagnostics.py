#!/usr/bin/env python3
"""The persistent compile cache and the cost of diagnostics.

    /usr/bin/python3 python/bench/bench_diagnostics.py [--runs 3] [--steps 200]

1. The digits main job (examples/train_digits.py, 1 epoch) in fresh processes: its total
   CompileTime with a cold compile cache (an empty LAZYX_CACHE_DIR folder) against a warm one
   (the folder the cold run filled), alternating, same run.
2. A cached training step of the digits MLP (Adam, batch 64): median step time with debug
   output off (the baseline), with LAZYX_DEBUG=1 (set_debug(1): frames collected at every
   mark_step; nothing printed, as a cached mark_step prints no block), and while profiling.
   At 1 and 2 threads (LAZYX_NUM_THREADS), quiet and next to a busy process this script starts.
"""
import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PKG = os.environ.get("LAZYX_PYTHONPATH", os.path.join(ROOT, "build", "python"))

MAIN_JOB = r"""
import io, contextlib, runpy, sys, json
sys.path.insert(0, sys.argv[1])
import lazyx
sys.argv = ["train_digits.py", "--epochs", "1"]
with contextlib.redirect_stdout(io.StringIO()):
    runpy.run_path(%r, run_name="__main__")
d = lazyx.metrics.metric_data("CompileTime")
print(json.dumps({"compile_ms": d[1] / 1e6, "programs": d[0],
                  "llvm_kernels": lazyx.metrics.counter_value("CpuKernelCompiled") or 0,
                  "loaded": lazyx.metrics.counter_value("PersistentCacheHit") or 0}))
"""

STEP = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch, torch.nn as nn, torch.nn.functional as F
import lazyx
steps = int(sys.argv[2])
dev = lazyx.device()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64),
                      nn.ReLU(), nn.Linear(64, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
x = torch.randn(64, 64).to(dev); y = torch.randint(0, 10, (64,)).to(dev)

def step():
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    opt.step()
    lazyx.mark_step()

for _ in range(5):
    step()  # compiled and cached

cpu = {"off": [], "debug": [], "profile": []}

def block(times):
    mode = [k for k, v in res.items() if v is times][0]
    c0 = time.process_time()
    for _ in range(10):
        t0 = time.perf_counter(); step(); times.append(time.perf_counter() - t0)
    cpu[mode].append((time.process_time() - c0) / 10)

res = {"off": [], "debug": [], "profile": []}
for rnd in range(steps // 10):  # 10-step blocks, modes alternating: drift hits them alike
    block(res["off"])
    lazyx.set_debug(1)
    block(res["debug"])
    lazyx.set_debug(0)
    with lazyx.profile(sys.argv[3]):
        block(res["profile"])
med = lambda v: sorted(v)[len(v) // 2] * 1e3
print(json.dumps({"wall": {k: med(v) for k, v in res.items()},
                  "cpu": {k: med(v) for k, v in cpu.items()}}))
"""


def busy():
    x = 0
    while True:
        x += 1


def run(code, args, env):
    e = dict(os.environ)
    e.update(env)
    out = subprocess.run([sys.executable, "-c", code, PKG] + args, env=e, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def compile_cache(runs):
    job = MAIN_JOB % os.path.join(ROOT, "examples", "train_digits.py")
    cold, warm = [], []
    for _ in range(runs):
        d = tempfile.mkdtemp(prefix="lazyx-bench-cache-")
        try:
            cold.append(run(job, [], {"LAZYX_CACHE_DIR": d}))
            warm.append(run(job, [], {"LAZYX_CACHE_DIR": d}))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    c = statistics.median(r["compile_ms"] for r in cold)
    w = statistics.median(r["compile_ms"] for r in warm)
    print(f"digits main job, total CompileTime in a fresh process (median of {runs}):")
    print(f"  cold cache {c:8.1f} ms  ({cold[0]['programs']} programs, "
          f"{cold[0]['llvm_kernels']} kernels compiled by LLVM)")
    print(f"  warm cache {w:8.1f} ms  ({warm[0]['llvm_kernels']} compiled by LLVM, "
          f"{warm[0]['loaded']} loaded)  warm/cold {w / c * 100:.1f}%")


def diag_cost(steps):
    print(f"cached training step, median of {steps} steps per mode (10-step blocks, alternating):")
    print("  wall: median step time; cpu: median process CPU time per step (all threads), less")
    print("  sensitive to other processes on a shared machine")
    print(f"  {'threads':>7} {'load':>5} {'':>4} {'off ms':>8} {'debug=1':>16} {'profiling':>16}")
    trace = os.path.join(tempfile.mkdtemp(prefix="lazyx-bench-trace-"), "t.json")
    for threads in ("1", "2"):
        for load in ("quiet", "busy"):
            p = multiprocessing.Process(target=busy, daemon=True) if load == "busy" else None
            if p:
                p.start()
            try:
                r = run(STEP, [str(steps), trace], {"LAZYX_NUM_THREADS": threads,
                                                   "LAZYX_DEBUG_FILE": os.devnull})
            finally:
                if p:
                    p.terminate()
                    p.join()
            for kind in ("wall", "cpu"):
                m = r[kind]
                off = m["off"]
                print(f"  {threads:>7} {load:>5} {kind:>4} {off:8.3f} {m['debug']:8.3f} "
                      f"({m['debug'] / off:.2f}x) {m['profile']:8.3f} ({m['profile'] / off:.2f}x)")
    shutil.rmtree(os.path.dirname(trace), ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    compile_cache(a.runs)
    diag_cost(a.steps)


if __name__ == "__main__":
    main()

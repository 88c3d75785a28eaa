#!/usr/bin/env python3
"""A TransformerEncoderLayer (d_model 256, 4 heads, feed-forward 1024, batch 32, sequence 64)
trained with AdamW: lazyx against torch eager on CPU, measured in this run.

    /usr/bin/python3 python/bench/bench_transformer.py [--steps 12] [--rounds 1]

Each configuration is a fresh process with a fresh, empty compile cache (the first step is a
cold start), at 1 and 2 threads, quiet and beside a spinning process this script starts.
Each mode runs twice per configuration, once right after the other mode's process and once
right after its own: on this VM a process that starts right after another one freed a lot of
memory touches its pages more slowly (lazyx's first step measured 2x slower right after an eager
process), so a fixed order would flatter one side. Reported per configuration, as the means of
the two processes: the first step (lazyx: compile included), the median of the steps after the
third (lazyx waits for its background compiler after step 3), and for lazyx the peak
device memory of a warmed-up step against the live set (parameters, gradients, AdamW state,
batch) plus the bytes eager's autograd saves for backward in the same step.
"""
import argparse
import os
import subprocess
import sys
import tempfile

from bench_load import load

CHILD = r"""
import os, sys, time, torch
import torch.nn as nn
pkg, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(int(os.environ["LAZYX_NUM_THREADS"]))
sys.path.insert(0, pkg)
import lazyx
D, HEADS, FF, B, S = 256, 4, 1024, 32, 64

def nbytes(t):
    return t.numel() * t.element_size()

def saved_bytes(layer, x):
    # What eager's autograd keeps for backward in one forward (parameters excluded).
    params = {p.data_ptr() for p in layer.parameters()}
    seen = {}
    def pack(t):
        if t.data_ptr() not in params:
            seen[t.data_ptr()] = max(seen.get(t.data_ptr(), 0), t.storage().nbytes())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = layer(x).square().mean()
    loss.backward()
    layer.zero_grad(set_to_none=True)
    return sum(seen.values())

dev = lazyx.device() if mode == "lazyx" else "cpu"
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.1, batch_first=True)
saved = saved_bytes(layer, torch.randn(B, S, D)) if mode == "lazyx" else 0
layer = layer.to(dev)
opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
xs = [torch.randn(B, S, D).to(dev) for _ in range(2)]
times, peak, live = [], 0, 0
for step in range(steps):
    x = xs[step % 2]
    if mode == "lazyx" and step == steps - 1:
        lazyx.reset_peak_memory_stats()
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = layer(x).square().mean()
    loss.backward()
    opt.step()
    if mode == "lazyx":
        lazyx.mark_step()
    loss.item()
    times.append(time.perf_counter() - t0)
    if mode == "lazyx" and step == 2:
        lazyx.wait_for_background_compiles()
if mode == "lazyx":
    peak = lazyx.memory_stats()["peak_bytes"]
    state = sum(nbytes(v) for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    live = sum(2 * nbytes(p) for p in layer.parameters()) + state + sum(nbytes(x) for x in xs)
    fb = sum(lazyx.metrics.fallback_counters().values())
else:
    fb = 0
rest = sorted(times[3:])
print("%.3f %.3f %d %d %d %d" % (rest[len(rest) // 2] * 1e3, times[0] * 1e3, peak, live, saved, fb))
"""

def run(pkg, mode, threads, steps):
    e = dict(os.environ)
    e["LAZYX_NUM_THREADS"] = str(threads)
    e["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory(prefix="lazyx-bench-cache-") as cache:
        e["LAZYX_CACHE_DIR"] = cache  # a cold start: nothing compiled before
        args = [sys.executable, "-c", CHILD, pkg, mode, str(steps)]
        out = subprocess.run(args, env=e, check=True, capture_output=True, text=True).stdout
    med, first, peak, live, saved, fb = out.split()
    return float(med), float(first), int(peak), int(live), int(saved), int(fb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=1, help="repetitions of every configuration")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--loads", default="quiet,busy")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(root, "build", "python"))
    print("| load | threads | eager step ms | lazyx step ms | eager/lazyx | eager first ms "
          "| lazyx first ms | first lazyx/eager | peak / (live + eager saved) | fallbacks |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind in a.loads.split(","):
        with load(kind):
            for _ in range(a.rounds):
                for t in [int(x) for x in a.threads.split(",")]:
                    # Each mode once right after the other and once right after itself (order
                    # eager, lazyx, lazyx, eager): the means of the two.
                    e1 = run(pkg, "eager", t, a.steps)
                    l1 = run(pkg, "lazyx", t, a.steps)
                    l2 = run(pkg, "lazyx", t, a.steps)
                    e2 = run(pkg, "eager", t, a.steps)
                    e_med, e_first = (e1[0] + e2[0]) / 2, (e1[1] + e2[1]) / 2
                    l_med, l_first = (l1[0] + l2[0]) / 2, (l1[1] + l2[1]) / 2
                    peak, live, saved, fb = l2[2], l2[3], l2[4], max(l1[5], l2[5])
                    print("| %s | %d | %.2f | %.2f | %.2fx | %.1f | %.1f | %.2fx | %.2fx "
                          "(%.1f / %.1f + %.1f MiB) | %d |" %
                          (kind, t, e_med, l_med, e_med / l_med, e_first, l_first,
                           l_first / e_first, peak / (live + saved), peak / 2**20,
                           live / 2**20, saved / 2**20, fb), flush=True)


if __name__ == "__main__":
    main()

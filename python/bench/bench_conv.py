#!/usr/bin/env python3
"""conv2d forward and forward+backward on the device against torch's own CPU convolution.

    /usr/bin/python3 python/bench/bench_conv.py [--iters 10]

Shapes: N=32 3->32 3x3 on 32x32; N=32 32->64 3x3 on 16x16; N=8 64->64 3x3 on 56x56 (padding 1).
Per shape and mode: the median time of a cached lazyx step (conv, then mark_step; for fwd+bwd
the gradients of input, weight and bias) and of the same in eager CPU torch with
torch.set_num_threads matched, alternating. At LAZYX_NUM_THREADS=1 and 2, quiet and next to a
busy process this script starts.
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.environ.get("LAZYX_PYTHONPATH",
                     os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "python"))
SHAPES = [((32, 3, 32, 32), (32, 3, 3, 3)), ((32, 32, 16, 16), (64, 32, 3, 3)),
          ((8, 64, 56, 56), (64, 64, 3, 3))]

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch, torch.nn.functional as F
import lazyx
iters, threads = int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
dev = lazyx.device()
out = []
for xs, ws in %r:
    torch.manual_seed(0)
    x, w, b = torch.randn(xs), torch.randn(ws), torch.randn(ws[0])
    for mode in ("fwd", "fwd+bwd"):
        grad = mode != "fwd"
        leaves = {d: [t.to(d).requires_grad_(grad) for t in (x, w, b)] for d in ("cpu", dev)}
        def run(d):
            xx, ww, bb = leaves[d]
            y = F.conv2d(xx, ww, bb, padding=1)
            if grad:
                for t in (xx, ww, bb): t.grad = None
                y.sum().backward()
            if d != "cpu":
                lazyx.mark_step()
        for d in ("cpu", dev, dev, dev):
            run(d)  # warm up; lazyx compiles its step
        t = {"cpu": [], "lazyx": []}
        for _ in range(iters):
            for d, k in ((dev, "lazyx"), ("cpu", "cpu")):
                t0 = time.perf_counter(); run(d); t[k].append(time.perf_counter() - t0)
        med = {k: sorted(v)[len(v) // 2] * 1e3 for k, v in t.items()}
        out.append({"shape": f"{xs} * {ws}", "mode": mode, **med})
print(json.dumps(out))
""" % (SHAPES,)


def busy():
    while True:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    print("| threads | load | shape (x * w) | mode | lazyx ms | torch ms | lazyx / torch |")
    print("|---|---|---|---|---|---|---|")
    for threads in (1, 2):
        for load in ("quiet", "busy"):
            hog = multiprocessing.Process(target=busy, daemon=True) if load == "busy" else None
            if hog:
                hog.start()
            env = dict(os.environ, LAZYX_NUM_THREADS=str(threads))
            try:
                res = subprocess.run([sys.executable, "-c", CHILD, PKG, str(args.iters),
                                      str(threads)], env=env, capture_output=True, text=True,
                                     check=True)
            finally:
                if hog:
                    hog.terminate()
                    hog.join()
            for r in json.loads(res.stdout.strip().splitlines()[-1]):
                print(f"| {threads} | {load} | {r['shape']} | {r['mode']} | {r['lazyx']:.2f} | "
                      f"{r['cpu']:.2f} | {r['lazyx'] / r['cpu']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

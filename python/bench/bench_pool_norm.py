#!/usr/bin/env python3
"""Pooling and normalization on the lazyx device vs torch eager CPU, measured in this one run.

    /usr/bin/python3 python/bench/bench_pool_norm.py [--threads N] [--busy] [--reps R]

Each case times forward + backward of one op (inputs reused, a step barrier per iteration on
lazyx, so the program is compiled once and then cached), median of R runs after a warm-up.
--busy starts a competing busy process for the duration of the run.
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _add_lazyx_to_path():
    import glob
    env = os.environ.get("LAZYX_PYTHONPATH")
    found = []
    for b in sorted(glob.glob(os.path.join(ROOT, "build*", "python"))):
        so = glob.glob(os.path.join(b, "lazyx", "_C*.so"))
        if so:
            found.append((max(os.path.getmtime(f) for f in so), b))
    best = env or (max(found)[1] if found else None)
    if best:
        sys.path.insert(0, best)


_add_lazyx_to_path()
THREADS = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)
os.environ["LAZYX_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lazyx  # noqa: E402

torch.set_num_threads(THREADS)
X = (16, 32, 32, 32)
CASES = [
    ("max_pool2d 3x3 s2 p1", lambda x: F.max_pool2d(x, 3, 2, 1)),
    ("avg_pool2d 2x2", lambda x: F.avg_pool2d(x, 2)),
    ("adaptive_avg_pool2d 7x7", lambda x: F.adaptive_avg_pool2d(x, 7)),
    ("batch_norm train", lambda x: F.batch_norm(x, None, None, training=True)),
    ("group_norm 8 groups", lambda x: F.group_norm(x, 8)),
    ("interpolate bilinear x2", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")),
    ("reflection pad 2", lambda x: F.pad(x, (2, 2, 2, 2), mode="reflect")),
]


def step_time(f, dev):
    x = torch.randn(*X).to(dev).requires_grad_(True)

    def once():
        y = f(x)
        y.backward(torch.ones_like(y))
        if dev != "cpu":
            lazyx.mark_step()
            x.grad.cpu()  # wait for the values
        x.grad = None

    for _ in range(2):
        once()
    times = []
    for _ in range(REPS):
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    busy = None
    if "--busy" in sys.argv:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        dev = lazyx.device()
        print(f"threads {THREADS}, input {X}, forward+backward, median of {REPS}"
              + (", with a busy process" if busy else ""))
        print(f"{'case':28s} {'eager ms':>9s} {'lazyx ms':>9s} {'lazyx/eager':>11s}")
        for name, f in CASES:
            te, tl = step_time(f, "cpu"), step_time(f, dev)
            print(f"{name:28s} {te * 1e3:9.2f} {tl * 1e3:9.2f} {tl / te:11.2f}")
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Training steps of python/bench/bench_torch_device.py on lazyx's CPU backend at one thread
count: the digits MLP (64-128-64-10) and the wide MLP (784-2048-2048-10), batch 64, median ms.
    /usr/bin/python3 bench/thread_steps.py THREADS
"""
import os
import sys

threads = sys.argv[1] if len(sys.argv) > 1 else "1"
sys.argv = [sys.argv[0], "--threads", threads]  # read by bench_torch_device at import
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "bench"))
import bench_torch_device as b  # noqa: E402

b.lazyx.set_backend("cpu")
for name, dims, steps in [("digits_mlp_step", (64, 128, 64, 10), 30),
                          ("wide_mlp_step", (784, 2048, 2048, 10), 4)]:
    print(f"{name} {b.train_time(dims, 64, steps, b.lazyx.device()) * 1e3:.3f}")

#!/usr/bin/env python3
"""Benchmarks of the lazyx PyTorch device, every figure measured in this one run.

    /usr/bin/python3 python/bench/bench_torch_device.py [--quick] [--wide-steps N] [--threads N]

1. Per-op overhead from Python: 1000 x `x = x + 1` on a 4x4 tensor, then a step barrier:
   lazyx vs torch eager vs torch._lazy (TorchScript lazy backend of the same torch).
2. Training step time (forward + backward + Adam + mark_step) for the digits MLP
   (64-128-64-10, batch 64) and a wide MLP (784-2048-2048-10, batch 64, random data): lazyx vs
   torch eager on CPU with the same thread count.
3. The digits MLP step split into phases (zero_grad, forward, backward, opt.step, mark_step and
   the step report's execute time), eager vs lazyx. Backward runs on the calling thread for the
   lazy device, as for CPU.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
def _add_lazyx_to_path():
    """$LAZYX_PYTHONPATH, else the newest <repo>/build*/python holding a built lazyx."""
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

# Same thread count everywhere: torch's intra-op pool, OpenBLAS (torch.set_num_threads does not
# bound it) and lazyx's CPU backend. Set before the libraries load.
THREADS = 1
for i, a in enumerate(sys.argv):
    if a == "--threads" and i + 1 < len(sys.argv):
        THREADS = int(sys.argv[i + 1])
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)
os.environ["LAZYX_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lazyx  # noqa: E402

OPS = 1000
BACKENDS = [b for b in ("reference", "cpu") if b in lazyx.backend_names()]


def median_time(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def per_op(reps):
    res = {}
    x0 = torch.zeros(4, 4)

    def eager():
        x = x0
        for _ in range(OPS):
            x = x + 1
        return x
    eager()
    res["eager"] = (median_time(eager, reps), 0.0)

    dev = lazyx.device()
    for backend in BACKENDS:
        lazyx.set_backend(backend)
        xl = x0.to(dev)
        lazyx.mark_step()
        trace_t, step_t = [], []
        for r in range(reps + 1):
            t0 = time.perf_counter()
            x = xl
            for _ in range(OPS):
                x = x + 1
            t1 = time.perf_counter()
            lazyx.mark_step()
            t2 = time.perf_counter()
            if r:  # the first rep compiles
                trace_t.append(t1 - t0)
                step_t.append(t2 - t1)
        assert x.cpu()[0, 0].item() == OPS
        res[f"lazyx ({backend})"] = (statistics.median(trace_t), statistics.median(step_t))

    try:
        import importlib
        tlazy = importlib.import_module("torch._lazy")
        importlib.import_module("torch._lazy.ts_backend").init()
        ldev = torch.device("lazy")
        xz = x0.to(ldev)
        tlazy.mark_step()
        trace_t, step_t = [], []
        for r in range(reps + 1):
            t0 = time.perf_counter()
            x = xz
            for _ in range(OPS):
                x = x + 1
            t1 = time.perf_counter()
            tlazy.mark_step()
            t2 = time.perf_counter()
            if r:
                trace_t.append(t1 - t0)
                step_t.append(t2 - t1)
        res["torch._lazy"] = (statistics.median(trace_t), statistics.median(step_t))
    except Exception as e:  # pragma: no cover - reported, not fatal
        print(f"torch._lazy unavailable: {e}")
    return res


def mlp(dims):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def train_time(dims, batch, steps, device):
    torch.manual_seed(0)
    model = mlp(dims).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, dims[0]).to(device)
    y = torch.randint(0, dims[-1], (batch,)).to(device)
    lazy = device != "cpu"

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if lazy:
            lazyx.mark_step()
        return loss
    for _ in range(2):  # warm-up (compile)
        step()
    if lazy:  # steady state: the full tier replaces the quick one in the background
        lazyx.wait_for_background_compiles()
        step()
    return median_time(step, steps)


def step_phases(dims, batch, steps, device):
    """Median microseconds of each phase of a training step (and the step report's execute)."""
    torch.manual_seed(0)
    model = mlp(dims).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, dims[0]).to(device)
    y = torch.randint(0, dims[-1], (batch,)).to(device)
    lazy = device != "cpu"
    names = ["zero_grad", "forward", "backward", "opt.step", "mark_step"]
    ph = {k: [] for k in names + ["execute"]}
    for i in range(steps + 5):
        t = [time.perf_counter()]
        opt.zero_grad(set_to_none=True)
        t.append(time.perf_counter())
        loss = F.cross_entropy(model(x), y)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        if lazy:
            lazyx.mark_step()
        t.append(time.perf_counter())
        if i >= 5:  # after warm-up and compile
            for k, a, b in zip(names, t, t[1:]):
                ph[k].append((b - a) * 1e6)
            ph["execute"].append(lazyx.last_step().execute_ms * 1e3 if lazy else 0.0)
    return {k: statistics.median(v) for k, v in ph.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--wide-steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    reps = 5 if args.quick else 20
    torch.set_num_threads(THREADS)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, threads {threads} (torch, OPENBLAS_NUM_THREADS, LAZYX_NUM_THREADS), "
          f"OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}, lazyx backends {BACKENDS}, load average {os.getloadavg()[0]:.1f}")

    print(f"\n## per-op overhead: {OPS} x `x = x + 1` on 4x4, then the step barrier "
          f"(median of {reps})")
    res = per_op(reps)
    eager_us = res["eager"][0] / OPS * 1e6
    print(f"{'':20s} {'trace us/op':>12s} {'step ms':>9s} {'total ms':>9s} {'total vs eager':>15s}")
    for name, (tr, st) in res.items():
        total = tr + st
        print(f"{name:20s} {tr / OPS * 1e6:12.2f} {st * 1e3:9.3f} {total * 1e3:9.3f} "
              f"{total / res['eager'][0]:14.2f}x")
    print(f"(eager {eager_us:.2f} us/op)")

    print("\n## training step (forward + backward + Adam [+ mark_step]), median ms")
    configs = [("digits MLP 64-128-64-10, batch 64", (64, 128, 64, 10), 64, 5 if args.quick else 30),
               ("wide MLP 784-2048-2048-10, batch 64", (784, 2048, 2048, 10), 64, args.wide_steps)]
    for name, dims, batch, steps in configs:
        te = train_time(dims, batch, steps, "cpu")
        line = f"{name:38s} eager {te * 1e3:9.2f}"
        for backend in BACKENDS:
            lazyx.set_backend(backend)
            tl = train_time(dims, batch, steps, lazyx.device())
            line += f" | lazyx {backend} {tl * 1e3:9.2f} ({tl / te:5.2f}x eager)"
        print(line)
    print("\n## where a digits MLP step goes, median us per phase")
    for name, dev in [("eager", "cpu")] + [(f"lazyx {b}", lazyx.device()) for b in BACKENDS]:
        if name != "eager":
            lazyx.set_backend(name.split()[1])
        r = step_phases((64, 128, 64, 10), 64, 50 if args.quick else 300, dev)
        print(f"{name:16s} " + " ".join(f"{k} {v:7.1f}" for k, v in r.items()))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Data-parallel benchmarks of lazyx.dist, every figure measured in this one run, 1 thread per
process (LAZYX_NUM_THREADS, OMP and OpenBLAS), ranks on this machine over loopback.

    /usr/bin/python3 python/bench/bench_dist.py [--quick] [--steps N] [--max-mib M] [--rounds R]

1. All-reduce (sum, float32) of 1 KiB .. 64 MiB on 2 ranks, three ways in the same processes:
   lazyx (a graph op: `x.copy_(all_reduce(x)); mark_step()`, so it includes tracing, the program
   launch and the ranks' graph-hash agreement), Gloo directly (lazyx's Gloo group on a CPU
   tensor, no graph) and torch.distributed's own Gloo process group. Median time per call.
2. The wide MLP (784-2048-2048-10, Adam, batch 1024 per process, random data): one process
   without lazyx.dist against 2 processes with lazyx.dist.optimizer_step and with DDP on the
   "lazyx" backend: samples/s, scaling efficiency (samples/s of 2 / (2 x samples/s of 1)), and
   the cost of the step's gradient all-reduce alone (the same gradient tensors, one program).
   Quiet, then with a busy process this benchmark starts (a Python spin loop). "CPU s/step" is
   the CPU time of one rank's process per step (all its threads): the work a step costs whatever
   else runs on the machine; "CPU vs 1" near 1.00x means the collective adds little work.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import train_digits  # noqa: E402,F401  (puts the built lazyx on sys.path)

for v in ("LAZYX_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import lazyx  # noqa: E402
import lazyx.dist as ld  # noqa: E402


def _timed(fn, reps):
    ts = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def allreduce_ranks(rank, max_mib, quick, out):
    torch.set_num_threads(1)
    dist.init_process_group("lazyx")
    gloo = dist.new_group(backend="gloo")
    dev = lazyx.device()
    rows = []
    size = 1024
    while size <= max_mib * 2**20:
        n = size // 4
        reps = max(5, min(100 if quick else 200, (64 << 20) // size))
        x = torch.ones(n).to(dev)
        c1, c2 = torch.ones(n), torch.ones(n)

        def lazy():
            x.copy_(ld.all_reduce(x))
            lazyx.mark_step()

        def direct():
            lazyx._C._dist.host_all_reduce(c1, 0)

        def torch_gloo():
            dist.all_reduce(c2, group=gloo)
        for f in (lazy, direct, torch_gloo):  # warm-up (compiles the program)
            f()
        t = {k: [] for k in ("lazyx", "gloo", "torch")}
        for _ in range(reps):  # call by call, so the machine's noise hits all three alike
            t["lazyx"].append(_timed(lazy, 1))
            t["gloo"].append(_timed(direct, 1))
            t["torch"].append(_timed(torch_gloo, 1))
        rows.append((size, *(statistics.median(t[k]) for k in ("lazyx", "gloo", "torch"))))
        size *= 4
    if rank == 0:
        with open(out, "w") as f:
            for r in rows:
                f.write(" ".join(map(str, r)) + "\n")
    dist.destroy_process_group()


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(),
                               torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                               torch.nn.Linear(2048, 10))


def _steps(model, opt, dev, steps, step_fn, batch=1024):
    x = torch.randn(batch, 784).to(dev)
    y = torch.randint(0, 10, (batch,)).to(dev)
    ts, cs = [], []
    for i in range(steps + 2):
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        step_fn(opt)
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    # Two warm-up steps compile. Wall time, and CPU time of this process (all its threads).
    return statistics.median(ts[2:]), statistics.median(cs[2:])


def mlp_ranks(rank, mode, steps, out):
    torch.set_num_threads(1)
    dev = lazyx.device()
    res = {}
    if mode == "one":
        model = _model().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def plain(o):
            o.step()
            lazyx.mark_step()
        res["step"] = _steps(model, opt, dev, steps, plain)
    else:
        dist.init_process_group("lazyx")
        model = _model().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        res["optimizer_step"] = _steps(model, opt, dev, steps, ld.optimizer_step)
        # The gradient all-reduce alone: the same tensors, one program per call.
        grads = [p.grad for p in model.parameters()]

        def reduce_only():
            ld.all_reduce(grads, op="mean")
            lazyx.mark_step()
        reduce_only()
        res["allreduce"] = _timed(reduce_only, steps)
        from torch.nn.parallel import DistributedDataParallel as DDP
        ddp = DDP(_model().to(dev))
        opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)

        def plain(o):
            o.step()
            lazyx.mark_step()
        res["ddp"] = _steps(ddp, opt, dev, steps, plain)
        dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(res))


def _read(path):
    with open(path) as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3, help="1 vs 2 process rounds per load")
    args = ap.parse_args()
    tmp = os.path.join("/tmp", f"lazyx_bench_dist_{os.getpid()}")
    print(f"lazyx {lazyx.backend_name()} backend, torch {torch.__version__}, "
          f"{os.cpu_count()} cores; 1 thread per process; ranks on this machine (loopback)\n")

    ld.spawn(allreduce_ranks, args=(args.max_mib, args.quick, tmp + "_ar"), nprocs=2)
    print("== all-reduce (sum, float32), 2 ranks: median time per call ==")
    print(f"{'size':>9} {'lazyx graph':>12} {'Gloo direct':>12} {'torch Gloo':>12} "
          f"{'lazyx/Gloo':>10} {'lazyx/torch':>11} {'lazyx GB/s':>10}")
    for line in _read(tmp + "_ar").splitlines():
        size, a, g, t = (float(v) for v in line.split())
        name = f"{int(size) >> 10} KiB" if size < 2**20 else f"{int(size) >> 20} MiB"
        print(f"{name:>9} {a * 1e6:10.0f}us {g * 1e6:10.0f}us {t * 1e6:10.0f}us "
              f"{a / g:9.2f}x {a / t:10.2f}x {size / a / 1e9:10.2f}")

    for busy in (False, True):
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        rounds = []
        try:
            for _ in range(args.rounds):  # 1 and 2 processes alternate, so load drifts hit both
                ld.spawn(mlp_ranks, args=("one", args.steps, tmp + "_one"), nprocs=1)
                ld.spawn(mlp_ranks, args=("two", args.steps, tmp + "_two"), nprocs=2)
                rounds.append((eval(_read(tmp + "_one")), eval(_read(tmp + "_two"))))
        finally:
            if spin:
                spin.kill()
                spin.wait()
        print(f"\n== wide MLP 784-2048-2048-10, Adam, batch 1024 per process, "
              f"{'with a busy competing process' if busy else 'quiet'} ==")
        print(f"{'':31} {'wall step':>10} {'samples/s':>10} {'vs 1':>6} {'efficiency':>10} "
              f"{'CPU s/step':>10} {'CPU vs 1':>8}")
        for i, (one, two) in enumerate(rounds):
            (w1, c1) = one["step"]
            s1 = 1024 / w1
            print(f"{f'round {i + 1}: 1 process (no dist)':31} {w1 * 1e3:8.1f}ms {s1:10.0f} "
                  f"{'':6} {'':10} {c1:10.3f}")
            for k in ("optimizer_step", "ddp"):
                w2, c2 = two[k]
                s2 = 2 * 1024 / w2
                print(f"{'  2 processes, ' + k:31} {w2 * 1e3:8.1f}ms {s2:10.0f} {s2 / s1:5.2f}x "
                      f"{s2 / (2 * s1) * 100:9.0f}% {c2:10.3f} {c2 / c1:7.2f}x")
            share = two["allreduce"] / two["optimizer_step"][0] * 100
            print(f"  gradient all-reduce alone (23 MB, one program): "
                  f"{two['allreduce'] * 1e3:.1f} ms = {share:.0f}% of the optimizer_step step")
    for suffix in ("_ar", "_one", "_two"):
        os.remove(tmp + suffix)


if __name__ == "__main__":
    main()

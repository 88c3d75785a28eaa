"""torch baselines for bench_core: eager per-op cost and torch._lazy tracing / cached mark_step.

Run with Debian's /usr/bin/python3. Prints "name value unit" lines like bench_core.
"""
import statistics
import time

import torch

OPS = 1000
REPS = 30


def eager_per_op():
    x0 = torch.zeros(4, 4)
    times = []
    for _ in range(REPS):
        x = x0
        t0 = time.perf_counter()
        for _ in range(OPS):
            x = x + 1
        times.append((time.perf_counter() - t0) / OPS * 1e9)
    return statistics.median(times)


def lazy_figures():
    import torch._lazy
    import torch._lazy.ts_backend
    torch._lazy.ts_backend.init()
    dev = torch.device("lazy")
    x0 = torch.zeros(4, 4, device=dev)
    torch._lazy.mark_step()
    trace, step = [], []
    for r in range(REPS + 2):
        x = x0
        t0 = time.perf_counter()
        for _ in range(OPS):
            x = x + 1
        t1 = time.perf_counter()
        torch._lazy.mark_step()
        t2 = time.perf_counter()
        if r >= 2:
            trace.append((t1 - t0) / OPS * 1e9)
            step.append((t2 - t1) * 1e3)
        del x
    return statistics.median(trace), statistics.median(step)


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(f"torch_version {torch.__version__}")
    print(f"torch_eager_python_per_op {eager_per_op():.1f} ns")
    tr, st = lazy_figures()
    print(f"torch_lazy_trace_per_op {tr:.1f} ns")
    print(f"torch_lazy_cached_mark_step {st:.3f} ms")

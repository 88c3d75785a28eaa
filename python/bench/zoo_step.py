#!/usr/bin/env python3
"""One model of the zoo (python/tests/test_model_zoo.py), bench_transformer.py's layer
("transformer") or bench_torch_device.py's MLPs ("digits_mlp", "wide_mlp"), trained in this
process; run by
bench_models.py and bench_threads_load.py, one fresh process per configuration.

    zoo_step.py PKG TESTS MODE NAME STEPS            prints: median ms, first ms, compiles, fallbacks
    zoo_step.py PKG TESTS lazyx NAME BLOCKS --toggle  prints: 1-thread, adaptive, fixed ms

With --toggle, after the warm-up the process cycles through half-second blocks of three settings:
lazyx.set_num_threads(1); all threads with LAZYX_ADAPTIVE_THREADS=1 (the default; the setting is
read at each program run); all threads with it =0. It prints the median step of each; the first
0.1 s of a block is dropped (the load monitor samples every 0.1 s and runs through the
set_num_threads(1) block before each adaptive one).
"""
import os
import sys
import time

import torch

pkg, tests, mode, name, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
toggle = "--toggle" in sys.argv[6:]
torch.set_num_threads(int(os.environ["LAZYX_NUM_THREADS"]))
sys.path.insert(0, pkg)
sys.path.insert(0, tests)
import lazyx  # noqa: E402
import test_model_zoo as z  # noqa: E402

dev = lazyx.device() if mode == "lazyx" else "cpu"
g = torch.Generator().manual_seed(0)


def batch():
    if name == "cnn":
        return torch.randn(64, 1, 12, 12, generator=g), torch.randint(0, 10, (64,), generator=g)
    if name == "resnet":
        return torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    if name == "lstm":
        t = torch.randint(0, 1000, (20, 36), generator=g)
        return t[:, :-1], t[:, 1:]
    if name == "gpt":
        t = torch.randint(0, 256, (16, 65), generator=g)
        return t[:, :-1], t[:, 1:]
    return torch.rand(128, 64, generator=g), torch.randn(128, 8, generator=g)


if name == "transformer":  # bench_transformer.py's layer: d 256, 4 heads, batch 32, seq 64
    def cls():
        return torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)

    def loss_fn(m, b):
        return m(b[0]).square().mean()

    def opt_fn(p):
        return torch.optim.AdamW(p, lr=1e-3)

    def batch():  # noqa: F811
        return (torch.randn(32, 64, 256, generator=g),)
elif name in ("digits_mlp", "wide_mlp"):  # bench_torch_device.py's MLPs, batch 64, Adam
    dims = (64, 128, 64, 10) if name == "digits_mlp" else (784, 2048, 2048, 10)

    def cls():
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers[:-1])

    def loss_fn(m, b):
        return torch.nn.functional.cross_entropy(m(b[0]), b[1])

    def opt_fn(p):
        return torch.optim.Adam(p, lr=1e-3)

    def batch():  # noqa: F811
        return torch.randn(64, dims[0], generator=g), torch.randint(0, 10, (64,), generator=g)
else:
    cls, _, loss_fn, opt_fn = z.MODELS[name]
torch.manual_seed(0)
# The language models at the examples' scale (the test's are tiny).
kw = {"lstm": dict(ntoken=1000, ninp=128, nhid=128),
      "gpt": dict(vocab=256, block=64, d=128, heads=4, layers=2)}.get(name, {})
model = cls(**kw).to(dev)
model.train()
opt = opt_fn(model.parameters())
data = [tuple(t.to(dev) for t in batch()) for _ in range(4)]
compiles = 0


def step(i):
    """One training step; returns its seconds and whether it compiled after the warm-up."""
    global compiles
    b = data[i % 4]
    t0 = time.perf_counter()
    loss = z.optimizer_step(name, model, opt, loss_fn, b)
    if mode == "lazyx":
        c0 = lazyx.metrics.counter_value("UncachedCompile") or 0
        lazyx.mark_step()
        if i >= 2:
            compiles += (lazyx.metrics.counter_value("UncachedCompile") or 0) - c0
    loss.item()
    return time.perf_counter() - t0


def median(xs):
    return sorted(xs)[len(xs) // 2]


times = []
for i in range(3 if toggle else steps):
    times.append(step(i))
    if mode == "lazyx" and i == 2:
        lazyx.wait_for_background_compiles()  # steady state: full-tier kernels swapped in
if not toggle:
    fb = sum(lazyx.metrics.fallback_counters().values()) if mode == "lazyx" else 0
    print("%.3f %.3f %d %d" % (median(times[3:]) * 1e3, times[0] * 1e3, compiles, fb))
    sys.exit(0)
# (set_num_threads, LAZYX_ADAPTIVE_THREADS) of each block, in turn.
modes = [(1, "1"), (lazyx.get_max_threads(), "1"), (lazyx.get_max_threads(), "0")]
runs = [[] for _ in modes]
i = 3
for block in range(steps):
    m = block % len(modes)
    lazyx.set_num_threads(modes[m][0])
    os.environ["LAZYX_ADAPTIVE_THREADS"] = modes[m][1]
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        dt = step(i)
        i += 1
        if time.perf_counter() - start > 0.1:  # the pool measures the load meanwhile
            runs[m].append(dt)
assert compiles == 0, "steady steps compiled"
print(" ".join("%.3f" % (median(r) * 1e3) for r in runs))

#!/usr/bin/env python3
"""Training-step time of the model zoo (python/tests/test_model_zoo.py: CNN, ResNet blocks, LSTM
LM, GPT blocks, VAE) on lazyx against torch eager on CPU as users call it, measured in this run.

    /usr/bin/python3 python/bench/bench_models.py [--steps 30] [--models cnn,resnet]

Each configuration runs in a fresh process at 1 and 2 threads, on a quiet machine and with a busy
process (a spinning Python loop) that this benchmark starts itself. Batches are larger than the
test's, and the language models wider, so that the step does real work. Reported: median step time over the steps after the
third, the first step's time (compile included), fallbacks and compiles after the warm-up. After
step 3 lazyx waits for its background compiler (tiered compilation), so the median is the
steady state; the first step ran the quick tier.
"""
import argparse
import os
import subprocess
import sys

CHILD = r"""
import os, sys, time, torch
pkg, tests, mode, name, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
torch.set_num_threads(int(os.environ["LAZYX_NUM_THREADS"]))
sys.path.insert(0, pkg); sys.path.insert(0, tests)
import lazyx
import test_model_zoo as z
dev = lazyx.device() if mode == "lazyx" else "cpu"
g = torch.Generator().manual_seed(0)
def batch():
    if name == "cnn":
        return torch.randn(64, 1, 12, 12, generator=g), torch.randint(0, 10, (64,), generator=g)
    if name == "resnet":
        return torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    if name == "lstm":
        t = torch.randint(0, 1000, (20, 36), generator=g); return t[:, :-1], t[:, 1:]
    if name == "gpt":
        t = torch.randint(0, 256, (16, 65), generator=g); return t[:, :-1], t[:, 1:]
    return torch.rand(128, 64, generator=g), torch.randn(128, 8, generator=g)
cls, _, loss_fn, opt_fn = z.MODELS[name]
torch.manual_seed(0)
# The language models at the examples' scale (the test's are tiny).
kw = {"lstm": dict(ntoken=1000, ninp=128, nhid=128),
      "gpt": dict(vocab=256, block=64, d=128, heads=4, layers=2)}.get(name, {})
model = cls(**kw).to(dev); model.train()
opt = opt_fn(model.parameters())
data = [tuple(t.to(dev) for t in batch()) for _ in range(4)]
times, compiles = [], 0
for step in range(steps):
    b = data[step % 4]
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model, b); loss.backward()
    if name == "lstm":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
    if mode == "lazyx":
        c0 = lazyx.metrics.counter_value("UncachedCompile") or 0
        lazyx.mark_step()
        if step >= 2:
            compiles += (lazyx.metrics.counter_value("UncachedCompile") or 0) - c0
    loss.item()
    times.append(time.perf_counter() - t0)
    if mode == "lazyx" and step == 2:
        lazyx.wait_for_background_compiles()  # steady state: full-tier kernels swapped in
t = sorted(times[3:])[len(times[3:]) // 2]
fb = sum(lazyx.metrics.fallback_counters().values()) if mode == "lazyx" else 0
print("%.3f %.3f %d %d" % (t * 1e3, times[0] * 1e3, compiles, fb))
"""

BUSY = "while True: pass"


def run(pkg, tests, mode, name, threads, steps):
    e = dict(os.environ)
    e["LAZYX_NUM_THREADS"] = str(threads)
    e["OMP_NUM_THREADS"] = str(threads)
    args = [sys.executable, "-c", CHILD, pkg, tests, mode, name, str(steps)]
    out = subprocess.run(args, env=e, check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2]), int(out[3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--models", default="cnn,resnet,lstm,gpt,vae")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(here, "..", "..", "build", "python"))
    tests = os.path.join(here, "..", "tests")
    print("model  load  thr | eager ms (first) | lazyx ms (first) | eager/lazyx | "
          "compiles after warm-up, fallbacks")
    for load in ("quiet", "busy"):
        busy = subprocess.Popen([sys.executable, "-c", BUSY]) if load == "busy" else None
        try:
            for name in a.models.split(","):
                for threads in (1, 2):
                    e, e0, _, _ = run(pkg, tests, "eager", name, threads, a.steps)
                    l, l0, c, fb = run(pkg, tests, "lazyx", name, threads, a.steps)
                    print("%-6s %-5s %d   | %7.2f (%7.1f) | %7.2f (%7.1f) | %5.2fx | %d, %d" %
                          (name, load, threads, e, e0, l, l0, e / l, c, fb), flush=True)
        finally:
            if busy:
                busy.kill()


if __name__ == "__main__":
    main()

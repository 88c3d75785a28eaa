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


BUSY = "while True: pass"


def run(pkg, tests, mode, name, threads, steps):
    e = dict(os.environ)
    e["LAZYX_NUM_THREADS"] = str(threads)
    e["OMP_NUM_THREADS"] = str(threads)
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo_step.py")
    args = [sys.executable, child, pkg, tests, mode, name, str(steps)]
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

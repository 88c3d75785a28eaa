#!/usr/bin/env python3
"""Model training steps, lazyx against eager, in one process: the same model (same seed) once on
the CPU and once on the device, steps in alternating blocks of half a second, so both meet the
same machine state. For each model, at 1 thread and at 2 (torch.set_num_threads and
lazyx.set_num_threads together), quiet and beside a busy process the script starts itself.

    .venv/bin/python python/bench/bench_zoo_ab.py [--models cnn,resnet,...] [--blocks 12]

Prints one table row per model, load and thread count: median step ms of eager and lazyx, their
ratio (above 1: lazyx is faster), and lazyx's compiles and fallbacks after the warm-up. Each model
runs in a child process (one process per model, both modes inside it).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def child(name, blocks):
    import torch
    if os.environ.get("LAZYX_PYTHONPATH"):  # a build's package before the installed one
        sys.path.insert(0, os.environ["LAZYX_PYTHONPATH"])
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
    sys.path.insert(0, HERE)
    import lazyx
    import test_model_zoo as z
    import zoo_models
    from bench_load import load

    runs = {}
    for mode, dev in (("eager", "cpu"), ("lazyx", lazyx.device())):
        model, opt, loss_fn, data = zoo_models.setup(name, dev)
        runs[mode] = (dev, model, opt, loss_fn, data)
    counters = {"compiles": 0}

    def step(mode, i):
        dev, model, opt, loss_fn, data = runs[mode]
        t0 = time.perf_counter()
        loss = z.optimizer_step(name, model, opt, loss_fn, data[i % 4])
        if mode == "lazyx":
            c0 = lazyx.metrics.counter_value("UncachedCompile") or 0
            lazyx.mark_step()
            counters["compiles"] += (lazyx.metrics.counter_value("UncachedCompile") or 0) - c0
        loss.item()
        return time.perf_counter() - t0

    for i in range(3):  # warm-up: compiles, caches, allocator
        for mode in runs:
            step(mode, i)
    lazyx.wait_for_background_compiles()
    counters["compiles"] = 0
    fb0 = sum(lazyx.metrics.fallback_counters().values())
    i = 3
    for kind in ("quiet", "busy"):
        with load(kind):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                lazyx.set_num_threads(min(threads, lazyx.get_max_threads()))
                times = {m: [] for m in runs}
                for block in range(blocks):
                    mode = ("eager", "lazyx")[block % 2]
                    start = time.perf_counter()
                    while time.perf_counter() - start < 0.5:
                        times[mode].append(step(mode, i))
                        i += 1
                med = {m: sorted(t)[len(t) // 2] * 1e3 for m, t in times.items()}
                fb = sum(lazyx.metrics.fallback_counters().values()) - fb0
                print(f"| {name} | {kind} | {threads} | {med['eager']:.3f} | {med['lazyx']:.3f} | "
                      f"{med['eager'] / med['lazyx']:.2f}x | {counters['compiles']}, {fb} |",
                      flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="cnn,resnet,lstm,gpt,vae,transformer,digits_mlp")
    ap.add_argument("--blocks", type=int, default=12, help="half-second blocks per setting")
    ap.add_argument("--child", default="")
    a = ap.parse_args()
    if a.child:
        child(a.child, a.blocks)
        return
    import torch
    print(f"torch {torch.__version__}, {os.cpu_count()} cores")
    print("| model | load | threads | eager ms | lazyx ms | eager/lazyx | compiles, fallbacks |")
    print("| --- | --- | --- | --- | --- | --- | --- |", flush=True)
    for name in a.models.split(","):
        subprocess.run([sys.executable, __file__, "--child", name, "--blocks", str(a.blocks)],
                       check=True)


if __name__ == "__main__":
    main()

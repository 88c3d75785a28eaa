#!/usr/bin/env python3
"""Resident memory around a one-off eval pass: an MNIST-sized MLP (784-1024-1024-10, Adam, batch
128, synthetic data) trains, then evaluates 40,000 rows in batches of 10,000 (value reads only, no
mark_step), then trains on.

    /usr/bin/python3 python/bench/bench_eval_memory.py [--configs 1q,2q,1b,2b]

Each configuration runs in a fresh process, once with the default cache bound (LAZYX_CACHE_LIMIT
unset: cached blocks above the recent peak in use are released after each step) and once with
the baseline LAZYX_CACHE_LIMIT=1000000 (in effect, no bound: the cache keeps what the pass freed
until empty_cache()). It prints resident memory (RSS) and the allocator's bytes in use and
cached: after training, right after the eval pass, and after 6 more training steps.
"""
import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import lazyx
dev = lazyx.device()
torch.set_num_threads(int(sys.argv[2]))

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def snap():
    m = lazyx.memory_stats()
    return {"rss": rss_mb(), "in_use": m["bytes_in_use"] / 2**20,
            "cached": m["bytes_cached"] / 2**20, "peak": m["peak_bytes"] / 2**20}

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(128, 784).to(dev), torch.randint(0, 10, (128,)).to(dev)
ex = [torch.randn(10000, 784).to(dev) for _ in range(4)]
lazyx.mark_step()

def train(n):
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        lazyx.mark_step()

train(5)
lazyx.reset_peak_memory_stats()
train(3)
out = {"train": snap()}
correct = 0
with torch.no_grad():
    for b in ex:
        correct += int((model(b).argmax(1) == 0).sum().item())
out["eval"] = snap()
train(6)
out["after"] = snap()
print(json.dumps(out))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="1q,2q,1b,2b")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(here, "..", "..", "build", "python"))
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for cfg in a.configs.split(","):
        threads, load = int(cfg[:-1]), cfg[-1]
        for limit in (None, "1000000"):
            env = dict(os.environ, LAZYX_NUM_THREADS=str(threads))
            env.pop("LAZYX_CACHE_LIMIT", None)
            if limit:
                env["LAZYX_CACHE_LIMIT"] = limit
            hog = None
            if load == "b":
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                res = subprocess.run([sys.executable, "-c", CHILD, pkg, str(threads)], env=env,
                                     check=True, capture_output=True, text=True)
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
            r = json.loads(res.stdout.strip().splitlines()[-1])
            t, e, f = r["train"], r["eval"], r["after"]
            name = "default bound" if limit is None else "no bound (baseline)"
            ratio = (f["in_use"] + f["cached"]) / t["peak"]
            mode = "busy" if hog else "quiet"
            print(f"{threads} thread(s), {mode}, {name}: training peak in use "
                  f"{t['peak']:.0f} MB; RSS after training {t['rss']:.0f} MB, after eval "
                  f"{e['rss']:.0f} MB (cached {e['cached']:.0f} MB), after 6 more steps "
                  f"{f['rss']:.0f} MB (in use {f['in_use']:.0f} MB, cached {f['cached']:.0f} MB; "
                  f"in use + cached = {ratio:.2f}x training peak)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""torch.optim.LBFGS on the lazyx device against CPU eager: PyTorch's time_sequence_prediction
example (two LSTMCells of 51 units and a Linear, float64, sine waves, MSELoss, LBFGS lr 0.8 whose
closure reads loss.item()), rewritten here with the data generated in memory.

    /usr/bin/python3 python/bench/bench_lbfgs.py [--length 100] [--future 100] [--steps 10]

Each configuration (LAZYX_NUM_THREADS 1 or 2; quiet, or with a busy process this script starts)
runs in a fresh process that trains eager (torch at --eager-threads, default 1) and lazyx from the
same initialization and prints the median step time after the first, the losses' largest
relative difference, and lazyx's resident memory after the steps. A step is one
optimizer.step (up to 20 closure calls) plus the example's prediction of `future` points under
no_grad, then mark_step.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, os, sys, time
import numpy as np, torch, torch.nn as nn
sys.path.insert(0, sys.argv[1])
import lazyx
L, FUTURE, STEPS, EAGER_THREADS = (int(a) for a in sys.argv[2:6])
torch.set_num_threads(EAGER_THREADS)

class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, x, future=0):
        n, dev = x.size(0), x.device
        h1, c1, h2, c2 = (torch.zeros(n, 51, dtype=torch.double, device=dev) for _ in range(4))
        outs = []
        for xt in x.split(1, dim=1):
            h1, c1 = self.lstm1(xt, (h1, c1))
            h2, c2 = self.lstm2(h1, (h2, c2))
            out = self.linear(h2)
            outs.append(out)
        for _ in range(future):
            h1, c1 = self.lstm1(out, (h1, c1))
            h2, c2 = self.lstm2(h1, (h2, c2))
            out = self.linear(h2)
            outs.append(out)
        return torch.cat(outs, dim=1)

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def data():
    rng = np.random.RandomState(2)
    T, N = 20, 100
    x = np.arange(L)[None, :] + rng.randint(-4 * T, 4 * T, N)[:, None]
    return torch.from_numpy(np.sin(x / 1.0 / T).astype("float64"))

def run(device, nudge=0.0):
    torch.manual_seed(0)
    d = data()
    inp, tgt = d[3:, :-1].to(device), d[3:, 1:].to(device)
    test_inp, test_tgt = d[:3, :-1].to(device), d[:3, 1:].to(device)
    seq = Sequence().double()
    with torch.no_grad():
        for p in seq.parameters():
            p.mul_(1 + nudge)
    seq = seq.to(device)
    crit = nn.MSELoss()
    opt = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    lazy = device != "cpu"
    if lazy:
        lazyx.mark_step()
    times, losses, rss, test_losses = [], [], [], []
    for _ in range(STEPS):
        t0 = time.perf_counter()
        def closure():
            opt.zero_grad()
            loss = crit(seq(inp), tgt)
            losses.append(loss.item())
            loss.backward()
            return loss
        opt.step(closure)
        with torch.no_grad():
            pred = seq(test_inp, future=FUTURE)
            test_losses.append(crit(pred[:, :-FUTURE], test_tgt).item())
            _ = pred.detach().cpu().numpy()
        if lazy:
            lazyx.mark_step()
        times.append(time.perf_counter() - t0)
        rss.append(rss_mb())
    out = {"times": times, "losses": losses, "test": test_losses, "rss": rss}
    if lazy:
        m = lazyx.memory_stats()
        out["compiles"] = lazyx.metrics.counter_value("UncachedCompile") or 0
        out["cached_mb"] = m["bytes_cached"] / 2**20
        out["in_use_mb"] = m["bytes_in_use"] / 2**20
        out["fallbacks"] = lazyx.metrics.fallback_counters()
    return out

res = {"eager": run("cpu"), "lazyx": run(lazyx.device())}
if int(sys.argv[6]):  # eager again, every weight changed by a relative 1e-15 (a rounding error)
    res["nudged"] = run("cpu", 1e-15)
print(json.dumps(res))
"""


def busy():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--length", type=int, default=100)
    ap.add_argument("--future", type=int, default=100)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--configs", default="1q,2q,1b,2b",
                    help="LAZYX_NUM_THREADS and q(uiet)/b(usy), comma separated")
    ap.add_argument("--nudged-eager", action="store_true",
                    help="also run eager with weights changed by 1e-15: how far rounding alone "
                         "moves the losses")
    ap.add_argument("--eager-threads", type=int, default=1,
                    help="torch threads of the eager baseline (1: its fastest on a shared machine)")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(here, "..", "..", "build", "python"))
    print(f"time_sequence_prediction, L={a.length}, future={a.future}, {a.steps} steps; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    for cfg in a.configs.split(","):
        threads, load = int(cfg[:-1]), cfg[-1]
        env = dict(os.environ, LAZYX_NUM_THREADS=str(threads))
        hog = busy() if load == "b" else None
        try:
            res = subprocess.run([sys.executable, "-c", CHILD, pkg, str(a.length), str(a.future),
                                  str(a.steps), str(a.eager_threads), str(int(a.nudged_eager))],
                                 env=env, check=True,
                                 capture_output=True, text=True)
        finally:
            if hog:
                hog.kill()
                hog.wait()
        r = json.loads(res.stdout.strip().splitlines()[-1])
        e, z = r["eager"], r["lazyx"]
        n = min(len(e["losses"]), len(z["losses"]))
        def rel_diffs(a, b):
            return [abs(x - y) / max(abs(y), 1e-300) for x, y in zip(a[:n], b[:n])]
        rels = rel_diffs(z["losses"], e["losses"])
        nudged = ""
        if "nudged" in r:
            nz = rel_diffs(r["nudged"]["losses"], e["losses"])
            nudged = f" (eager with weights changed by 1e-15: max rel diff {max(nz):.1e})"
        te, tz = statistics.median(e["times"][1:]), statistics.median(z["times"][1:])
        print(f"{threads} thread(s), {'busy' if hog else 'quiet'}: eager step {te:.3f} s, lazyx "
              f"step {tz:.3f} s ({tz / te:.2f}x eager; first step eager {e['times'][0]:.2f} s, "
              f"lazyx {z['times'][0]:.2f} s incl. compiles); closure calls {len(z['losses'])} vs "
              f"{len(e['losses'])}; losses max rel diff {max(rels):.1e} (first step "
              f"{max(rels[:20]):.1e}, first 3 steps {max(rels[:60]):.1e}){nudged}; final loss "
              f"{z['losses'][-1]:.3e} vs eager {e['losses'][-1]:.3e}; lazyx compiles "
              f"{z['compiles']}; lazyx RSS after step 2 {z['rss'][1]:.0f} MB, last "
              f"{z['rss'][-1]:.0f} MB (eager {e['rss'][-1]:.0f} MB in the same process); "
              f"allocator in use {z['in_use_mb']:.1f} MB, cached {z['cached_mb']:.1f} MB; "
              f"CPU fallbacks {z['fallbacks'] or 'none'}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

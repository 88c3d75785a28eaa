#!/usr/bin/env python3
"""word_language_model-style training (LSTM LM, corpus on the device, one window per step):
step time of lazyx with run-time view offsets against LAZYX_STATIC_VIEW_OFFSETS=1 (one compile
per window, as before) and against torch eager on CPU, all measured in this run.

    /usr/bin/python3 python/bench/bench_word_lm.py

Each configuration runs in a fresh process at 1 and 2 threads, on a quiet machine and with a
busy process (a spinning Python loop) that this benchmark starts itself. Reported: median step
time over steps 3..N and compiles per step after the warm-up.
"""
import os
import subprocess
import sys

CHILD = r"""
import os, sys, time, torch, torch.nn as nn
mode = sys.argv[2]
torch.set_num_threads(int(os.environ["LAZYX_NUM_THREADS"]))
if mode != "eager":
    sys.path.insert(0, sys.argv[1])
    import lazyx
    dev = lazyx.device()
else:
    dev = "cpu"
torch.manual_seed(0)
NT, BPTT, BSZ, STEPS = 2000, 35, 20, 23
class LM(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(NT, 200); s.rnn = nn.LSTM(200, 200, 2)
        s.dec = nn.Linear(200, NT)
    def forward(s, x, h):
        o, h = s.rnn(s.emb(x), h); return s.dec(o).view(-1, NT), h
model = LM().to(dev)
data = torch.randint(0, NT, ((BPTT * STEPS + 1) * BSZ,)).view(BSZ, -1).t().contiguous().to(dev)
crit = nn.CrossEntropyLoss(); opt = torch.optim.SGD(model.parameters(), lr=1.0)
h = (torch.zeros(2, BSZ, 200, device=dev), torch.zeros(2, BSZ, 200, device=dev))
times, compiles = [], 0
for step in range(STEPS):
    t0 = time.perf_counter()
    i = step * BPTT
    x, y = data[i:i + BPTT], data[i + 1:i + 1 + BPTT].reshape(-1)
    h = tuple(t.detach() for t in h)
    opt.zero_grad()
    out, h = model(x, h)
    loss = crit(out, y); loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25); opt.step()
    if mode != "eager":
        c0 = lazyx.metrics.counter_value("UncachedCompile") or 0
        lazyx.mark_step()
        if step >= 2:
            compiles += (lazyx.metrics.counter_value("UncachedCompile") or 0) - c0
    loss.item()
    times.append(time.perf_counter() - t0)
t = sorted(times[3:])[len(times[3:]) // 2]
print("%.3f %d" % (t * 1e3, compiles))
"""

BUSY = "while True: pass"


def run(pkg, mode, threads):
    e = dict(os.environ)
    e["LAZYX_NUM_THREADS"] = str(threads)
    e["OMP_NUM_THREADS"] = str(threads)
    e.pop("LAZYX_STATIC_VIEW_OFFSETS", None)
    if mode == "static":
        e["LAZYX_STATIC_VIEW_OFFSETS"] = "1"
    args = [sys.executable, "-c", CHILD, pkg, mode]
    out = subprocess.run(args, env=e, check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    pkg = os.environ.get("LAZYX_PYTHONPATH", os.path.join(here, "..", "..", "build", "python"))
    for load in ("quiet", "busy"):
        busy = subprocess.Popen([sys.executable, "-c", BUSY]) if load == "busy" else None
        try:
            for threads in (1, 2):
                eager, _ = run(pkg, "eager", threads)
                static, sc = run(pkg, "static", threads)
                dyn, dc = run(pkg, "runtime", threads)
                print("%-5s %d thr  eager %8.2f ms | static offsets %8.2f ms (%d compiles after "
                      "warm-up) | run-time offsets %8.2f ms (%d compiles)  static/run-time %.1fx  "
                      "eager/run-time %.2fx" % (load, threads, eager, static, sc, dyn, dc,
                                                static / dyn, eager / dyn))
        finally:
            if busy:
                busy.kill()


if __name__ == "__main__":
    main()

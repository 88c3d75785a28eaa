#!/usr/bin/env python3
"""Trains an MLP on sklearn's digits (shipped by python3-sklearn) on the lazyx PyTorch device.

    /usr/bin/python3 examples/train_digits.py [--epochs N] [--batch B]

Unchanged PyTorch code (nn, autograd, torch.optim) except `.to(lazyx.device())` and one
`lazyx.mark_step()` per step. Prints a line per epoch (loss, test accuracy, step time), then the
metrics report, the report of the training run's last step, and a training step's peak memory
with and without donation (LAZYX_ENABLE_PARAM_ALIASING=0, which the engine reads at every sync).
"""
import argparse
import gc
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
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

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import lazyx  # noqa: E402


def load():
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    n_test = len(x) // 5
    return x[perm[n_test:]], y[perm[n_test:]], x[perm[:n_test]], y[perm[:n_test]]


def make_model():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def train_step(model, opt, xb, yb):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    lazyx.mark_step()
    return loss.detach()


def peak_step_bytes(aliasing, xb, yb):
    """Peak device memory of one warm training step, above what was live before the model."""
    if aliasing:
        os.environ.pop("LAZYX_ENABLE_PARAM_ALIASING", None)
    else:
        os.environ["LAZYX_ENABLE_PARAM_ALIASING"] = "0"
    gc.collect()
    lazyx.mark_step()
    base = lazyx.memory_stats()["bytes_in_use"]
    torch.manual_seed(0)
    model = make_model().to(lazyx.device())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(3):
        train_step(model, opt, xb, yb)
    lazyx.reset_peak_memory_stats()
    train_step(model, opt, xb, yb)
    peak = lazyx.memory_stats()["peak_bytes"] - base
    os.environ.pop("LAZYX_ENABLE_PARAM_ALIASING", None)
    return peak, lazyx.last_step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()

    dev = lazyx.device()
    print(f"lazyx device {dev}, backend {lazyx.backend_name()}, torch {torch.__version__}")
    xtr, ytr, xte, yte = load()
    print(f"digits: {len(xtr)} train / {len(xte)} test images of 8x8")
    torch.manual_seed(0)
    model = make_model().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(1)
    xte_d, yte_d = xte.to(dev), yte.to(dev)
    lazyx.metrics.clear_all()
    last_train_step = None
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        losses, times = [], []
        for i in range(0, len(xtr) - args.batch + 1, args.batch):
            idx = perm[i:i + args.batch]
            t0 = time.perf_counter()
            losses.append(train_step(model, opt, xtr[idx].to(dev), ytr[idx].to(dev)))
            times.append(time.perf_counter() - t0)
        # The evaluation below syncs too, so keep the report of the last training step now.
        last_train_step = lazyx.last_step()
        model.eval()
        with torch.no_grad():
            acc = (model(xte_d).argmax(1) == yte_d).float().mean().item()
        loss = torch.stack([l.cpu() for l in losses]).mean().item()
        steady = sorted(times)[len(times) // 2]
        print(f"epoch {epoch:2d}  loss {loss:.4f}  test accuracy {acc * 100:5.1f}%  "
              f"step {steady * 1e3:.2f} ms (median of {len(times)}, first {times[0] * 1e3:.1f} ms)")

    print("\n== metrics report ==")
    print(lazyx.metrics.metrics_report())
    fallbacks = lazyx.metrics.fallback_counters()
    print("ops that fell back to CPU:", fallbacks if fallbacks else "none")

    print("\n== last step report (the training run's last step) ==")
    print(last_train_step)

    xb, yb = xtr[:args.batch].to(dev), ytr[:args.batch].to(dev)
    peak_on, rep_on = peak_step_bytes(True, xb, yb)
    peak_off, rep_off = peak_step_bytes(False, xb, yb)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    print("== peak memory of one training step ==")
    print(f"parameters {params} B; with donation {peak_on} B ({rep_on.num_donated} buffers donated, "
          f"{rep_on.bytes_allocated} B allocated); without donation {peak_off} B "
          f"({rep_off.num_donated} donated, {rep_off.bytes_allocated} B allocated); "
          f"ratio {peak_off / max(1, peak_on):.2f}x")


if __name__ == "__main__":
    main()

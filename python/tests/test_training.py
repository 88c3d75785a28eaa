"""An MLP trained on sklearn's digits on the lazyx device matches the same training on CPU."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


def load_digits_split():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    n_test = len(x) // 5
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


def make_mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def train(device, epochs=8, batch=64):
    xtr, ytr, xte, yte = load_digits_split()
    torch.manual_seed(0)
    model = make_mlp().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    curve = []
    for epoch in range(epochs):
        perm = torch.randperm(len(xtr), generator=g)
        losses = []
        for i in range(0, len(xtr) - batch + 1, batch):
            idx = perm[i:i + batch]
            xb, yb = xtr[idx].to(device), ytr[idx].to(device)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            if device != "cpu":
                lazyx.mark_step()
            losses.append(loss.detach())
        curve.append(float(torch.stack([l.cpu() for l in losses]).mean()))
    with torch.no_grad():
        pred = model(xte.to(device)).argmax(1).cpu()
    acc = (pred == yte).float().mean().item()
    return curve, acc


def test_digits_mlp_matches_cpu_and_learns():
    lazyx.metrics.clear_all()
    curve_cpu, acc_cpu = train("cpu")
    curve_dev, acc_dev = train(DEV)
    np.testing.assert_allclose(curve_dev, curve_cpu, rtol=2e-3, atol=2e-4)
    assert curve_dev[-1] < curve_dev[0] / 5
    assert acc_dev >= 0.95, acc_dev
    assert abs(acc_dev - acc_cpu) <= 0.01
    # Everything ran natively, and the compiled step was reused.
    assert not [n for n in lazyx.metrics.counter_names() if n.startswith("aten::")], \
        lazyx.metrics.fallback_counters()
    aliased = lazyx.metrics.metric_data("InputOutputAliasCount")
    assert aliased is not None and aliased[1] > 0

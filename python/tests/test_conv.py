"""Convolutions on the device against CPU eager: values and gradients (input, weight, bias) over
1-, 2- and 3-D problems with strides, padding, dilation, groups and transposed convolutions, in
several dtypes; nn.Conv2d training with no CPU fallback and no compile after the second step."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()

# (name, function, input shape, weight shape, keyword arguments)
CASES = [
    ("conv1d", F.conv1d, (2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ("conv1d_dil_b1", F.conv1d, (1, 3, 9), (5, 3, 2), dict(dilation=3)),
    ("conv2d_pad", F.conv2d, (2, 3, 7, 9), (4, 3, 3, 3), dict(padding=1)),
    ("conv2d_mixed", F.conv2d, (3, 4, 8, 7), (6, 2, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    ("conv2d_depthwise", F.conv2d, (2, 4, 6, 6), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ("conv2d_1x1_b1", F.conv2d, (1, 8, 5, 5), (4, 8, 1, 1), dict()),
    ("conv2d_parallel", F.conv2d, (5, 16, 20, 20), (16, 16, 3, 3), dict(padding=1)),
    ("conv3d", F.conv3d, (2, 2, 5, 6, 4), (3, 2, 2, 3, 2),
     dict(stride=(1, 2, 1), padding=(1, 0, 1))),
    ("conv_transpose1d", F.conv_transpose1d, (2, 4, 5), (4, 3, 3),
     dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d_groups", F.conv_transpose2d, (2, 4, 5, 4), (4, 2, 3, 3),
     dict(stride=2, padding=1, output_padding=(1, 0), groups=2)),
    ("conv_transpose2d_dil", F.conv_transpose2d, (2, 3, 4, 4), (3, 2, 3, 3),
     dict(padding=2, dilation=2)),
    ("conv_transpose3d", F.conv_transpose3d, (1, 2, 3, 3, 2), (2, 3, 2, 2, 2), dict(stride=2)),
]

TOL = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-10, 1e-10),
       torch.bfloat16: (3e-2, 3e-2), torch.float16: (5e-3, 5e-3)}


def out_channels(fn, w, kw):
    transposed = fn in (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
    return w.shape[1] * kw.get("groups", 1) if transposed else w.shape[0]


def run(fn, x, w, b, kw, device, dtype):
    """Forward and the gradients of a weighted sum, on `device` (the leaves are copies)."""
    xs, ws, bs = (t.detach().to(device).requires_grad_() for t in (x, w, b))
    y = fn(xs, ws, bs, **kw)
    g = torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape).to(dtype)
    (y * g.to(device)).sum().backward()
    return [t.detach().cpu().double() for t in (y, xs.grad, ws.grad, bs.grad)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name,fn,xs,ws,kw", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_eager(name, fn, xs, ws, kw, dtype):
    torch.manual_seed(0)
    x, w = torch.randn(xs, dtype=dtype), torch.randn(ws, dtype=dtype)
    b = torch.randn(out_channels(fn, w, kw), dtype=dtype)
    lazyx.metrics.clear_counters()
    got = run(fn, x, w, b, kw, DEV, dtype)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()
    want = run(fn, x, w, b, kw, "cpu", dtype)
    rtol, atol = TOL[dtype]
    for what, g, e in zip(("output", "grad input", "grad weight", "grad bias"), got, want):
        assert g.shape == e.shape, what
        scale = max(1, e.abs().max().item())
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=rtol, atol=atol * scale,
                                   err_msg=f"{name} {what}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name,fn,xs,ws,kw", CASES[2:5] + CASES[9:10],
                         ids=[c[0] for c in CASES[2:5] + CASES[9:10]])
def test_half_types_match_float32_eager(name, fn, xs, ws, kw, dtype):
    # The device rounds once from exact sums: compare with float32 eager on the rounded inputs.
    torch.manual_seed(0)
    x, w = torch.randn(xs).to(dtype), torch.randn(ws).to(dtype)
    b = torch.randn(out_channels(fn, w, kw)).to(dtype)
    y = fn(x.to(DEV), w.to(DEV), b.to(DEV), **kw)
    assert y.dtype == dtype
    want = fn(x.float(), w.float(), b.float(), **kw)
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(y.cpu().float().numpy(), want.numpy(), rtol=rtol,
                               atol=atol * max(1, want.abs().max().item()))


def test_no_bias_and_partial_gradients():
    torch.manual_seed(0)
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3, requires_grad=True)
    wd = w.detach().to(DEV).requires_grad_()
    F.conv2d(x.to(DEV), wd, stride=2).square().sum().backward()  # input needs no gradient
    F.conv2d(x, w, stride=2).square().sum().backward()
    np.testing.assert_allclose(wd.grad.cpu().numpy(), w.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_bad_input_raises_with_op_name():
    x, w = torch.randn(1, 3, 5, 5).to(DEV), torch.randn(4, 2, 3, 3).to(DEV)
    with pytest.raises(Exception, match="channels"):
        F.conv2d(x, w)


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.c3 = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        x = F.relu(self.c3(x))
        return self.fc(x.flatten(1))


def train(device, steps=5):
    torch.manual_seed(0)
    model = SmallCnn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    xb = torch.randn(16, 1, 8, 8, generator=g)  # one batch, so the loss must fall
    yb = torch.randint(0, 10, (16,), generator=g)
    losses, compiles = [], []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        if device != "cpu":
            lazyx.mark_step()
            compiles.append(lazyx.metrics.counter_value("UncachedCompile") or 0)
        losses.append(loss.item())
    return losses, compiles


def test_cnn_training_is_native_and_compiles_once():
    lazyx.metrics.clear_all()
    dev_losses, compiles = train(DEV)
    assert not lazyx.metrics.fallback_counters(), lazyx.metrics.fallback_counters()
    cpu_losses, _ = train("cpu")
    np.testing.assert_allclose(dev_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    assert dev_losses[-1] < dev_losses[0]
    # Steps after the second compile nothing.
    assert compiles[2:] == [compiles[1]] * (len(compiles) - 2), compiles

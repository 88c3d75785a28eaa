"""What a value read computes, it keeps: loops that read values between in-place updates
(metrics, optimizer closures, LBFGS) compile a flat number of programs. Also the ops found with
them: all/any over empty tensors, and ops whose schema under-declares their writes (RReLU's noise,
batch norm's running statistics). Every value is checked against CPU eager."""
import pytest
import torch
import torch.nn as nn

import lazyx

DEV = lazyx.device()


def compiles():
    return lazyx.metrics.counter_value("UncachedCompile") or 0


def test_read_loop_compiles_flat_and_keeps_the_updated_tensor():
    w = torch.zeros(1000).to(DEV)
    lazyx.mark_step()
    counts = []
    for k in range(6):
        w.add_(1.0)
        assert (w * 2).sum().item() == pytest.approx(2000.0 * (k + 1))
        assert not lazyx.is_pending(w)
        rep = lazyx.last_step()
        assert lazyx.storage_base_id(w) in rep.kept_live
        assert lazyx.storage_base_id(w) in rep.materialized
        assert rep.num_nodes <= 8
        counts.append(compiles())
    assert counts[1] == counts[-1], counts


def test_partial_sync_keeps_then_mark_step_donates():
    m = torch.zeros(64).to(DEV)
    g = torch.arange(64, dtype=torch.float32).to(DEV)
    lazyx.mark_step()
    m.mul_(0.9).add_(g)
    loss = (m * m).sum()
    lazyx.sync(loss)
    rep = lazyx.last_step()
    assert rep.num_donated == 0 and lazyx.storage_base_id(m) in rep.kept_live
    assert not lazyx.is_pending(m)
    m.add_(1.0)
    lazyx.mark_step()
    rep = lazyx.last_step()
    assert rep.num_donated == 1
    assert [p.output_tensor_id for p in rep.params if p.donated] == [lazyx.storage_base_id(m)]
    torch.testing.assert_close(m.cpu(), torch.arange(64, dtype=torch.float32) + 1)


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 8)
        self.l2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(torch.tanh(self.l1(x)))


def _lbfgs_losses(device, steps, counts=None):
    torch.manual_seed(0)
    x = torch.randn(32, 3, dtype=torch.float64)
    y = torch.sin(x.sum(1, keepdim=True))
    model = _Net().double()
    model.to(device)
    x, y = x.to(device), y.to(device)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=3)
    crit = nn.MSELoss()
    losses = []
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            return loss
        losses.append(float(opt.step(closure)))
        if device == DEV:
            lazyx.mark_step()
            if counts is not None:
                counts.append(compiles())
    return losses


def test_lbfgs_compiles_flat_after_the_first_step_and_matches_eager():
    counts = []
    lazyx.metrics.clear_all()
    got = _lbfgs_losses(DEV, 6, counts)
    want = _lbfgs_losses("cpu", 6)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert counts[1] == counts[-1], counts  # nothing new to compile after the first two steps
    # Each read runs one forward and backward at most (about 75 nodes), never the history of
    # earlier reads (about 370 nodes when reads keep nothing).
    assert max(lazyx.metrics.metric_data("TensorsGraphSize")[2]) < 150


def test_all_and_any_over_empty_tensors():
    for dtype in (torch.float32, torch.bool, torch.int64):
        e = torch.zeros(0, dtype=dtype)
        assert torch.all(e.to(DEV)).item() is torch.all(e).item() is True
        assert torch.any(e.to(DEV)).item() is torch.any(e).item() is False
        e2 = torch.zeros(3, 0, dtype=dtype)
        assert torch.all(e2.to(DEV)).cpu().dtype == torch.bool
    x = torch.tensor([0.0, 2.0, 0.0])
    assert torch.all(x.to(DEV)).item() is False and torch.any(x.to(DEV)).item() is True


def _check_rrelu(x0, out, lower=0.1, upper=0.3):
    """Training rrelu draws its slopes from the device's generator: check the definition."""
    neg = x0 < 0
    torch.testing.assert_close(out[~neg], x0[~neg])
    slope = out[neg] / x0[neg]
    assert ((slope >= lower - 1e-6) & (slope <= upper + 1e-6)).all(), slope
    assert slope.unique().numel() > 1  # drawn per element
    return neg, slope


def test_rrelu_training_gradients_use_the_drawn_slopes():
    x0 = torch.randn(4, 16)
    x = x0.clone().to(DEV).requires_grad_(True)
    out = nn.RReLU(0.1, 0.3).train()(x)
    (out * out).sum().backward()
    out_l, g_l = out.detach().cpu(), x.grad.cpu()
    neg, slope = _check_rrelu(x0, out_l)
    # d(out^2)/dx = 2 out * slope: the backward saw the same noise the forward drew.
    torch.testing.assert_close(g_l[neg], 2 * out_l[neg] * slope)
    torch.testing.assert_close(g_l[~neg], 2 * x0[~neg])


def test_rrelu_in_place_training_writes_the_tensor():
    x0 = torch.randn(64)
    x = x0.clone().to(DEV)
    y = torch.nn.functional.rrelu(x, 0.1, 0.3, training=True, inplace=True)
    assert y is x
    _check_rrelu(x0, x.cpu())


def test_batch_norm_running_stats_written_back_only_in_training():
    torch.manual_seed(2)
    x = torch.randn(16, 5) * 3 + 1
    bn_c = nn.BatchNorm1d(5)
    bn_l = nn.BatchNorm1d(5).to(DEV)
    for _ in range(2):
        torch.testing.assert_close(bn_l(x.to(DEV)).cpu(), bn_c(x))
    torch.testing.assert_close(bn_l.running_mean.cpu(), bn_c.running_mean)
    torch.testing.assert_close(bn_l.running_var.cpu(), bn_c.running_var)
    bn_l.eval()
    bn_c.eval()
    lazyx.mark_step()
    torch.testing.assert_close(bn_l(x.to(DEV)).cpu(), bn_c(x))
    assert not lazyx.is_pending(bn_l.running_mean)  # eval does not write them
    torch.testing.assert_close(bn_l.running_mean.cpu(), bn_c.running_mean)

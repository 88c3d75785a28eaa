"""Donation through PyTorch (ALIASING.md): in-place updates of parameters, clones, partial syncs,
user-requested donation and gradient accumulation."""
import os

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DEV = lazyx.device()


def last_alias_count():
    data = lazyx.metrics.metric_data("InputOutputAliasCount")
    assert data is not None
    return data[2][-1]


def donated_ids(rep):
    return {p.output_tensor_id for p in rep.params if p.donated}


def test_several_parameters_in_one_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(10, 8).to(DEV), torch.randint(0, 4, (10,)).to(DEV)
    ids_before = [lazyx.tensor_id(p) for p in model.parameters()]
    for _ in range(3):
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        lazyx.mark_step()
    rep = lazyx.last_step()
    params = list(model.parameters())
    assert [lazyx.tensor_id(p) for p in params] == ids_before  # identity kept across steps
    persistent = params + [p.grad for p in params] + [opt.state[p]["momentum_buffer"] for p in params]
    ids = {lazyx.storage_base_id(t) for t in persistent}
    assert ids <= donated_ids(rep), rep
    assert rep.num_donated >= len(persistent)
    assert last_alias_count() == rep.num_donated
    assert rep.bytes_allocated == 0  # every updated tensor reuses its own buffer


def test_clone_keeps_the_old_value():
    base = torch.arange(6.)
    x = base.clone().to(DEV)
    y = x.clone()
    x += 1
    lazyx.mark_step()
    rep = lazyx.last_step()
    torch.testing.assert_close(y.cpu(), base)
    torch.testing.assert_close(x.cpu(), base + 1)
    kept = [p for p in rep.params if not p.donated]
    assert kept and kept[0].reason == "shared"
    # A clone updated in place leaves the original alone.
    z = x.clone()
    z *= 10
    lazyx.mark_step()
    torch.testing.assert_close(x.cpu(), base + 1)
    torch.testing.assert_close(z.cpu(), (base + 1) * 10)


def test_partial_syncs_never_donate():
    x = torch.ones(4, 4).to(DEV)
    w = torch.ones(4, 4).to(DEV)
    x += 1
    w *= 2
    lazyx.sync([x])
    rep = lazyx.last_step()
    assert rep.kind == "sync" and rep.num_donated == 0
    assert all(p.reason == "partial sync" for p in rep.params)
    assert x.cpu().sum().item() == 32
    x += 1
    assert x.sum().item() == 48  # .item() is a partial sync too
    assert lazyx.last_step().num_donated == 0
    lazyx.mark_step()  # w's pending update is run by the step barrier, with donation
    rep = lazyx.last_step()
    assert rep.num_donated >= 1 and lazyx.tensor_id(w) in donated_ids(rep)
    assert w.cpu().sum().item() == 32


def test_user_requested_donation():
    a = torch.randn(8, 8).to(DEV)
    a_cpu = a.cpu()
    b = a * 2
    assert lazyx.set_buffer_donation(a, True) is True
    assert lazyx.get_buffer_donation(a) is True
    assert lazyx.set_buffer_donation(b, True) is False  # pending: no buffer of its own
    lazyx.sync([b])
    rep = lazyx.last_step()
    assert rep.num_donated == 1 and rep.params[0].reason == "user requested"
    assert lazyx.is_donated(a)
    torch.testing.assert_close(b.cpu(), a_cpu * 2)
    with pytest.raises(RuntimeError, match="donated"):
        a.cpu()
    # Turning the flag off again keeps the buffer.
    c = torch.randn(8, 8).to(DEV)
    lazyx.set_buffer_donation(c, True)
    lazyx.set_buffer_donation(c, False)
    d = c + 1
    lazyx.sync([d])
    assert not lazyx.is_donated(c)
    torch.testing.assert_close(d.cpu(), c.cpu() + 1)


def test_gradient_accumulation_over_steps():
    torch.manual_seed(0)
    mc = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    md = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    md.load_state_dict(mc.state_dict())
    md.to(DEV)
    oc = torch.optim.SGD(mc.parameters(), lr=0.1)
    od = torch.optim.SGD(md.parameters(), lr=0.1)
    batches = [(torch.randn(5, 6), torch.randint(0, 3, (5,))) for _ in range(4)]
    for outer in range(2):
        oc.zero_grad(set_to_none=False)
        od.zero_grad(set_to_none=False)
        for x, y in batches:
            F.cross_entropy(mc(x), y).backward()
            F.cross_entropy(md(x.to(DEV)), y.to(DEV)).backward()
            lazyx.mark_step()  # the gradients are updated in place across steps
            rep = lazyx.last_step()
            grad_ids = {lazyx.storage_base_id(p.grad) for p in md.parameters()}
            if outer > 0 or x is not batches[0][0]:
                assert grad_ids <= donated_ids(rep)
        for pc, pd in zip(mc.parameters(), md.parameters()):
            torch.testing.assert_close(pd.grad.cpu(), pc.grad, atol=1e-5, rtol=1e-4)
        oc.step()
        od.step()
        lazyx.mark_step()
    for pc, pd in zip(mc.parameters(), md.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), atol=1e-5, rtol=1e-4)


def test_aliasing_disabled_by_env():
    x = torch.ones(16).to(DEV)
    x += 1
    os.environ["LAZYX_ENABLE_PARAM_ALIASING"] = "0"
    lazyx.mark_step()
    rep = lazyx.last_step()
    assert rep.num_donated == 0 and rep.params[0].reason == "disabled"
    os.environ.pop("LAZYX_ENABLE_PARAM_ALIASING")
    x += 1
    lazyx.mark_step()
    assert lazyx.last_step().num_donated == 1
    assert x.cpu().sum().item() == 48


def test_view_updates_donate_the_base():
    x = torch.zeros(4, 4).to(DEV)
    x[1] += 1
    x[:, 2:] = 5.0
    lazyx.mark_step()
    rep = lazyx.last_step()
    assert rep.num_donated == 1 and lazyx.tensor_id(x) in donated_ids(rep)
    c = torch.zeros(4, 4)
    c[1] += 1
    c[:, 2:] = 5.0
    torch.testing.assert_close(x.cpu(), c)

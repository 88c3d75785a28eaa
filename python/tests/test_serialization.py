"""copy.deepcopy, torch.save/torch.load and lazyx.save of device tensors, modules and optimizers."""
import copy
import io
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazyx

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.bool]


def sample(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, generator=g) * 10
    return x.to(dtype) if dtype != torch.bool else x > 0


def round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_deepcopy_values_dtype_device(dev, dtype):
    ref = sample(dtype)
    t = ref.to(dev)
    c = copy.deepcopy(t)
    assert c.device == t.device and c.dtype == dtype and c.shape == t.shape
    assert torch.equal(c.cpu(), ref)
    assert lazyx.storage_base_id(c) != lazyx.storage_base_id(t)


def test_deepcopy_is_independent(dev):
    t = torch.arange(6.0).to(dev)
    c = copy.deepcopy(t)
    t.mul_(10)
    c.add_(1)
    lazyx.mark_step()
    assert t.cpu().tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    assert c.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_deepcopy_of_pending_value_and_view(dev):
    t = torch.arange(12.0).reshape(3, 4).to(dev)
    lazyx.mark_step()
    t.mul_(2)  # pending: the copy must see the recorded update
    v = t[1:, ::2]
    c = copy.deepcopy(v)
    assert torch.equal(c.cpu(), (torch.arange(12.0).reshape(3, 4) * 2)[1:, ::2])
    t.zero_()
    assert c.cpu().abs().sum().item() > 0


def test_deepcopy_keeps_requires_grad_grad_and_memo(dev):
    w = torch.tensor([1.0, -2.0, 3.0]).to(dev).requires_grad_()
    (w * w).sum().backward()
    d = copy.deepcopy({"a": w, "b": w})
    assert d["a"] is d["b"]  # the memo: one tensor stays one tensor
    c = d["a"]
    assert c.requires_grad and c.is_leaf and c.device == w.device
    assert torch.equal(c.detach().cpu(), torch.tensor([1.0, -2.0, 3.0]))
    assert torch.equal(c.grad.cpu(), torch.tensor([2.0, -4.0, 6.0]))
    assert c.grad is not w.grad
    plain = copy.deepcopy(torch.ones(2).to(dev))
    assert not plain.requires_grad


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_save_load_round_trip(dev, dtype):
    ref = sample(dtype)
    t = ref.to(dev)
    lazyx.mark_step()
    t2 = t.t()  # a non-contiguous view
    out = round_trip({"t": t, "view": t2})
    for k, r in (("t", ref), ("view", ref.t())):
        assert out[k].device == t.device and out[k].dtype == dtype
        assert torch.equal(out[k].cpu(), r)


def test_save_load_requires_grad_and_pending(dev):
    w = torch.arange(4.0).to(dev).requires_grad_()
    p = w.detach() * 3 + 1  # pending, never synced
    out = round_trip([w, p])
    assert out[0].requires_grad and out[0].is_leaf
    assert not out[1].requires_grad
    assert out[0].detach().cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert out[1].cpu().tolist() == [1.0, 4.0, 7.0, 10.0]


def make_model(dev):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)


def train_steps(model, opt, x, y, n):
    for _ in range(n):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        lazyx.mark_step()


@pytest.mark.parametrize("saver", ["torch.save", "lazyx.save"])
def test_state_dict_and_optimizer_round_trip(dev, saver):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 8, generator=g).to(dev)
    y = torch.randint(0, 3, (32,), generator=g).to(dev)
    model = make_model(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train_steps(model, opt, x, y, 3)

    buf = io.BytesIO()
    (torch.save if saver == "torch.save" else lazyx.save)(
        {"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = torch.load(buf)
    want = "cpu" if saver == "lazyx.save" else lazyx.DEVICE_TYPE
    assert all(v.device.type == want for v in ck["model"].values())
    assert ck["opt"]["state"][0]["exp_avg"].device.type == want
    assert hasattr(ck["model"], "_metadata")

    # A second model with other weights, restored from the checkpoint.
    torch.manual_seed(5)
    model2 = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(dev)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=1e-2)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    for a, b in zip(model.parameters(), model2.parameters()):
        assert a.device == b.device
        assert torch.equal(a.detach().cpu(), b.detach().cpu())
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    for i in s1:
        for k in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(s1[i][k].cpu(), s2[i][k].cpu())
        assert float(s1[i]["step"]) == float(s2[i]["step"]) == 3.0

    # Training on from the restored state matches training on from the original one, which
    # needs the optimizer moments and step counts to have round-tripped.
    train_steps(model, opt, x, y, 2)
    train_steps(model2, opt2, x, y, 2)
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.allclose(a.detach().cpu(), b.detach().cpu(), rtol=1e-6, atol=1e-7)


def test_whole_module_save_and_deepcopy(dev):
    model = make_model(dev)
    x = torch.randn(4, 8).to(dev)
    want = model(x).detach().cpu()
    # A whole module is arbitrary pickled code: torch.load refuses it unless weights_only=False,
    # on the CPU as here (the default weights_only=True covers tensors and state_dicts).
    with pytest.raises(Exception, match="weights_only"):
        round_trip(model)
    for m2 in (round_trip(model, weights_only=False), copy.deepcopy(model)):
        assert next(m2.parameters()).device == x.device
        assert isinstance(m2[0].weight, nn.Parameter) and m2[0].weight.requires_grad
        assert torch.allclose(m2(x).detach().cpu(), want)


def test_cpu_tensors_pickle_as_before():
    t = torch.arange(5.0)
    out = round_trip({"a": t, "b": t[1:]})
    assert torch.equal(out["a"], t)
    out["a"][2] = 100.0  # storage sharing between views survives, as without lazyx
    assert out["b"][1].item() == 100.0
    c = copy.copy(t)
    assert c.data_ptr() == t.data_ptr()


def test_lazyx_save_loads_without_lazyx(dev, tmp_path):
    f = tmp_path / "ck.pt"
    lazyx.save({"w": torch.arange(3.0).to(dev), "n": [torch.ones(2, dtype=torch.int32).to(dev)]}, f)
    code = ("import sys, torch; d = torch.load(sys.argv[1]); "
            "assert 'lazyx' not in sys.modules; "
            "print(d['w'].device, d['w'].tolist(), d['n'][0].dtype, d['n'][0].tolist())")
    out = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "cpu [0.0, 1.0, 2.0] torch.int32 [1, 1]"


def test_copy_copy_of_device_tensor_is_a_copy(dev):
    t = torch.arange(3.0).to(dev)
    c = copy.copy(t)
    assert c.device == t.device and c.cpu().tolist() == [0.0, 1.0, 2.0]
    t.add_(1)
    assert c.cpu().tolist() == [0.0, 1.0, 2.0]


def test_load_with_map_location_both_ways(dev):
    # torch.load's default weights_only=True: CPU checkpoints onto the device and device
    # checkpoints onto the CPU, with map_location.
    sd = {"w": sample(torch.float32), "n": torch.arange(6)}
    on_dev = round_trip(sd, map_location=dev)
    assert all(v.device == dev for v in on_dev.values())
    for k in sd:
        assert torch.equal(on_dev[k].cpu(), sd[k])
    back = round_trip({k: v.to(dev) for k, v in sd.items()}, map_location="cpu")
    assert all(v.device.type == "cpu" for v in back.values())
    for k in sd:
        assert torch.equal(back[k], sd[k])

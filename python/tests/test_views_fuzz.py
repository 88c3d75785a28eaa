"""Random sequences of views, in-place updates, copies, steps and partial syncs on one base,
mirrored on CPU: every tensor and view must agree at the end (ALIASING.md rule 7)."""
import random

import pytest
import torch

import lazyx

dev = lazyx.device()


def run(seed, steps=30):
    rng = random.Random(seed)
    base = torch.randn(4, 6)
    C = [base.clone()]; D = [base.clone().to(dev)]
    log = []
    for s in range(steps):
        i = rng.randrange(len(C)); c, d = C[i], D[i]
        op = rng.choice(["t", "slice", "select", "view", "unsq", "add_", "mul_", "copy_", "fill", "new", "step", "sync", "clone", "expand_read", "idx_copy", "setitem"])
        log.append((op, i, tuple(c.shape)))
        try:
            if op == "t" and c.dim() == 2: C.append(c.t()); D.append(d.t())
            elif op == "slice" and c.dim() >= 1 and c.shape[0] > 1:
                a = rng.randrange(c.shape[0] - 1); b = rng.randrange(a + 1, c.shape[0] + 1); st = rng.choice([1, 2])
                C.append(c[a:b:st]); D.append(d[a:b:st])
            elif op == "select" and c.dim() >= 1:
                k = rng.randrange(c.shape[0]); C.append(c[k]); D.append(d[k])
            elif op == "view" and c.is_contiguous() and c.numel() > 0:
                C.append(c.view(-1)); D.append(d.view(-1))
            elif op == "unsq": C.append(c.unsqueeze(0)); D.append(d.unsqueeze(0))
            elif op == "add_": v = rng.random(); c.add_(v); d.add_(v)
            elif op == "mul_": v = rng.random() + 0.5; c.mul_(v); d.mul_(v)
            elif op == "copy_":
                r = torch.randn(c.shape); c.copy_(r); d.copy_(r.to(dev))
            elif op == "fill": v = rng.random(); c.fill_(v); d.fill_(v)
            elif op == "new": C.append(c * 2 + 1); D.append(d * 2 + 1)
            elif op == "step": lazyx.mark_step()
            elif op == "sync": lazyx.sync([d])
            elif op == "clone": C.append(c.clone()); D.append(d.clone())
            elif op == "expand_read" and c.dim() >= 1:
                C.append(c.unsqueeze(0).expand(2, *c.shape).sum(0)); D.append(d.unsqueeze(0).expand(2, *d.shape).sum(0))
            elif op == "idx_copy" and c.dim() >= 1 and c.shape[0] >= 2:
                idx = torch.tensor([1, 0]); src = torch.randn(2, *c.shape[1:])
                c.index_copy_(0, idx, src); d.index_copy_(0, idx.to(dev), src.to(dev))
            elif op == "setitem" and c.dim() >= 1:
                c[0] += 1; d[0] += 1
        except Exception as e:
            raise AssertionError(f"seed {seed}: {log[-1]} raised {e}")
    for k, (c, d) in enumerate(zip(C, D)):
        if not torch.allclose(c, d.cpu(), atol=1e-5):
            raise AssertionError(f"seed {seed}: tensor {k} differs after {log}")
    return True


@pytest.mark.parametrize("chunk", range(4))
def test_random_view_and_inplace_sequences(chunk):
    for seed in range(chunk * 50, chunk * 50 + 50):
        assert run(seed)

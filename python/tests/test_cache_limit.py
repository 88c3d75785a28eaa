"""The caching allocator's bound after each step (LAZYX_CACHE_LIMIT): an invalid value raises
before the step does anything; cached blocks a one-off pass freed are returned after steps."""
import os

import pytest
import torch

import lazyx

DEV = lazyx.device()


def test_invalid_cache_limit_raises_and_the_step_changes_nothing(monkeypatch):
    w = torch.ones(16).to(DEV)
    lazyx.mark_step()
    w.add_(1.0)
    monkeypatch.setenv("LAZYX_CACHE_LIMIT", "-5")
    with pytest.raises(lazyx.LazyxError, match="LAZYX_CACHE_LIMIT"):
        lazyx.mark_step()
    assert lazyx.is_pending(w)
    monkeypatch.delenv("LAZYX_CACHE_LIMIT")
    lazyx.mark_step()
    torch.testing.assert_close(w.cpu(), torch.full((16,), 2.0))


def test_one_off_pass_is_returned_after_steps():
    w = torch.randn(256, 256).to(DEV)
    lazyx.mark_step()

    def train():
        w.sub_(torch.tanh(w @ w) * 1e-3)
        lazyx.mark_step()

    for _ in range(3):
        train()
    lazyx.reset_peak_memory_stats()
    train()
    peak = lazyx.memory_stats()["peak_bytes"]
    big = torch.randn(2048, 256).to(DEV)
    assert torch.tanh(big @ w).abs().sum().item() > 0
    del big
    s = lazyx.memory_stats()
    assert s["bytes_in_use"] + s["bytes_cached"] > 2 * peak
    for _ in range(6):
        train()
    s = lazyx.memory_stats()
    assert s["bytes_in_use"] + s["bytes_cached"] <= 1.25 * peak, s
    assert s["num_trimmed_bytes"] > 0

"""The seed scenario (ALIASING.md, worked example), exactly as the issue writes it."""
import torch
import lazyx


def test_seed_scenario():
    dev = lazyx.device()
    torch.manual_seed(0)
    x = torch.randn(5, 5).to(dev)
    expected = x.cpu()
    x_id = lazyx.tensor_id(x)
    x += 1
    x *= 3
    assert lazyx.tensor_id(x) == x_id  # in-place ops keep the tensor's identity
    lazyx.mark_step()
    data = lazyx.metrics.metric_data("InputOutputAliasCount")
    assert data is not None
    total, acc, samples = data
    assert total == 1 and acc == 1.0 and list(samples) == [1.0]
    rep = lazyx.last_step()
    assert rep.kind == "mark_step" and rep.num_donated == 1
    assert rep.params[0].donated and rep.params[0].reason == "in-place update"
    assert rep.params[0].output_tensor_id == x_id
    expected = (expected + 1) * 3
    assert torch.allclose(x.cpu(), expected)

    x *= 1
    lazyx.mark_step()
    total, acc, samples = lazyx.metrics.metric_data("InputOutputAliasCount")
    assert total == 2 and acc == 2.0
    assert torch.allclose(x.cpu(), expected)
    assert lazyx.tensor_id(x) == x_id

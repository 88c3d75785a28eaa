"""Printing device tensors: torch's exact text, formatted from one CPU copy, with no fallbacks."""
import pytest
import torch
import torch._tensor_str as tensor_str

import lazyx

DEV = lazyx.device()
SUFFIX = "device='lazy:0'"


def fallbacks():
    return [n for n in lazyx.metrics.counter_names() if n.startswith("aten::")]


def with_device(cpu_text):
    """torch's text for a tensor whose only suffix is the device, from the CPU tensor's text
    (which has no suffix): torch's own _add_suffixes places it, wrapping long lines."""
    assert cpu_text.startswith("tensor(") and cpu_text.endswith(")")
    return tensor_str._add_suffixes(cpu_text[:-1], [SUFFIX], len("tensor("), force_newline=False)


def unhooked_str(t):
    """What torch itself prints for t (it formats a CPU copy of a lazy tensor)."""
    hook = tensor_str._str
    tensor_str._str = lazyx._printing._original_str
    try:
        return str(t)
    finally:
        tensor_str._str = hook


CASES = {
    "float": lambda: torch.tensor([[1.5, -2.0, 3.25], [0.0, 1e-3, 7.0]]),
    "float_sci": lambda: torch.tensor([1e-8, 1.0, 1e8]),
    "float_inf_nan": lambda: torch.tensor([1.0, float("inf"), float("nan"), -2.5]),
    "int64": lambda: torch.tensor([[1, -20, 300], [4, 5, 6]]),
    "bool": lambda: torch.tensor([True, False, True]),
    "0d": lambda: torch.tensor(3.5),
    "large_1d": lambda: torch.arange(2000, dtype=torch.float32),
    "large_2d": lambda: torch.randn(60, 70, generator=torch.Generator().manual_seed(0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_str_is_torch_text_with_device(name):
    c = CASES[name]()
    t = c.to(DEV)
    lazyx.metrics.clear_counters()
    assert str(t) == with_device(str(c))
    assert repr(t) == str(t)
    assert fallbacks() == []


def test_suffixes():
    cases = [
        (torch.tensor([1, 2, 3], dtype=torch.int32),
         "tensor([1, 2, 3], device='lazy:0', dtype=torch.int32)"),
        (torch.tensor([0.5, 2.0], dtype=torch.float64),
         "tensor([0.5000, 2.0000], device='lazy:0', dtype=torch.float64)"),
        (torch.tensor([0.5, 2.0], dtype=torch.bfloat16),
         "tensor([0.5000, 2.0000], device='lazy:0', dtype=torch.bfloat16)"),
        (torch.tensor([]), "tensor([], device='lazy:0')"),
        (torch.zeros(2, 0, dtype=torch.int64),
         "tensor([], device='lazy:0', size=(2, 0), dtype=torch.int64)"),
        (torch.tensor(True), "tensor(True, device='lazy:0')"),
    ]
    lazyx.metrics.clear_counters()
    for c, want in cases:
        assert str(c.to(DEV)) == want
    assert fallbacks() == []


def test_autograd_suffixes():
    w = torch.tensor([1.0, -2.0]).to(DEV).requires_grad_()
    lazyx.metrics.clear_counters()
    assert str(w) == "tensor([ 1., -2.], device='lazy:0', requires_grad=True)"
    y = w * 2
    assert str(y) == "tensor([ 2., -4.], device='lazy:0', grad_fn=<MulBackward0>)"
    p = torch.nn.Parameter(torch.ones(2).to(DEV))
    assert repr(p) == ("Parameter containing:\n"
                       "tensor([1., 1.], device='lazy:0', requires_grad=True)")
    assert fallbacks() == []
    assert w.grad is None and y.grad_fn is not None  # printing left the graph alone


@pytest.mark.parametrize("name", sorted(CASES) + ["view", "pending", "grad_fn"])
def test_same_text_as_torch_without_the_hook(name):
    if name == "view":
        t = torch.arange(24.0).reshape(4, 6).to(DEV).t()[1:, ::2]  # non-contiguous
    elif name == "pending":
        t = torch.ones(3, 4).to(DEV) * 0.5 + 1  # traced, not yet run
    elif name == "grad_fn":
        t = torch.randn(3, 3).to(DEV).requires_grad_().exp()
    else:
        t = CASES[name]().to(DEV)
    lazyx.metrics.clear_counters()
    got = str(t)
    assert fallbacks() == []
    assert got == unhooked_str(t)


def test_print_syncs_only_the_printed_tensor(capsys):
    a = torch.ones(4).to(DEV) + 1
    b = torch.ones(4).to(DEV) * 3
    lazyx.mark_step()
    x = a * 2
    y = b - 1
    step = lazyx.last_step().step
    print(x)
    assert capsys.readouterr().out == "tensor([4., 4., 4., 4.], device='lazy:0')\n"
    assert not lazyx.is_pending(x) and lazyx.is_pending(y)
    assert lazyx.last_step().step == step + 1 and lazyx.last_step().kind == "read"  # one sync
    print(x)  # already materialized: no sync at all
    assert lazyx.last_step().step == step + 1
    assert fallbacks() == []
    lazyx.mark_step()
    assert y.cpu().tolist() == [2.0] * 4

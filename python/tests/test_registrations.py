"""The registration audit: every kernel lazyx registers fits the installed torch. Run it after a
torch bump (python -m pytest python/tests/test_registrations.py); importing lazyx already fails,
naming each op, when a kernel's C++ signature no longer matches its schema."""
import pytest
import torch

import lazyx

# Lazy kernels on ops torch decomposes (CompositeImplicitAutograd) replace the decomposition for
# the device; allowed only where no gradient can be lost, each for the reason given.
COMPOSITE_OK = {
    "aten::_to_cpu": "the CPU fallback's own transfer; no gradient",
    "aten::silu_backward": "a backward formula; first-order gradients do not pass through it",
    "aten::mish_backward": "a backward formula; first-order gradients do not pass through it",
    "aten::argsort.stable": "integer output; no gradient",
    "aten::diag.out": "an out= form; autograd does not run out= ops",
    "aten::nanmean.out": "an out= form, registered for AutogradLazy",
    "aten::tensor_split.tensor_indices_or_sections": "registered for AutogradLazy: views of self",
}


def _qualified(name):
    return name if "::" in name else "aten::" + name


def test_every_registered_kernel_names_an_op_of_this_torch():
    names = [_qualified(n) for n in lazyx._C._registered_kernels()]
    assert len(names) > 400
    missing = []
    for full in names:
        base, _, overload = full.partition(".")
        try:
            torch._C._dispatch_find_schema_or_throw(base, overload)
        except RuntimeError:
            missing.append(full)
    assert not missing, f"kernels for ops torch {torch.__version__} does not have: {missing}"


def test_no_kernel_hides_a_decomposition_that_carries_the_gradient():
    names = sorted({_qualified(n) for n in lazyx._C._registered_kernels()})
    hidden = [n for n in names
              if torch._C._dispatch_has_kernel_for_dispatch_key(n, "CompositeImplicitAutograd")
              and n not in COMPOSITE_OK]
    assert not hidden, ("kernels on composite ops, whose gradient comes from the decomposition "
                        f"they replace; register the ops they decompose into: {hidden}")
    stale = [n for n in COMPOSITE_OK if n not in names]
    assert not stale, f"COMPOSITE_OK lists ops lazyx no longer registers: {stale}"


# View ops (a return aliasing an input, not written) that no lazyx kernel and no composite
# covers reach the CPU fallback, which refuses them: on CPU they would return copies. Each is
# here with why the device does not need it; a torch bump that adds one fails this test.
REFUSED_VIEWS = {
    "aten::_values": "sparse", "aten::_indices": "sparse", "aten::_sparse_broadcast_to": "sparse",
    "aten::view_as_real": "complex", "aten::view_as_complex": "complex",
    "aten::_nested_view_from_buffer": "nested", "aten::_nested_get_values": "nested",
    "aten::_nested_view_from_jagged": "nested",
}


def test_every_view_op_is_native_composite_or_refused():
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    refused = set()
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        if not any(r.alias_info is not None and not r.alias_info.is_write for r in s.returns):
            continue
        name = s.name + ("." + s.overload_name if s.overload_name else "")
        try:
            covered = any(has(name, k) for k in
                          ("Lazy", "CompositeImplicitAutograd", "CompositeExplicitAutograd"))
        except RuntimeError:  # a schema the dispatcher does not have (TorchScript builtins)
            continue
        if not covered:
            refused.add(name)
    assert refused <= set(REFUSED_VIEWS), f"view ops without a kernel: {refused - set(REFUSED_VIEWS)}"
    x = torch.zeros(3, 2, device=lazyx.device())
    with pytest.raises(RuntimeError, match=r"\[aten::view_as_real\] is a view op without a lazyx "
                                           r"kernel"):
        torch.ops.aten.view_as_real(x)

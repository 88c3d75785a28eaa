"""Tied parameters survive ``model.to(device)``.

For a device whose tensors cannot take a CPU tensor's place in place (XLA, lazyx), torch's
``Module._apply`` makes a new Parameter for each module that holds a parameter, so a weight
shared by two modules (``lin.weight = emb.weight``) would become two independent parameters on
the device. lazyx wraps ``Module._apply``: parameters that were one object before the move are
one object after it (the first module's new Parameter), as on CPU and CUDA.
"""
import threading

import torch

_state = threading.local()


def _groups(module):
    """Every (module, name) slot of each parameter object, keyed by the object's id."""
    groups = {}
    for m in _all_modules(module):
        for name, p in m._parameters.items():
            if p is not None:
                groups.setdefault(id(p), []).append((m, name))
    return [g for g in groups.values() if len(g) > 1]


def _all_modules(module):
    seen, out, stack = set(), [], [module]
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append(m)
        stack.extend(c for c in m._modules.values() if c is not None)
    return out


def install(device_type):
    orig = torch.nn.Module._apply
    if getattr(orig, "_lazyx_keeps_ties", False):
        return

    def _apply(self, *args, **kwargs):
        if getattr(_state, "depth", 0) > 0:  # only the outermost call re-ties
            return orig(self, *args, **kwargs)
        tied = _groups(self)
        _state.depth = 1
        try:
            out = orig(self, *args, **kwargs)
        finally:
            _state.depth = 0
        for slots in tied:
            m0, n0 = slots[0]
            first = m0._parameters[n0]
            if first is None or first.device.type != device_type:
                continue
            for m, n in slots[1:]:
                m._parameters[n] = first
        return out

    _apply._lazyx_keeps_ties = True
    torch.nn.Module._apply = _apply

"""copy.deepcopy, torch.save and torch.load of lazyx device tensors.

torch 1.13's ``Tensor.__deepcopy__`` clones a lazy tensor on the device when it has no storage
(``torch._C._has_storage``). A lazyx tensor has a c10 storage, but only a zero-byte placeholder
that keeps PyTorch's aliasing checks in line with lazyx's (its values live in the engine), so
the first hook answers "no storage" for lazyx tensors.

Pickling goes through the second hook, a copyreg reducer: it writes what torch writes for a
PyTorch/XLA tensor, through CPU (a numpy array plus dtype, device and requires_grad, which
``torch.load`` turns back into a device tensor), from a detached copy, so a tensor that requires
grad pickles too.
"""
import copyreg

import torch

from . import _C

DEVICE_TYPE = _C.device_type()
_original_has_storage = torch._C._has_storage


def _has_storage(t):
    return _original_has_storage(t) and t.device.type != DEVICE_TYPE


def _reduce_tensor(t):
    if t.device.type != DEVICE_TYPE:
        return torch.Tensor.__reduce_ex__(t, 2)  # unchanged; torch ignores the protocol here
    torch.utils.hooks.warn_if_has_hooks(t)
    c = t.detach().cpu()  # a partial sync of t only
    if c.dtype == torch.bfloat16:  # numpy has no bfloat16; the record keeps the real dtype
        c = c.float()
    return (torch._utils._rebuild_device_tensor_from_numpy,
            (c.numpy(), t.dtype, str(t.device), t.requires_grad))


def install():
    """Idempotent: importing lazyx twice (or reloading it) installs each hook once."""
    if not getattr(torch._C._has_storage, "_lazyx_hook", False):
        _has_storage._lazyx_hook = True
        torch._C._has_storage = _has_storage
    if not getattr(copyreg.dispatch_table.get(torch.Tensor), "_lazyx_hook", False):
        _reduce_tensor._lazyx_hook = True
        copyreg.pickle(torch.Tensor, _reduce_tensor)


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.cpu() if obj.device.type == DEVICE_TYPE else obj
    if isinstance(obj, dict):
        out = obj.copy()  # keeps the mapping type (OrderedDict, defaultdict)
        for k, v in obj.items():
            out[k] = _to_cpu(v)
        if hasattr(obj, "_metadata"):  # state_dict versions, read by load_state_dict
            out._metadata = obj._metadata
        return out
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def save(obj, f, **kwargs):
    """torch.save of `obj` with every device tensor in its dicts, lists and tuples moved to CPU
    first (as torch_xla's xm.save does), so torch.load reads it back without lazyx."""
    torch.save(_to_cpu(obj), f, **kwargs)

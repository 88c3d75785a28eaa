"""copy.deepcopy, torch.save and torch.load of lazyx device tensors.

``Tensor.__deepcopy__`` clones a tensor of the "lazy" device on the device. A lazyx tensor has a
c10 storage, but only a zero-byte placeholder that keeps PyTorch's aliasing checks in line with
lazyx's (its values live in the engine), so the first hook answers "no storage" for lazyx
tensors wherever torch asks.

Pickling goes through the second hook, a copyreg reducer: it writes what torch writes for a
PyTorch/XLA tensor, a CPU copy plus dtype, device and requires_grad
(``torch._utils._rebuild_device_tensor_from_cpu_tensor``, which ``torch.load`` with its default
``weights_only=True`` accepts and turns back into a device tensor), from a detached copy, so a
tensor that requires grad pickles too.
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
    return (torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (c, t.dtype, str(t.device), t.requires_grad))


def install():
    """Idempotent: importing lazyx twice (or reloading it) installs each hook once."""
    if not getattr(torch._C._has_storage, "_lazyx_hook", False):
        _has_storage._lazyx_hook = True
        torch._C._has_storage = _has_storage
    if not getattr(copyreg.dispatch_table.get(torch.Tensor), "_lazyx_hook", False):
        _reduce_tensor._lazyx_hook = True
        copyreg.pickle(torch.Tensor, _reduce_tensor)
    if not getattr(torch.load, "_lazyx_hook", False):
        _load._lazyx_hook = True
        _load._lazyx_original = _original_load
        _load.__doc__ = (_original_load.__doc__ or "") + "\n" + _load.__doc__
        torch.load = _load


def _map_tensors(obj, fn):
    """`obj` with fn applied to every tensor in its dicts, lists and tuples (containers keep their
    types and a state_dict its _metadata)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        out = obj.copy()  # keeps the mapping type (OrderedDict, defaultdict)
        for k, v in obj.items():
            out[k] = _map_tensors(v, fn)
        if hasattr(obj, "_metadata"):  # state_dict versions, read by load_state_dict
            out._metadata = obj._metadata
        return out
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def _to_cpu(obj):
    return _map_tensors(obj, lambda t: t.cpu() if t.device.type == DEVICE_TYPE else t)


def _is_lazyx_location(loc):
    if isinstance(loc, torch.device):
        return loc.type == DEVICE_TYPE
    return isinstance(loc, str) and loc.split(":")[0] == DEVICE_TYPE


def _to_device(obj, device):
    def move(t):
        if t.device == device:
            return t
        moved = t.detach().to(device)
        if isinstance(t, torch.nn.Parameter):
            return torch.nn.Parameter(moved, t.requires_grad)
        return moved.requires_grad_(t.requires_grad) if t.is_floating_point() else moved

    if isinstance(obj, torch.nn.Module):
        return obj.to(device)
    return _map_tensors(obj, move)


_original_load = getattr(torch.load, "_lazyx_original", torch.load)  # a reload finds the hook


def _load(f, map_location=None, *args, **kwargs):
    """torch.load, with map_location=lazyx.device() (or "lazy"): the checkpoint is read onto the
    CPU, then its tensors (in dicts, lists and tuples) or its module move to the device. Storage
    tags cannot name the device: its tensors have no host storage to restore into."""
    if not _is_lazyx_location(map_location):
        return _original_load(f, map_location, *args, **kwargs)
    device = torch.device(map_location)
    return _to_device(_original_load(f, "cpu", *args, **kwargs), device)


def save(obj, f, **kwargs):
    """torch.save of `obj` with every device tensor in its dicts, lists and tuples moved to CPU
    first (as torch_xla's xm.save does), so torch.load reads it back without lazyx."""
    torch.save(_to_cpu(obj), f, **kwargs)

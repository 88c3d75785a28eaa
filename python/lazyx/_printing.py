"""Printing of lazyx device tensors without CPU fallbacks.

torch 1.13's formatter (``torch._tensor_str._tensor_str``) runs ops on the tensor it prints
(``masked_select``, ``ceil``, ``bitwise_and``, slicing for summaries), which lazyx would trace or
send to the CPU fallback one by one. It copies xla/lazy tensors to CPU first, but not
PrivateUse1 ones. The hook below does that for lazyx tensors: one partial sync of the printed
tensor, then torch's own formatting of the CPU copy. Only the data part is formatted from the
copy; ``_str_intern`` still builds the suffixes (device, dtype, grad_fn) from the device tensor,
so the text is what torch prints for it.
"""
import torch._tensor_str as _tensor_str_module

from . import _C

DEVICE_TYPE = _C.device_type()
_original_tensor_str = _tensor_str_module._tensor_str


def _tensor_str(self, indent):
    if self.device.type == DEVICE_TYPE:
        with _C._SyncCause("value read by printing"):
            self = self.cpu()  # torch calls this under no_grad: the copy records no graph
    return _original_tensor_str(self, indent)


def install():
    """Idempotent: importing lazyx twice (or reloading it) installs the hook once."""
    if not getattr(_tensor_str_module._tensor_str, "_lazyx_hook", False):
        _tensor_str._lazyx_hook = True
        _tensor_str_module._tensor_str = _tensor_str

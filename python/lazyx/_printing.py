"""Printing of lazyx device tensors: one partial sync, reported as a read by printing.

torch's formatter (``torch._tensor_str._str_intern``) copies a lazy tensor to CPU before it
runs the ops that format it (``masked_select``, ``ceil``, slicing for summaries), so printing is
one partial sync of the printed tensor; the suffixes (device, dtype, grad_fn) still come from the
device tensor. The hook below only names that sync's cause, "value read by printing", for the
debug output and the step report.
"""
import torch._tensor_str as _tensor_str_module

from . import _C

DEVICE_TYPE = _C.device_type()
_original_str = _tensor_str_module._str


def _str(self, *, tensor_contents=None):
    if self.device.type == DEVICE_TYPE:
        with _C._SyncCause("value read by printing"):
            return _original_str(self, tensor_contents=tensor_contents)
    return _original_str(self, tensor_contents=tensor_contents)


def install():
    """Idempotent: importing lazyx twice (or reloading it) installs the hook once."""
    if not getattr(_tensor_str_module._str, "_lazyx_hook", False):
        _str._lazyx_hook = True
        _tensor_str_module._str = _str

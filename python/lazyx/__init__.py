"""lazyx as a PyTorch device.

    import torch, lazyx
    dev = lazyx.device()            # torch.device("lazy:0")
    x = torch.randn(5, 5).to(dev)
    x += 1; x *= 3
    lazyx.mark_step()               # one program; x's buffer is donated to its new value
    print(lazyx.metrics.metric_data("InputOutputAliasCount"))

Every device tensor wraps a lazyx tensor: ops are recorded, ``mark_step()`` runs all pending
work as one program, value reads (``.item()``, ``.cpu()``, printing) and ``sync(tensors)`` run
only what they need. Ops without a native kernel run on CPU and are counted as ``aten::<op>``
in ``lazyx.metrics``.
"""
import ctypes
import os
import sys

from ._build_info import TORCH_VERSION as _BUILT_FOR, LIBRARY_CANDIDATES as _LIBS

try:
    import torch  # loads libtorch before the extension
except ImportError as e:
    raise ImportError(f"[lazyx] needs torch {_BUILT_FOR}, and this Python ({sys.executable}) "
                      f"cannot import torch ({e}); install it with 'pip install "
                      f"torch=={_BUILT_FOR}' (scripts/install_deps.sh makes .venv with it)") from None


def _minor(v):
    return tuple(v.split("+")[0].split(".")[:2])


if _minor(torch.__version__) != _minor(_BUILT_FOR):
    raise ImportError(f"[lazyx] this lazyx was built for torch {_BUILT_FOR}, but torch "
                      f"{torch.__version__} is installed; install torch=={_BUILT_FOR} or rebuild "
                      "lazyx against the installed torch (scripts/build.sh)")
import torch._lazy.ts_backend as _ts_backend

# lazyx is torch's "lazy" device, as is torch._lazy's TorchScript backend: only one of them can
# register its kernels in a process. Refuse either order with an error that says so (the
# extension's kernels would otherwise fail to load, or be overwritten).
_BOTH = ("torch._lazy's TorchScript backend and lazyx both are torch's 'lazy' device; one "
         "process can use only one of them")
if ("lazyx._C" not in sys.modules  # a reload finds lazyx's own kernels
        and torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "Lazy")):
    raise ImportError("[lazyx] " + _BOTH + ": the TorchScript backend was initialized first.")


def _refuse_ts_backend(*args, **kwargs):
    raise RuntimeError("[torch._lazy.ts_backend.init] " + _BOTH + ": lazyx is imported.")


_ts_backend.init = _refuse_ts_backend


def _load_engine():
    """Loads liblazyx with RTLD_DEEPBIND before the extension links it: the torch wheel's
    libtorch_cpu exports its own oneDNN internals, Sleef, MKL's cblas and Gloo, and without this
    Debian's libdnnl, libsleef, libopenblas and libgloo that the engine links would bind some of
    their own symbols to torch's copies (oneDNN's sgemm then fails with status 3). Deep
    binding makes the engine and its libraries resolve within their own tree first."""
    here = os.path.dirname(os.path.abspath(__file__))
    for folder, name in _LIBS:
        path = os.path.normpath(os.path.join(here, folder, name))
        if os.path.isfile(path):
            return ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_DEEPBIND)
    return None  # the extension's RPATH finds it (the symbols may then interpose)


_ENGINE = _load_engine()

from . import _C
from ._C import LazyxError, StepReport, ParamReport
from . import metrics
from . import _printing
from . import _serialization
from . import dist  # lazyx.dist; registers the torch.distributed backend "lazyx"
from . import _ties
from ._serialization import save
from .buckets import set_shape_buckets, get_shape_buckets, bucket_size, pad_to_bucket
from . import _diagnostics
from ._diagnostics import set_debug, debug_level, allow_sync, sync_allowed, profile

_serialization.install()  # copy.deepcopy, torch.save and torch.load of device tensors
_printing.install()  # print(t) copies t to CPU once instead of falling back op by op
_diagnostics.install()  # syncs name the user's frames, not lazyx's or torch's
_ties.install(_C.device_type())  # model.to(device) keeps tied parameters tied

__all__ = [
    "device", "mark_step", "sync", "set_buffer_donation", "get_buffer_donation", "is_donated",
    "last_step", "memory_stats", "reset_peak_memory_stats", "empty_cache", "tensor_id",
    "graph_text", "graph_dot", "storage_base_id", "is_pending", "metrics", "LazyxError", "StepReport", "ParamReport",
    "backend_name", "set_backend", "program_cache_size", "clear_program_cache",
    "wait_for_background_compiles", "manual_seed", "set_num_threads", "get_num_threads",
    "get_max_threads",
    "save", "set_shape_buckets", "get_shape_buckets", "bucket_size", "pad_to_bucket",
    "set_debug", "debug_level", "allow_sync", "sync_allowed", "profile",
]

DEVICE_TYPE = _C.device_type()  # "lazy": the device type torch keeps for lazy tensor engines


def device(index: int = 0) -> torch.device:
    """The lazyx device (``lazy:0``)."""
    if index != 0:
        raise ValueError("lazyx has one device, index 0")
    return torch.device(DEVICE_TYPE, 0)


def _check(t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != DEVICE_TYPE:
        raise ValueError(f"expected a tensor on the lazyx device ({DEVICE_TYPE}), got one on {t.device}")
    return t


def _list(tensors):
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    return [_check(t) for t in tensors]


def mark_step() -> None:
    """The step barrier: syncs every live tensor, donating what ALIASING.md allows."""
    with _C._SyncCause("user mark_step"):
        _C.mark_step()


def _torch_lazy_mark_step(device: str = "", wait=False):
    """torch._lazy.mark_step while lazyx is torch's lazy device: lazyx's step barrier (torch's
    own code calls it, e.g. torch.testing's wrapper_set_seed on lazy outputs)."""
    mark_step()


torch._lazy.mark_step = _torch_lazy_mark_step


def sync(tensors) -> None:
    """A partial sync of `tensors` (a tensor or a list). Never donates on its own."""
    with _C._SyncCause("partial sync"):
        _C.sync(_list(tensors))


def set_buffer_donation(t: torch.Tensor, should_donate: bool) -> bool:
    """Promise not to read t's current value again; returns whether the flag is now set."""
    return _C.set_buffer_donation(_check(t), bool(should_donate))


def get_buffer_donation(t: torch.Tensor) -> bool:
    return _C.get_buffer_donation(_check(t))


def is_donated(t: torch.Tensor) -> bool:
    return _C.is_donated(_check(t))


def last_step() -> StepReport:
    """The report of the most recent sync (mark_step, sync or value read)."""
    return _C.last_step()


def memory_stats() -> dict:
    """bytes_in_use, peak_bytes, bytes_cached, num_allocs, num_fresh_allocs, num_trimmed_bytes."""
    return _C.memory_stats()


def reset_peak_memory_stats() -> None:
    _C.reset_peak_memory_stats()


def empty_cache() -> None:
    _C.empty_cache()


def tensor_id(t: torch.Tensor) -> int:
    """The lazyx tensor id behind t (in-place ops keep it)."""
    return _C.tensor_id(_check(t))


def storage_base_id(t: torch.Tensor) -> int:
    """The id of the base tensor of t's storage (t itself unless t is a view): the tensor id a
    StepReport names for outputs and donations."""
    return _C.storage_base_id(_check(t))


def is_pending(t: torch.Tensor) -> bool:
    return _C.is_pending(_check(t))


def graph_text(tensors) -> str:
    return _C.graph_text(_list(tensors))


def graph_dot(tensors) -> str:
    return _C.graph_dot(_list(tensors))


backend_name = _C.backend_name
backend_names = _C.backend_names
set_backend = _C.set_backend
program_cache_size = _C.program_cache_size
clear_program_cache = _C.clear_program_cache
wait_for_background_compiles = _C.wait_for_background_compiles
manual_seed = _C.manual_seed
set_num_threads = _C.set_num_threads  # at most get_max_threads(): LAZYX_NUM_THREADS sizes the pool
get_num_threads = _C.get_num_threads
get_max_threads = _C.get_max_threads

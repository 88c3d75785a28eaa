"""Why lazyx compiles and syncs: debug output, strict mode and the timeline.

    lazyx.set_debug(1)                  # or LAZYX_DEBUG=1: a block per compile and per sync
    with lazyx.allow_sync(False):       # any sync but mark_step raises LazyxError
        train_step()
    with lazyx.profile("trace.json"):   # Chrome trace-event JSON (Perfetto, chrome://tracing)
        train_step()

Syncs triggered from Python carry the user's frames: the innermost frames outside the lazyx
package and torch (up to ``LAZYX_DEBUG_MAX_FRAMES``, default 8).
"""
import os

import torch

from . import _C


def set_debug(level: int) -> None:
    """0 quiet; 1 a short block for every compile and every sync other than mark_step (cause,
    frames, graph, why it compiled); 2 also every step report. Overrides LAZYX_DEBUG."""
    _C.set_debug(int(level))


def debug_level() -> int:
    return _C.debug_level()


class allow_sync:
    """``allow_sync(False)`` makes any sync other than mark_step (a value read, a partial sync, a
    CPU fallback op that needs a value) raise LazyxError naming its cause and frames.
    Called alone it sets the mode for the process; as a context manager it restores the
    previous mode on exit."""

    def __init__(self, allowed: bool = True):
        self._previous = _C.sync_allowed()
        _C.allow_sync(bool(allowed))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _C.allow_sync(self._previous)
        return False


def sync_allowed() -> bool:
    return _C.sync_allowed()


class profile:
    """``with lazyx.profile("trace.json"):`` records a timeline (tracing, each sync and its
    cause, compiles, every kernel and GEMM call with its thread, CPU fallback ops, host
    transfers) and writes it as Chrome trace-event JSON when the block ends."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __enter__(self):
        _C.profile_begin(self.path)
        return self

    def __exit__(self, *exc):
        _C.profile_end()
        return False


def profile_begin(path) -> None:
    _C.profile_begin(os.fspath(path))


def profile_end() -> None:
    _C.profile_end()


def cause(what: str):
    """A context manager naming why the syncs inside it happen (shown with the caller's frames
    by debug output, strict-mode errors and the timeline)."""
    return _C._SyncCause(str(what))


def install():
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [here + os.sep, os.path.dirname(os.path.abspath(torch.__file__)) + os.sep]
    _C._set_skipped_folders(folders)

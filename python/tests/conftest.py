"""Finds the built package: $LAZYX_PYTHONPATH, else the newest <repo>/build*/python holding one."""
import glob
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(os.path.dirname(_here))


def _built_package_dirs():
    """$LAZYX_PYTHONPATH, else the build folders holding a built lazyx, newest first."""
    env = os.environ.get("LAZYX_PYTHONPATH")
    if env:
        return [env]
    found = []
    for b in sorted(glob.glob(os.path.join(_root, "build*", "python"))):
        so = glob.glob(os.path.join(b, "lazyx", "_C*.so"))
        if so:
            found.append((max(os.path.getmtime(f) for f in so), b))
    return [b for _, b in sorted(found, reverse=True)]


# $LAZYX_PYTHONPATH wins over an installed copy (cmake --install), so test.sh tests its build.
if os.environ.get("LAZYX_PYTHONPATH"):
    sys.path.insert(0, os.environ["LAZYX_PYTHONPATH"])
else:
    try:
        import lazyx  # noqa: F401  (already importable through PYTHONPATH or installed)
    except ImportError:
        for c in _built_package_dirs()[:1]:
            sys.path.insert(0, c)

import pytest  # noqa: E402
import torch  # noqa: E402
import lazyx  # noqa: E402


@pytest.fixture
def dev():
    return lazyx.device()


@pytest.fixture(autouse=True)
def _clean():
    # Each test starts from a step barrier with clean metrics and default donation settings.
    os.environ.pop("LAZYX_ENABLE_PARAM_ALIASING", None)
    lazyx.mark_step()
    lazyx.clear_program_cache()  # metrics like InputOutputAliasCount are recorded per compile
    lazyx.metrics.clear_all()
    yield
    os.environ.pop("LAZYX_ENABLE_PARAM_ALIASING", None)

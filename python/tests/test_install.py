"""`cmake --install` of the build these tests import gives a package that works from the prefix."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import lazyx

# <build>/python/lazyx (abspath, not realpath: the build links the .py files to the sources).
PACKAGE_DIR = os.path.dirname(os.path.abspath(lazyx.__file__))
BUILD_DIR = os.path.dirname(os.path.dirname(PACKAGE_DIR))

SEED = textwrap.dedent("""
    import os, sys
    import torch, lazyx
    dev = lazyx.device()
    x = torch.randn(5, 5).to(dev)
    x += 1
    x *= 3
    lazyx.mark_step()
    print(lazyx.metrics.metric_data("InputOutputAliasCount"))
    print(torch.arange(3).to(dev))
    print(os.path.abspath(lazyx.__file__))
    libs = {l.split()[-1] for l in open("/proc/self/maps") if "liblazyx" in l}
    print(";".join(sorted(libs)))
""")


def cache_value(name):
    with open(os.path.join(BUILD_DIR, "CMakeCache.txt")) as f:
        m = re.search(rf"^{name}:\w+=(.*)$", f.read(), re.M)
    return m.group(1) if m else None


def test_cmake_install_into_a_prefix(tmp_path):
    if not os.path.isfile(os.path.join(BUILD_DIR, "CMakeCache.txt")):
        pytest.skip(f"lazyx was imported from {PACKAGE_DIR}, which is not in a CMake build tree "
                    f"({BUILD_DIR} has no CMakeCache.txt), so there is no build to install")
    py_dir = cache_value("LAZYX_PYTHON_INSTALL_DIR")
    assert py_dir, f"{BUILD_DIR} was configured before the install rules: re-run cmake on it"
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    site = os.path.join(prefix, py_dir)  # a relative dir is under the prefix
    assert os.path.isfile(os.path.join(site, "lazyx", "__init__.py"))
    assert not os.path.islink(os.path.join(site, "lazyx", "__init__.py"))

    # Only the prefix: no build tree, no library path, no sources on the import path.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LAZYX_PYTHONPATH")}
    env["PYTHONPATH"] = site
    r = subprocess.run([sys.executable, "-c", SEED], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    alias, printed, init, libs = r.stdout.splitlines()
    assert alias == "(1, 1.0, [1.0])"
    assert printed == "tensor([0, 1, 2], device='lazy:0')"
    assert init == os.path.join(site, "lazyx", "__init__.py")
    libs = libs.split(";")
    assert libs != [""] and all(p.startswith(str(prefix) + os.sep) for p in libs), libs

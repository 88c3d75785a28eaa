"""Bad set-ups fail at import with one line that names the fix: a lazyx built for another torch
minor, and a Python without torch."""
import os
import shutil
import subprocess
import sys

import lazyx

PACKAGE_DIR = os.path.dirname(os.path.abspath(lazyx.__file__))


def _copy_package(tmp_path, torch_version):
    """The built package in tmp_path/lazyx, its _build_info saying it was built for torch_version."""
    dst = tmp_path / "lazyx"
    shutil.copytree(PACKAGE_DIR, dst, symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))
    info = (dst / "_build_info.py").read_text()
    lines = [f'TORCH_VERSION = "{torch_version}"' if ln.startswith("TORCH_VERSION") else ln
             for ln in info.splitlines()]
    (dst / "_build_info.py").write_text("\n".join(lines) + "\n")
    return tmp_path


def _import(path, python=sys.executable, extra_env=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LAZYX_PYTHONPATH")}
    env["PYTHONPATH"] = str(path)
    env.update(extra_env or {})
    return subprocess.run([python, "-c", "import lazyx"], capture_output=True, text=True, env=env,
                          cwd=path, timeout=300)


def test_another_torch_minor_is_refused_in_one_line(tmp_path):
    import torch
    r = _import(_copy_package(tmp_path, "2.0.1"))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: [lazyx] this lazyx was built for torch 2.0.1, but torch "
                           f"{torch.__version__} is installed"), r.stderr
    assert "scripts/build.sh" in last


def test_the_same_minor_imports(tmp_path):
    import torch
    same = ".".join(torch.__version__.split("+")[0].split(".")[:2]) + ".99"
    r = _import(_copy_package(tmp_path, same))
    assert r.returncode == 0, r.stderr


def test_a_python_without_torch_is_told_what_to_install(tmp_path):
    # A directory named torch that cannot be imported stands in for a missing torch.
    fake = tmp_path / "shadow"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    pkg = _copy_package(tmp_path / "pkg", lazyx._build_info.TORCH_VERSION)
    r = _import(pkg, extra_env={"PYTHONPATH": f"{fake}:{pkg}"})
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert f"[lazyx] needs torch {lazyx._build_info.TORCH_VERSION}" in last, r.stderr
    assert "pip install" in last

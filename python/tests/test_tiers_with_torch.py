"""With torch's wheel loaded beside the engine (its own oneDNN internals, Sleef and cblas exported),
lazyx's quick and full tiers still compute bitwise alike, and alike with tiers off: the engine's
libraries resolve their symbols within their own tree (lazyx/__init__.py loads liblazyx with
RTLD_DEEPBIND)."""
import os
import subprocess
import sys
import textwrap

import lazyx

PROGRAM = textwrap.dedent("""
    import sys, torch, lazyx
    dev = lazyx.device()
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(200_000, generator=g) * 3).to(dev)
    y = (torch.rand(200_000, generator=g) + 0.1).to(dev)
    a = torch.randn(96, 80, generator=g).to(dev)
    b = torch.randn(80, 64, generator=g).to(dev)
    w = torch.randn(4, 3, 3, 3, generator=g).to(dev)
    img = torch.randn(2, 3, 16, 16, generator=g).to(dev)
    lazyx.mark_step()

    def program():
        # Sleef's vector math, a row sum, oneDNN's sgemm and convolution, OpenBLAS's dgemm.
        m = (x.exp().tanh() + y.log1p() * x.atan() + torch.atan2(x, y) + x.erf() + y.tan()).sum()
        return [m, a @ b, torch.nn.functional.conv2d(img, w), a.double() @ b.double()]

    first = [t.cpu() for t in program()]
    lazyx.wait_for_background_compiles()
    again = [t.cpu() for t in program()]
    torch.save(first + again, sys.argv[1])
""")


def _run(tmp_path, name, tiered):
    # The package under test (a build's, when the tests import one), no persistent cache.
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
    env = dict(os.environ, LAZYX_CPU_TIERED=tiered, LAZYX_CACHE_DIR="", PYTHONPATH=pkg)
    out = tmp_path / f"{name}.pt"
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    import torch
    return torch.load(out)


def test_quick_and_full_tiers_are_bitwise_equal_beside_torch(tmp_path):
    import torch
    tiered = _run(tmp_path, "tiered", "1")
    full = _run(tmp_path, "full", "0")
    n = len(tiered) // 2
    for quick, upgraded, at_once in zip(tiered[:n], tiered[n:], full[:n]):
        assert torch.equal(quick, upgraded)  # the quick tier, then the full tier swapped in
        assert torch.equal(quick, at_once)  # tiers off: the full tier from the start
    # And the libraries computed the right values: eager's, within rounding.
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(200_000, generator=g) * 3, torch.rand(200_000, generator=g) + 0.1
    a, b = torch.randn(96, 80, generator=g), torch.randn(80, 64, generator=g)
    w, img = torch.randn(4, 3, 3, 3, generator=g), torch.randn(2, 3, 16, 16, generator=g)
    m = (x.exp().tanh() + y.log1p() * x.atan() + torch.atan2(x, y) + x.erf() + y.tan()).sum()
    torch.testing.assert_close(tiered[0], m, rtol=1e-4, atol=1e-2)
    torch.testing.assert_close(tiered[1], a @ b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tiered[2], torch.nn.functional.conv2d(img, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tiered[3], a.double() @ b.double(), rtol=1e-12, atol=1e-12)

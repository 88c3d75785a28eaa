"""Why the PyTorch device compiles and syncs: causes with the user's frames (item, .cpu(),
printing, a CPU fallback op, a partial sync, mark_step), recompile explanations, strict mode
and the timeline."""
import json
import os
import re

import pytest
import torch

import lazyx

DEV = lazyx.device()
HERE = os.path.basename(__file__)


def line_of(marker):
    """The line number of the line of this file holding `marker` (once)."""
    with open(__file__) as f:
        lines = [i + 1 for i, l in enumerate(f) if marker in l and "line_of(" not in l]
    assert len(lines) == 1, marker
    return lines[0]


@pytest.fixture
def debug_file(tmp_path, monkeypatch):
    path = tmp_path / "debug.txt"
    monkeypatch.setenv("LAZYX_DEBUG_FILE", str(path))
    lazyx.set_debug(1)
    yield path
    lazyx.set_debug(0)


def blocks(path):
    """The debug blocks of the file: (header, body lines)."""
    text = path.read_text() if path.exists() else ""
    return [b for b in re.split(r"(?m)^(?=\[lazyx\] )", text) if b]


def test_each_python_sync_names_its_cause_and_frame(debug_file):
    x = torch.arange(12.).view(3, 4).to(DEV)
    lazyx.mark_step()
    y = x * 2
    y.sum().item()  # marker: item
    (y + 1).cpu()  # marker: cpu
    print(y - 1)  # marker: print
    torch.geqrf(y * 3)  # marker: fallback
    lazyx.sync(y * 5)  # marker: sync
    z = (x - 3).abs()  # a new graph, pending until the step (the reads above kept y itself)
    lazyx.mark_step()  # marker: mark_step
    got = blocks(debug_file)
    want = [("value read by item()", "item"), ("value read by .cpu()", "cpu"),
            ("value read by printing", "print"),
            ("CPU fallback aten::geqrf needed the value", "fallback"),
            ("partial sync", "sync")]
    for cause, marker in want:
        match = [b for b in got if b.split("\n")[0].endswith(": " + cause)]
        assert match, (cause, got)
        frame = f"{HERE}:{line_of('# marker: ' + marker)} in test_each_python_sync"
        assert f"  at " in match[0] and frame in match[0], (cause, match[0])
        assert "/lazyx/" not in match[0] and "torch/" not in match[0], match[0]
        assert re.search(r"graph [0-9a-f]{16} ", match[0]), match[0]
    # z was still pending: mark_step compiles it, and says where.
    (b,) = [b for b in got if b.split("\n")[0].endswith(": user mark_step")]
    assert f"{HERE}:{line_of('# marker: mark_step')} in test_each_python_sync" in b, b
    assert all("compiled because: " in b for b in got if "compiled in" in b)


def test_mark_step_that_compiles_prints_its_frame(debug_file):
    x = torch.ones(5, 7).to(DEV)
    lazyx.mark_step()
    x.mul_(3).add_(1)
    lazyx.mark_step()  # marker: compile
    (b,) = blocks(debug_file)
    assert ": user mark_step\n" in b
    assert "compiled because: first compile at this site" in b
    assert "1 inputs, 1 outputs, 1 donated" in b
    assert f"{HERE}:{line_of('# marker: compile')}" in b


def test_frames_are_limited_by_max_frames(debug_file, monkeypatch):
    monkeypatch.setenv("LAZYX_DEBUG_MAX_FRAMES", "1")

    def inner(t):
        return t.sum().item()

    inner(torch.ones(3).to(DEV) * 2)
    (b,) = blocks(debug_file)
    assert b.count(HERE) == 1 and "in inner" in b, b
    monkeypatch.setenv("LAZYX_DEBUG_MAX_FRAMES", "many")
    with pytest.raises(lazyx.LazyxError, match="LAZYX_DEBUG_MAX_FRAMES"):
        (torch.ones(3).to(DEV) * 3).sum().item()


def test_set_debug_rejects_bad_levels():
    with pytest.raises(lazyx.LazyxError, match=r"\[set_debug\] level 3"):
        lazyx.set_debug(3)
    assert lazyx.debug_level() == 0


def test_recompile_explains_new_input_shape():
    model = torch.nn.Linear(8, 4).to(DEV)

    def step(batch):
        with lazyx._diagnostics.cause("eval step"):
            out = model(torch.ones(batch, 8).to(DEV)).sum()
            lazyx.sync(out)
        return lazyx.last_step()

    first = step(64)
    assert first.cause == "eval step" and first.compile_reason == ""
    second = step(32)
    assert not second.cache_hit
    assert re.search(r"input \d shape \[32, 8\] vs \[64, 8\]", second.compile_reason), \
        second.compile_reason
    assert lazyx.metrics.counter_value("CompileCause:input_shape") == 1
    assert step(32).cache_hit


def test_strict_mode_raises_at_the_stray_item():
    model = torch.nn.Linear(4, 1).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 4).to(DEV)
    losses = []
    with pytest.raises(lazyx.LazyxError) as err:
        with lazyx.allow_sync(False):
            for _ in range(3):
                opt.zero_grad()
                loss = model(x).pow(2).mean()
                loss.backward()
                opt.step()
                losses.append(loss.item())  # marker: stray item
                lazyx.mark_step()  # allowed
    msg = str(err.value)
    assert "value read by item()" in msg and "allow_sync(false)" in msg, msg
    assert f"at {__file__}:{line_of('# marker: stray item')} in test_strict_mode" in msg, msg
    assert losses == [] and lazyx.sync_allowed()  # the context manager restored the mode
    lazyx.mark_step()
    assert loss.item() >= 0  # no work left: not a sync
    assert (loss * 2).item() >= 0  # allowed again
    assert lazyx.metrics.counter_value("StrictModeRefusedSync") == 1


def test_allow_sync_alone_sets_the_mode():
    x = torch.ones(3).to(DEV) * 4
    lazyx.allow_sync(False)
    try:
        assert not lazyx.sync_allowed()
        with pytest.raises(lazyx.LazyxError, match="partial sync"):
            lazyx.sync(x)
        with pytest.raises(lazyx.LazyxError, match=r"value read by \.cpu\(\)"):
            x.cpu()
        assert lazyx.is_pending(x)
    finally:
        lazyx.allow_sync(True)
    assert x.cpu().tolist() == [4., 4., 4.]


def test_profile_is_chrome_trace_json(tmp_path):
    path = tmp_path / "trace.json"
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(),
                                torch.nn.Linear(96, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with lazyx.profile(path):
        for _ in range(3):
            xb = torch.randn(128, 64).to(DEV)
            opt.zero_grad()
            loss = model(xb).pow(2).mean()
            loss.backward()
            opt.step()
            lazyx.mark_step()
        loss.item()
        torch.geqrf(torch.ones(1, 5).to(DEV) * 2)
    assert not lazyx._C.profiling()
    trace = json.loads(path.read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in events}
    for want in ["tracing", "sync: user mark_step", "compile", "execute", "to_device",
                 "aten::geqrf", "sync: CPU fallback aten::geqrf needed the value"]:
        assert want in names, (want, sorted(names))
    assert any(n.startswith("kernel ") for n in names), sorted(names)
    assert any(n.startswith("gemm ") for n in names), sorted(names)
    for e in events:
        assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["tid"], int)
    syncs = [e for e in events if e["cat"] == "sync"]
    assert all("cause" in e["args"] and "graph" in e["args"] for e in syncs)
    marks = [e for e in syncs if e["args"]["cause"] == "user mark_step"]
    # zero_grad() sets grads to None (torch 2.x's default), so every step is the first one's graph.
    assert [e["args"]["cache_hit"] for e in marks[:3]] == [False, True, True]
    assert any(HERE in f for e in marks for f in e["args"]["frames"])
    with pytest.raises(lazyx.LazyxError, match="no profile"):
        lazyx._C.profile_end()


def test_lazyx_debug_env_prints_to_stderr():
    import subprocess
    import sys
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
    code = ("import sys; sys.path.insert(0, sys.argv[1])\n"
            "import torch, lazyx\n"
            "x = torch.ones(3).to(lazyx.device())\n"
            "def read(t):\n"
            "    return t.sum().item()\n"
            "read(x * 2)\n")
    env = dict(os.environ, LAZYX_DEBUG="1")
    env.pop("LAZYX_DEBUG_FILE", None)
    r = subprocess.run([sys.executable, "-c", code, pkg], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert ": value read by item()\n" in r.stderr, r.stderr
    assert "  at <string>:5 in read\n     <string>:6 in <module>\n" in r.stderr, r.stderr

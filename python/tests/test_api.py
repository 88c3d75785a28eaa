"""The Python API: steps, donation flags, reports, memory, inspection, metrics and errors."""
import os
import subprocess
import sys

import pytest
import torch

import lazyx

DEV = lazyx.device()


def test_device():
    assert DEV == torch.device("lazy", 0)
    assert str(DEV) == "lazy:0"
    t = torch.ones(2, device=DEV)
    assert t.device == DEV and t.device.type == lazyx.DEVICE_TYPE == "lazy"


def test_mark_step_and_sync():
    x = torch.ones(3).to(DEV)
    y = x * 2
    assert lazyx.is_pending(y)
    lazyx.sync([y])
    assert not lazyx.is_pending(y)
    z = y + 1
    lazyx.sync(z)  # a single tensor works too
    assert lazyx.last_step().kind == "sync"
    w = z * 3
    lazyx.mark_step()
    rep = lazyx.last_step()
    assert rep.kind == "mark_step" and rep.ran_program
    assert w.cpu().tolist() == [9.0, 9.0, 9.0]


def test_step_report_fields():
    x = torch.ones(4, 4).to(DEV)
    x.mul_(2)
    lazyx.mark_step()
    rep = lazyx.last_step()
    assert isinstance(rep, lazyx.StepReport)
    for field in ["kind", "step", "graph_hash", "ran_program", "cache_hit", "num_nodes",
                  "num_parameters", "num_scalars", "num_outputs", "num_donated", "donated_bytes",
                  "params", "compile_ms", "execute_ms", "bytes_allocated", "backend"]:
        assert hasattr(rep, field), field
    assert rep.num_parameters == 1 and rep.num_donated == 1 and rep.donated_bytes == 64
    p = rep.params[0]
    assert p.donated and p.bytes == 64 and list(p.shape) == [4, 4] and p.dtype == "float32"
    assert p.output_tensor_id == lazyx.tensor_id(x)
    assert "donated" in str(rep) and rep.backend == lazyx.backend_name()
    x.mul_(2)
    lazyx.mark_step()
    assert lazyx.last_step().cache_hit  # same graph, new scalar value: no recompile


def test_donation_flags():
    a = torch.randn(3).to(DEV)
    assert lazyx.get_buffer_donation(a) is False
    assert lazyx.set_buffer_donation(a, True) is True
    assert lazyx.get_buffer_donation(a) is True
    assert lazyx.is_donated(a) is False
    b = a + 1
    lazyx.sync([b])
    assert lazyx.is_donated(a) is True
    with pytest.raises(RuntimeError) as info:
        a.cpu()
    assert "donated" in str(info.value)


def test_memory_stats():
    st = lazyx.memory_stats()
    for k in ["bytes_in_use", "peak_bytes", "bytes_cached", "num_allocs", "num_fresh_allocs"]:
        assert isinstance(st[k], int)
    before = lazyx.memory_stats()["bytes_in_use"]
    x = torch.ones(256, 256).to(DEV)
    assert lazyx.memory_stats()["bytes_in_use"] >= before + 256 * 256 * 4
    del x
    lazyx.reset_peak_memory_stats()
    st = lazyx.memory_stats()
    assert st["peak_bytes"] == st["bytes_in_use"]


def test_tensor_id_and_graphs():
    x = torch.ones(2, 2).to(DEV)
    i = lazyx.tensor_id(x)
    x.add_(1)
    x[0] *= 2
    assert lazyx.tensor_id(x) == i
    assert lazyx.tensor_id(x.detach()) == i  # detach shares the lazyx tensor
    y = (x * 3).relu()
    text = lazyx.graph_text([y])
    assert "relu" in text and "mul" in text
    dot = lazyx.graph_dot([y])
    assert dot.startswith("digraph")
    assert lazyx.tensor_id(y) != i
    # Views of temporaries: the dump builds their gather nodes and keeps them while it prints.
    z = torch.ones(4, 3).to(DEV)
    lazyx.mark_step()
    text = lazyx.graph_text([z.sum(0, keepdim=True).view(3), (z * 2).t()])
    assert "sum" in text and "ROOT 1" in text
    assert "sum" in lazyx.graph_dot([z.sum(0, keepdim=True).view(3)])


def test_metrics_api():
    m = lazyx.metrics
    m.clear_all()
    assert m.metric_data("InputOutputAliasCount") is None
    assert m.counter_value("aten::no_such_op") is None
    x = torch.ones(3).to(DEV)
    x += 1
    lazyx.mark_step()
    assert "InputOutputAliasCount" in m.metric_names()
    total, acc, samples = m.metric_data("InputOutputAliasCount")
    assert total == 1 and acc == 1 and len(samples) == 1
    torch.geqrf(x.view(1, 3))  # no native kernel: runs on CPU
    assert m.counter_value("aten::geqrf") == 1 and "aten::geqrf" in m.counter_names()
    assert m.fallback_counters()["aten::geqrf"] == 1
    report = m.metrics_report()
    assert "InputOutputAliasCount" in report and "aten::geqrf" in report
    m.clear_counters()
    assert m.counter_value("aten::geqrf") is None
    assert m.metric_data("InputOutputAliasCount") is not None
    m.clear_metrics()
    assert m.metric_data("InputOutputAliasCount") is None


def test_engine_errors_are_python_exceptions():
    a, b = torch.ones(2, 3).to(DEV), torch.ones(4, 5).to(DEV)
    with pytest.raises(RuntimeError, match=r"\[mm\].*cannot be multiplied"):
        torch.mm(a, b)
    with pytest.raises(ValueError):
        lazyx.sync([torch.ones(2)])  # a CPU tensor
    with pytest.raises(RuntimeError, match="index"):
        idx = torch.tensor([5]).to(DEV)
        torch.ones(3).to(DEV).index_select(0, idx).cpu()


def test_torch_lazy_ts_backend_is_refused_in_both_orders():
    # lazyx and torch._lazy's TorchScript backend are both torch's "lazy" device.
    import torch._lazy.ts_backend
    with pytest.raises(RuntimeError, match="one process can use only one of them"):
        torch._lazy.ts_backend.init()
    x = torch.ones(3).to(DEV) * 2  # lazyx's kernels are untouched
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    code = ("import sys, torch, torch._lazy.ts_backend\n"
            "torch._lazy.ts_backend.init()\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "try:\n"
            "    import lazyx\n"
            "except ImportError as e:\n"
            "    print('refused:', e)\n")
    pkg = os.path.dirname(os.path.dirname(lazyx.__file__))
    out = subprocess.run([sys.executable, "-c", code, pkg], capture_output=True, text=True,
                         timeout=120)
    assert "refused: [lazyx]" in out.stdout and "initialized first" in out.stdout, out


def test_backward_runs_on_the_calling_thread():
    # torch runs a lazy device's backward on the thread that calls backward(), with no handoff
    # to a device thread and back (which cost 20-130 us per backward() on a busy machine).
    import threading
    w = torch.ones(3, device=DEV, requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(threading.get_ident()))
    (w * 2).sum().backward()
    assert seen == [threading.get_ident()]
    assert w.grad.cpu().tolist() == [2.0, 2.0, 2.0]


def test_set_num_threads_caps_threads_and_keeps_results():
    """Like torch.set_num_threads, up to the pool's size; the same training steps give the same
    bits at every count, since the pool's size alone fixes how work is split."""
    top = lazyx.get_max_threads()
    assert lazyx.get_num_threads() == top >= 1
    for bad in (0, top + 1):
        with pytest.raises(lazyx.LazyxError, match=r"\[set_num_threads\]"):
            lazyx.set_num_threads(bad)
    assert lazyx.get_num_threads() == top

    def step(threads):
        """Two SGD steps of a CNN large enough that its loops and convolutions run in chunks."""
        lazyx.set_num_threads(threads)
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.GELU(),
            torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.Flatten(),
            torch.nn.Linear(16 * 16 * 16, 10)).to(DEV)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(64, 3, 16, 16).to(DEV)
        y = torch.randint(0, 10, (64,)).to(DEV)
        for _ in range(2):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            lazyx.mark_step()
        return loss.item(), [p.cpu() for p in model.parameters()]

    try:
        loss1, params1 = step(1)
        assert lazyx.get_num_threads() == 1
        loss2, params2 = step(top)
    finally:
        lazyx.set_num_threads(top)
    assert loss1 == loss2
    for a, b in zip(params1, params2):
        assert torch.equal(a, b)


def test_default_threads_follow_the_affinity_mask():
    """A process pinned to one core gets a one-thread pool by default; LAZYX_NUM_THREADS wins."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to pin to one")
    code = "import sys; sys.path.insert(0, sys.argv[1]); import lazyx; print(lazyx.get_max_threads())"
    pkg = os.path.dirname(os.path.dirname(lazyx.__file__))
    env = dict(os.environ)
    env.pop("LAZYX_NUM_THREADS", None)

    def pool_size():
        return subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code, pkg], env=env,
                              check=True, capture_output=True, text=True, timeout=120).stdout
    assert pool_size().strip() == "1"
    env["LAZYX_NUM_THREADS"] = "3"
    assert pool_size().strip() == "3"

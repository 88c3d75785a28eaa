"""lazyx.dist and the torch.distributed backend "lazyx": ranks are subprocesses running this file
(LAZYX_NUM_THREADS=1 each) that share a file store; each checks its results against NumPy, CPU
eager training on the full batch, or DDP on CPU over torch's own Gloo backend."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

HERE = os.path.abspath(__file__)


def _launch(case, world, env=None, limit=60):
    """Runs `case` on `world` ranks; returns (exit codes, stderr texts)."""
    import lazyx
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
    store = tempfile.mkdtemp(prefix="lazyx_pytest_dist_")
    base = dict(os.environ, PYTHONPATH=pkg, LAZYX_NUM_THREADS="1",
                LAZYX_DIST_STORE="file://" + store, WORLD_SIZE=str(world),
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    base.update(env or {})
    procs = []
    for r in range(world):
        e = dict(base, RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, HERE, case], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    deadline = time.time() + limit
    codes, errs = [], []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err += "\n(killed: still running at the test's limit)"
        codes.append(p.returncode)
        errs.append(err)
    return codes, errs


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ok(codes, errs):
    assert codes == [0] * len(codes), "\n".join(f"rank {r}: {e}" for r, e in enumerate(errs))


# ---- checks run inside the ranks -------------------------------------------------------------

def _inputs(rank, world):
    x = (np.arange(world * 6, dtype=np.float32).reshape(world * 2, 3) + 1) * (rank + 1) * 0.5 - rank
    y = 1.0 / (np.arange(5, dtype=np.float64) + 1 + rank) + rank
    z = (np.arange(4, dtype=np.int64) * 7 + rank * 3) % 5 - 2
    return x, y, z


def case_collectives(rank, world):
    import torch
    import torch.distributed as dist
    import lazyx
    import lazyx.dist as ld
    dev = lazyx.device()
    xs, ys, zs = zip(*[_inputs(r, world) for r in range(world)])
    X, Y, Z = np.stack(xs), np.stack(ys), np.stack(zs)
    x, y, z = (torch.from_numpy(a).to(dev) for a in _inputs(rank, world))
    # lazyx.dist: every collective recorded, then one program.
    s = [x * 1, y + 0, z.clone()]
    ld.all_reduce(s)  # in place, three dtypes
    mean = ld.all_reduce(x * 1, op="mean", scale=3.0)
    mx, mn = ld.all_reduce(x, op="max"), ld.all_reduce(z, op="min")
    g = ld.all_gather(x)
    rs = ld.reduce_scatter(x, scale=0.5)
    b = ld.broadcast(y, src=world - 1)
    lazyx.mark_step()
    np.testing.assert_allclose(s[0].cpu().numpy(), X.sum(0), rtol=1e-6)
    np.testing.assert_allclose(s[1].cpu().numpy(), Y.sum(0), rtol=1e-12)
    np.testing.assert_array_equal(s[2].cpu().numpy(), Z.sum(0))
    np.testing.assert_allclose(mean.cpu().numpy(), 3.0 * X.mean(0), rtol=1e-6)
    np.testing.assert_array_equal(mx.cpu().numpy(), X.max(0))
    np.testing.assert_array_equal(mn.cpu().numpy(), Z.min(0))
    np.testing.assert_array_equal(g.cpu().numpy(), np.concatenate(xs))
    np.testing.assert_allclose(rs.cpu().numpy(), 0.5 * X.sum(0)[2 * rank:2 * rank + 2], rtol=1e-6)
    np.testing.assert_array_equal(b.cpu().numpy(), ys[world - 1])

    # torch.distributed on the "lazyx" backend, device and CPU tensors.
    dist.init_process_group("lazyx")
    assert dist.get_rank() == rank and dist.get_world_size() == world
    t = x.clone()
    dist.all_reduce(t)
    tmax = x.clone()
    dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
    outs = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(outs, x)
    big = torch.empty(world * x.shape[0], 3, device=dev)
    dist._all_gather_base(big, x)
    rso = torch.empty(2, 3, device=dev)
    dist.reduce_scatter(rso, list(x.split(2)))
    bt = y.clone()
    dist.broadcast(bt, src=0)
    cpu = torch.from_numpy(_inputs(rank, world)[0].copy())
    dist.all_reduce(cpu)  # runs at once through Gloo
    works = [dist.all_reduce(x.clone(), async_op=True)]
    lazyx.mark_step()
    assert all(w.is_completed() for w in works)
    np.testing.assert_allclose(t.cpu().numpy(), X.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(tmax.cpu().numpy(), X.max(0))
    for r in range(world):
        np.testing.assert_array_equal(outs[r].cpu().numpy(), xs[r])
    np.testing.assert_array_equal(big.cpu().numpy(), np.concatenate(xs))
    np.testing.assert_allclose(rso.cpu().numpy(), X.sum(0)[2 * rank:2 * rank + 2], rtol=1e-6)
    np.testing.assert_array_equal(bt.cpu().numpy(), ys[0])
    np.testing.assert_allclose(cpu.numpy(), X.sum(0), rtol=1e-6)
    dist.destroy_process_group()


def _model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _batch(torch, step, world, rows):
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(world * rows, 16, generator=gen)
    return x, torch.randint(0, 4, (world * rows,), generator=gen)


def _train(torch, model, dev, world, rank, rows, steps, after_backward=None, step_fn=None):
    import torch.nn.functional as F
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        xb, yb = _batch(torch, s, world, rows)
        lo, hi = rank * rows, (rank + 1) * rows
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb[lo:hi].to(dev)), yb[lo:hi].to(dev)).backward()
        if step_fn:
            step_fn(opt)
        else:
            opt.step()
            after_backward and after_backward()
    return [p.detach().cpu().numpy() for p in model.parameters()]


def _one_step(torch, model, dev, step_fn):
    import lazyx
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = _batch(torch, 0, 1, 8)
    torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
    if step_fn:
        step_fn(opt)
    else:
        opt.step()
        lazyx.mark_step()


def case_training(rank, world):
    """optimizer_step and DDP on lazyx against one process on the full batch (CPU eager), and DDP
    on lazyx against DDP on CPU over torch's Gloo backend: 10 steps each."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    import lazyx
    import lazyx.dist as ld
    dev, steps, rows = lazyx.device(), 10, 8
    want = _train(torch, _model(torch), "cpu", 1, 0, world * rows, steps)

    got_step = _train(torch, _model(torch).to(dev), dev, world, rank, rows, steps,
                      step_fn=ld.optimizer_step)
    assert lazyx.last_step().ran_program

    dist.init_process_group("lazyx")
    ddp = DDP(_model(torch).to(dev))
    got_ddp = _train(torch, ddp, dev, world, rank, rows, steps, after_backward=lazyx.mark_step)
    gloo = dist.new_group(backend="gloo")
    got_gloo = _train(torch, DDP(_model(torch), process_group=gloo), "cpu", world, rank, rows,
                      steps)
    for w, a, b, c in zip(want, got_step, got_ddp, got_gloo):
        np.testing.assert_allclose(a, w, atol=1e-5, rtol=0)
        np.testing.assert_allclose(b, w, atol=1e-5, rtol=0)
        np.testing.assert_allclose(b, c, atol=1e-5, rtol=0)
    # A warm step of each is one program, with no op falling back to CPU.
    for model, fn in ((_model(torch).to(dev), ld.optimizer_step), (ddp, None)):
        _train(torch, model, dev, world, rank, rows, 2, after_backward=lazyx.mark_step, step_fn=fn)
        lazyx.metrics.clear_all()
        _one_step(torch, model, dev, fn)
        report = lazyx.metrics.metrics_report()
        assert lazyx.metrics.counter_value("ExecuteComputation") == 1, report
        assert not lazyx.metrics.fallback_counters()
    # A different start on each rank: DDP broadcasts rank 0's parameters.
    torch.manual_seed(rank)
    m = torch.nn.Linear(4, 4).to(dev)
    DDP(m)
    w = m.weight.detach().cpu()
    gathered = [torch.empty_like(w) for _ in range(world)]
    dist.all_gather(gathered, w)
    for gw in gathered:
        assert torch.equal(gw, gathered[0])
    dist.destroy_process_group()


def case_diverge(rank, world):
    import torch
    import lazyx
    import lazyx.dist as ld
    ld.init()
    x = torch.ones(8).to(lazyx.device())
    r = ld.all_reduce(x)
    if rank == 0:
        r = r * 2  # rank 0 traces one more op
    with pytest.raises(lazyx.LazyxError, match="disagree") as e:
        lazyx.mark_step()
    assert "rank 0 runs graph" in str(e.value) and "rank 1 runs graph" in str(e.value)
    # The group still works for agreeing programs.
    assert ld.all_reduce(torch.tensor([1.0 + rank]).to(lazyx.device())).item() == 3.0
    # One rank syncs a collective the other never runs: it raises within the timeout.
    timeout = float(os.environ["LAZYX_DIST_TIMEOUT"])
    r = ld.all_reduce(x)
    if rank == 1:
        t0 = time.time()
        with pytest.raises(lazyx.LazyxError, match="did not join"):
            r.cpu()
        assert time.time() - t0 < timeout + 2
    else:
        time.sleep(timeout + 1)


def case_killed(rank, world):
    import torch
    import lazyx
    import lazyx.dist as ld
    ld.init()
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    pending = ld.all_reduce(torch.ones(4096).to(lazyx.device()))  # noqa: F841 (live: mark_step runs it)
    t0 = time.time()
    with pytest.raises(lazyx.LazyxError, match=r"\[mark_step\]"):
        lazyx.mark_step()
    assert time.time() - t0 < float(os.environ["LAZYX_DIST_TIMEOUT"]) + 2
    with pytest.raises(lazyx.LazyxError):  # the group is broken: later collectives raise too
        ld.all_reduce(torch.ones(1).to(lazyx.device())).item()


def _spawned(rank, out_dir):
    import torch
    import lazyx
    import lazyx.dist as ld
    v = ld.all_reduce(torch.tensor([rank + 1.0]).to(lazyx.device())).item()
    with open(os.path.join(out_dir, str(rank)), "w") as f:
        f.write(f"{ld.get_world_size()} {os.environ['LAZYX_NUM_THREADS']} {v}")
    if rank == 1:
        raise ValueError("rank 1 fails on purpose")


def _tutorial(rank, world_size, port, out_dir):
    """PyTorch's DDP tutorial (basic use case) with only the device and backend names changed."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.optim as optim
    from torch.nn.parallel import DistributedDataParallel as DDP
    import lazyx
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("lazyx", rank=rank, world_size=world_size)
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 5)).to(lazyx.device())
    before = model[0].weight.detach().cpu().clone()
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10))  # a CPU input, as in the tutorial
    labels = torch.randn(20, 5).to(lazyx.device())
    loss_fn(outputs, labels).backward()
    optimizer.step()
    torch.save((before, model[0].weight.detach().cpu()), os.path.join(out_dir, str(rank)))
    dist.destroy_process_group()


# ---- the tests --------------------------------------------------------------------------------

def case_collectives_and_training(rank, world):
    case_collectives(rank, world)
    case_training(rank, world)


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_match_numpy_and_training_matches_one_process_and_torch_gloo(world):
    """Every collective against NumPy, then DDP and optimizer_step against one process on the
    full batch and against DDP over torch's Gloo (one launch of the ranks for both)."""
    _ok(*_launch("collectives_and_training", world, limit=120))


def test_rank_divergence_raises_within_the_timeout():
    _ok(*_launch("diverge", 2, env={"LAZYX_DIST_TIMEOUT": "3"}))


def test_killed_rank_makes_the_others_raise():
    codes, errs = _launch("killed", 2, env={"LAZYX_DIST_TIMEOUT": "10"})
    assert codes == [0, -signal.SIGKILL], "\n".join(errs)


def test_ddp_tutorial_runs_with_device_and_backend_names_changed(monkeypatch):
    import torch
    import torch.multiprocessing as mp
    monkeypatch.setenv("LAZYX_NUM_THREADS", "1")
    out = tempfile.mkdtemp()
    mp.spawn(_tutorial, args=(2, _free_port(), out), nprocs=2, join=True)
    (b0, w0), (b1, w1) = (torch.load(os.path.join(out, r)) for r in "01")
    assert not torch.equal(b0, b1)  # different starts: DDP broadcast rank 0's
    assert torch.equal(w0, w1) and not torch.equal(w0, b0)


def case_torchrun(rank, world):
    """Under torchrun: the group comes from torchrun's environment and store alone."""
    import torch
    import torch.distributed as dist
    import lazyx
    assert "LAZYX_DIST_STORE" not in os.environ and os.environ.get("TORCHELASTIC_RUN_ID")
    dist.init_process_group("lazyx")
    x = torch.from_numpy(_inputs(rank, world)[0]).to(lazyx.device())
    dist.all_reduce(x)
    lazyx.mark_step()
    X = np.stack([_inputs(r, world)[0] for r in range(world)])
    np.testing.assert_allclose(x.cpu().numpy(), X.sum(0), rtol=1e-6)
    print(f"torchrun rank {rank} of {world} ok", flush=True)
    dist.destroy_process_group()


def test_torchrun_launches_ranks_that_find_each_other():
    """torchrun (Debian's python3-torch) starts the ranks; no lazyx variable is set."""
    import lazyx
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAZYX_DIST", "RANK",
                                                                     "WORLD_SIZE", "MASTER_"))}
    env.update(PYTHONPATH=pkg, LAZYX_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "1",
           "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), HERE, "torchrun"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(2):
        assert f"torchrun rank {r} of 2 ok" in p.stdout, p.stdout + p.stderr


def test_spawn_runs_ranks_and_reports_failures():
    import lazyx.dist as ld
    out = tempfile.mkdtemp()
    with pytest.raises(RuntimeError, match="rank 1 exit code 1"):
        ld.spawn(_spawned, args=(out,), nprocs=2, env={"LAZYX_NUM_THREADS": "1"})
    # Both ranks ran with the group set up from the environment spawn gave them.
    assert sorted(open(os.path.join(out, f)).read() for f in os.listdir(out)) == ["2 1 3.0"] * 2


def test_mul_and_div_out_run_on_the_device():
    """DDP's reducer writes grad / world_size into its bucket with mul.out."""
    import torch
    import lazyx
    dev = lazyx.device()
    a, b = torch.randn(3, 4), torch.randn(3, 4).abs() + 0.5
    bucket = torch.zeros(12, device=dev)
    view = bucket[4:].view(2, 4)
    torch.mul(a[:2].to(dev), 0.5, out=view)
    o = torch.empty(0, device=dev)
    torch.div(a.to(dev), b.to(dev), out=o)  # resizes an empty out
    assert not lazyx.metrics.fallback_counters()
    np.testing.assert_allclose(bucket.cpu()[4:].view(2, 4).numpy(), (a[:2] * 0.5).numpy())
    assert bucket.cpu()[:4].abs().sum().item() == 0
    np.testing.assert_allclose(o.cpu().numpy(), (a / b).numpy(), rtol=1e-6)


def test_bad_input_is_a_clear_error_and_a_world_of_one_works(tmp_path, monkeypatch):
    import torch
    import lazyx
    import lazyx.dist as ld
    for v in ("RANK", "WORLD_SIZE", "LAZYX_DIST_STORE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(v, raising=False)
    x = torch.tensor([1.0, 2.0]).to(lazyx.device())
    with pytest.raises(lazyx.LazyxError, match="not initialized"):
        ld.all_reduce(x)
    with pytest.raises(ValueError, match="expected file:///dir or tcp://host:port"):
        ld.init(0, 1, "ftp://somewhere")
    with pytest.raises(ValueError, match="no store given"):
        ld.init(0, 1)
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(ValueError, match="RANK='zero' is not a whole number"):
        ld.init(world_size=1, store="file://" + str(tmp_path))
    monkeypatch.delenv("RANK")
    assert not ld.is_initialized()
    ld.init(0, 1, "file://" + str(tmp_path))
    try:
        with pytest.raises(ValueError, match="unknown reduction 'prod'"):
            ld.all_reduce(x, op="prod")
        with pytest.raises(lazyx.LazyxError, match="root 3"):
            ld.broadcast(x, src=3)
        # A world of one: every collective is the identity (times the scale).
        np.testing.assert_array_equal(ld.all_reduce(x, op="mean", scale=2.0).cpu().numpy(), [2, 4])
        np.testing.assert_array_equal(ld.all_gather(x).cpu().numpy(), [1, 2])
        assert ld.get_rank() == 0 and ld.get_world_size() == 1
    finally:
        ld.destroy()
    assert not ld.is_initialized()


if __name__ == "__main__":
    globals()["case_" + sys.argv[1]](int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))

"""Data parallel across processes and machines: collectives that are graph ops, run by Gloo.

    import lazyx, lazyx.dist as ld
    ld.init()                          # from RANK, WORLD_SIZE and a store (see init)
    loss.backward()
    ld.optimizer_step(opt)             # all-reduce (mean) the gradients, step, mark_step

Collectives on device tensors are recorded like any op and run inside the next program, in the
same order on every rank; a step's gradients travel packed in one Gloo call per dtype. Every rank
must trace the same ops and sync the same way: ranks about to run different programs with
collectives raise naming both graph hashes, and a rank that stops or dies makes the others raise
within LAZYX_DIST_TIMEOUT seconds (default 60).

``torch.distributed.init_process_group("lazyx")`` gives a torch process group over the same
collectives, so ``DistributedDataParallel`` runs unchanged on ``lazyx.device()``.
"""
import os
import socket
import tempfile
import traceback

import torch
import torch.distributed as _td

from . import _C

_D = _C._dist
_OPS = {"sum": 0, "mean": 1, "max": 2, "min": 3}

__all__ = [
    "init", "destroy", "is_initialized", "get_rank", "get_world_size", "all_reduce", "all_gather",
    "reduce_scatter", "broadcast", "barrier", "reduce_gradients", "optimizer_step", "spawn",
]


def _op(op):
    if op not in _OPS:
        raise ValueError(f"[dist] unknown reduction {op!r}; use 'sum', 'mean', 'max' or 'min'")
    return _OPS[op]


def _env_int(name):
    v = os.environ.get(name)
    if v is None:
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"[dist] {name}={v!r} is not a whole number") from None


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _parse_store(store):
    if store.startswith("file://"):
        return "file", store[len("file://"):], 0
    if store.startswith("tcp://"):
        host, _, port = store[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"[dist] store {store!r}: expected tcp://host:port")
        return "tcp", host.strip("[]"), int(port)
    raise ValueError(f"[dist] store {store!r}: expected file:///dir or tcp://host:port")


def _store_from_env(rank):
    """LAZYX_DIST_STORE; else under torchrun a port rank 0 publishes in torchrun's store; else
    MASTER_ADDR:MASTER_PORT."""
    if os.environ.get("LAZYX_DIST_STORE"):
        return os.environ["LAZYX_DIST_STORE"]
    host = os.environ.get("MASTER_ADDR")
    port = _env_int("MASTER_PORT")
    if host is None or port is None:
        raise ValueError("[dist.init] no store given: pass store='file:///dir' or "
                         "'tcp://host:port', or set LAZYX_DIST_STORE, or MASTER_ADDR and "
                         "MASTER_PORT")
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # torchrun serves its own store on MASTER_PORT
        world = _env_int("WORLD_SIZE")
        client = _td.TCPStore(host, port, world, False)
        return f"tcp://{host}:{_published_port(client, rank, 'lazyx_env_port')}"
    return f"tcp://{host}:{port}"


def _published_port(store, rank, key):
    """A port for lazyx's store: LAZYX_DIST_PORT, else one rank 0 finds free; shared via `store`."""
    if rank == 0:
        store.set(key, str(_env_int("LAZYX_DIST_PORT") or _free_port()))
    return int(store.get(key))


def init(rank=None, world_size=None, store=None):
    """Joins the group of `world_size` ranks; blocks until all have joined (or the timeout).

    rank and world_size default to $RANK and $WORLD_SIZE (torchrun and spawn set them). store is
    'file:///dir' (one machine: a fresh directory every rank sees) or 'tcp://host:port' (rank 0
    serves it on port; host must reach rank 0); it defaults to $LAZYX_DIST_STORE, else to
    $MASTER_ADDR:$MASTER_PORT (under torchrun: a free port rank 0 publishes in torchrun's store).
    """
    rank = _env_int("RANK") if rank is None else rank
    world_size = _env_int("WORLD_SIZE") if world_size is None else world_size
    if rank is None or world_size is None:
        raise ValueError("[dist.init] rank and world_size are needed (or $RANK and $WORLD_SIZE)")
    kind, where, port = _parse_store(store or _store_from_env(rank))
    _D.init(int(rank), int(world_size), kind, where, port)


def _ensure():
    if not _D.is_initialized() and os.environ.get("RANK") and os.environ.get("WORLD_SIZE"):
        init()


def destroy():
    _D.destroy()


def is_initialized():
    return _D.is_initialized()


def get_rank():
    _ensure()
    return _D.rank()


def get_world_size():
    _ensure()
    return _D.world_size()


def all_reduce(tensors, op="sum", scale=1.0):
    """The reduction across ranks ('sum', 'mean', 'max', 'min') times `scale`. A tensor gives a new
    tensor; a list is updated in place (one Gloo call per dtype) and returned."""
    _ensure()
    if isinstance(tensors, torch.Tensor):
        return _D.all_reduce([tensors], _op(op), float(scale))[0]
    tensors = list(tensors)
    out = _D.all_reduce(tensors, _op(op), float(scale))
    with torch.no_grad():
        for t, r in zip(tensors, out):
            t.copy_(r)
    return tensors


def all_gather(tensor):
    """Every rank's tensor concatenated along dim 0, in rank order."""
    _ensure()
    return _D.all_gather(tensor)


def reduce_scatter(tensor, op="sum", scale=1.0):
    """The reduction across ranks split into world_size blocks along dim 0: this rank's block."""
    _ensure()
    return _D.reduce_scatter(tensor, _op(op), float(scale))


def broadcast(tensor, src=0):
    """Rank `src`'s tensor on every rank."""
    _ensure()
    return _D.broadcast(tensor, int(src))


def barrier():
    """Waits for every rank (runs at once, outside any graph)."""
    _ensure()
    _D.barrier()


def _grads(optimizer):
    return [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]


def reduce_gradients(optimizer, op="mean"):
    """Replaces every gradient of the optimizer's parameters by its mean across ranks (recorded,
    packed in one buffer per dtype)."""
    grads = _grads(optimizer)
    if grads:
        all_reduce(grads, op=op)


def optimizer_step(optimizer, mark_step=True, optimizer_args=None):
    """reduce_gradients, optimizer.step(), then mark_step(): the forward, backward, all-reduce and
    update of the step run as one program."""
    reduce_gradients(optimizer)
    out = optimizer.step(**(optimizer_args or {}))
    if mark_step:
        _C.mark_step()
    return out


# torch.distributed backend "lazyx": collectives of device tensors are recorded graph ops and the
# returned work is complete; CPU tensors are reduced at once through the same Gloo group.
def _create_process_group(store, rank, world_size, timeout):
    if not _D.is_initialized():
        if os.environ.get("LAZYX_DIST_STORE"):
            where = os.environ["LAZYX_DIST_STORE"]
        else:
            host = os.environ.get("LAZYX_DIST_HOST") or os.environ.get("MASTER_ADDR", "127.0.0.1")
            where = f"tcp://{host}:{_published_port(store, rank, 'lazyx_port')}"
        init(rank, world_size, where)
    return _D.create_backend(rank, world_size)


# One backend for device tensors (graph ops) and CPU tensors (Gloo at once, for torch's own
# bookkeeping such as DDP's parameter checks).
if _td.is_available() and "LAZYX" not in _td.Backend._plugins:
    _td.Backend.register_backend("lazyx", _create_process_group, devices=["lazy", "cpu"])


def _worker(fn, rank, nprocs, env, args):
    os.environ.update(env)
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nprocs)})
    try:
        fn(rank, *args)
    except BaseException:
        traceback.print_exc()
        raise SystemExit(1)


def spawn(fn, args=(), nprocs=2, env=None):
    """Runs fn(rank, *args) in `nprocs` fresh processes on this machine (start method 'spawn', so
    fn must be importable) with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and a fresh file store
    in LAZYX_DIST_STORE; `env` adds variables. Returns when all have exited; raises naming the
    ranks that failed (the others are stopped)."""
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    tmp = tempfile.mkdtemp(prefix="lazyx_dist_")
    e = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
         "LAZYX_DIST_STORE": "file://" + tmp}
    e.update(env or {})
    procs = [ctx.Process(target=_worker, args=(fn, r, nprocs, e, tuple(args)))
             for r in range(nprocs)]
    for p in procs:
        p.start()
    failed = []
    try:
        alive = list(procs)
        while alive:
            for p in list(alive):
                p.join(0.05)
                if p.exitcode is None:
                    continue
                alive.remove(p)
                if p.exitcode != 0:
                    failed.append((procs.index(p), p.exitcode))
            if failed:
                break
    finally:
        for p in procs:
            if p.exitcode is None:
                p.terminate()
                p.join(5)
    if failed:
        desc = ", ".join(f"rank {r} exit code {c}" for r, c in failed)
        raise RuntimeError(f"[dist.spawn] {desc}; the other ranks were stopped")

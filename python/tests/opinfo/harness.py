"""PyTorch's OpInfo database run on the lazyx device against CPU eager.

Each op entry (name and variant) runs its sample inputs forward, backward (gradients of the first
output's sum with respect to every differentiable input) and in place, on CPU and on the device,
and is classified: native, fallback (named aten ops ran on CPU), error (lazyx raised where eager
did not), wrong (a value, shape or dtype differs) or crash (the process died or hung). Ops run in
chunks in child processes, so a crash is counted, not fatal.

    python3 harness.py --dtypes float32,int64 --samples 3 --out table.txt
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "int16", "int8", "uint8",
          "bool"]
# Ops whose outputs are uninitialized memory: only shapes and dtypes are compared.
UNINIT = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "resize_",
          "resize_as_", "empty_permuted"}
# In-place sampling with heavy or discrete tails: one sample's mean and std cannot tell the
# distribution (Cauchy has neither); shapes only here, quantiles in test_distributions.py.
SAMPLED = {"cauchy", "exponential", "geometric", "log_normal"}
# Ops whose result is defined by the input's storage layout: the non-contiguous mode would compare
# the device's strided view with eager's contiguous tensor, and eager's own backward of
# as_strided_scatter reads uninitialized memory (two eager runs can agree by chance), so they run
# in the plain mode only.
LAYOUT_OPS = {"as_strided", "as_strided_scatter"}
# Random ops: OpInfo seeds CPU eager itself (wrapper_set_seed), so these compare statistics.
RANDOM_WORDS = ("rand", "dropout", "uniform", "normal", "bernoulli", "multinomial", "rrelu",
                "fractional_max_pool", "_scaled_dot_product_attention", "exponential",
                "geometric", "cauchy", "log_normal")


def _import_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# ------------------------------------------------------------------------------------------------
# Child side: runs ops and writes one JSON line per event.
class Wrong(Exception):
    pass


def _tol(dtype):
    import torch
    return {torch.float32: (1e-3, 1e-3), torch.float64: (1e-6, 1e-6),
            torch.bfloat16: (8e-2, 5e-2), torch.float16: (1e-2, 1e-2)}.get(dtype, (0, 0))


def _compare(c, d, what, stats, tol_dtype=None):
    import torch
    from torch.utils._pytree import tree_flatten
    cl, _ = tree_flatten(c)
    dl, _ = tree_flatten(d)
    if len(cl) != len(dl):
        raise Wrong(f"{what}: {len(dl)} outputs, eager gives {len(cl)}")
    for i, (x, y) in enumerate(zip(cl, dl)):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            raise Wrong(f"{what}[{i}]: {type(y).__name__}, eager gives {type(x).__name__}")
        if not isinstance(x, torch.Tensor):
            if x != y and not (isinstance(x, float) and x != x and y != y):
                raise Wrong(f"{what}[{i}]: {y!r}, eager gives {x!r}")
            continue
        if y.dtype != x.dtype:
            raise Wrong(f"{what}[{i}]: dtype {y.dtype}, eager gives {x.dtype}")
        if y.shape != x.shape:
            raise Wrong(f"{what}[{i}]: shape {tuple(y.shape)}, eager gives {tuple(x.shape)}")
        if x.layout != torch.strided or y.layout != torch.strided:
            if x.layout != y.layout:
                raise Wrong(f"{what}[{i}]: layout {y.layout}, eager gives {x.layout}")
            x, y = x.to_dense(), y.cpu().to_dense()
        y = y.detach().cpu()
        x = x.detach()
        if stats == "shape":
            continue
        if stats == "random":
            if x.numel() >= 64 and x.is_floating_point():
                xs, ys = x.double(), y.double()
                sd = float(xs.std()) if xs.numel() > 1 else 1.0
                if abs(float(xs.mean()) - float(ys.mean())) > 0.25 * sd + 1e-3 or \
                        abs(float(ys.std()) - sd) > 0.25 * sd + 1e-3:
                    raise Wrong(f"{what}[{i}]: statistics differ (mean {float(ys.mean()):.4g} vs "
                            f"{float(xs.mean()):.4g}, std {float(ys.std()):.4g} vs {sd:.4g})")
            continue
        atol, rtol = _tol(tol_dtype or x.dtype)
        try:
            torch.testing.assert_close(y, x, atol=atol, rtol=rtol, equal_nan=True,
                                       check_device=False, check_stride=False)
        except AssertionError as e:
            lines = [s for s in str(e).splitlines() if s.strip()]
            raise Wrong(f"{what}[{i}]: " + " ".join(lines[:3]))


def _to_dev(s, dev, mode=""):
    return s.map(lambda tree: _to_dev_tree(tree, dev, mode))


def _to_dev_tree(tree, dev, mode=""):
    """The sample on the device. "noncontig": every tensor of at least one dim and one element
    becomes a strided view of a larger device tensor (every other element of a new last dim,
    the others holding a value the op must never read), as torch's noncontiguous_like.
    "pending": every tensor is the pending result of an op (x * 1), so the op under test joins
    its producer's program (and the cpu backend's fused loops) instead of reading a buffer."""
    noncontig, pending = mode == "noncontig", mode == "pending"
    import math
    import torch
    from torch.utils._pytree import tree_map

    def f(t):
        if isinstance(t, torch.Tensor):
            if t.layout != torch.strided:
                return t.to(dev)
            d = t.detach().to(dev)
            if noncontig and d.dim() > 0 and d.numel() > 0:
                bad = (math.nan if d.dtype.is_floating_point else
                       True if d.dtype == torch.bool else 12)
                wide = torch.empty(tuple(d.shape) + (2,), dtype=d.dtype, device=dev)
                wide[..., 0] = bad
                wide[..., 1] = d
                d = wide[..., 1]
            if pending and d.numel() > 0:
                d = d & True if d.dtype == torch.bool else d * 1
                if t.requires_grad:
                    d = d.detach()
            return d.requires_grad_(t.requires_grad)
        return t
    return tree_map(f, tree)


def _clone(s):
    return s.map(_clone_tree)


def _clone_tree(tree):
    import torch
    from torch.utils._pytree import tree_map

    def f(t):
        if isinstance(t, torch.Tensor) and t.layout == torch.strided:
            return t.detach().clone().requires_grad_(t.requires_grad)
        return t
    return tree_map(f, tree)


def _leaves(tree):
    import torch
    from torch.utils._pytree import tree_flatten
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor) and t.requires_grad]


def _first_out(out):
    import torch
    from torch.utils._pytree import tree_flatten
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor):
            return t
    return None


def _is_random(op, s, run):
    """True for random ops: named so, seeded by OpInfo, or different under two seeds."""
    import torch
    if any(w in op.name for w in RANDOM_WORDS):
        return True
    code = getattr(op.op, "__code__", None)
    if code is not None and "wrapper_set_seed" in code.co_names:
        return True
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            a = run(op, _clone(s))
            torch.manual_seed(1)
            b = run(op, _clone(s))
        _compare(a, b, "", "values")
        return False
    except Wrong:
        return True
    except Exception:
        return True


class S:
    """A sample's (input, args, kwargs)."""

    def __init__(self, input, args, kwargs):
        self.input, self.args, self.kwargs = input, tuple(args), dict(kwargs)

    def map(self, f):
        return S(*f((self.input, self.args, self.kwargs)))


def _upcast(tree, wide=None):
    import torch
    from torch.utils._pytree import tree_map
    wide = wide or torch.float32
    return tree_map(lambda t: t.detach().cpu().to(wide)
                    if isinstance(t, torch.Tensor) and t.is_floating_point() else t, tree)


def _run_f32(op, s, run, part, wide=None):
    """The op on CPU with the sample's floating tensors widened (float32 by default)."""
    import torch
    c = _upcast(_clone(s).map(lambda x: x), wide)
    c = S(*_upcast((c.input, c.args, c.kwargs), wide))
    torch.manual_seed(0)
    with torch.no_grad():
        out = run(op, c)
    return (out, c.input) if part == "inplace" else out


def _grads_f32(op, s, wide=None):
    """Gradients of the first output's sum, on CPU with the sample's floats widened."""
    import torch
    from torch.utils._pytree import tree_map
    wide = wide or torch.float32

    def up(t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return t.detach().cpu().to(wide).requires_grad_(t.requires_grad)
        return t
    c = S(*tree_map(up, (s.input, s.args, s.kwargs)))
    leaves = _leaves((c.input, c.args, c.kwargs))
    torch.manual_seed(0)
    out = _first_out(_call(op, c))
    return torch.autograd.grad(out.sum(), leaves, allow_unused=True)


def _err(e):
    first = str(e).splitlines()[0][:240] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def _call(op, s):
    return op(s.input, *s.args, **s.kwargs)


def _call_out(op, s):
    """The out= form, into empty tensors of the result's dtypes (resized by the op)."""
    import torch
    from torch.utils._pytree import tree_map
    want = op(s.input, *s.args, **s.kwargs)  # the result's structure, dtypes and device
    out = tree_map(lambda t: torch.empty(0, dtype=t.dtype, device=t.device)
                   if isinstance(t, torch.Tensor) else t, want)
    op(s.input, *s.args, **s.kwargs, out=out)
    return out


def _call_inplace(op, s):
    return op.inplace_variant(s.input, *s.args, **s.kwargs)


def _run_sample(op, dtype, s, dev, errors, wrongs, mode=""):
    """Forward, backward and in place for one sample; eager failures skip the part."""
    import torch
    import lazyx
    stats = "shape" if op.name in UNINIT or op.name in SAMPLED else None
    if op.name == "nn.functional.scaled_dot_product_attention":
        # With dropout each output row is a sum over rows masked at random: too correlated for a
        # mean/std test on one sample, so only shapes; without it values compare exactly.
        stats = "shape" if s.kwargs.get("dropout_p", 0.0) > 0 else "values"
    parts = [("forward", _call)]
    if op.inplace_variant is not None and isinstance(s.input, torch.Tensor):
        parts.append(("inplace", _call_inplace))
    if mode == "out":  # the out= form only
        parts = [("out", _call_out)]
    for part, run in parts:
        cs = _clone(s)
        if part == "inplace":
            cs.input = cs.input.detach()
        torch.manual_seed(0)
        try:
            c_out = run(op, cs)
        except Exception:
            continue  # eager refuses it: nothing to compare
        mode = stats or ("random" if _is_random(op, s, run) else "values")
        torch.manual_seed(0)
        try:
            ds = _to_dev(s, dev, mode)
            if part == "inplace":
                ds.input = ds.input.detach()
            d_out = run(op, ds)
            if part == "inplace":
                d_res = (d_out, ds.input)
                c_res = (c_out, cs.input)
            else:
                d_res, c_res = d_out, c_out
            try:
                _compare(c_res, d_res, part, mode)
            except Wrong as e:
                # 16-bit floats: eager rounds differently inside some ops; the device passes if
                # it is as close to the op computed in float32 on the same inputs.
                if "not close" not in str(e) or dtype not in (torch.bfloat16, torch.float16,
                                                              torch.float32):
                    raise
                try:
                    if dtype == torch.float32:
                        raise e
                    _compare(_upcast(_run_f32(op, s, run, part)), _upcast(d_res), part, mode,
                             dtype)
                except Wrong:
                    # Eager's vectorized float loops give NaN for a subnormal divisor (fmod(1.5,
                    # 1e-39) in float32), where float64 gives the exact value: the device passes
                    # if it is as close to eager in float64 as the dtype's tolerance allows.
                    # (rounded to the dtype first, where a huge quotient overflows alike).
                    wide = torch.float64
                    exact = _upcast(_upcast(_run_f32(op, s, run, part, wide), dtype), wide)
                    _compare(exact, _upcast(d_res, wide), part, mode, dtype)
        except Wrong as e:
            wrongs.append(str(e)[:300])
            continue
        except Exception as e:
            errors.append(f"{part}: {_err(e)}")
            continue
        if part != "forward" or not dtype.is_floating_point or not op.supports_autograd:
            continue
        # Backward: gradients of the first output's sum w.r.t. every differentiable input.
        c_in = _leaves((cs.input, cs.args, cs.kwargs))
        d_in = _leaves((ds.input, ds.args, ds.kwargs))
        co, do = _first_out(c_out), _first_out(d_out)
        if not c_in or co is None or not co.requires_grad or len(c_in) != len(d_in):
            continue
        try:
            cg = torch.autograd.grad(co.sum(), c_in, allow_unused=True, retain_graph=True)
            cg2 = torch.autograd.grad(co.sum(), c_in, allow_unused=True)
        except Exception:
            continue
        bmode = "shape" if mode == "random" else mode
        if op.name == "as_strided_scatter":
            # Eager's backward here may read uninitialized memory (it did in torch 1.13), and two eager runs
            # can read the same garbage and agree: its gradient values are no oracle.
            bmode = "shape"
        try:  # eager's backward differs from itself (uninitialized memory): shapes only
            _compare([torch.zeros(()) if g is None else g for g in cg],
                     [torch.zeros(()) if g is None else g for g in cg2], "", "values")
        except Wrong:
            bmode = "shape"
        try:
            dg = torch.autograd.grad(do.sum(), d_in, allow_unused=True)
            lazyx.mark_step()
            cg = [torch.zeros(()) if g is None else g for g in cg]
            dg = [torch.zeros(()) if g is None else g for g in dg]
            try:
                _compare(cg, dg, "backward", bmode)
            except Wrong as e:
                # 16-bit floats: as for the forward, eager's own rounding (a batch sum kept in
                # bfloat16) may be what differs; the device passes if it is as close to float32.
                if dtype not in (torch.bfloat16, torch.float16) or "not close" not in str(e):
                    raise
                fg = [torch.zeros(()) if g is None else g for g in _grads_f32(op, s)]
                try:
                    _compare(_upcast(fg), _upcast(dg), "backward", bmode, dtype)
                except Wrong:  # as for the forward: eager in float64, rounded to the dtype
                    w = torch.float64
                    fg = [torch.zeros(()) if g is None else g for g in _grads_f32(op, s, w)]
                    _compare(_upcast(_upcast(fg, dtype), w), _upcast(dg, w), "backward", bmode,
                             dtype)
        except Wrong as e:
            wrongs.append(str(e)[:300])
        except Exception as e:
            errors.append(f"backward: {_err(e)}")


def run_op(op, dtype_name, cap):
    """dtype_name is a dtype, or a dtype and a mode: one of _to_dev_tree ("float32:noncontig",
    "float32:pending"), or "out" (the out= form alone, into empty tensors)."""
    import torch
    import lazyx
    dtype_name, _, mode = dtype_name.partition(":")
    if op.name in LAYOUT_OPS:
        mode = ""
    if mode == "out" and not op.supports_out:
        return {"status": "unsupported"}
    dtype = getattr(torch, dtype_name)
    if dtype not in op.supported_dtypes("cpu"):
        return {"status": "unsupported"}
    dev = lazyx.device()
    try:
        torch.manual_seed(0)
        grad = op.supports_autograd and dtype.is_floating_point
        samples = []
        for s in op.sample_inputs("cpu", dtype, requires_grad=grad):
            samples.append(s)
            if len(samples) >= cap:
                break
    except Exception as e:
        return {"status": "no-samples", "detail": str(e)[:200]}
    lazyx.metrics.clear_counters()
    errors, wrongs = [], []
    for s0 in samples:
        s = S(s0.input, s0.args, s0.kwargs)
        _run_sample(op, dtype, s, dev, errors, wrongs, mode)
        try:
            lazyx.mark_step()
        except Exception as e:
            errors.append(f"mark_step: {str(e)[:200]}")
    fb = sorted(n for n in lazyx.metrics.counter_names() if n.startswith("aten::"))
    if wrongs:
        st = "wrong"
    elif errors:
        st = "error"
    elif fb:
        st = "fallback"
    else:
        st = "native"
    return {"status": st, "fallback": fb, "errors": errors[:3], "wrong": wrongs[:3],
            "samples": len(samples)}


def child_main(names, dtype_name, cap, path):
    import torch  # noqa: F401
    import lazyx  # noqa: F401
    import warnings
    warnings.filterwarnings("ignore")
    ops = {entry_name(o): o for o in _import_op_db()}
    with open(path, "a") as f:
        for n in names:
            f.write(json.dumps({"start": n}) + "\n")
            f.flush()
            r = run_op(ops[n], dtype_name, cap)
            r["op"] = n
            f.write(json.dumps(r) + "\n")
            f.flush()


# ------------------------------------------------------------------------------------------------
# Parent side: chunks, child processes, crash and hang detection, the table.
def _read(path):
    done, started = {}, None
    if not os.path.exists(path):
        return done, started
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "start" in r:
                started = r["start"]
            else:
                done[r["op"]] = r
                started = None
    return done, started


def run_dtype(names, dtype_name, cap, workers, chunk, op_timeout, tmpdir, log=None):
    """Runs names for one dtype; returns {op: result}."""
    env = dict(os.environ)
    import lazyx
    env["LAZYX_PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
    env.setdefault("LAZYX_NUM_THREADS", "1")
    todo = [names[i:i + chunk] for i in range(0, len(names), chunk)]
    results = {}
    running = []  # (proc, path, names, last_progress_time, last_line_count)
    k = 0
    while todo or running:
        while todo and len(running) < workers:
            names_c = todo.pop(0)
            path = os.path.join(tmpdir, f"{dtype_name}-{k}.jsonl")
            k += 1
            cmd = [sys.executable, os.path.abspath(__file__), "--child", dtype_name, str(cap), path]
            p = subprocess.Popen(cmd + names_c, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            running.append([p, path, names_c, time.time(), 0])
        time.sleep(0.05)
        for r in list(running):
            p, path, names_c, t0, nl = r
            done, started = _read(path)
            if len(done) + (started is not None) != nl:
                r[3], r[4] = time.time(), len(done) + (started is not None)
            rc = p.poll()
            hung = rc is None and time.time() - r[3] > op_timeout
            if rc is None and not hung:
                continue
            if hung:
                p.kill()
                p.wait()
            err = p.stderr.read().decode(errors="replace")[-300:] if p.stderr else ""
            running.remove(r)
            results.update(done)
            rest = [n for n in names_c if n not in done]
            if rest and (hung or rc != 0):
                bad = started if started is not None else rest[0]
                why = "hung" if hung else f"exit status {rc}"
                results[bad] = {"op": bad, "status": "crash", "errors": [why + ": " + err.strip()]}
                rest = [n for n in rest if n != bad]
            if rest:
                todo.insert(0, rest)
            if log:
                log(f"{dtype_name}: {len(results)}/{len(names)} ops")
    return results


STATUSES = ["native", "fallback", "error", "wrong", "crash", "unsupported", "no-samples"]


def write_table(all_results, path):
    with open(path, "w") as f:
        f.write("# op\tdtype\tstatus\tdetail\n")
        for dt, res in all_results.items():
            for n in sorted(res):
                r = res[n]
                if r["status"] == "unsupported":
                    continue
                detail = ""
                if r["status"] == "fallback":
                    detail = ",".join(r.get("fallback", []))
                elif r["status"] in ("error", "wrong", "crash", "no-samples"):
                    detail = " | ".join(r.get("wrong") or r.get("errors") or [r.get("detail", "")])
                f.write(f"{n}\t{dt}\t{r['status']}\t{detail}\n")


def counts(res):
    c = {s: 0 for s in STATUSES}
    for r in res.values():
        c[r["status"]] += 1
    return c


def load_allowlist(path):
    """Lines `op dtype|* reason`: errors allowed for that entry, with the reason."""
    allow = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            op, dt, reason = line.split(None, 2)
            allow[(op, dt)] = reason
    return allow


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--ops", default="", help="comma-separated entry names (default: all)")
    ap.add_argument("--out", default="opinfo_table.txt")
    a = ap.parse_args(argv)
    import tempfile
    names = [entry_name(o) for o in _import_op_db()]
    if a.ops:
        names = [n for n in names if n in a.ops.split(",")]
    allres = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dt in a.dtypes.split(","):
            t0 = time.time()
            allres[dt] = run_dtype(names, dt, a.samples, a.workers, a.chunk, a.timeout, tmp)
            c = counts(allres[dt])
            print(f"{dt}: " + ", ".join(f"{k} {v}" for k, v in c.items()) +
                  f" ({time.time() - t0:.0f} s)", flush=True)
    write_table(allres, a.out)
    for dt, res in allres.items():
        for n, r in sorted(res.items()):
            if r["status"] in ("wrong", "crash", "error"):
                d = r.get("wrong") or r.get("errors") or []
                print(f"{r['status']:6} {dt:8} {n}: {d[0] if d else ''}")
    return allres


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        pp = os.environ.get("LAZYX_PYTHONPATH")
        if pp:
            sys.path.insert(0, pp)
        child_main(sys.argv[5:], sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.path.insert(0, os.environ.get("LAZYX_PYTHONPATH", ""))
        main()

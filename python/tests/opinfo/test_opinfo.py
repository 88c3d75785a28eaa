"""PyTorch's OpInfo database on the device against CPU eager (harness.py): no op may give a wrong
value or crash, and every error must be on allowlist.txt with its reason."""
import os
import tempfile
import time

import harness

import lazyx

# CI budget: every dtype the device has, with fewer samples per op beyond float32. The narrow
# integer dtypes caught dot/vdot widening to int64 and uint8 all/any giving bool.
# ":noncontig" gives the device strided views of the same values (the CPU fallback's copies
# once lost that layout, and det/solve gradients came out transposed); ":pending" gives it
# unmaterialized values, so each op runs fused with its producer; ":out" runs the out= form alone,
# into empty tensors (mode.values and nanmean.out once reached torch's CPU-only kernels).
PLAN = [("float32", 8), ("float64", 4), ("bfloat16", 4), ("float16", 4), ("int64", 4),
        ("int32", 2), ("int16", 2), ("int8", 2), ("uint8", 2), ("bool", 4),
        ("float32:noncontig", 4), ("int64:noncontig", 2), ("float32:pending", 4),
        ("int64:pending", 2), ("float32:out", 4), ("int64:out", 2)]
# Share of the entries eager runs in float32 that run natively, forward and backward (no CPU
# fallback): a floor that only moves up, so an op that starts falling back again fails the suite.
NATIVE_FLOOR_FLOAT32 = 0.85


def _table_path():
    if os.environ.get("LAZYX_OPINFO_TABLE"):
        return os.environ["LAZYX_OPINFO_TABLE"]
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__))))
    return os.path.join(build if os.access(build, os.W_OK) else tempfile.gettempdir(),
                        "opinfo_table.txt")


def test_opinfo_suite(capsys):
    names = [harness.entry_name(o) for o in harness._import_op_db()]
    allow = harness.load_allowlist(os.path.join(os.path.dirname(__file__), "allowlist.txt"))
    results, lines = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for dt, cap in PLAN:
            # Large chunks: each child pays for importing torch and the OpInfo database once.
            t0 = time.time()
            results[dt] = harness.run_dtype(names, dt, cap, workers=2, chunk=160, op_timeout=180,
                                            tmpdir=tmp)
            c = harness.counts(results[dt])
            lines.append(f"{dt} ({cap} samples per op): " +
                         ", ".join(f"{k} {v}" for k, v in c.items()) +
                         f" ({time.time() - t0:.0f} s)")
    path = _table_path()
    harness.write_table(results, path)
    bad = []
    for dt, res in results.items():
        for n, r in sorted(res.items()):
            detail = (r.get("wrong") or r.get("errors") or [""])[0]
            if r["status"] in ("wrong", "crash"):
                bad.append(f"{r['status']} {n} {dt}: {detail}")
            elif r["status"] == "error" and (n, dt) not in allow and (n, "*") not in allow:
                bad.append(f"error not on the allow-list: {n} {dt}: {detail}")
    with capsys.disabled():
        print("\nOpInfo suite, table in " + path)
        for line in lines:
            print("  " + line)
    f32 = harness.counts(results["float32"])
    # Entries eager itself does not run in float32 ("unsupported": integer- or complex-only ops)
    # or that have no samples are not float32 entries: they count on neither side.
    runnable = sum(v for k, v in f32.items() if k not in ("unsupported", "no-samples"))
    share = f32["native"] / max(1, runnable)
    if share < NATIVE_FLOOR_FLOAT32:
        bad.append(f"float32: {share:.1%} of entries native, below the floor "
                   f"{NATIVE_FLOOR_FLOAT32:.0%}: {f32}")
    assert not bad, "\n".join(bad)

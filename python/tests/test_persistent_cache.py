"""The persistent compile cache across processes: a second process running the same training
compiles no kernel with LLVM, a damaged entry is recompiled, and two processes filling one
folder at once both succeed."""
import glob
import json
import os
import subprocess
import sys

import lazyx

PKG = os.path.dirname(os.path.dirname(os.path.abspath(lazyx.__file__)))
TRAIN = r"""
import torch, torch.nn.functional as F
import lazyx

def train():
    dev = lazyx.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 16).to(dev), torch.randint(0, 4, (64,)).to(dev)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        lazyx.mark_step()
        losses.append(loss.item())
    lazyx.wait_for_background_compiles()  # kernels are stored once recompiled at the full tier
    names = ["CpuKernelCompiled", "PersistentCacheHit", "PersistentCacheMiss",
             "PersistentCacheCorrupt", "UncachedCompile"]
    return {"losses": losses,
            "counters": {n: lazyx.metrics.counter_value(n) or 0 for n in names}}
"""
CHILD = "import json, sys\nsys.path.insert(0, sys.argv[1])\n" + TRAIN + \
    "print(json.dumps(train()))\n"


def start(cache_dir):
    env = dict(os.environ, LAZYX_CACHE_DIR=str(cache_dir))
    return subprocess.Popen([sys.executable, "-c", CHILD, PKG], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p):
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def train_here(cache_dir, monkeypatch):
    """The same training in this process, its programs and kernels compiled or loaded anew."""
    monkeypatch.setenv("LAZYX_CACHE_DIR", str(cache_dir))
    lazyx.mark_step()
    lazyx.clear_program_cache()  # frees the kernels compiled so far
    lazyx.metrics.clear_counters()
    ns = {}
    exec(TRAIN, ns)
    return ns["train"]()


def entries(cache_dir):
    return sorted(glob.glob(os.path.join(str(cache_dir), "cpu", "*.lzk")))


def test_second_process_compiles_no_kernel(tmp_path):
    cold = finish(start(tmp_path))
    kernels = cold["counters"]["CpuKernelCompiled"]
    assert kernels > 0 and cold["counters"]["PersistentCacheMiss"] == kernels
    assert len(entries(tmp_path)) == kernels
    warm = finish(start(tmp_path))
    c = warm["counters"]
    assert c["CpuKernelCompiled"] == 0, c
    assert c["PersistentCacheHit"] == kernels and c["PersistentCacheMiss"] == 0, c
    assert c["UncachedCompile"] == cold["counters"]["UncachedCompile"]  # programs still planned
    assert warm["losses"] == cold["losses"]


def test_damaged_entries_are_recompiled(tmp_path, monkeypatch):
    cold = train_here(tmp_path, monkeypatch)
    files = entries(tmp_path)
    assert len(files) == cold["counters"]["CpuKernelCompiled"] > 0
    for i, f in enumerate(files):
        if i % 2:
            os.truncate(f, os.path.getsize(f) // 3)
        else:
            with open(f, "r+b") as fh:
                fh.seek(-5, os.SEEK_END)
                b = fh.read(1)
                fh.seek(-5, os.SEEK_END)
                fh.write(bytes([b[0] ^ 0xFF]))
    again = train_here(tmp_path, monkeypatch)
    c = again["counters"]
    assert c["PersistentCacheCorrupt"] == len(files) == c["CpuKernelCompiled"], c
    assert again["losses"] == cold["losses"]
    c = train_here(tmp_path, monkeypatch)["counters"]  # stored whole again
    assert c["CpuKernelCompiled"] == 0 and c["PersistentCacheHit"] == len(files), c


def test_two_processes_fill_one_folder_at_once(tmp_path, monkeypatch):
    a, b = start(tmp_path), start(tmp_path)
    ra, rb = finish(a), finish(b)
    assert ra["losses"] == rb["losses"]
    kernels = max(ra["counters"]["CpuKernelCompiled"], rb["counters"]["CpuKernelCompiled"])
    assert len(entries(tmp_path)) == kernels > 0
    assert not glob.glob(os.path.join(str(tmp_path), "cpu", "*.tmp.*"))  # no stray temporaries
    here = train_here(tmp_path, monkeypatch)
    c = here["counters"]
    assert c["CpuKernelCompiled"] == 0 and c["PersistentCacheHit"] == kernels, c
    assert here["losses"] == ra["losses"]

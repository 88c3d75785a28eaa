#!/usr/bin/env python3
"""The digits MLP of train_digits.py, data parallel: N processes, each with its shard of every
batch, gradients averaged by DistributedDataParallel over the "lazyx" torch.distributed backend.

    /usr/bin/python3 examples/train_digits_ddp.py [--nprocs 2] [--epochs N] [--batch B]
    torchrun --nproc_per_node 2 examples/train_digits_ddp.py      # or launched by torchrun

Unchanged DDP code except the device (lazyx.device()) and the backend name ("lazyx"), plus one
lazyx.mark_step() per step. Without torchrun it starts its own ranks with lazyx.dist.spawn.
--batch is the global batch; each rank trains on batch / world_size rows of it.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_digits  # noqa: E402  (puts the built lazyx on sys.path)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import lazyx  # noqa: E402


def run(rank, args):
    os.environ.setdefault("LAZYX_NUM_THREADS", "1")
    dist.init_process_group("lazyx")
    world = dist.get_world_size()
    dev = lazyx.device()
    xtr, ytr, xte, yte = train_digits.load()
    torch.manual_seed(rank)  # different initial weights: DDP broadcasts rank 0's
    model = DDP(train_digits.make_model().to(dev))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    g = torch.Generator().manual_seed(1)  # the same permutation on every rank
    per_rank = args.batch // world
    xte_d, yte_d = xte.to(dev), yte.to(dev)
    if rank == 0:
        print(f"{world} processes, backend {dist.get_backend()}, lazyx device {dev}; "
              f"global batch {per_rank * world}, {per_rank} rows per rank")
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(len(xtr), generator=g)
        losses, t0 = [], time.perf_counter()
        steps = 0
        for i in range(0, len(xtr) - per_rank * world + 1, per_rank * world):
            idx = perm[i + rank * per_rank:i + (rank + 1) * per_rank]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xtr[idx].to(dev)), ytr[idx].to(dev))
            loss.backward()
            opt.step()
            lazyx.mark_step()
            losses.append(loss.detach())
            steps += 1
        last_train_step = lazyx.last_step()  # the evaluation below syncs too
        step_ms = (time.perf_counter() - t0) / steps * 1e3
        model.eval()
        with torch.no_grad():
            acc = (model(xte_d).argmax(1) == yte_d).float().mean().item()
        loss = torch.stack([l.cpu() for l in losses]).mean().item()
        if rank == 0:
            print(f"epoch {epoch:2d}  loss {loss:.4f} (rank 0's shard)  test accuracy "
                  f"{acc * 100:5.1f}%  step {step_ms:.2f} ms (mean of {steps})")
    # Every rank holds the same parameters: gather them and compare.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    out = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(out, flat)
    diff = max((o - out[0]).abs().max().item() for o in out)
    if rank == 0:
        print(f"largest parameter difference between ranks: {diff:g}")
        print("\n== last training step (forward, backward, all-reduce, Adam: one program) ==")
        print(last_train_step)
    dist.destroy_process_group()
    if diff != 0:
        raise SystemExit(f"rank {rank}: parameters differ across ranks by {diff}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()
    if "RANK" in os.environ:  # torchrun (or another launcher) started this rank
        run(int(os.environ["RANK"]), args)
    else:
        lazyx.dist.spawn(run, args=(args,), nprocs=args.nprocs)


if __name__ == "__main__":
    main()

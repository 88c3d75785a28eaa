"""Shape buckets: a handful of programs for loops whose lengths grow (generation, variable-length
batches). Every distinct shape is a distinct program; rounding lengths up to a bucket and masking
the padding keeps the number of shapes, and so of compiles, small.

    buf = torch.zeros(1, 512, dtype=torch.long).to(dev)    # token buffer, written in place
    for n in range(prompt_len, 256):
        b = lazyx.bucket_size(n)                           # 16, 32, 64, ... by default
        logits = model(buf[:, :b])                         # causal: padding after n is unseen
        last = logits.index_select(1, torch.tensor([n - 1]).to(dev))
        buf.index_copy_(1, torch.tensor([n]).to(dev), last.argmax(-1))
        lazyx.mark_step()

Window offsets and host-built index tensors are run-time operands, so only the bucket size
changes the program.
"""
import torch

_buckets = None  # None: powers of two from 16


def set_shape_buckets(buckets=None):
    """Sets the bucket sizes used by bucket_size() and pad_to_bucket(): an increasing list of
    positive ints, or None for powers of two from 16."""
    global _buckets
    if buckets is not None:
        b = [int(x) for x in buckets]
        if not b or any(x <= 0 for x in b) or any(x >= y for x, y in zip(b, b[1:])):
            raise ValueError("[set_shape_buckets] buckets must be a non-empty, strictly "
                             "increasing list of positive sizes; got %r" % (buckets,))
        buckets = b
    _buckets = buckets


def get_shape_buckets():
    return None if _buckets is None else list(_buckets)


def bucket_size(n):
    """The smallest bucket that holds n. Past the last configured bucket, n itself."""
    n = int(n)
    if n < 0:
        raise ValueError("[bucket_size] length must be >= 0; got %d" % n)
    if _buckets is None:
        b = 16
        while b < n:
            b *= 2
        return b
    for b in _buckets:
        if b >= n:
            return b
    return n


def pad_to_bucket(t, dim=-1, value=0):
    """Pads `t` along `dim` up to bucket_size(t.size(dim)) with `value`; returns (padded, n).
    Pad on the host before uploading: a device tensor of a new length is a new shape itself."""
    n = t.size(dim)
    b = bucket_size(n)
    if b == n:
        return t, n
    shape = list(t.shape)
    shape[dim] = b
    out = torch.full(shape, value, dtype=t.dtype, device=t.device)
    out.narrow(dim, 0, n).copy_(t)
    return out, n

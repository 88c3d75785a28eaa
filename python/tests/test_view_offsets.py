"""Windows into a corpus that lives on the device (word_language_model's get_batch) compile once:
their offsets are run-time operands. Losses match CPU eager; after the second step nothing
compiles."""
import math

import pytest
import torch
import torch.nn as nn

import lazyx

DEV = lazyx.device()
NTOKEN, BPTT, BSZ, STEPS = 50, 8, 4, 20


def compiles():
    return lazyx.metrics.counter_value("UncachedCompile") or 0


def corpus():
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, NTOKEN, ((BPTT * STEPS + 1) * BSZ + 3,), generator=g)
    nbatch = data.size(0) // BSZ
    return data[:nbatch * BSZ].view(BSZ, -1).t().contiguous()  # [nbatch, bsz], as batchify


class LstmLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(NTOKEN, 16)
        self.rnn = nn.LSTM(16, 24, 1)
        self.dec = nn.Linear(24, NTOKEN)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.emb(x), hidden)
        return self.dec(out).view(-1, NTOKEN), hidden

    def init_hidden(self, device):
        return (torch.zeros(1, BSZ, 24, device=device), torch.zeros(1, BSZ, 24, device=device))


class TransformerLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(NTOKEN, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, 1)
        self.dec = nn.Linear(16, NTOKEN)

    def forward(self, x, mask):
        return self.dec(self.enc(self.emb(x) * math.sqrt(16), mask)).view(-1, NTOKEN)


def train(kind, device):
    torch.manual_seed(0)
    model = (LstmLM() if kind == "lstm" else TransformerLM()).to(device)
    source = corpus().to(device)
    if device != "cpu":
        lazyx.mark_step()
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    mask = torch.triu(torch.full((BPTT, BPTT), float("-inf")), diagonal=1).to(device)
    hidden = model.init_hidden(device) if kind == "lstm" else None
    losses, per_step = [], []
    for step in range(STEPS):
        i = step * BPTT
        data, target = source[i:i + BPTT], source[i + 1:i + 1 + BPTT].reshape(-1)
        opt.zero_grad()
        if kind == "lstm":
            hidden = tuple(h.detach() for h in hidden)
            out, hidden = model(data, hidden)
        else:
            out = model(data, mask)
        loss = crit(out, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        if device != "cpu":
            before = compiles()
            lazyx.mark_step()
            per_step.append(compiles() - before)
        losses.append(loss.detach())
    return [float(l.cpu()) for l in losses], per_step


@pytest.mark.parametrize("kind", ["lstm", "transformer"])
def test_moving_windows_compile_nothing_after_warmup(kind):
    want, _ = train(kind, "cpu")
    got, per_step = train(kind, DEV)
    assert per_step[0] >= 1
    assert sum(per_step[2:]) == 0, f"compiles per step: {per_step}"
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)


def test_static_offsets_switch_compiles_every_window(monkeypatch):
    monkeypatch.setenv("LAZYX_STATIC_VIEW_OFFSETS", "1")
    src = torch.arange(1000.).to(DEV)
    lazyx.mark_step()
    before = compiles()
    for i in range(4):
        y = (src[i * 10:(i + 1) * 10] * 2).sum()
        lazyx.mark_step()
        assert y.item() == pytest.approx(2 * sum(range(i * 10, (i + 1) * 10)))
    assert compiles() - before >= 4
    monkeypatch.delenv("LAZYX_STATIC_VIEW_OFFSETS")
    before = compiles()
    for i in range(4, 8):
        y = (src[i * 10:(i + 1) * 10] * 2).sum()
        lazyx.mark_step()
        assert y.item() == pytest.approx(2 * sum(range(i * 10, (i + 1) * 10)))
    assert compiles() - before <= 1


class TinyGPT(nn.Module):
    """Token and position embeddings, one causal encoder layer, a tied decoder."""

    def __init__(self, vocab=40, d=16, max_len=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.block = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        t = idx.size(1)
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1).to(idx.device)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        return self.head(self.block(x, mask))


def test_generation_under_buckets_compiles_a_handful():
    torch.manual_seed(0)
    cpu_model = TinyGPT().eval()
    model = TinyGPT().eval()
    model.load_state_dict(cpu_model.state_dict())
    model.to(DEV)
    prompt, total = 5, 200
    buf = torch.zeros(1, 256, dtype=torch.long)
    buf[0, :prompt] = torch.randint(0, 40, (prompt,), generator=torch.Generator().manual_seed(1))
    buf = buf.to(DEV)
    lazyx.mark_step()
    before = compiles()
    per_token, last_logits = [], []
    with torch.no_grad():
        for n in range(prompt, total):
            b = lazyx.bucket_size(n)
            c0 = compiles()
            logits = model(buf[:, :b])
            last = logits.index_select(1, torch.tensor([n - 1]).to(DEV))
            buf.index_copy_(1, torch.tensor([n]).to(DEV), last.argmax(-1))
            lazyx.mark_step()
            per_token.append((n, b, compiles() - c0))
            last_logits.append(last)
    used = sorted({b for _, b, _ in per_token})
    assert used == [16, 32, 64, 128, 256]
    # Programs are compiled at the first token of each bucket only (one step is a few programs
    # while some op in it runs on the CPU fallback), never again within a bucket.
    firsts = {b: n for n, b, _ in reversed(per_token)}
    late = [(n, c) for n, b, c in per_token if n != firsts[b] and c]
    assert not late, late
    assert compiles() - before <= 5 * len(used), per_token
    # Eager on the device's tokens: every step's last logits, without padding.
    tokens = buf.cpu()
    with torch.no_grad():
        for k, n in enumerate(range(prompt, total, 17)):
            want = cpu_model(tokens[:, :n])[:, n - 1]
            got = last_logits[n - prompt].cpu()[:, 0]
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_bucket_helpers():
    assert [lazyx.bucket_size(n) for n in (0, 1, 16, 17, 100)] == [16, 16, 16, 32, 128]
    lazyx.set_shape_buckets([8, 24, 40])
    try:
        assert [lazyx.bucket_size(n) for n in (3, 9, 40, 41)] == [8, 24, 40, 41]
        x = torch.arange(10.).view(1, 10)
        p, n = lazyx.pad_to_bucket(x, dim=1, value=-1)
        assert n == 10 and p.shape == (1, 24)
        assert torch.equal(p[:, :10], x) and bool((p[:, 10:] == -1).all())
        with pytest.raises(ValueError, match="set_shape_buckets"):
            lazyx.set_shape_buckets([8, 8])
        assert lazyx.get_shape_buckets() == [8, 24, 40]  # unchanged by the bad call
    finally:
        lazyx.set_shape_buckets(None)

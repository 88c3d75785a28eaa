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

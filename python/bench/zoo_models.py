"""The benchmarks' models: the zoo of python/tests/test_model_zoo.py at the examples' scale,
bench_transformer.py's layer ("transformer") and bench_torch_device.py's MLPs ("digits_mlp",
"wide_mlp"). Used by zoo_step.py and bench_zoo_ab.py."""
import torch

import test_model_zoo as z  # python/tests on sys.path

NAMES = ["cnn", "resnet", "lstm", "gpt", "vae", "transformer", "digits_mlp", "wide_mlp"]


def setup(name, dev, seed=0):
    """(model, opt, loss_fn, data): the model in train mode on `dev`, its optimizer, its loss
    and four batches on `dev`; the same values for every `dev` given the same seed."""
    g = torch.Generator().manual_seed(seed)

    def batch():
        if name == "cnn":
            return (torch.randn(64, 1, 12, 12, generator=g),
                    torch.randint(0, 10, (64,), generator=g))
        if name == "resnet":
            return (torch.randn(16, 3, 32, 32, generator=g),
                    torch.randint(0, 10, (16,), generator=g))
        if name == "lstm":
            t = torch.randint(0, 1000, (20, 36), generator=g)
            return t[:, :-1], t[:, 1:]
        if name == "gpt":
            t = torch.randint(0, 256, (16, 65), generator=g)
            return t[:, :-1], t[:, 1:]
        return torch.rand(128, 64, generator=g), torch.randn(128, 8, generator=g)

    if name == "transformer":  # bench_transformer.py's layer: d 256, 4 heads, batch 32, seq 64
        def cls():
            return torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)

        def loss_fn(m, b):
            return m(b[0]).square().mean()

        def opt_fn(p):
            return torch.optim.AdamW(p, lr=1e-3)

        def batch():  # noqa: F811
            return (torch.randn(32, 64, 256, generator=g),)
    elif name in ("digits_mlp", "wide_mlp"):  # bench_torch_device.py's MLPs, batch 64, Adam
        dims = (64, 128, 64, 10) if name == "digits_mlp" else (784, 2048, 2048, 10)

        def cls():
            layers = []
            for a, b in zip(dims[:-1], dims[1:]):
                layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
            return torch.nn.Sequential(*layers[:-1])

        def loss_fn(m, b):
            return torch.nn.functional.cross_entropy(m(b[0]), b[1])

        def opt_fn(p):
            return torch.optim.Adam(p, lr=1e-3)

        def batch():  # noqa: F811
            return (torch.randn(64, dims[0], generator=g),
                    torch.randint(0, 10, (64,), generator=g))
    else:
        cls, _, loss_fn, opt_fn = z.MODELS[name]
    torch.manual_seed(seed)
    # The language models at the examples' scale (the test's are tiny).
    kw = {"lstm": dict(ntoken=1000, ninp=128, nhid=128),
          "gpt": dict(vocab=256, block=64, d=128, heads=4, layers=2)}.get(name, {})
    model = cls(**kw).to(dev)
    model.train()
    opt = opt_fn(model.parameters())
    data = [tuple(t.to(dev) for t in batch()) for _ in range(4)]
    return model, opt, loss_fn, data

"""The benchmark's workloads: what gets compiled, its inputs, and how each system compiles it.

Place in the pipeline: outside it, beside ``bench/__init__.py`` (the driver) and ``bench/measure.py``
(the worker that times them). Each builder returns a :class:`Workload` for full or
``quick`` sizes; the real models come from ``minidynamo/zoo.py`` and timm. No torch file
mirrors it: the torch side is ``torch.compile(fn, backend="aot_eager")``, with
``minidynamo.real_passes.counting_backend`` to count FakeTensor ops per pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

SYSTEMS = ("ours", "torch")
SMALL = ("mlp", "transformer_block", "mutation_views", "pointwise_chain", "inputs200")
REAL_MODELS = ("gpt2_tiny", "resnet10t_train")  # minidynamo/zoo.py, issue 13
CNNS = ("resnet18_train", "mobilenetv3_small_train")  # issue 12: compiled fw+bw within 5% of eager
REAL_MODELS = REAL_MODELS + CNNS
WORKLOADS = SMALL + REAL_MODELS
SCALING_SIZES = (25, 50, 100, 200, 400)


@dataclass
class Workload:
    fn: Callable  # what gets compiled
    make_inputs: Callable[[], tuple]
    backward: bool  # the steady-state call includes out.backward()


def _mlp(quick: bool) -> Workload:
    import torch

    width, batch = (32, 4) if quick else (256, 32)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width),
    )

    def mlp(x):
        return model(x).sum()

    return Workload(mlp, lambda: (torch.randn(batch, width),), backward=True)


def _transformer_block(quick: bool) -> Workload:
    import torch
    import torch.nn.functional as F

    seq, dim, heads = (8, 16, 2) if quick else (64, 128, 4)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)
            self.ln2 = torch.nn.LayerNorm(dim)
            self.fc1 = torch.nn.Linear(dim, 4 * dim)
            self.fc2 = torch.nn.Linear(4 * dim, dim)

        def forward(self, x):
            s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q = q.view(s, heads, d // heads).transpose(0, 1)
            k = k.view(s, heads, d // heads).transpose(0, 1)
            v = v.view(s, heads, d // heads).transpose(0, 1)
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // heads), dim=-1)
            y = (att @ v).transpose(0, 1).reshape(s, d)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x.sum()

    block = Block()
    return Workload(block, lambda: (torch.randn(seq, dim),), backward=True)


def _mutation_views(quick: bool) -> Workload:
    import torch

    n = 8 if quick else 64

    def mutation_views(x, y):
        x.add_(1)
        y[0].add_(y[1])
        return x.view(-1), x[1:], y.t(), (x * y).sum()

    return Workload(mutation_views, lambda: (torch.randn(n, n), torch.randn(n, n)), backward=False)


_POINTWISE = ("x = x.sin()", "x = x * 1.01", "x = x + 0.5", "x = x.cos()", "x = torch.relu(x)", "x = x - 0.25")


def pointwise_chain_fn(length: int) -> Callable:
    """A function of ``length`` pointwise ops, generated as Python source."""
    import torch

    body = "\n".join(f"    {_POINTWISE[i % len(_POINTWISE)]}" for i in range(length))
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(f"def pointwise_chain(x):\n{body}\n    return x\n", f"<pointwise_chain_{length}>", "exec"), namespace)
    return namespace["pointwise_chain"]


def _pointwise_chain(quick: bool, length: int = 50) -> Workload:
    import torch

    n = 64 if quick else 1024
    return Workload(pointwise_chain_fn(length), lambda: (torch.randn(n),), backward=False)


def _inputs200(quick: bool) -> Workload:
    import torch

    count = 20 if quick else 200

    def inputs200(*xs):
        xs[0].add_(1)
        xs[1].add_(1)
        xs[2].add_(1)
        return torch.stack(xs[3:]).sum(0)

    return Workload(inputs200, lambda: tuple(torch.randn(4) for _ in range(count)), backward=False)


def _gpt2_tiny(quick: bool) -> Workload:
    """transformers GPT2LMHeadModel (2 layers, hidden 64), forward with labels and backward of the loss."""
    from minidynamo import zoo

    model, _, kwargs = zoo.gpt2()

    def gpt2_tiny(input_ids):
        return model(input_ids=input_ids, labels=input_ids).loss

    return Workload(gpt2_tiny, lambda: (kwargs["input_ids"],), backward=True)


def _resnet10t_train(quick: bool) -> Workload:
    """timm resnet10t in train mode (BatchNorm updates its running statistics): forward and backward."""
    from minidynamo import zoo

    model, args, _ = zoo.resnet10t()
    model.train()

    def resnet10t_train(x):
        return model(x).sum()

    return Workload(resnet10t_train, lambda: args, backward=True)


def _timm_cnn(name: str, quick: bool) -> Workload:
    """A timm CNN built from its config (pretrained=False) in train mode: forward, sum, backward."""
    import torch

    from minidynamo import zoo

    zoo._without_broken_torchvision()
    import timm

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10).train()
    shape = (2, 3, 32, 32) if quick else (2, 3, 64, 64)  # batch 2: train-mode BatchNorm needs 2 values

    def cnn(x):
        return model(x).sum()

    cnn.__name__ = cnn.__qualname__ = name.replace("_100", "")
    return Workload(cnn, lambda: (torch.randn(*shape),), backward=True)


_BUILDERS = {
    "resnet18_train": lambda quick: _timm_cnn("resnet18", quick),
    "mobilenetv3_small_train": lambda quick: _timm_cnn("mobilenetv3_small_100", quick),
    "mlp": _mlp,
    "transformer_block": _transformer_block,
    "mutation_views": _mutation_views,
    "pointwise_chain": _pointwise_chain,
    "inputs200": _inputs200,
    "gpt2_tiny": _gpt2_tiny,
    "resnet10t_train": _resnet10t_train,
}


def _warmup_fn(x):
    # The unrelated function compiled first in "warm" measurements.
    return (x.sin() * 2).relu().sum()


def _compile(system: str, fn: Callable) -> Callable:
    if system == "ours":
        import minidynamo as md

        return md.compile(fn, backend="aot_eager")
    import torch

    from minidynamo.real_passes import counting_backend

    return torch.compile(fn, backend=counting_backend("aot_eager"))


def _reset(system: str) -> None:
    if system == "ours":
        import minidynamo as md

        md.reset()
    else:
        from minidynamo._torch_private import dynamo_reset

        dynamo_reset()


def _call(fn: Callable, args: tuple, backward: bool) -> Any:
    out = fn(*args)
    if backward:
        out.backward()
    return out

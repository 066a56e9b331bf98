"""The helpers, classes, modules and constant globals that the corpus's cases share.

Place in the pipeline: beside ``minidynamo.symbolic``; user code to it, called and read by
the cases of ``dynamo_cases.py``. Mirrors the module-level helpers of PyTorch's
``test/dynamo/test_functions.py`` and ``test/dynamo/test_modules.py``. Globals that cases
*write* live with those cases (each case module resets and observes its own).
"""

from __future__ import annotations

import collections

import torch
import torch.nn as nn

from .dynamo_testing import T


# ---------------------------------------------------------------------------
# Shared helpers, classes and globals the cases use
# ---------------------------------------------------------------------------

SCALE = 3
OFFSET = 0.5
NAMES = ("a", "b", "c")
GW = T(4, 4, seed=11)
def helper_add(a, b):
    return a + b


def helper_default(x, y=2, *, z=3):
    return x * y + z


def helper_star(*args):
    out = args[0]
    for a in args[1:]:
        out = out + a
    return out


def helper_kw(**kwargs):
    return kwargs["x"] * kwargs.get("s", 1)


def helper_nested(x):
    return helper_add(x, 1) * 2


def helper_recursive(x, n):
    if n == 0:
        return x
    return helper_recursive(x + 1, n - 1)


def helper_print(x):
    y = x * 2
    print("helper_print")
    return y + 1


def helper_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def helper_item(x):
    return x.sum().item()


class Point:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm2(self):
        return self.x * self.x + self.y * self.y

    def scaled(self, k):
        return Point(self.x * k, self.y * k)

    @staticmethod
    def origin_dist(a, b):
        return a - b

    @classmethod
    def make(cls, v):
        return cls(v, v)


class Config:
    def __init__(self):
        self.scale = 2
        self.use_relu = True
        self.name = "cfg"


class Holder:
    def __init__(self):
        self.count = 0
        self.items = []


Pair = collections.namedtuple("Pair", ["first", "second"])


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.arange(4.0))
        self.weight = nn.Parameter(torch.ones(4) * 0.5)

    def forward(self, x):
        return (x - self.mean) * self.weight


class WithList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.scale = 0.5

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) * self.scale
        return x


class WithDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})

    def forward(self, x):
        return {k: h(x) for k, h in self.heads.items()}


class WithHelper(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def act(self, x):
        return torch.tanh(x) * 2

    def forward(self, x):
        return self.act(self.lin(x))


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), WithBuffer())
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.inner(x))


class PrintingModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("PrintingModule")
        return torch.relu(y)


def _mod(cls, seed=0):
    torch.manual_seed(seed)
    return cls()

"""AOTAutograd over symbolic sizes, size sequence by size sequence, against torch 2.13 (issues 26 and 28).

Each case is a function and a sequence of input sizes, run in training (a backward after
every call) or inference (``torch.no_grad``), through ``md.compile(backend="aot_eager")``
and through ``torch.compile`` with torch's ``aot_eager`` (``dynamic=None``: automatic
dynamic, so the second size recompiles with dynamic dims). torch's backend is built with
``torch._dynamo.backends.common.aot_autograd`` and compilers that count. Compared per case:
results and gradients against eager at every size; the number of Dynamo graphs; the number
of AOT forward (or inference) compiles. Ours must never fall back: no ``AOTFallbackWarning``,
no per-size AOT compile (the ``aot_symbolic_failed`` / ``aot_specialized`` events of
Note [AOT backends specialize per size] in ``minidynamo/backends.py``).

Run as a script (``python tests/test_aot_symbolic_like_torch.py``) it prints a table, one
row per case: graphs and AOT compiles of both, and why ours fell back.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import minidynamo as md
from minidynamo import events
from minidynamo._torch_private import dynamo_reset, torch_counting_aot_eager

pytestmark = pytest.mark.ch15

SIZES = (4, 6, 8, 10, 12)


def _seeded(build):
    torch.manual_seed(0)
    return build()


# -- the programs -----------------------------------------------------------------------------

class Block(nn.Module):
    """A small pre-norm transformer block (attention by hand, SDPA, MLP)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class HandAttention(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        w = (q @ k.transpose(-2, -1)) / math.sqrt(x.size(-1))
        return w.softmax(-1) @ v


def mha_fn(m):
    return lambda x: m(x, x, x, need_weights=False)[0]


def mha_weights_fn(m):
    return lambda x: m(x, x, x)[0]


def module_fn(m):
    return lambda x: m(x)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def layer_norm_last(x):
    return F.layer_norm(x, x.shape[-1:])


def half_size(x):
    return x * (x.size(0) / 2)


def sqrt_last(x):
    return x / math.sqrt(x.size(-1))


def float_size(x):
    return x * float(x.size(0))


def scale_pow(x):
    return (x @ x.transpose(0, 1)) * x.size(-1) ** -0.5


def ceil_div(x):
    n = x.size(0)
    return F.pad(x, (0, 0, 0, (n + 3) // 4 * 4 - n)).view(-1, 4, x.size(1)).sum(1)


def ceil_div_slice(x):
    return x[: (x.size(0) + 3) // 4] * 2


def view_half(x):
    n = x.size(1)
    return x.view(-1, n // 2).sin()


def reshape_flat(x):
    return x.reshape(x.size(0) * x.size(1)).cos()


def expand_rows(x):
    return x.unsqueeze(0).expand(3, -1, -1).sum(0) * x


def expand_col(x, y):
    return y.expand(x.size(0), 4) * x


def cat_self(x):
    return torch.cat([x, x * 2], 0).sin()


def cat_two(x, y):
    return torch.cat([x, y], 0).exp()


def stack_two(x):
    return torch.stack([x, x.cos()], 1).sum(-1)


def mean_by_numel(x):
    return x.sum() / x.numel() + x


def arange_add(x):
    return torch.arange(x.size(0), dtype=x.dtype) + x


def chunk_halves(x):
    a, b = x.chunk(2, dim=-1)
    return a * b.sigmoid()


def slice_half(x):
    return x[:, : x.size(1) // 2].tanh()


def transpose_view(x):
    return x.transpose(0, 1).contiguous().view(x.size(1), -1).relu()


def softmax_temp(x):
    return (x / x.size(-1)).softmax(-1)


def var_by_hand(x):
    m = x.mean(0)
    return ((x - m) ** 2).sum(0) / (x.size(0) - 1)


def new_ones_sized(x):
    return x + x.new_ones(x.size(0), 1) * x.size(1)


def zeros_sized(x):
    return x + torch.zeros(x.size(0), 1) + x.new_zeros(x.size(1))


def full_half(x):
    return x * torch.full((x.size(0), 1), x.size(0) / 2)


def mutate_view(x):
    y = x.clone()
    y[: y.size(0) // 2].mul_(2)
    return y


def mutate_input(x, b):
    b.add_(x.size(0))
    return x * b.sum()


def narrow_half(x):
    return x.narrow(0, 1, x.size(0) // 2).exp()


def repeat_rows(x):
    return x.repeat(2, 1).sin()


def interpolate_twice(x):
    return F.interpolate(x, scale_factor=2.0, mode="linear")


def index_arange(x):
    return x.index_select(0, torch.arange(x.size(0) // 2)) * 2


def roll_half(x):
    return torch.roll(x, x.size(0) // 2, 0) * x


def split_sizes(x):
    n = x.size(0)
    a, b = x.split([n // 2, n - n // 2], 0)
    return a.sum(0) * b.sum(0)


def keepdim_expand(x):
    return x - x.sum(0, keepdim=True).expand_as(x) / x.size(0)


def flatten_view_out(x):
    return x.flatten(0, 1)


def alias_out(x):
    y = x * 2
    return y, y.view(-1), x.t()


def masked_fill_tri(x):
    n = x.size(-2)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    return (x @ x.transpose(-2, -1)).masked_fill(mask, float("-inf")).softmax(-1)


def unfold_windows(x):
    return x.unfold(0, 2, 2).sum(-1)


def _t(*shape):
    return torch.randn(*shape)


# name -> (build the callable, inputs for a size n, modules whose params get grads)
CASES = {
    "mha_seq": (lambda: mha_fn(nn.MultiheadAttention(16, 2, batch_first=True)), lambda n: (_t(2, n, 16),)),
    "mha_batch": (lambda: mha_fn(nn.MultiheadAttention(16, 2, batch_first=True)), lambda n: (_t(n, 5, 16),)),
    "mha_weights": (lambda: mha_weights_fn(nn.MultiheadAttention(16, 4, batch_first=True)), lambda n: (_t(2, n, 16),)),
    "sdpa_seq": (lambda: sdpa, lambda n: (_t(2, 2, n, 8), _t(2, 2, n, 8), _t(2, 2, n, 8))),
    "sdpa_causal": (lambda: sdpa_causal, lambda n: (_t(2, 2, n, 8), _t(2, 2, n, 8), _t(2, 2, n, 8))),
    "layernorm_rows": (lambda: module_fn(nn.LayerNorm(16)), lambda n: (_t(n, 16),)),
    "layernorm_last": (lambda: layer_norm_last, lambda n: (_t(3, n),)),
    "block": (lambda: module_fn(Block()), lambda n: (_t(2, n, 16),)),
    "hand_attention": (lambda: module_fn(HandAttention()), lambda n: (_t(2, n, 16),)),
    "encoder_layer": (lambda: module_fn(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)),
                      lambda n: (_t(2, n, 16),)),
    "half_size": (lambda: half_size, lambda n: (_t(n, 3),)),
    "sqrt_last": (lambda: sqrt_last, lambda n: (_t(3, n),)),
    "float_size": (lambda: float_size, lambda n: (_t(n, 3),)),
    "scale_pow": (lambda: scale_pow, lambda n: (_t(5, n),)),
    "ceil_div": (lambda: ceil_div, lambda n: (_t(n + 1, 3),)),
    "ceil_div_slice": (lambda: ceil_div_slice, lambda n: (_t(n + 1, 3),)),
    "view_half": (lambda: view_half, lambda n: (_t(4, n),)),
    "reshape_flat": (lambda: reshape_flat, lambda n: (_t(n, 3),)),
    "expand_rows": (lambda: expand_rows, lambda n: (_t(n, 3),)),
    "expand_col": (lambda: expand_col, lambda n: (_t(n, 4), _t(1, 4))),
    "cat_self": (lambda: cat_self, lambda n: (_t(n, 3),)),
    "cat_two": (lambda: cat_two, lambda n: (_t(n, 3), _t(n + 1, 3))),
    "stack_two": (lambda: stack_two, lambda n: (_t(n, 3),)),
    "mean_by_numel": (lambda: mean_by_numel, lambda n: (_t(n, 3),)),
    "arange_add": (lambda: arange_add, lambda n: (_t(n),)),
    "chunk_halves": (lambda: chunk_halves, lambda n: (_t(3, n),)),
    "slice_half": (lambda: slice_half, lambda n: (_t(3, n),)),
    "transpose_view": (lambda: transpose_view, lambda n: (_t(n, 3),)),
    "softmax_temp": (lambda: softmax_temp, lambda n: (_t(3, n),)),
    "var_by_hand": (lambda: var_by_hand, lambda n: (_t(n, 3),)),
    "new_ones_sized": (lambda: new_ones_sized, lambda n: (_t(n, 3),)),
    "linear_batch": (lambda: module_fn(nn.Linear(8, 4)), lambda n: (_t(n, 8),)),
    "conv1d_len": (lambda: module_fn(nn.Conv1d(3, 4, 3)), lambda n: (_t(2, 3, n),)),
    "embedding_len": (lambda: module_fn(nn.Embedding(20, 8)), lambda n: (torch.randint(0, 20, (2, n)),)),
    "zeros_sized": (lambda: zeros_sized, lambda n: (_t(n, 3),)),
    "full_half": (lambda: full_half, lambda n: (_t(n, 3),)),
    "mutate_view": (lambda: mutate_view, lambda n: (_t(n, 3),)),
    "mutate_input": (lambda: mutate_input, lambda n: (_t(n, 3), torch.ones(3))),
    "narrow_half": (lambda: narrow_half, lambda n: (_t(n, 3),)),
    "repeat_rows": (lambda: repeat_rows, lambda n: (_t(n, 3),)),
    "interpolate_twice": (lambda: interpolate_twice, lambda n: (_t(2, 3, n),)),
    "index_arange": (lambda: index_arange, lambda n: (_t(n, 3),)),
    "roll_half": (lambda: roll_half, lambda n: (_t(n, 3),)),
    "split_sizes": (lambda: split_sizes, lambda n: (_t(n + 1, 3),)),
    "keepdim_expand": (lambda: keepdim_expand, lambda n: (_t(n, 3),)),
    "flatten_view_out": (lambda: flatten_view_out, lambda n: (_t(n, 3, 2).clone(),)),
    "alias_out": (lambda: alias_out, lambda n: (_t(n, 3),)),
    "masked_fill_tri": (lambda: masked_fill_tri, lambda n: (_t(2, n, 4),)),
    "unfold_windows": (lambda: unfold_windows, lambda n: (_t(n, 3),)),
}

PROBES = [(name, training) for name in CASES for training in (True, False)]


def _params(fn):
    owner = getattr(fn, "__closure__", None) or ()
    for cell in owner:
        if isinstance(cell.cell_contents, nn.Module):
            return list(cell.cell_contents.parameters())
    return []


MUTATED = {"mutate_input": {1}}  # arguments the function writes: no grad, compared after the call


def _inputs(name, n, training):
    torch.manual_seed(100 + n)
    args = CASES[name][1](n)
    if training:
        args = tuple(a.requires_grad_() if a.is_floating_point() and i not in MUTATED.get(name, ()) else a
                     for i, a in enumerate(args))
    return args


def _outputs(out):
    return list(out) if isinstance(out, tuple) else [out]


def _run_sequence(name, training, compile_fn):
    """Outputs, the arguments after the call, and gradients (inputs', then parameters') at each size."""
    fn = _seeded(CASES[name][0])
    params = _params(fn)
    compiled = compile_fn(fn)
    results = []
    for n in SIZES:
        args = _inputs(name, n, training)
        for p in params:
            p.grad = None
        if training:
            outs = _outputs(compiled(*args))
            sum(o.sum() for o in outs).backward()
            grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad] + [p.grad for p in params]
        else:
            with torch.no_grad():
                outs = _outputs(compiled(*args))
            grads = []
        results.append(([o.detach() for o in outs] + [a.detach() for a in args], grads))
    return results


def run_torch(name, training):
    dynamo_reset()
    counts = {"dynamo": 0, "aot_fw": 0}
    backend = torch_counting_aot_eager(counts)
    results = _run_sequence(name, training, lambda fn: torch.compile(fn, backend=backend, dynamic=None))
    return results, counts


def run_ours(name, training):
    """``(results, counts)``; counts: Dynamo graphs, AOT forward compiles, and why AOT fell back (if it did)."""
    md.reset()
    counts = {"dynamo": 0, "aot_fw": 0, "fallback": []}
    with events.record() as log, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = _run_sequence(name, training, lambda fn: md.compile(fn, backend="aot_eager", dynamic=None))
    for e in log:
        if e.kind == "dynamo_graph":
            counts["dynamo"] += 1
        elif e.kind == "aot_graph" and e.details.get("which") == "Forward graph":
            counts["aot_fw"] += 1
        elif e.kind == "aot_symbolic_failed":
            counts["fallback"].append(e.details.get("reason", "")[:160])
    counts["fallback"] += [str(w.message)[:160] for w in caught if type(w.message).__name__ == "AOTFallbackWarning"]
    return results, counts


def run_eager(name, training):
    return _run_sequence(name, training, lambda fn: fn)


def _assert_close(ours, eager):
    for (o, og), (e, eg) in zip(ours, eager, strict=True):
        torch.testing.assert_close(o, e, rtol=1e-4, atol=1e-5)
        assert len(og) == len(eg)
        for a, b in zip(og, eg):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,training", PROBES, ids=[f"{n}-{'train' if t else 'infer'}" for n, t in PROBES])
def test_aot_compiles_like_torch(name, training):
    eager = run_eager(name, training)
    ours, ocounts = run_ours(name, training)
    theirs, tcounts = run_torch(name, training)
    _assert_close(theirs, eager)  # the oracle itself is right
    _assert_close(ours, eager)
    assert ocounts["fallback"] == []
    assert ocounts["dynamo"] == tcounts["dynamo"]
    assert ocounts["aot_fw"] == tcounts["aot_fw"]


def main() -> None:
    same = 0
    for name, training in PROBES:
        row = f"{name:16s} {'train' if training else 'infer'}"
        try:
            eager = run_eager(name, training)
            ours, o = run_ours(name, training)
            theirs, t = run_torch(name, training)
            try:
                _assert_close(ours, eager)
                ok = "ok"
            except AssertionError:
                ok = "WRONG"
            match = not o["fallback"] and o["dynamo"] == t["dynamo"] and o["aot_fw"] == t["aot_fw"] and ok == "ok"
            same += match
            print(f"{row} graphs {o['dynamo']}/{t['dynamo']} aot {o['aot_fw']}/{t['aot_fw']} {ok} "
                  f"{'SAME' if match else 'DIFF'} {o['fallback'][:1]}", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"{row} RAISED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    print(f"{same}/{len(PROBES)} sequences compile AOT as often as torch")


if __name__ == "__main__":
    main()

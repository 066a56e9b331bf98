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
    if ocounts["dynamo"] == 0 and name in ("mha_seq", "mha_batch", "mha_weights", "encoder_layer"):
        # our Dynamo breaks before the first op of nn.MultiheadAttention.forward (F._none_or_dtype), so no
        # graph reaches AOT: the realmodels change traces through it; once it has, this case runs in full
        pytest.xfail("our Dynamo compiles no graph of nn.MultiheadAttention yet (F._none_or_dtype breaks)")
    assert ocounts["fallback"] == []
    assert ocounts["dynamo"] == tcounts["dynamo"]
    assert ocounts["aot_fw"] == tcounts["aot_fw"]


# -- unbacked symbols (issue 28): item / nonzero / masked_select / mark_unbacked ------------------------

def item_float(x, n):
    return x * n.sum().item()


def item_int_sized(x, n):
    k = (n * 2).sum().item()
    torch._check(k >= 0)
    return torch.zeros(k) + x.sum()


def item_checked(x, n):
    k = (n * 2).sum().item()
    torch._check(k >= 2)
    torch._check(k < 100)
    return x + k


def item_slice(x, n):
    k = n.sum().item()
    torch._check(k >= 0)
    torch._check(k <= x.size(0))
    return x[:k].sin()


def nonzero_rows(x, n):
    return (x > 0).nonzero().float() + n.sum()


def nonzero_gather(x, n):
    return x[(x > 0).nonzero()[:, 0]].exp() * n.sum()


def mask_index(x, n):
    return x[x > 0].sum() * n.sum()


def masked_select_exp(x, n):
    return x.masked_select(x > 0).exp() * 2


def tolist_pair(x, n):
    a, b = (n * 2).tolist()
    return x * a + b


def cond_on_item(x, n):
    return torch.cond(n.sum().item() > 2, lambda t: t.sin(), lambda t: t.cos(), (x,))


def cond_on_mask(x, n):
    y = x[x > 0]
    return torch.cond(y.sum() > 1, lambda t: t * 2, lambda t: t + 1, (y,)) * n.sum()


UNBACKED = [item_float, item_int_sized, item_checked, item_slice, nonzero_rows, nonzero_gather, mask_index,
            masked_select_exp, tolist_pair, cond_on_item, cond_on_mask]


def _unbacked_inputs(i, training):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(6, generator=g)
    return x.requires_grad_(training), torch.tensor([1, 1 + i])


def mu_sin(x):
    return (x * 2).sin()


def mu_view(x):
    return x.view(-1) * x.size(0)


def mu_matmul(x, w):
    return (x @ w).relu().sum(0)


def mu_cat(x):
    return torch.cat([x, x]).cos()


MARK_UNBACKED = {"mu_sin": (mu_sin, lambda n: (_t(n, 3),)), "mu_view": (mu_view, lambda n: (_t(n, 3),)),
                 "mu_matmul": (mu_matmul, lambda n: (_t(n, 4), _t(4, 5))), "mu_cat": (mu_cat, lambda n: (_t(n, 3),))}


# -- torch.cond over symbolic sizes (issue 28) --------------------------------------------------------------

def cond_data(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin() * 2, lambda t: t.cos(), (x,))


def cond_closure(x, w):
    return torch.cond(x.mean() > 0, lambda t: t @ w, lambda t: (t * 2) @ w, (x,))


def cond_size_pred(x):
    return torch.cond(x.shape[0] > 6, lambda t: t.sin(), lambda t: t.cos(), (x,))


def cond_sized_branch(x):
    return torch.cond(x.sum() > 0, lambda t: t * t.size(0), lambda t: t.view(-1).view(t.shape) + 1, (x,))


def cond_then_more(x):
    y = x * 3
    return torch.cond(y.sum() > 0, lambda t: t.exp(), lambda t: t.neg(), (y,)).sum(0)


CONDS = {"cond_data": (cond_data, lambda n: (_t(n, 3),)),
         "cond_closure": (cond_closure, lambda n: (_t(n, 4), _t(4, 2))),
         "cond_size_pred": (cond_size_pred, lambda n: (_t(n, 3),)),
         "cond_sized_branch": (cond_sized_branch, lambda n: (_t(n, 3),)),
         "cond_then_more": (cond_then_more, lambda n: (_t(n, 3),))}


def _run_calls(fn, calls, training, compile_fn, mark=None):
    """Outputs and input gradients of ``compile_fn(fn)`` over ``calls`` (argument makers); ``mark(t)`` per call."""
    compiled = compile_fn(fn)
    results = []
    for make in calls:
        args = make()
        if training:
            args = tuple(a.requires_grad_() if a.is_floating_point() else a for a in args)
        if mark is not None:
            mark(args[0])
        if training:
            out = compiled(*args)
            if out.requires_grad:
                out.float().sum().backward()
            results.append(([out.detach()], [a.grad for a in args if a.requires_grad]))
        else:
            with torch.no_grad():
                results.append(([compiled(*args)], []))
    return results


def _count_ours(run):
    counts = {"dynamo": 0, "aot_fw": 0, "fallback": []}
    with events.record() as log, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run()
    for e in log:
        if e.kind == "dynamo_graph":
            counts["dynamo"] += 1
        elif e.kind == "aot_graph" and e.details.get("which") == "Forward graph":
            counts["aot_fw"] += 1
        elif e.kind == "aot_symbolic_failed":
            counts["fallback"].append(e.details.get("reason", "")[:160])
    counts["fallback"] += [str(w.message)[:160] for w in caught
                           if type(w.message).__name__ == "AOTFallbackWarning" or "internal error" in str(w.message)]
    return results, counts


def _compare_calls(fn, calls, training, *, flags=None, mark=None):
    """(ours' counts, torch's counts) after checking both against eager."""
    import torch._dynamo

    from minidynamo._torch_private import dynamo_mark_unbacked

    flags = flags or {}
    eager = _run_calls(fn, calls, training, lambda f: f)
    md.reset()
    with md.config.patch(**flags):
        ours, ocounts = _count_ours(lambda: _run_calls(fn, calls, training, lambda f: md.compile(f, backend="aot_eager"),
                                                        mark=(lambda t: md.mark_unbacked(t, 0)) if mark else None))
    dynamo_reset()
    tcounts = {"dynamo": 0, "aot_fw": 0}
    with torch._dynamo.config.patch(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _run_calls(fn, calls, training, lambda f: torch.compile(f, backend=torch_counting_aot_eager(tcounts)),
                            mark=(lambda t: dynamo_mark_unbacked(t, 0)) if mark else None)
    _assert_close(theirs, eager)
    _assert_close(ours, eager)
    return ocounts, tcounts


UNBACKED_PROBES = [(f.__name__, t) for f in UNBACKED for t in (True, False)]
MARK_PROBES = [(n, t) for n in MARK_UNBACKED for t in (True, False)]
COND_PROBES = [(n, t) for n in CONDS for t in (True, False)]


def _unbacked_case(name, training):
    fn = next(f for f in UNBACKED if f.__name__ == name)
    calls = [lambda i=i: _unbacked_inputs(i, False) for i in range(3)]
    return _compare_calls(fn, calls, training,
                          flags=dict(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True))


def _mark_case(name, training):
    fn, make = MARK_UNBACKED[name]
    return _compare_calls(fn, [lambda n=n: (torch.manual_seed(n), make(n))[1] for n in (5, 7, 9)], training, mark=True)


def _cond_case(name, training):
    fn, make = CONDS[name]
    return _compare_calls(fn, [lambda n=n: (torch.manual_seed(n), make(n))[1] for n in (4, 6, 8, 10)], training)


def _check_counts(ocounts, tcounts):
    assert ocounts["fallback"] == []
    assert ocounts["dynamo"] == tcounts["dynamo"]
    assert ocounts["aot_fw"] == tcounts["aot_fw"]


@pytest.mark.ch16
@pytest.mark.parametrize("name,training", UNBACKED_PROBES, ids=[f"{n}-{'train' if t else 'infer'}" for n, t in UNBACKED_PROBES])
def test_aot_over_unbacked_like_torch(name, training):
    """``.item()`` / ``nonzero`` / ``masked_select`` / boolean masks under the two capture configs: one AOT compile,
    no eager fallback, results and gradients equal eager (the runtime asserts run in the compiled forward)."""
    _check_counts(*_unbacked_case(name, training))


@pytest.mark.ch16
@pytest.mark.parametrize("name,training", MARK_PROBES, ids=[f"{n}-{'train' if t else 'infer'}" for n, t in MARK_PROBES])
def test_aot_over_mark_unbacked_like_torch(name, training):
    _check_counts(*_mark_case(name, training))


@pytest.mark.ch16
@pytest.mark.parametrize("name,training", COND_PROBES, ids=[f"{n}-{'train' if t else 'infer'}" for n, t in COND_PROBES])
def test_cond_over_symbolic_sizes_like_torch(name, training):
    _check_counts(*_cond_case(name, training))


def test_unbacked_graphs_read_like_torchs(real_dynamo):
    """``x[:u0]`` in training: the forward reads ``u0`` off ``_local_scalar_dense`` and keeps the two runtime asserts;
    the backward takes ``u0`` as a saved SymInt and has no assert, as torch's aot_eager graphs."""
    import torch._dynamo

    from minidynamo.backends import aot_eager

    flags = dict(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True)
    x, n = _unbacked_inputs(1, True)
    theirs, ours = {}, []
    dynamo_reset()
    with torch._dynamo.config.patch(**flags):
        out = torch.compile(item_slice, backend=torch_counting_aot_eager({}, graphs=theirs))(x, n)
        out.sum().backward()
    md.reset()
    with md.config.patch(**flags):
        md.compile(item_slice, backend=lambda gm, ex: ours.append(aot_eager(gm, ex)) or ours[-1])(x, n)
    part = ours[0].artifacts.partition
    ops = lambda gm: [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]  # noqa: E731
    for mine, theirs in ((part.fw_module, theirs["aot_fw"][0]), (part.bw_module, theirs["aot_bw"][0])):
        assert ops(mine).count("aten._assert_scalar.default") == ops(theirs).count("aten._assert_scalar.default")
        assert [o for o in ops(mine) if o.startswith("aten.")] == [o for o in ops(theirs) if o.startswith("aten.")]


def _all_probes():
    for name, training in PROBES:
        yield f"{name} {'train' if training else 'infer'}", lambda name=name, training=training: _sizes_case(name, training)
    for name, training in UNBACKED_PROBES:
        yield f"{name} {'train' if training else 'infer'}", lambda name=name, training=training: _unbacked_case(name, training)
    for name, training in MARK_PROBES:
        yield f"{name} {'train' if training else 'infer'}", lambda name=name, training=training: _mark_case(name, training)
    for name, training in COND_PROBES:
        yield f"{name} {'train' if training else 'infer'}", lambda name=name, training=training: _cond_case(name, training)


def _sizes_case(name, training):
    eager = run_eager(name, training)
    ours, ocounts = run_ours(name, training)
    theirs, tcounts = run_torch(name, training)
    _assert_close(theirs, eager)
    _assert_close(ours, eager)
    return ocounts, tcounts


def main() -> None:
    same = total = 0
    for label, case in _all_probes():
        total += 1
        try:
            o, t = case()
            match = not o["fallback"] and o["dynamo"] == t["dynamo"] and o["aot_fw"] == t["aot_fw"]
            same += match
            print(f"{label:28s} graphs {o['dynamo']}/{t['dynamo']} aot {o['aot_fw']}/{t['aot_fw']} "
                  f"{'SAME' if match else 'DIFF'} {o['fallback'][:1]}", flush=True)
        except Exception as exc:  # noqa: BLE001
            print(f"{label:28s} RAISED {type(exc).__name__}: {str(exc)[:200]}", flush=True)
    print(f"{same}/{total} sequences compile AOT as often as torch (ours/torch above)")


if __name__ == "__main__":
    main()

"""The per-call hot path: shortcuts taken after the first call must give eager's answers.

Covers Note [The hot path skips pytree] (aot_function), Note [A whole sequence is
passed with a star] (the transformed function) and the write-back chosen once per
mutated input (runtime wrapper), each against eager.
"""

import pytest
import torch

import minidynamo as md
from minidynamo.aot import aot_function


def test_aot_function_fast_path_keeps_the_output_structure():
    def f(x, y):
        return {"sum": x + y, "pair": (x * 2, [y.sin()])}

    cf = aot_function(f)
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(3):  # first call compiles; later ones take the fast path
        got, want = cf(x, y), f(x, y)
        assert got.keys() == want.keys() and isinstance(got["pair"][1], list)
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("make_out", [lambda x: x + 1, lambda x: (x + 1, x * 2), lambda x: [x + 1]],
                         ids=["leaf", "tuple", "list"])
def test_aot_function_fast_path_output_kinds(make_out):
    cf = aot_function(make_out)
    x = torch.randn(4)
    for _ in range(3):
        got, want = cf(x), make_out(x)
        assert type(got) is type(want)
        torch.testing.assert_close(got, want)


def test_aot_function_refuses_a_new_argument_structure():
    cf = aot_function(lambda xs: xs[0] + xs[1])
    cf((torch.randn(2), torch.randn(2)))
    with pytest.raises(TypeError, match="compiled for arguments shaped"):
        cf([torch.randn(2), torch.randn(2)])  # a list, not the compiled tuple


def test_aot_function_flat_first_then_container_takes_the_checked_path():
    cf = aot_function(lambda x: x * 3)
    cf(torch.randn(2))
    with pytest.raises(TypeError, match="compiled for arguments shaped"):
        cf((torch.randn(2),))


def test_mutated_leaf_inputs_are_written_back_each_call():
    def f(a, b, c):
        a.add_(1)
        c.mul_(2)
        return a + b

    cf = aot_function(f)
    args = [torch.randn(3) for _ in range(3)]
    ref = [t.clone() for t in args]
    for _ in range(3):
        torch.testing.assert_close(cf(*args), f(*ref))
        torch.testing.assert_close(args, ref)


def test_star_argument_graph_call_equals_eager():
    def f(xs):
        return torch.stack(list(xs)).sum(0) * xs[0]

    cf = md.compile(f, backend="aot_eager")
    xs = tuple(torch.randn(3) for _ in range(5))
    torch.testing.assert_close(cf(xs), f(xs))
    assert "(*L['xs'])" in cf.cache.entries[0].transformed_source
    torch.testing.assert_close(cf(xs), f(xs))  # the cached entry, same answer


@pytest.mark.parametrize("container", [dict, "partial"], ids=["dict", "some_items"])
def test_star_argument_only_for_a_whole_sequence(container):
    if container is dict:
        def f(d):
            return d[0] + d[1]

        arg = {0: torch.randn(2), 1: torch.randn(2)}
    else:
        def f(d):
            return d[0] + d[2]

        arg = (torch.randn(2), torch.randn(2), torch.randn(2))
    cf = md.compile(f, backend="eager")
    torch.testing.assert_close(cf(arg), f(arg))
    assert "*L['d']" not in cf.cache.entries[0].transformed_source


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_graph_code_is_written_once_not_per_call(backend, monkeypatch):
    """Note [Graph modules compile their code lazily]: the ``eager`` backend returns ``gm.forward``
    (torch's does too), a bound method the cache keeps; its first run writes the code and every
    later run calls that code, as torch's ``_LazyGraphModule.real_recompile`` does, never writing it again."""
    from torch.fx.graph_module import GraphModule

    written = []
    real = GraphModule.recompile
    monkeypatch.setattr(GraphModule, "recompile", lambda self: written.append(1) or real(self))
    cf = md.compile(lambda x, y: (x + y).relu(), backend=backend)
    x, y = torch.randn(3), torch.randn(3)
    cf(x, y)
    first = len(written)
    for _ in range(5):
        torch.testing.assert_close(cf(x, y), (x + y).relu())
    assert first >= 1 and len(written) == first

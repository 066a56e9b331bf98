"""set_(), resize_() and out= ops: functionalized and compiled where torch compiles them.

Oracles: torch's ``run_functionalized_fw_and_collect_metadata`` (through
``_torch_private.torch_collect_metadata``) for the metadata, field by field, with
the same ``keep_input_mutations``; eager PyTorch for the outputs, the inputs after
the call (values, sizes, strides) and the gradients. Every case is called twice
through ``aot_function``, so the cached hot path is compared too. Where torch
refuses a program, ours must run it eagerly with torch's reason in the warning.

The cases are written after PyTorch's own (``test/functorch/test_aotdispatch.py``:
``test_input_mutation_set__*``, ``test_set__steals_view_chain``,
``test_input_mutation_return``; ``test/test_functionalization.py``: ``test_resize_*``,
``test_set_*``, out= tests), in our own words.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import torch_aot_function, torch_collect_metadata, torch_make_boxed_func
from minidynamo.aot import aot_function, collect_metadata
from minidynamo.aot.aot_autograd import AOTFallbackWarning
from minidynamo.corpus.metadata_compare import metadata_differences

pytestmark = pytest.mark.ch11


@dataclass
class StorageCase:
    name: str
    fn: Callable
    make: Callable[[bool], list]  # requires_grad -> fresh inputs, same values every call
    keeps: tuple[bool, ...] = (True, False)
    grads: tuple[bool, ...] = (False, True)
    compare_inputs: bool = True  # False where eager leaves uninitialised memory in an input
    # torch's metadata pass fails on this program for a reason of its own (its first line); ours compiles it
    torch_fails: str | None = None


CASES: list[StorageCase] = []


def case(make, **kw):
    def deco(fn):
        CASES.append(StorageCase(fn.__name__, fn, make, **kw))
        return fn
    return deco


def _ones(rg):
    return [torch.ones(3, 3, requires_grad=rg)]


def _seeded(*shapes, rg=False):
    g = torch.Generator().manual_seed(len(shapes))
    return [torch.randn(*s, generator=g, requires_grad=rg) for s in shapes]


# ----------------------------------------------------------------------------- set_


@case(_ones)
def set_input_to_fresh_tensor(a):
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        a.set_(b)
    return a * b


@case(lambda rg: [torch.ones(3, 3), torch.zeros(3, 9)], grads=(False,))
def set_intermediate_takes_a_view_chain(a, b):
    a_ = a.mul(2)
    b_ = b.mul(2)
    b_slice = b_[1].view(3, 3)
    a_.set_(b_slice)
    a_.view(-1).mul_(2)  # writes through b_'s storage
    return a_ * b_slice


@case(lambda rg: [torch.ones(3, 3, requires_grad=rg), torch.full((3, 3), 2.0, requires_grad=rg)])
def set_input_then_mutate_the_source(a, b):
    with torch.no_grad():
        a.set_(b)
        b.mul_(2)
    return a + b


@case(_ones)
def set_twice_back_to_itself(a):
    b = torch.arange(9, dtype=a.dtype)
    a_old = torch.ops.aten.alias.default(a)
    with torch.no_grad():
        a.set_(b)
        a.set_(a_old)
    return a + b.reshape(3, 3)


@case(lambda rg: [torch.ones(2, 3), torch.arange(6.0).reshape(2, 3)], grads=(False,))
def set_input_to_another_input_returned(a, b):
    with torch.no_grad():
        a.set_(b)
    return a


@case(lambda rg: [torch.ones(4), torch.arange(4.0)], grads=(False,))
def set_input_then_mutate_it(a, b):
    with torch.no_grad():
        a.set_(b)
        a.mul_(3)
    return a + 1


@case(lambda rg: [torch.ones(2, 2), torch.zeros(2, 2)], grads=(False,), keeps=(True,))
def set_then_write_to_the_old_storage(a, b):
    """torch freezes the storage set_() left: "cannot mutate tensors with frozen storage"."""
    v = a.view(-1)
    with torch.no_grad():
        a.set_(b)
    v.mul_(2)
    return a + 1


@case(lambda rg: _seeded((3, 4), (4,), rg=rg), grads=(True,))
def set_buffer_beside_a_grad_computation(w, buf):
    y = (w * 2).sum(0)
    with torch.no_grad():
        buf.set_(y.detach().clone())
    return y * 3


# set_ with a Storage, and set_() with no source: torch's functionalization has no hand-written
# kernel for them (only for set_(Tensor)); the generated one runs the functional twin, which
# below a FakeTensor cannot take the storage the program holds (a cpu one): torch refuses.


@case(lambda rg: [torch.ones(3, requires_grad=rg), torch.arange(4.0)])
def set_input_to_a_storage(x, y):
    with torch.no_grad():
        x.set_(y.untyped_storage())
    return x + 1


@case(lambda rg: [torch.ones(3, requires_grad=rg), torch.arange(6.0)])
def set_input_to_a_storage_with_offset(x, y):
    with torch.no_grad():
        x.set_(y.untyped_storage(), 1, (2, 2), (2, 1))
    return x * 2


@case(lambda rg: [torch.ones(3, requires_grad=rg), torch.arange(6.0)])
def set_input_to_a_tensor_with_offset(x, y):
    """set_(Tensor, offset, size, stride) is CompositeImplicit: it arrives as set_(Storage, ...)."""
    with torch.no_grad():
        x.set_(y, 1, (2, 2), (2, 1))
    return x * 2


@case(lambda rg: _seeded((3,), (6,)), grads=(False,))
def set_intermediate_to_a_storage(x, y):
    a = x * 2
    a.set_(y.detach().untyped_storage(), 0, (2, 3), (3, 1))
    return a + 1


@case(lambda rg: [torch.ones(3, requires_grad=rg), torch.arange(2.0)])
def set_input_to_nothing(x, y):
    """set_(): a data mutation in torch's metadata (replace_); the copy_ back cannot shrink x."""
    with torch.no_grad():
        x.set_()
    return x.sum() + y


@case(lambda rg: _seeded((3,), (2,)), grads=(False,))
def set_intermediate_to_nothing(x, y):
    """Compiles (with grad, see test_set_on_an_intermediate_that_requires_grad)."""
    a = x * 2
    a.set_()
    return a.sum() + y


# ----------------------------------------------------------------------------- resize_as_
# A data mutation through its functional twin aten.resize_as (not resize_: torchgen groups it
# with resize_as and generates its kernel); eager refuses it on a tensor that requires grad.


@case(lambda rg: [torch.arange(9.0).reshape(3, 3), torch.ones(3, 3)], grads=(False,))
def resize_as_input_same_shape(x, y):
    x.resize_as_(y)
    x.mul_(2)
    return x + y


@case(lambda rg: [torch.arange(4.0), torch.ones(3, 3)], grads=(False,))
def resize_as_input_bigger(x, y):
    x.resize_as_(y)
    x.fill_(1.0)
    return x * 2


@case(lambda rg: [torch.arange(9.0).reshape(3, 3), torch.ones(2, 2)], grads=(False,))
def resize_as_input_smaller(x, y):
    x.resize_as_(y)
    return x * 2


@case(lambda rg: [torch.arange(9.0).reshape(3, 3), torch.ones(3)], grads=(False,))
def resize_as_input_to_a_broadcastable_shape(x, y):
    """torch's copy_ back broadcasts (3,) into x's (3, 3): its compiled function is silently wrong."""
    x.resize_as_(y)
    return x * 2


@case(lambda rg: _seeded((4,), (3, 3), rg=rg))
def resize_as_intermediate_bigger(x, y):
    a = x.detach() * 2
    a.resize_as_(y)
    a.fill_(1.0)
    return a * y


@case(lambda rg: _seeded((3, 3), (2, 2), rg=rg))
def resize_as_intermediate_smaller_then_write(x, y):
    a = x.detach() * 2
    a.resize_as_(y)
    a.add_(1)
    return a * y, x.sum()


@case(lambda rg: [torch.arange(4.0), torch.zeros(0)], grads=(False,))
def out_into_an_empty_input(x, y):
    """out= resizes an empty input: is it resize_ (a metadata mutation) or replace_ (data only)?"""
    torch.add(x, 1, out=y)
    return y * 2


# ----------------------------------------------------------------------------- resize_


@case(lambda rg: [torch.arange(9.0).reshape(3, 3)], grads=(False,))
def resize_input_smaller(x):
    x.resize_(4)
    return x * 2


@case(lambda rg: [torch.arange(6.0)], grads=(False,))
def resize_input_smaller_then_write(x):
    x.resize_(2, 2)
    x.add_(10)
    return x.sum(0)


@case(lambda rg: _seeded((3,), rg=rg))
def resize_intermediate_larger(x):
    y = torch.zeros(2)
    y.resize_(6)
    y.fill_(1.0)
    return y * x.sum()


@case(lambda rg: [torch.arange(4.0)], grads=(False,))
def resize_input_larger(x):
    """Metadata as torch's; the compiled graph could not grow the caller's storage: eager, with a reason."""
    x.resize_(8)
    x.fill_(1.0)
    return x * 2


@case(lambda rg: _seeded((8, 2)), grads=(False,))  # eager: "cannot resize variables that require grad"
def resize_a_view_smaller_then_write_through_it(x):
    """After test_functionalization's test_resize_smaller: the write lands in y's storage."""
    y = x + 1
    z = y.view(4, 4)
    z.resize_(3, 3)
    z.view(-1).add_(1)
    return y


@case(lambda rg: _seeded((8, 2)), grads=(False,))
def resize_to_the_same_size(x):
    y = x + 1
    y.resize_(8, 2)
    y.mul_(2)
    return y, y.sum()


_FAKE_DEVICE = 'Attempted to set the storage of a tensor on device "cpu" to a storage on different device "meta"'


@case(lambda rg: _seeded((8, 2)), grads=(False,), torch_fails=_FAKE_DEVICE)
def resize_larger_then_fill(x):
    """After test_resize_larger_valid: a fresh, bigger storage, then written in full."""
    y = x + 1
    y.resize_(5, 5)
    y.view(25).fill_(1)
    return y, y + x.sum()


@case(lambda rg: _seeded((8, 2)), grads=(False,), keeps=(False,))
def resize_a_view_larger(x):
    """After test_resize_larger_invalid: torch refuses to grow a view; eager grows the storage."""
    y = x + 1
    z = y[0]
    z.resize_(20)
    z.fill_(1)
    return z * 2


# ----------------------------------------------------------------------------- out=


@case(lambda rg: [torch.arange(9.0).reshape(3, 3), torch.ones(3, 3)], grads=(False,))
def out_into_an_input_returned(a, b):
    return torch.sin(a, out=b)


@case(lambda rg: _seeded((3,), (3,), rg=False) + _seeded((3,), rg=rg))
def out_into_a_fresh_empty_tensor(a, b, w):
    buf = torch.empty(0)
    torch.mul(a, b, out=buf)  # resized from 0 to 3 elements
    return buf * w


@case(lambda rg: [torch.arange(12.0).reshape(3, 4), torch.empty(3), torch.zeros(3, dtype=torch.long)],
      grads=(False,))
def out_two_outputs_into_inputs(x, values, indices):
    torch.max(x, 1, out=(values, indices))
    return values + 1


@case(lambda rg: [torch.arange(3.0), torch.zeros(2, 3)], grads=(False,))
def out_into_a_view_of_an_input(a, b):
    torch.mul(a, 2, out=b[1])
    return b.sum()


@case(lambda rg: _seeded((3, 4), rg=False) + _seeded((4,), rg=rg))
def out_then_used_with_grad(x, w):
    s = torch.empty(4)
    torch.sum(x, 0, out=s)
    return (s * w).sum(), s


@case(lambda rg: [torch.arange(6.0).reshape(2, 3)], grads=(False,))
def out_with_a_view_op_before(a):
    """out= into a transposed view of an intermediate, read back through the base."""
    base = torch.zeros(3, 2)
    torch.mul(a, 3, out=base.t())
    return base + 1


@case(lambda rg: _seeded((4,), (4,)) + [torch.zeros(4, dtype=torch.float64)], grads=(False,))
def out_of_another_dtype(a, b, c):
    torch.add(a, b, out=c)  # the out= kernel casts into c's dtype
    return c * 2


PARAMS = [pytest.param(c, keep, rg, id=f"{c.name}-keep{int(keep)}-rg{int(rg)}")
          for c in CASES for keep in c.keeps for rg in c.grads]


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0]


def _collect(impl, c, keep, rg):
    try:
        return impl(c.fn, *c.make(rg), keep_input_mutations=keep), None
    except Exception as exc:  # noqa: BLE001 - the refusal is what we compare
        return None, exc


@pytest.mark.parametrize("c,keep,rg", PARAMS)
def test_metadata_matches_torch(c, keep, rg):
    theirs, their_exc = _collect(torch_collect_metadata, c, keep, rg)
    ours, our_exc = _collect(collect_metadata, c, keep, rg)
    if c.torch_fails is not None:
        # a torch limitation, not a refusal of the program: keep checking that it still fails so
        assert their_exc is not None and _first_line(their_exc).startswith(c.torch_fails)
        assert our_exc is None
        return
    if their_exc is not None:
        assert our_exc is not None, f"torch refuses ({_first_line(their_exc)}), ours accepts"
        assert _first_line(our_exc) == _first_line(their_exc)
        return
    assert our_exc is None, f"torch accepts, ours raises {our_exc!r}"
    assert metadata_differences(ours, theirs) == []
    for x, y in zip(ours.input_info, theirs.input_info):
        assert x.mutation_type.name == y.mutation_type.name


def _flat(o: Any) -> list:
    return [t for x in o for t in _flat(x)] if isinstance(o, (tuple, list)) else [o]


def _assert_same(a, b, what):
    for i, (x, y) in enumerate(zip(_flat(a), _flat(b))):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor), f"{what}[{i}]"
            assert x.shape == y.shape and x.stride() == y.stride(), f"{what}[{i}]: layout"
            torch.testing.assert_close(x, y, msg=f"{what}[{i}]")
        else:
            assert x == y, f"{what}[{i}]"


def _grads(outs, args):
    """``.grad`` of the leaf inputs after ``backward()`` of the summed outputs.

    Not ``torch.autograd.grad(..., inputs)``: after a ``set_()`` inside the compiled
    forward, the input's grad accumulator is a new one, which ``autograd.grad``
    does not find (torch's compiled function behaves the same); ``backward()``
    reaches the one the graph was built with.
    """
    wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    terms = [o.sum() for o in _flat(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not wrt or not terms:
        return None
    sum(terms).backward()
    return [a.grad for a in wrt]


def _compare_with_eager(compiled, c, rg, *, record: bool = False) -> list[str]:
    """Call ``compiled`` twice beside eager; outputs, inputs after and gradients must agree.

    Returns the AOTFallbackWarning messages of the first call.
    """
    fallback: list[str] = []
    for call in range(2):
        args_e, args_c = c.make(rg), c.make(rg)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out_c = compiled(*args_c)
        out_e = c.fn(*args_e)
        if call == 0:
            fallback = [str(w.message) for w in caught if issubclass(w.category, AOTFallbackWarning)]
        _assert_same(out_c, out_e, "outputs")
        if c.compare_inputs:
            _assert_same(args_c, args_e, "inputs after")
        ge, gc = _grads(out_e, args_e), _grads(out_c, args_c)
        assert (ge is None) == (gc is None)
        if ge is not None:
            for x, y in zip(gc, ge):
                assert (x is None) == (y is None)
                if x is not None:
                    torch.testing.assert_close(x, y)
    return fallback


def _torch_runtime(c, keep, rg) -> str | None:
    """torch's own aot_function on the program: None where it agrees with eager (called twice,
    gradients too); else the first line of what it raises, or "differs from eager"."""
    compiled = torch_aot_function(c.fn, lambda gm, ex: torch_make_boxed_func(gm),
                                  keep_inference_input_mutations=keep)
    try:
        _compare_with_eager(compiled, c, rg)
    except AssertionError:
        return "differs from eager"
    except Exception as exc:  # noqa: BLE001 - torch's failure is what we compare
        return _first_line(exc)
    return None


@pytest.mark.parametrize("c,keep,rg", PARAMS)
def test_runtime_matches_eager(c, keep, rg):
    """Ours equals eager always; it compiles wherever torch's compiled function equals eager, and
    runs eagerly (saying torch's reason) where torch refuses, or where torch's compiled function
    raises or is silently wrong."""
    _, their_meta_exc = _collect(torch_collect_metadata, c, keep, rg)
    theirs = _torch_runtime(c, keep, rg)
    compiled = aot_function(c.fn, keep_inference_input_mutations=keep)
    fallback = _compare_with_eager(compiled, c, rg)
    if c.torch_fails is not None:
        assert not fallback, fallback  # a limitation of torch's metadata pass: ours compiles
    elif their_meta_exc is not None:
        # torch refuses at compile time: eagerly, and the warning gives torch's reason
        assert fallback and _first_line(their_meta_exc) in fallback[0], fallback
    elif theirs is None:
        assert not fallback, fallback
        assert compiled.artifacts.fallback is None
    elif fallback and not keep and not rg and theirs != "differs from eager":
        # torch's metadata pass accepts it, but its compiled function raises at call time (the
        # wrapper's copy_ or as_strided_): ours runs it eagerly, at compile time, and quotes what
        # torch's raises. (Kept in the graph, both refuse the copy_ when tracing it, torch with the
        # message of its Python decomposition, "expand: ...", ours with the C++ meta kernel's.)
        assert theirs in fallback[0], (theirs, fallback)
    # else torch's compiled function raises or is wrong; ours, equal to eager above, may compile it


def test_set_is_the_last_node_of_the_graph_as_in_torch():
    c = next(c for c in CASES if c.name == "set_input_then_mutate_the_source")
    compiled = aot_function(c.fn, keep_inference_input_mutations=True)
    compiled(*c.make(False))
    ops = [n.target for n in compiled.artifacts.fw_module.graph.nodes if n.op == "call_function"]
    assert ops[-2:] == [torch.ops.aten.set_.source_Tensor, torch.ops.aten.copy_.default]


def test_out_op_becomes_its_functional_sibling():
    c = next(c for c in CASES if c.name == "out_two_outputs_into_inputs")
    compiled = aot_function(c.fn)
    compiled(*c.make(False))
    ops = {n.target for n in compiled.artifacts.fw_module.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.max.dim in ops and torch.ops.aten.max.dim_max not in ops


@pytest.mark.parametrize("name", ["set_input_then_mutate_the_source", "out_into_a_view_of_an_input",
                                  "resize_input_smaller_then_write"])
def test_under_md_compile(name):
    """Through Dynamo and the aot_eager backend (keep_inference_input_mutations=True): compiled, equal to eager."""
    c = next(c for c in CASES if c.name == name)
    md.reset()
    cf = md.compile(c.fn)
    for _ in range(2):
        args_e, args_c = c.make(False), c.make(False)
        with warnings.catch_warnings():
            warnings.simplefilter("error", AOTFallbackWarning)
            out_c = cf(*args_c)
        _assert_same(out_c, c.fn(*args_e), "outputs")
        _assert_same(args_c, args_e, "inputs after")


def test_resize_as_becomes_its_functional_twin():
    """Not resize_ (torch's hand-written kernel): the autogen'd aten.resize_as, as torch's generated kernel runs."""
    c = next(c for c in CASES if c.name == "resize_as_intermediate_smaller_then_write")
    compiled = aot_function(c.fn)
    compiled(*c.make(False))
    ops = {n.target for n in compiled.artifacts.fw_module.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.resize_as.default in ops
    assert not ops & {torch.ops.aten.resize_as_.default, torch.ops.aten.resize_.default}


@pytest.mark.filterwarnings("ignore:Error detected in")  # torch's joint trace runs under anomaly mode
def test_set_on_an_intermediate_that_requires_grad():
    """torch's joint trace refuses (autograd has no derivative for set_); ours runs eagerly with that reason,
    and backward() then raises what eager raises."""
    c = next(c for c in CASES if c.name == "set_intermediate_to_nothing")

    def make():
        return [t.requires_grad_() if i == 0 else t for i, t in enumerate(c.make(False))]

    with pytest.raises(RuntimeError) as theirs:
        torch_aot_function(c.fn, lambda gm, ex: torch_make_boxed_func(gm))(*make())
    with pytest.raises(RuntimeError) as eager:
        c.fn(*make()).sum().backward()
    compiled = aot_function(c.fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(*make())
    assert any(_first_line(theirs.value) in str(w.message) for w in caught
               if issubclass(w.category, AOTFallbackWarning))
    with pytest.raises(RuntimeError) as ours:
        out.sum().backward()
    assert _first_line(ours.value) == _first_line(eager.value)


@pytest.mark.parametrize("name", ["set_input_to_a_storage", "set_input_to_nothing", "resize_as_input_bigger",
                                  "resize_as_input_same_shape", "resize_as_intermediate_smaller_then_write",
                                  "set_intermediate_to_nothing"])
def test_md_compile_beside_torch_compile(name):
    """md.compile and torch.compile, both backend="aot_eager", beside eager, called twice.

    torch's Dynamo graph-breaks on these (set_ with a storage or on an input, resize_as_), so
    the op runs eagerly between graphs; ours traces it: AOT then compiles it, or runs that
    graph eagerly with a warning. Either way both must equal eager.
    """
    from minidynamo._torch_private import dynamo_reset

    c = next(c for c in CASES if c.name == name)
    # where torch's AOT (aot_eager's keep_inference_input_mutations=True) is right, ours must compile
    must_compile = _torch_runtime(c, True, False) is None
    dynamo_reset()
    md.reset()
    theirs = torch.compile(c.fn, backend="aot_eager")
    ours = md.compile(c.fn, backend="aot_eager")
    for _ in range(2):
        args_e, args_t, args_o = c.make(False), c.make(False), c.make(False)
        out_e = c.fn(*args_e)
        with warnings.catch_warnings():
            warnings.simplefilter("error" if must_compile else "ignore", AOTFallbackWarning)
            out_o = ours(*args_o)
        out_t = theirs(*args_t)
        _assert_same(out_t, out_e, "torch.compile outputs")
        _assert_same(args_t, args_e, "torch.compile inputs after")
        _assert_same(out_o, out_e, "md.compile outputs")
        _assert_same(args_o, args_e, "md.compile inputs after")


def test_set_to_a_functional_storage_on_real_tensors_is_refused_not_read():
    """functionalize() over real tensors: a FunctionalTensor's storage holds no data; reading it would crash."""
    from minidynamo.aot.functional_tensor import FunctionalizationError, functionalize

    c = next(c for c in CASES if c.name == "set_input_to_a_storage")
    with pytest.raises(FunctionalizationError, match="holds no data"):
        functionalize(c.fn)(*c.make(False))
    d = next(c for c in CASES if c.name == "resize_as_input_bigger")  # no storage: runs, as eager
    outs, finals = functionalize(d.fn)(*d.make(False))
    args_e = d.make(False)
    _assert_same(outs, d.fn(*args_e), "outputs")
    _assert_same(finals, args_e, "inputs after")

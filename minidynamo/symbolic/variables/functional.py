"""functools and itertools while tracing: ``reduce``, ``partial``, ``lru_cache``, ``product``, ``chain``...

Place in the pipeline: a call to one of these library helpers inside a traced frame
would otherwise be an opaque C call (a graph break). They are simple enough to run
at trace time on trackers: ``reduce`` calls its function once per item (so a tensor
``fn`` adds graph nodes), ``partial`` becomes a tracker holding the function and the
bound arguments, and the itertools that see finite, known inputs are materialized
into lists of trackers. Mirrors ``torch/_dynamo/variables/functions.py``
(``FunctoolsPartialVariable``, the ``lru_cache`` wrapper inlined through
``__wrapped__``) and ``torch/_dynamo/variables/iter.py`` (``ItertoolsVariable``).

Note [Lazy itertools over iterators are refused]
    ``chain`` pulls from its arguments lazily: materializing ``chain(it, ...)`` would
    advance ``it`` further than eager does if the caller stops early and uses ``it``
    again. So it accepts only sequences (list, tuple, range, constants); an iterator
    argument is a graph break. ``islice`` over an iterator is traced lazily instead
    (Note [islice over an iterator is lazy]). ``product`` and
    ``combinations`` read their whole inputs first in CPython too, so any finite
    iterable is fine.
"""

from __future__ import annotations

import collections
import functools
import inspect
import itertools
from typing import Any

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable, is_constant_value
from .iter import ListIteratorVariable
from .lists import ListVariable, TupleVariable


class FunctoolsPartialVariable(VariableTracker):
    """``functools.partial(func, *args, **keywords)`` made inside the trace."""

    def __init__(self, func: VariableTracker, args: list, keywords: dict, **kwargs):
        super().__init__(**kwargs)
        self.func = func
        self.args = list(args)
        self.keywords = dict(keywords)

    def python_type(self) -> type:
        return functools.partial

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.func.call_function(tx, self.args + list(args), {**self.keywords, **kwargs})

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .dicts import ConstDictVariable

        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return ConstDictVariable(dict(self.keywords))
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:  # read from outside: the same object again
            return codegen.source_expr(self.source)
        parts = [codegen.expr(self.func)] + [codegen.expr(a) for a in self.args]
        if self.keywords:
            parts.append("**{" + ", ".join(f"{k!r}: {codegen.expr(v)}" for k, v in self.keywords.items()) + "}")
        return f"{codegen.constant_expr(functools.partial)}({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"FunctoolsPartialVariable({self.func!r})"


def _seq(tx, v: VariableTracker) -> list:
    return v.unpack_var_sequence(tx)


def _lazy_seq(tx, v: VariableTracker, what: str) -> list:
    """Items of an argument that a lazy itertool reads (Note [Lazy itertools over iterators are refused])."""
    if isinstance(v, ListIteratorVariable):
        unimplemented(f"{what} over an iterator (materializing it would consume more than eager does)",
                      gb_id=gb.UNSUPPORTED_FUNCTION)
    return _seq(tx, v)


def _const(v: VariableTracker, what: str) -> Any:
    if not v.is_python_constant():
        unimplemented(f"{what} needs a constant", gb_id=gb.NOT_A_CONSTANT)
    return v.as_python_constant()


def _reduce(tx, fn, seq, *initial):
    items = _seq(tx, seq)
    if initial:
        acc = initial[0]
    elif items:
        acc, items = items[0], items[1:]
    else:
        unimplemented("functools.reduce of an empty sequence with no initial value (eager raises TypeError)",
                      gb_id=gb.OBSERVED_EXCEPTION)
    for item in items:
        acc = fn.call_function(tx, [acc, item], {})
    return acc


def _partial(tx, func, *args, **keywords):
    if isinstance(func, FunctoolsPartialVariable):  # partial(partial(f, a), b) flattens, as functools does
        return FunctoolsPartialVariable(func.func, func.args + list(args), {**func.keywords, **keywords})
    return FunctoolsPartialVariable(func, list(args), keywords)


def _product(tx, *seqs, repeat=None):
    n = 1 if repeat is None else _const(repeat, "itertools.product's repeat")
    cols = [_seq(tx, s) for s in seqs] * n
    return ListIteratorVariable([TupleVariable(list(row)) for row in itertools.product(*cols)])


def _chain(tx, *seqs):
    return ListIteratorVariable([v for s in seqs for v in _lazy_seq(tx, s, "itertools.chain")])


def _chain_from_iterable(tx, seqs):
    return _chain(tx, *_lazy_seq(tx, seqs, "itertools.chain.from_iterable"))


def _starmap(tx, fn, seq):
    """``itertools.starmap(fn, rows)``: ``fn(*row)`` per row, materialized as ``map`` is (builtin.py ``_call_map``)."""
    return ListIteratorVariable([fn.call_function(tx, _seq(tx, row), {}) for row in _seq(tx, seq)])


def _combinations(tx, seq, r):
    rows = itertools.combinations(_seq(tx, seq), _const(r, "itertools.combinations' r"))
    return ListIteratorVariable([TupleVariable(list(row)) for row in rows])


class IsliceIteratorVariable(ListIteratorVariable):
    """``itertools.islice(it, ...)`` over an iterator: pulls from ``it`` only as CPython's islice does.

    Note [islice over an iterator is lazy]
        ``islice(chain(a, b), 1, 3)`` or ``next(islice(it, 1, None))`` must leave ``it``
        exactly where eager leaves it: islice skips up to the next index it yields,
        takes one item, and stops without reading past ``stop``. So instead of
        materializing, this tracker keeps the underlying iterator tracker and the
        counters of ``itertoolsmodule.c``'s ``islice_next`` (``cnt``, ``next``), and
        pulls from it on each ``next``. Rebuilt, unfinished, as ``islice(rest, ...)``
        over the underlying iterator's own rebuild (which shares it with its other names).
    """

    lazy = True  # zip pulls it row by row

    def __init__(self, inner: ListIteratorVariable, start: int, stop, step: int, **kwargs):
        super().__init__([], **kwargs)
        self.inner = inner
        self.stop = stop  # None: no bound
        self.step = step
        self.cnt = 0
        self.next_index = start
        self.exhausted = False

    def next_variable(self, tx):
        if self.index < len(self.items):
            return super().next_variable(tx)
        if self.exhausted:
            return None
        while self.cnt < self.next_index:  # skip to the next index this islice yields
            if self.inner.next_variable(tx) is None:
                self.exhausted = True
                return None
            self.cnt += 1
        if self.stop is not None and self.cnt >= self.stop:
            self.exhausted = True
            return None
        item = self.inner.next_variable(tx)
        if item is None:
            self.exhausted = True
            return None
        self.cnt += 1
        self.next_index += self.step
        if self.stop is not None and self.next_index > self.stop:
            self.next_index = self.stop
        self.items.append(item)
        return super().next_variable(tx)

    def unpack_var_sequence(self, tx) -> list:
        rest = []
        while (v := self.next_variable(tx)) is not None:
            rest.append(v)
        return rest

    def reconstruct(self, codegen) -> str:
        if self.exhausted:
            return "___ResumeIterator([])"
        start = self.next_index - self.cnt
        stop = None if self.stop is None else self.stop - self.cnt
        return f"{codegen.constant_expr(itertools.islice)}({codegen.expr(self.inner)}, {start}, {stop}, {self.step})"

    def __repr__(self) -> str:
        return f"IsliceIteratorVariable({self.inner!r}, next={self.next_index}, stop={self.stop})"


def _islice(tx, seq, *bounds):
    b = [_const(v, "itertools.islice's bounds") for v in bounds]
    if isinstance(seq, ListIteratorVariable):  # Note [islice over an iterator is lazy]
        try:
            s = slice(*b)
            start, stop, step = s.start or 0, s.stop, 1 if s.step is None else s.step
            if start < 0 or (stop is not None and stop < 0) or step < 1:
                raise ValueError
        except (TypeError, ValueError):
            unimplemented("itertools.islice with these bounds (eager raises ValueError)", gb_id=gb.OBSERVED_EXCEPTION)
        return IsliceIteratorVariable(seq, start, stop, step)
    return ListIteratorVariable(list(itertools.islice(_seq(tx, seq), *b)))


class CountIteratorVariable(ListIteratorVariable):
    """``itertools.count(start, step)``: an endless counter, one constant per ``next``.

    As Dynamo's ``CountIteratorVariable`` (torch/_dynamo/variables/iter.py): it only moves
    when pulled (``zip(itertools.count(), items)`` pulls it in lockstep, builtin.py), and
    is rebuilt after a graph break as ``itertools.count(next, step)``.
    """

    lazy = True  # zip pulls it row by row

    def __init__(self, start, step, **kwargs):
        super().__init__([], **kwargs)
        self.next_value = start
        self.step = step

    def next_variable(self, tx):
        value, self.next_value = self.next_value, self.next_value + self.step
        return ConstantVariable(value)

    def unpack_var_sequence(self, tx) -> list:
        unimplemented("materializing an endless itertools.count (eager never ends)", gb_id=gb.OBSERVED_EXCEPTION)

    def reconstruct(self, codegen) -> str:
        return f"{codegen.constant_expr(itertools.count)}({self.next_value!r}, {self.step!r})"

    def __repr__(self) -> str:
        return f"CountIteratorVariable(next={self.next_value}, step={self.step})"


def _count(tx, start=None, step=None):
    first = 0 if start is None else _const(start, "itertools.count's start")
    by = 1 if step is None else _const(step, "itertools.count's step")
    return CountIteratorVariable(first, by)


class InspectSignatureVariable(VariableTracker):
    """``inspect.signature(fn)`` of a function the trace knows: folded to the real signature.

    Note [inspect.signature folds]
        transformers' ``apply_chunking_to_forward`` asks
        ``len(inspect.signature(forward_fn).parameters)``. Inlining ``inspect`` would
        walk C descriptors; Dynamo instead models the result
        (``InspectSignatureVariable`` in ``torch/_dynamo/variables/misc.py``). The
        signature depends only on the function, which is already fixed by the trace
        (its tracker is guarded, or made in the trace from a code constant), so we read
        the real one now. Its ``parameters`` become a dict of name -> ``Parameter``,
        whose fields (``name``, ``kind``, ``default``) read as constants.
    """

    def __init__(self, signature: inspect.Signature, **kwargs):
        super().__init__(**kwargs)
        self.signature = signature

    def python_type(self) -> type:
        return inspect.Signature

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .dicts import ConstDictVariable

        if name == "parameters":
            return ConstDictVariable({k: tx.wrap_sourceless(p) for k, p in self.signature.parameters.items()})
        if name == "return_annotation" and is_constant_value(self.signature.return_annotation):
            return ConstantVariable(self.signature.return_annotation)
        return super().var_getattr(tx, name)


def _signature(tx, fn, **kwargs):
    from .functions import UserFunctionVariable, UserMethodVariable

    if kwargs or not isinstance(fn, UserFunctionVariable):
        unimplemented("inspect.signature of this callable (only plain functions and methods fold)",
                      gb_id=gb.INSPECT, context=f"inspect.signature of {fn}")
    sig = inspect.signature(fn.fn)
    if isinstance(fn, UserMethodVariable):  # bound: inspect drops the first parameter, as for a method object
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return InspectSignatureVariable(sig)


HANDLERS = {
    inspect.signature: _signature,
    functools.reduce: _reduce,
    functools.partial: _partial,
    itertools.product: _product,
    itertools.chain: _chain,
    itertools.combinations: _combinations,
    itertools.starmap: _starmap,
    itertools.islice: _islice,
    itertools.count: _count,
}

def _dict_fromkeys(tx, keys, value=None, *, cls=dict):
    from .dicts import ConstDictVariable

    value = value if value is not None else ConstantVariable(None)
    return ConstDictVariable({_const(k, f"{cls.__name__}.fromkeys' keys"): value for k in _seq(tx, keys)}, cls)


def _ordered_dict_fromkeys(tx, keys, value=None):
    return _dict_fromkeys(tx, keys, value, cls=collections.OrderedDict)


def _defaultdict_fromkeys(tx, keys, value=None):
    return _dict_fromkeys(tx, keys, value, cls=collections.defaultdict)  # its default_factory is None


# ``itertools.chain.from_iterable`` is a new bound object at each lookup: keyed by (owner, name)
CLASS_METHODS = {(itertools.chain, "from_iterable"): _chain_from_iterable, (dict, "fromkeys"): _dict_fromkeys,
                 (collections.OrderedDict, "fromkeys"): _ordered_dict_fromkeys,
                 (collections.defaultdict, "fromkeys"): _defaultdict_fromkeys}


def is_functional(value: Any) -> bool:
    """One of the helpers this module runs at trace time (wrapped as a BuiltinVariable)."""
    try:
        return value in HANDLERS and any(value is k for k in HANDLERS)
    except TypeError:
        return False


def handler_for(fn: Any):
    """The trace-time implementation of ``fn``, or None."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type) and (owner, getattr(fn, "__name__", None)) in CLASS_METHODS:
        return CLASS_METHODS[(owner, fn.__name__)]
    if is_functional(fn):
        return HANDLERS[fn]
    return None


def is_lru_cache_of_user_function(value: Any) -> bool:
    """``@functools.lru_cache`` over a user function: traced through ``__wrapped__``, as Dynamo does.

    Dynamo (``VariableBuilder``, ``functools._lru_cache_wrapper``) inlines the wrapped
    function; the cache is neither read nor filled while tracing. The result is the
    same as eager's for a pure function, which is what a cache assumes anyway.
    """
    from .functions import is_user_function

    return isinstance(value, functools._lru_cache_wrapper) and is_user_function(  # noqa: SLF001
        getattr(value, "__wrapped__", None))


__all__ = ["FunctoolsPartialVariable", "InspectSignatureVariable", "HANDLERS", "handler_for", "is_functional", "is_lru_cache_of_user_function",
           "ConstantVariable", "ListVariable"]

"""``collections.deque`` and ``collections.defaultdict`` made inside the trace.

Place in the pipeline: calling one of these classes in a traced frame would be a
"constructing a deque object" graph break. Both are plain containers, so, like a
list or a dict made in the trace, they are taken apart at trace time: a deque is a
list tracker with deque's methods, a defaultdict a dict tracker with a factory
(Note [defaultdict is a dict with a factory] in dicts.py). Mirrors
``torch/_dynamo/variables/lists.py`` (``DequeVariable``) and
``torch/_dynamo/variables/dicts.py`` (``DefaultDictVariable``).

Note [A deque made in the trace]
    ``d = deque([a, b]); d.appendleft(x); d.rotate(1)``: every method changes the
    tracker's items as CPython changes the deque's (``maxlen`` drops items from the
    other end). A deque that outlives the graph (returned, or live at a graph break)
    is rebuilt as ``collections.deque([...], maxlen)`` from its items. A deque that
    came from outside the frame (an argument, or one carried over a graph break into
    the resume function) is this tracker too, with a source: guarded by type, length
    and maxlen, its items through ``L['d'][i]``; a change is written back after the
    graph as ``L['d'].__init__([...], maxlen)`` (side_effects.py): deque's ``__init__``
    clears the deque and refills it, and the new items (which may read ``L['d'][i]``)
    are all evaluated before it runs.
"""

from __future__ import annotations

import collections
from typing import Any

from .. import graph_break_registry as gb
from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable
from .lists import ListVariable


def _int(v: VariableTracker, what: str) -> int:
    if not v.is_python_constant() or not isinstance(v.as_python_constant(), int):
        unimplemented(f"{what} needs a constant int", gb_id=gb.NOT_A_CONSTANT)
    return v.as_python_constant()


class DequeVariable(ListVariable):
    """Note [A deque made in the trace]."""

    kind = collections.deque

    def __init__(self, items: list, maxlen=None, **kwargs):
        super().__init__(items, **kwargs)
        self.maxlen = maxlen
        self._trim(left=True)

    def _trim(self, left: bool) -> None:
        """Drop items beyond maxlen: from the left after a right-hand append, and the converse."""
        if self.maxlen is None:
            return
        while len(self.items) > self.maxlen:
            self.items.pop(0 if left else -1)

    def as_python_constant(self) -> Any:
        return collections.deque((v.as_python_constant() for v in self.items), self.maxlen)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        idx = index.as_python_constant()
        if not isinstance(idx, int):
            unimplemented(f"deque index of type {type(idx).__name__} (eager raises TypeError)",
                          gb_id=gb.UNSUPPORTED_METHOD)
        if not -len(self.items) <= idx < len(self.items):
            unimplemented("deque index out of range (eager raises IndexError)", gb_id=gb.UNSUPPORTED_METHOD)
        return self.items[idx]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return super().var_getattr(tx, name)

    MUTATING = ("pop", "popleft", "append", "extend", "appendleft", "extendleft", "rotate", "insert",
                "__setitem__", "__delitem__", "clear", "reverse", "remove")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        items = self.items
        if kwargs:
            unimplemented(f"deque.{name} with keyword arguments", gb_id=gb.UNSUPPORTED_METHOD)
        if name in self.MUTATING:
            tx.output.side_effects.mutation(self)
        if name == "copy":
            return DequeVariable(items, self.maxlen)
        if name in ("pop", "popleft"):
            if args:
                unimplemented(f"deque.{name} takes no arguments (eager raises TypeError)", gb_id=gb.UNSUPPORTED_METHOD)
            if not items:
                unimplemented(f"deque.{name} of an empty deque (eager raises IndexError)", gb_id=gb.UNSUPPORTED_METHOD)
            return items.pop(-1 if name == "pop" else 0)
        if name in ("append", "extend"):
            new = [args[0]] if name == "append" else args[0].unpack_var_sequence(tx)
            items.extend(new)
            self._trim(left=True)
            return ConstantVariable(None)
        if name in ("appendleft", "extendleft"):
            new = [args[0]] if name == "appendleft" else args[0].unpack_var_sequence(tx)
            for v in new:  # extendleft reverses, as it appends to the left one at a time
                items.insert(0, v)
            self._trim(left=False)
            return ConstantVariable(None)
        if name == "rotate":
            n = _int(args[0], "deque.rotate") if args else 1
            if items:
                n %= len(items)
                items[:] = items[-n:] + items[:-n] if n else items
            return ConstantVariable(None)
        if name == "insert":
            if self.maxlen is not None and len(items) >= self.maxlen:
                unimplemented("deque.insert into a full bounded deque (eager raises IndexError)",
                              gb_id=gb.UNSUPPORTED_METHOD)
            items.insert(_int(args[0], "deque.insert"), args[1])
            return ConstantVariable(None)
        if name in ("__setitem__", "__delitem__"):
            idx = _int(args[0], f"deque.{name}")
            if not -len(items) <= idx < len(items):
                unimplemented("deque index out of range (eager raises IndexError)", gb_id=gb.UNSUPPORTED_METHOD)
        if not hasattr(collections.deque, name):
            unimplemented(f"deque has no method {name!r} (eager raises AttributeError)", gb_id=gb.UNSUPPORTED_METHOD)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:  # the real object (side effects already written back)
            return codegen.source_expr(self.source)
        items = ", ".join(codegen.expr(v) for v in self.items)
        return f"{codegen.constant_expr(collections.deque)}([{items}], {self.maxlen!r})"

    def __repr__(self) -> str:
        return f"DequeVariable({len(self.items)} items, maxlen={self.maxlen})"


def _deque(tx, iterable=None, maxlen=None):
    items = iterable.unpack_var_sequence(tx) if iterable is not None else []
    if maxlen is not None:
        if not maxlen.is_python_constant():
            unimplemented("deque's maxlen needs a constant", gb_id=gb.UNSUPPORTED_METHOD)
        maxlen = maxlen.as_python_constant()
        if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 0):
            unimplemented("deque's maxlen must be a non-negative int (eager raises ValueError)",
                          gb_id=gb.UNSUPPORTED_METHOD)
    return DequeVariable(items, maxlen)


def _defaultdict(tx, default_factory=None, *args, **kwargs):
    if default_factory is not None and default_factory.is_python_constant() and \
            default_factory.as_python_constant() is None:
        default_factory = None
    if default_factory is not None and not callable(getattr(default_factory, "call_function", None)):
        unimplemented("defaultdict's first argument must be callable or None", gb_id=gb.OBSERVED_EXCEPTION)
    d = tx.wrap_sourceless(dict)._call_dict(tx, *args, **kwargs)
    d.user_cls = collections.defaultdict
    d.default_factory = default_factory
    return d


def _ordered_dict(tx, *args, **kwargs):
    d = tx.wrap_sourceless(dict)._call_dict(tx, *args, **kwargs)
    d.user_cls = collections.OrderedDict
    return d


def _counter(tx, *args, **kwargs):
    """``collections.Counter(...)`` of constants (Note [A Counter of constants], dicts.py)."""
    if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
        unimplemented("collections.Counter of values that are not constants", gb_id=gb.UNSUPPORTED_FUNCTION)
    real = collections.Counter(*[a.as_python_constant() for a in args],
                               **{k: v.as_python_constant() for k, v in kwargs.items()})
    d = tx.wrap_sourceless(dict)._call_dict(tx)  # a ConstDictVariable (dicts.py sits beside this module)
    d.items = {k: ConstantVariable(v) for k, v in real.items()}
    d.user_cls = collections.Counter
    return d


# classes whose call inside the trace makes one of these trackers (UserDefinedClassVariable.call_function)
CONSTRUCTORS = {collections.deque: _deque, collections.defaultdict: _defaultdict,
                collections.OrderedDict: _ordered_dict, collections.Counter: _counter}


def construct(tx, cls: type, args: list, kwargs: dict):
    """The tracker for ``cls(*args, **kwargs)``, or None when ``cls`` is not one of CONSTRUCTORS."""
    fn = CONSTRUCTORS.get(cls) if isinstance(cls, type) else None
    if fn is None or type(cls) is not type:
        return None
    try:
        return fn(tx, *args, **kwargs)
    except TypeError as e:  # wrong arguments: eager raises TypeError, a graph break here
        unimplemented(f"{cls.__name__}(...) with these arguments: {e}", gb_id=gb.UNSUPPORTED_FUNCTION)


__all__ = ["DequeVariable", "CONSTRUCTORS", "construct"]

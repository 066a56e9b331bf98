"""Lists, tuples, slices and generators while tracing.

Place in the pipeline: Python containers are taken apart at trace time; only the
tensors inside them reach the graph. Mirrors ``torch/_dynamo/variables/lists.py``
(``ListVariable``, ``TupleVariable``, ``SliceVariable``; its ``ListIteratorVariable``
is our ``iter.py``).

Note [Containers mutate in place and say so]
    ``lst.append(x)`` changes the tracker's ``items``. If the list came from outside
    the frame (it has a source), SideEffects records it, and the transformed function
    writes the final contents back (``L['lst'][:] = [...]``) after the graph ran.
    A list created inside the frame needs nothing: it is rebuilt from its items.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import GetAttrVariable, VariableTracker
from .constant import ConstantVariable
from .iter import ListIteratorVariable


def _index(v: VariableTracker) -> Any:
    if isinstance(v, SliceVariable):
        return v.as_python_constant()
    return v.as_python_constant()


class BaseListVariable(VariableTracker):
    kind: type = list

    def __init__(self, items: list, **kwargs):
        super().__init__(**kwargs)
        self.items = list(items)

    def python_type(self) -> type:
        return self.kind

    def as_python_constant(self) -> Any:
        return self.kind(v.as_python_constant() for v in self.items)

    def is_python_constant(self) -> bool:  # asking must not fix a symbolic size inside (sym_node.py)
        return all(v.is_python_constant() for v in self.items)

    def as_proxy(self) -> Any:
        return self.kind(v.as_proxy() for v in self.items)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def truth(self, tx) -> bool:
        return bool(self.items)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        idx = _index(index)
        if isinstance(idx, slice):
            return type(self)(self.items[idx])
        if not isinstance(idx, int):
            unimplemented(f"{self.kind.__name__} index of type {type(idx).__name__}", gb_id=gb.UNSUPPORTED_METHOD)
        if not -len(self.items) <= idx < len(self.items):
            tx.raise_observed_exception(IndexError, [f"{self.kind.__name__} index out of range"])
        return self.items[idx]

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__len__":
            return ConstantVariable(len(self.items))
        if name == "__contains__":
            return tx.call_operator(operator.contains, [self, args[0]])  # operators.compare_in
        if name in ("index", "count") and all(a.is_python_constant() for a in args):
            consts = [v.as_python_constant() if v.is_python_constant() else v for v in self.items]
            try:
                return ConstantVariable(getattr(consts, name)(*[a.as_python_constant() for a in args]))
            except ValueError as e:  # [1, 2].index(7): eager's ValueError, raised in the trace
                tx.raise_error_of(e)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:  # the real object (side effects already written back)
            return codegen.source_expr(self.source)
        parts = [codegen.expr(v) for v in self.items]
        if self.kind is tuple:
            return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
        return f"[{', '.join(parts)}]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.items!r})"


class TupleVariable(BaseListVariable):
    kind = tuple

    def __init__(self, items: list, tuple_cls: type = tuple, **kwargs):
        super().__init__(items, **kwargs)
        self.tuple_cls = tuple_cls  # a named tuple / torch.return_types structseq keeps its class

    def python_type(self) -> type:
        return self.tuple_cls

    def fields(self) -> tuple:
        return getattr(self.tuple_cls, "_fields", None) or getattr(self.tuple_cls, "__match_args__", ())

    def as_python_constant(self) -> Any:
        if self.tuple_cls is torch.Size:
            return torch.Size(v.as_python_constant() for v in self.items)
        return super().as_python_constant()

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if self.tuple_cls is torch.Size and isinstance(_index(index), slice):  # x.shape[1:] is a torch.Size too
            return TupleVariable(self.items[_index(index)], tuple_cls=torch.Size)
        return super().getitem(tx, index)

    def _own_method(self, name: str):
        """A method a namedtuple subclass defines (``Point.norm``): its function, or None."""
        if self.tuple_cls is tuple or hasattr(tuple, name) or name in self.fields():
            return None
        import inspect
        import types

        attr = inspect.getattr_static(self.tuple_cls, name, None)
        return attr if isinstance(attr, types.FunctionType) else None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.fields():
            return self.items[self.fields().index(name)]
        if self._own_method(name) is not None:  # a method of a namedtuple subclass: inlined when called
            return GetAttrVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        method = self._own_method(name)
        if method is not None:  # the method's function, called with the tuple first: inlined
            return tx.wrap_sourceless(method).call_function(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        text = super().reconstruct(codegen)
        if self.tuple_cls is tuple or self.source is not None:
            return text
        cls = codegen.constant_expr(self.tuple_cls)
        if hasattr(self.tuple_cls, "_make"):
            return f"{cls}._make({text})"
        return f"{cls}({text})"


class ListVariable(BaseListVariable):
    kind = list

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        mutating = {"append", "extend", "pop", "insert", "clear", "reverse", "remove", "sort", "__setitem__",
                    "__delitem__"}
        if name not in mutating:
            if name == "copy":
                return ListVariable(self.items)
            return super().call_method(tx, name, args, kwargs)
        tx.output.side_effects.mutation(self)
        items = self.items
        if name == "append":
            items.append(args[0])
        elif name == "extend":
            items.extend(args[0].unpack_var_sequence(tx))
        elif name == "insert":
            items.insert(args[0].as_python_constant(), args[1])
        elif name == "pop":
            idx = args[0].as_python_constant() if args else -1
            return items.pop(idx)
        elif name == "clear":
            items.clear()
        elif name == "reverse":
            items.reverse()
        elif name == "remove":
            target = args[0].as_python_constant()
            for i, v in enumerate(items):
                if v.is_python_constant() and v.as_python_constant() == target:
                    del items[i]
                    break
            else:
                unimplemented("list.remove of a value not found as a constant", gb_id=gb.OBSERVED_EXCEPTION)
        elif name == "sort":
            key = {k: v.as_python_constant() for k, v in kwargs.items()}
            values = sorted((v.as_python_constant() for v in items), **key)
            items[:] = [ConstantVariable(v) for v in values]
        elif name == "__setitem__":
            idx = _index(args[0])
            if isinstance(idx, slice):
                items[idx] = args[1].unpack_var_sequence(tx)
            else:
                items[idx] = args[1]
        elif name == "__delitem__":
            del items[_index(args[0])]
        return ConstantVariable(None)


class SliceVariable(VariableTracker):
    """``a[1:n]``: a slice whose bounds may be tensors (then it is only a proxy argument)."""

    def __init__(self, parts: list, **kwargs):
        super().__init__(**kwargs)
        self.parts = parts  # start, stop, step trackers

    def as_python_constant(self) -> Any:
        return slice(*[p.as_python_constant() for p in self.parts])

    def as_proxy(self) -> Any:
        return slice(*[p.as_proxy() for p in self.parts])

    def reconstruct(self, codegen) -> str:
        return f"slice({', '.join(codegen.expr(p) for p in self.parts)})"


class LazyGeneratorVariable(ListIteratorVariable):
    """A generator inlined lazily: each ``next`` runs its body up to the next ``yield``.

    Real Dynamo: ``LocalGeneratorObjectVariable``. The generator's own translator
    (an ``InliningInstructionTranslator`` sharing the caller's graph) is suspended
    between items, so a generator consumed partly runs only the part eager runs, with
    only those side effects. ``items`` holds what it yielded so far.
    """

    lazy = True  # zip pulls it row by row

    def __init__(self, tracer, **kwargs):
        super().__init__([], **kwargs)
        self.tracer = tracer
        self.exhausted = False

    def next_variable(self, tx):
        if self.index >= len(self.items):
            if self.exhausted:
                return None
            value = self.tracer.next_yield()
            if value is None:
                self.exhausted = True
                return None
            self.items.append(value)
        return super().next_variable(tx)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        rest = []
        while (v := self.next_variable(tx)) is not None:
            rest.append(v)
        return rest

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        """``gen.send(v)`` / ``gen.__next__()``: the generator's body runs on to its next yield.

        Note [generator.send]
            A suspended generator's translator has the value its ``yield`` evaluates to
            on top of its stack (``YIELD_VALUE`` pushed None, what ``next()`` sends);
            ``send(v)`` puts ``v`` there and runs on, as Dynamo's
            ``LocalGeneratorObjectVariable.call_method`` (torch/_dynamo/variables/functions.py)
            does for ``send``. A send of a value into a generator not yet started, or one
            that returns (StopIteration), is an exception eager raises: a graph break here.
        """
        if name in ("send", "__next__") and not kwargs and len(args) == (name == "send") \
                and self.index == len(self.items) and not self.exhausted:
            sent = args[0] if args else None
            if sent is not None and not (sent.is_python_constant() and sent.as_python_constant() is None):
                if not self.items:
                    unimplemented("send() of a value into a generator that has not started (eager raises "
                                  "TypeError)", gb_id="GB0253", context=f"send() of {sent} into {self}")
                self.tracer.stack[-1] = sent
            value = self.next_variable(tx)
            if value is not None:
                return value
            unimplemented(f"{name}() on a generator that returned (eager raises StopIteration)",
                          gb_id=gb.OBSERVED_EXCEPTION)
        if name == "close" and not args and not kwargs:
            # ``gen.close()`` throws GeneratorExit in at the suspended yield; a body with no handler to run
            # (no try/with in its code) just ends there, as it would eagerly
            if self.items and not self.exhausted and not _has_handlers(self.tracer.code):
                self.exhausted = True
                return ConstantVariable(None)
            if not self.items and not self.exhausted:  # never started: closing it only marks it done
                self.exhausted = True
                return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if not self.exhausted:
            unimplemented("a generator suspended at a graph break cannot be rebuilt", gb_id=gb.RECONSTRUCTION)
        return super().reconstruct(codegen)

    def python_type(self) -> type:
        import types

        return types.GeneratorType

    def __repr__(self) -> str:
        return f"LazyGeneratorVariable({self.tracer.code.co_name}, {len(self.items)} yielded)"


def _has_handlers(code) -> bool:
    """Does ``code`` have a try or with block of its own (a handler that GeneratorExit would run)?

    3.12+ gives every generator an implicit handler (StopIteration -> RuntimeError) with no
    ``PUSH_EXC_INFO``; a user's try/except/finally or with-block has one.
    """
    import dis

    return any(i.opname in ("PUSH_EXC_INFO", "BEFORE_WITH", "SETUP_WITH") for i in dis.get_instructions(code))

"""The transformed function: readable Python that runs the compiled pieces of a frame.

Place in the pipeline: the last step of tracing a frame. Real Dynamo emits new
*bytecode* (``torch/_dynamo/codegen.py`` ``PyCodegen``, ``output_graph.compile_subgraph``)
and installs it through PEP 523. We emit Python *source* and ``exec`` it: the reader
can print exactly what runs on every call (``entry.transformed_source``).
Mirrors ``torch/_dynamo/codegen.py`` (``PyCodegen``) and the reconstruction half of
``torch/_dynamo/output_graph.py`` (``compile_subgraph``).

Note [Reconstruct is an expression]
    Every value the rest of the program needs after the graph (the return value, the
    stack and locals at a graph break, values written back by side effects) is rebuilt
    by an expression: a graph output (``___graph_out[0]``), a source (``L['x']``), a
    literal (``3``), or a container of those (``[L['x'], ___graph_out[1]]``).
    A new list or dict is built once into a temporary, so two references stay one object.

A transformed function looks like::

    def ___transformed_f(L, G):
        ___graph_out = ___compiled_fn_0(L['x'], L['self'].fc.weight)
        L['log'][:] = [___graph_out[1]]                 # side effects, replayed once
        ___r = print(___graph_out[0])                   # the graph break, run eagerly
        return ___resume_at_38_1(___stack0=___r, x=L['x'], y=___graph_out[0])
"""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import torch

from .resume_execution import NULL, ResumeIterator
from .variables.base import VariableTracker
from .variables.dicts import ConstDictVariable
from .variables.functions import make_function
from .variables.iter import ListIteratorVariable
from .variables.lists import ListVariable
from .variables.new_object import NewObjectVariable, new_object


def replace_dict(target: dict, new: dict) -> None:
    target.clear()
    target.update(new)


def rebuild_dict_dataclass(cls: type, entries: dict, attrs: dict):
    """A ModelOutput made in the trace whose entries and attributes differ (Note [ModelOutput]):
    made without its ``__init__``, then each written through the base classes."""
    import collections

    obj = cls.__new__(cls)
    manual_dict_setitem(entries, obj, collections.OrderedDict if issubclass(cls, collections.OrderedDict) else dict)
    for k, v in attrs.items():
        object.__setattr__(obj, k, v)
    return obj


def manual_dict_setitem(new: dict, target: dict, base: type) -> None:
    """The entries of a dict subclass written back through ``base`` (dict or OrderedDict), as torch's
    ``_manual_dict_setitem`` (torch/_dynamo/side_effects.py): the subclass's own methods never run."""
    base.clear(target)
    for k, v in new.items():
        base.__setitem__(target, k, v)


def _is_literal(value: Any) -> bool:
    if value is None or type(value) in (bool, int, str, bytes):  # not an IntEnum, whose repr is no literal
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is tuple:
        return all(_is_literal(v) for v in value)
    return False


class PyCodegen:
    """Collects the expressions and statements of one transformed function."""

    def __init__(self, output):
        self.output = output
        self.scope: dict[str, Any] = {"torch": torch, "sys": sys, "___NULL": NULL, "___replace_dict": replace_dict, "___manual_dict_setitem": manual_dict_setitem,
                                       "___rebuild_dict_dataclass": rebuild_dict_dataclass,
                                      "___ResumeIterator": ResumeIterator,
                                      "___new_object": new_object, "___CellType": types.CellType,
                                      "___make_function": make_function}
        self.graph_outputs: list = []
        self.temps: list[str] = []
        self._memo: dict[int, str] = {}
        self._installed: dict[int, str] = {}

    def expr(self, var: VariableTracker) -> str:
        key = id(var)
        if key in self._memo:
            return self._memo[key]
        text = var.reconstruct(self)
        # mutable objects (an iterator too: two names, one position) are built once, shared by every use
        if isinstance(var, ListIteratorVariable) or (
                isinstance(var, (ListVariable, ConstDictVariable, NewObjectVariable)) and var.source is None):
            name = f"___tmp_{len(self.temps)}"
            self.temps.append(f"{name} = {text}")
            text = name
        self._memo[key] = text
        return text

    def cell_expr(self, cell) -> str:
        """The real cell of a CellVariable: where it lives (a resume function's cell), or one made once
        holding its value (closures and the resume function share it: Note [Rebuilding a closure])."""
        if cell.real_expr is not None:
            return cell.real_expr
        key = ("cell", id(cell))
        if key not in self._memo:
            name = f"___cell_{len(self.temps)}"
            value = "" if cell.value is None else self.expr(cell.value)  # a name not bound yet: an empty cell
            self.temps.append(f"{name} = ___CellType({value})")
            self._memo[key] = name
        return self._memo[key]

    def source_expr(self, source) -> str:
        return self.output.guards.read_expr(source)  # Note [Module attributes are read from their tables]

    def install(self, value: Any, hint: str = "const") -> str:
        """Put an object the code needs into its globals under a readable name."""
        if id(value) in self._installed:
            return self._installed[id(value)]
        clean = "".join(c if c.isalnum() else "_" for c in hint)[:40]
        name = clean if clean.startswith("___") else f"___{clean}"
        while name in self.scope and self.scope[name] is not value:
            name += "_"
        self.scope[name] = value
        self._installed[id(value)] = name
        return name

    def constant_expr(self, value: Any) -> str:
        if _is_literal(value):
            return repr(value)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.Size):
            return f"torch.Size({list(value)!r})"
        if value is NULL:
            return "___NULL"
        import builtins

        name = getattr(value, "__name__", None)
        if isinstance(name, str) and getattr(builtins, name, None) is value:
            return name
        return self.install(value, name if isinstance(name, str) else type(value).__name__)

    def tensor_expr(self, var) -> str:
        if var.source is not None:
            return self.source_expr(var.source)
        node = var.proxy.node
        if node not in self.graph_outputs:
            self.graph_outputs.append(node)
        return f"___graph_out[{self.graph_outputs.index(node)}]"


def graph_args(sources: list, guards: list, read: Any = None) -> str:
    """The graph call's argument list: ``L['xs'][0], ..., L['xs'][199]`` becomes ``*L['xs']``.

    Note [A whole sequence is passed with a star]
        When the graph's inputs include every item of one tuple or list, in order,
        and guards have fixed its type and length, ``*L['xs']`` passes the same tensors
        as the 200 subscripts, and CPython unpacks it in C. Any other run of
        sources is written out one by one, as ``read(source)`` says (default: its name).
    """
    read = read or (lambda source: source.name())
    from .source import GetItemSource

    sequences = {g.source.name() for g in guards if g.kind == "TYPE_MATCH" and g.source is not None
                 and (g.expr.endswith(" is tuple") or g.expr.endswith(" is list"))}
    lengths = {g.source.name(): g.expr.rsplit("== ", 1)[1] for g in guards
               if g.kind == "LENGTH_CHECK" and g.source is not None and g.source.name() in sequences}
    parts, i = [], 0
    while i < len(sources):
        src = sources[i]
        if isinstance(src, GetItemSource) and src.index == 0:
            base, n = src.base, 0
            while (i + n < len(sources) and isinstance(sources[i + n], GetItemSource)
                   and sources[i + n].base == base and sources[i + n].index == n):
                n += 1
            if lengths.get(base.name()) == str(n):
                parts.append(f"*{read(base)}")
                i += n
                continue
        parts.append(read(src))
        i += 1
    return ", ".join(parts)


def assemble(fn_name: str, graph_call: str, temps: list[str], side_effects: list[str], tail: list[str]) -> str:
    """The source of ``def fn_name(L, G): ...`` from its parts, in execution order."""
    body = []
    if graph_call:
        body.append(graph_call)
    body += temps + side_effects + tail
    return f"def {fn_name}(L, G):\n" + "\n".join("    " + line for line in body) + "\n"

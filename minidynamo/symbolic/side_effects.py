"""SideEffects: mutations of objects that outlive the frame, replayed after the graph runs.

Place in the pipeline: the interpreter records here every change it makes to a list,
dict, object attribute or global that came from outside the frame; the transformed
function (``codegen.py``) writes those changes back right after calling the graph,
once. Mirrors ``torch/_dynamo/side_effects.py``.

Note [Replay once, after the graph]
    While tracing, a mutation only changes trackers (``lst.append(x)`` appends to the
    ListVariable's items). Nothing real changes. When the compiled piece ends (a return
    or a graph break), the transformed function evaluates the graph, then assigns the
    final state: ``L['lst'][:] = [...]``, ``L['self'].count = 3``, ``G['calls'] = 2``.
    A graph break writes back *before* running the unsupported code eagerly, so that
    code sees the objects as eager would; the resume function starts from them. So
    each mutation happens exactly once, in program order relative to the eager parts.
"""

from __future__ import annotations

from typing import Optional

from .exc import unimplemented
from . import graph_break_registry as gb
from .variables.base import VariableTracker


def _may_alias(a: VariableTracker, b: VariableTracker) -> bool:
    va, vb = getattr(a, "value", None), getattr(b, "value", None)
    return type(a) is type(b) and (va is None or vb is None or type(va) is type(vb))


def _key(obj: VariableTracker):
    return obj.source.name() if obj.source is not None else id(obj)


class DeletedVariable(VariableTracker):
    """The value of an attribute deleted in the frame (torch's ``DeletedVariable``, variables/base.py)."""


DELETED = DeletedVariable()


class SideEffects:
    def __init__(self) -> None:
        self.mutated_containers: dict = {}  # key -> List/Dict tracker with a source
        self.attr_stores: dict = {}  # (key, name) -> (obj tracker, name, value tracker)
        self.global_stores: dict = {}  # name -> value tracker
        self.objects: dict = {}  # id(obj) -> (tracker, obj): Note [One object, one tracker] (builder.py)
        self.removed_hooks: list = []  # handles of tensor_hooks the frame removed
        self.locked_by: Optional[str] = None  # the higher-order op whose body is being traced (check_allowed)
        self.tensor_hooks: list = []  # (tensor, hook, handle, method): Note [A hook on a tensor of the trace is a node]
        self.cells: dict = {}  # id(real cell) -> (CellVariable, cell): the cells a resume function received
        self.dict_parts: dict = {}  # source name -> the entries of a dict subclass (Note [The dict inside a dict subclass])
        self.object_setattr: set = set()  # attr_stores keys written through object.__setattr__ (super().__setattr__)

    def check_allowed(self, what: str) -> None:
        """Inside a hook's body (``locked_by``), a change to the world outside it breaks the graph there.

        torch: ``SideEffects.check_allowed_side_effect`` while ``speculate_subgraph`` traces a
        higher-order op's body (Note [A hook on a tensor of the trace is a node]).
        """
        if self.locked_by is not None:
            unimplemented(f"the {self.locked_by} body mutates {what}, a variable from outside its scope",
                          gb_id="GB0067", context=f"Attempted to mutate {what}")

    def mutation(self, var: VariableTracker) -> None:
        """A list or dict tracker was changed in place."""
        if var.source is not None:
            self.check_allowed(var.source.name())
            self.mutated_containers[_key(var)] = var

    def store_attr(self, obj: VariableTracker, name: str, value: VariableTracker, generic: bool = False) -> None:
        """``obj.name = value`` replayed after the graph; ``generic``: as ``object.__setattr__`` (the
        trace ran the class's own ``__setattr__`` already and reached object's through ``super()``)."""
        self.check_allowed(f"{obj}.{name}")
        from .variables.tensor import TensorVariable

        if obj.source is None and not isinstance(obj, TensorVariable):  # Note [A tensor's own attribute ...]
            unimplemented(f"setting attribute {name!r} on an object created while tracing", gb_id=gb.SETATTR)
        self.attr_stores[(_key(obj), name)] = (obj, name, value)
        if generic:
            self.object_setattr.add((_key(obj), name))
        else:
            self.object_setattr.discard((_key(obj), name))

    def delete_attr(self, obj: VariableTracker, name: str) -> None:
        """``del obj.name`` of an object from outside the frame: done after the graph (torch: ``DeletedVariable``)."""
        self.store_attr(obj, name, DELETED)

    def load_attr(self, obj: VariableTracker, name: str) -> Optional[VariableTracker]:
        entry = self.attr_stores.get((_key(obj), name))
        if entry and entry[2] is DELETED:
            unimplemented(f"attribute {name!r} was deleted earlier in the frame (eager raises AttributeError)",
                          gb_id=gb.OBSERVED_EXCEPTION, context=f"getattr after del {name}")
        return entry[2] if entry else None

    def pending_attrs(self, obj: VariableTracker) -> tuple[dict, set]:
        """The attributes of ``obj`` the frame has set so far (name -> value tracker), and those it deleted."""
        key = _key(obj)
        mine = {name: value for (k, name), (_, _, value) in self.attr_stores.items() if k == key}
        return {n: v for n, v in mine.items() if v is not DELETED}, {n for n, v in mine.items() if v is DELETED}

    def register_hook(self, tensor: VariableTracker, hook: VariableTracker, handle: VariableTracker,
                      method: str) -> None:
        """``tensor.<method>(hook)`` on an input, run after the graph (torch: ``SideEffects.register_hook``)."""
        self.tensor_hooks.append((tensor, hook, handle, method))

    def remove_hook(self, handle: VariableTracker) -> None:
        """``handle.remove()`` of a hook registered after the graph: removed there, right after."""
        self.removed_hooks.append(handle)

    def track_cell_existing(self, cell, var: VariableTracker) -> None:
        """A real cell the frame received (torch: ``SideEffects.track_cell_existing``): a function whose
        ``__closure__`` holds it reads ``var`` while tracing, and a write to it is replayed after the graph."""
        self.cells[id(cell)] = (var, cell)

    def store_cell(self, name: str) -> None:
        """A write to a cell the frame received (``nonlocal``), replayed after the graph (``codegen``)."""
        self.check_allowed(f"cell {name}")

    def tracked_cell(self, cell) -> Optional[VariableTracker]:
        entry = self.cells.get(id(cell))
        return entry[0] if entry is not None and entry[1] is cell else None

    def store_global(self, name: str, value: VariableTracker) -> None:
        self.check_allowed(f"global {name}")
        self.global_stores[name] = value

    def load_global(self, tx, name: str) -> Optional[VariableTracker]:
        if tx.globals_source is not None:
            return None
        return self.global_stores.get(name)

    def aliasing_guards(self, guards) -> None:
        """Objects the trace wrote to were distinct from every other object of their type it read.

        Traced as two lists, ``f(a, b)`` may append to ``a`` and read ``len(b)``;
        called as ``f(l, l)`` that trace is wrong. So each written object gets a
        guard that it is none of the others (the converse of Note [One object, one tracker]).
        """
        written = {id(v) for v in self.mutated_containers.values()} | {id(o) for o, _, _ in self.attr_stores.values()}
        trackers = [var for var, _ in self.objects.values() if var.source is not None]
        for var in trackers:
            if id(var) not in written:
                continue
            others = [o for o in trackers if o is not var and _may_alias(o, var)]
            if others:
                n = var.source.name()
                guards.add(var.source, "NO_ALIASING", " and ".join(f"{n} is not {o.source.name()}" for o in others),
                           "the trace wrote to this object, taking it to be distinct from these", n)

    def is_empty(self) -> bool:
        return not (self.mutated_containers or self.attr_stores or self.global_stores or self.tensor_hooks
                    or any(var.mutated for var, _ in self.cells.values()))

    def codegen(self, cg) -> list[str]:
        """The write-back statements (Note [Replay once, after the graph])."""
        from .variables.containers import DequeVariable
        from .variables.dicts import ConstDictVariable
        from .variables.iter import ListIteratorVariable
        from .variables.sets import SetVariable

        lines = []
        for var in self.mutated_containers.values():
            target = cg.source_expr(var.source)
            if isinstance(var, ConstDictVariable) and getattr(var, "written_through", None) is not None:
                # Note [The dict inside a dict subclass]: through the base class, never the subclass's overrides
                body = ", ".join(f"{cg.constant_expr(k)}: {cg.expr(v)}" for k, v in var.items.items())
                lines.append(f"___manual_dict_setitem({{{body}}}, {target}, {cg.constant_expr(var.written_through)})")
            elif isinstance(var, ConstDictVariable):
                body = ", ".join(f"{cg.constant_expr(k)}: {cg.expr(v)}" for k, v in var.items.items())
                lines.append(f"___replace_dict({target}, {{{body}}})")
            elif isinstance(var, ListIteratorVariable):  # Note [A carried iterator is advanced in place]
                lines.append(f"{target}.resume_index = {var.index}")
            elif isinstance(var, SetVariable):  # set.__init__ clears, then fills (as torch's SetVariable.__init__)
                lines.append(f"{target}.__init__([{', '.join(cg.expr(v) for v in var.items.values())}])")
            elif isinstance(var, DequeVariable):  # Note [A deque made in the trace]: __init__ clears, then fills
                lines.append(f"{target}.__init__([{', '.join(cg.expr(v) for v in var.items)}], {var.maxlen!r})")
            else:
                lines.append(f"{target}[:] = [{', '.join(cg.expr(v) for v in var.items)}]")
        from .variables.tensor import TensorVariable

        for key, (obj, name, value) in self.attr_stores.items():
            if isinstance(obj, TensorVariable) and obj.source is None and obj.proxy.node not in cg.graph_outputs:
                continue  # a tensor of the trace nothing after the graph reaches: pruned, as torch's
            if value is DELETED:
                lines.append(f"delattr({cg.expr(obj)}, {name!r})")
            elif key in self.object_setattr:
                lines.append(f"object.__setattr__({cg.expr(obj)}, {name!r}, {cg.expr(value)})")
            elif name.isidentifier():
                lines.append(f"{cg.expr(obj)}.{name} = {cg.expr(value)}")
            else:
                lines.append(f"setattr({cg.expr(obj)}, {name!r}, {cg.expr(value)})")
        for name, value in self.global_stores.items():
            lines.append(f"G[{name!r}] = {cg.expr(value)}")
        for var, _ in self.cells.values():  # a cell the frame received, written while tracing
            if var.mutated:
                lines.append(f"del {var.real_expr}.cell_contents" if var.value is None
                             else f"{var.real_expr}.cell_contents = {cg.expr(var.value)}")
        for tensor, hook, handle, method in self.tensor_hooks:  # in the order the frame registered them
            lines.append(f"{handle.name} = {cg.expr(tensor)}.{method}({cg.expr(hook)})")
        for handle in self.removed_hooks:
            lines.append(f"{handle.name}.remove()")
        return lines

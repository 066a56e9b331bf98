"""Guard codegen: an entry's guards compiled into one generated check function, run before every call.

Place in the pipeline: ``convert_frame.py`` builds a ``CheckFunction`` from the
``GuardSet`` (``guards.py``) the trace filled; the cache (``frame_cache.py``) calls its
``fn`` on every call, and ``first_failure`` when it says no. Mirrors
``CheckFunctionManager`` in ``torch/_dynamo/guards.py`` and the C++ guard tree it
builds (``torch/csrc/dynamo/guards.cpp``: a ``GuardManager`` per source, child
managers for items and attributes, TENSOR_MATCH / GLOBAL_STATE / NO_TENSOR_ALIASING
as C++ leaves). Ours is generated Python (Note [Each source is read once]) whose
leaves call the C++ matchers of ``tensor_match.cpp`` where the extension is built.
"""

from __future__ import annotations

import re
import sys
from typing import Any, Optional

import torch

from . import tensor_match
from .guards import _MODULE_TABLES, Guard, GuardSet, _no_hooks_expr
from .source import AttrSource, GetItemSource, LocalSource, ModuleSource, Source

# ``torch.float32`` or ``torch.nn.Parameter`` in a guard, as the check function reads it: a global bound once.
_TORCH_CONSTANT = re.compile(r"(?<![\w.'\]])torch((?:\.[A-Za-z_]\w*)+)(?![\w.(])")


def _hoist_torch_constants(text: str, scope: dict[str, Any]) -> str:
    """``torch.float32`` -> ``___torch_float32`` (bound in ``scope``): one lookup instead of two (three
    for ``torch.nn.Parameter``, which a module's 200 parameters pay on every call)."""

    def bind(m: re.Match) -> str:
        value: Any = torch
        for part in m.group(1)[1:].split("."):
            value = getattr(value, part, None)
        if not isinstance(value, (torch.dtype, type)):
            return m.group(0)
        name = "___torch_" + m.group(1)[1:].replace(".", "_")
        scope[name] = value
        return name

    return _TORCH_CONSTANT.sub(bind, text)


def _no_aliasing_guard(guard_set: GuardSet) -> Optional[Guard]:
    """The NO_TENSOR_ALIASING guard for an entry (Note [Distinct tensors stay distinct]).

    Note [Distinct tensors stay distinct]
        The graph was traced with ``a`` and ``b`` as two tensors. Called with
        the same tensor twice, a write through ``a`` would have to show in
        ``b``, and the graph, which read ``b`` as its own input, would give a
        wrong answer. Torch's NO_TENSOR_ALIASING guard (``check_no_aliasing``,
        C++) checks that all tensor inputs are distinct objects; a miss
        recompiles, and the new trace sees one tensor reached twice. Like torch
        (``skip_no_tensor_aliasing_guards_on_parameters``), parameters are left out.

        A write is not the only way the difference shows: ``a is b`` (or
        ``a.data_ptr() == b.data_ptr()``) read while tracing was folded to a
        constant, so ``def g(a, b): return a + 100 if a is b else a + b`` traced
        with two tensors must not serve ``g(z, z)``. So, as torch
        (``install_no_tensor_aliasing_guard`` in torch/_dynamo/guards.py, over
        every tensor source but parameters), every pair of tensor inputs is
        checked, whether or not the graph writes to one. Where the C++ extension
        is built that is one call, ``___no_aliasing(200, ___s1, ..., ___s200)``
        (pairs while few, a sorted copy of the pointers when many, as torch's
        C++ uses a set), or part of the one ``ItemsMatch`` call when all of them
        are items of one tuple (Note [A sequence of tensors is one C++ call]);
        elsewhere unrolled ``is`` tests for a few, a set of ids for many.
    """
    sources = [n for n in guard_set.tensor_names if n not in guard_set.duplicate_sources]
    # torch builds its guards sorted by ``Guard.sort_key`` (torch/_guards.py: locals before globals, then
    # by the name's length and text), so its aliasing guard lists them so, whatever order the trace met them
    sources.sort(key=lambda n: (not n.startswith("L["), len(n), n))
    written = sources
    if len(sources) < 2:
        return None
    expr = f"___check_not_aliased(({', '.join(written)},), ({', '.join(sources)},))"
    why = "the graph takes these tensors as distinct inputs (torch's NO_TENSOR_ALIASING)"
    return Guard(None, "NO_TENSOR_ALIASING", expr, why, operands=(tuple(written), tuple(sources)))


def _unrolled_not_aliased(guard: Guard, bound: dict[str, str]) -> str:
    """``___s1 is ___s2 or ___s1 is ___s3 ...``: true when some mutated input is another input."""
    written, sources = guard.operands
    if len(written) == len(sources) and len(sources) > 6:  # every pair of many: a set of ids
        return f"len({{{', '.join(f'id({bound.get(n, n)})' for n in sources)}}}) != {len(sources)}"
    tests, done = [], set()
    for w in written:
        done.add(w)
        tests += [f"{bound.get(w, w)} is {bound.get(n, n)}" for n in sources if n not in done]
    return " or ".join(tests) if tests else "False"


def _no_aliasing_call(guard: Guard, bound: dict[str, str]) -> str:
    """``___no_aliasing(2, ___s1, ___s2, ___s3)``: the written inputs first, then the others (tensor_match.cpp)."""
    written, sources = guard.operands
    ordered = list(written) + [n for n in sources if n not in written]
    return f"___no_aliasing({len(written)}, {', '.join(bound.get(n, n) for n in ordered)})"


def _replace_source(expr: str, name: str, local: str) -> str:
    """``expr`` with each ``name`` not followed by ``\\w``, ``'`` or ``]`` replaced by ``local``.

    ``re.sub(re.escape(name) + r"(?![\\w'\\]])", local, expr)`` without compiling one
    pattern per source: 450 sources overflow ``re``'s cache, and compiling them was
    a tenth of a ResNet's first compile.
    """
    parts, start, at = [], 0, expr.find(name)
    while at >= 0:
        end = at + len(name)
        nxt = expr[end:end + 1]
        if nxt and (nxt.isalnum() or nxt in "_']"):
            at = expr.find(name, at + 1)
            continue
        parts += [expr[start:at], local]
        start = end
        at = expr.find(name, end)
    return "".join(parts) + expr[start:] if parts else expr


def _check_fn_source(guards: list[Guard], scope: dict[str, Any],
                     tensor_specs: Optional[dict[str, tuple]] = None, guard_set: Optional[GuardSet] = None) -> str:
    """One function checking every guard, each source read once (Note [Each source is read once]).

    Note [Each source is read once]
        A tensor input has six guards (type, dtype, device, shape, stride,
        requires_grad). Joined naively, ``L['xs'][7]`` would be looked up six
        times per call; with 200 inputs that dominates a call. So the guards are
        grouped by source, in order of first appearance, the source is bound to a
        local once, and its guards test the local. A source inside another one
        (``L['xs'][7]`` inside ``L['xs']``) is read from its parent's local, and
        constants such as ``torch.float32`` are bound once as globals of the check
        function. Real Dynamo's guard managers do the same in C++: one manager per
        source, child managers for items and attributes, the checks as leaves.

    With ``tensor_specs`` (the C++ ``TensorMatch`` is available), a source's
    TENSOR_MATCH guards run as one call (Note [TENSOR_MATCH runs in C++]), and
    with ``guard_set`` a module's layout guards too (Note [A module's layout is one
    C++ call]); sources are read as ``guard_set.read_expr`` says (Note [Module
    attributes are read from their tables]).
    """
    matchers: dict[tuple, str] = {}  # one TensorMatch per distinct spec: 200 alike inputs share one
    module_matchers: dict[tuple, str] = {}  # one ModuleMatch per distinct layout: every ReLU shares one
    layouts = guard_set.module_layouts if guard_set is not None and tensor_match.module_match() is not None else {}
    groups: dict[str, list[Guard]] = {}
    sources: dict[str, Any] = {}
    over_many = [g for g in guards if g.source is None and g.kind == "NO_TENSOR_ALIASING"]  # checked last
    global_state = [g for g in guards if g.kind == "GLOBAL_STATE"]  # checked first, one call
    for g in guards:
        if g.source is None:
            continue
        groups.setdefault(g.source.name(), []).append(g)
        sources.setdefault(g.source.name(), g.source)
    fused_items = _fusable_items(groups, sources, tensor_specs, scope)  # Note [A sequence of tensors is one C++ call]
    folded = _fold_no_aliasing(fused_items, over_many)
    over_many = [g for g in over_many if all(g is not f for f in folded.values())]
    skipped = {child for items in fused_items.values() for _, child, _, _ in items}
    lines = ["def ___check_guards(L, G):"]
    if global_state:  # Note [Global state is one guard]
        tests = "___global_state()" if "___global_state" in scope else \
            " and ".join(f"({_hoist_torch_constants(g.expr, scope)})" for g in global_state)
        lines += [f"    if not ({tests}):", "        return False"]
    for g in guards:  # a flag read as a constant (allow_tf32), a class attribute inlined
        if g.source is None and g.kind in ("BACKEND_FLAG", "CLASS_ATTRIBUTE", "TORCH_FUNCTION_STATE",
                                           "DEFAULT_DEVICE"):
            test = _class_attribute_test(g.expr, scope) if g.kind == "CLASS_ATTRIBUTE" else None
            lines += [f"    if not ({test or _hoist_torch_constants(g.expr, scope)}):", "        return False"]
    bound: dict[str, str] = {}  # source name -> the local holding it
    for source in sources.values():  # a module and its __dict__, read through: bound once (Note [A module is bound once])
        for base in source.bases():
            module = _module_read(base, scope)
            if module is not None:
                bound.setdefault(base.name(), module)
    for i, (name, group) in enumerate(groups.items()):
        if name in skipped:
            continue
        local = f"___s{i}"
        read = _module_read(sources[name], scope) or (
            guard_set.read_expr(sources[name], bound) if guard_set is not None else _read_from_bound(sources[name], bound))
        bound[name] = local
        lines.append(f"    {local} = {read}")
        spec = tensor_specs.get(name) if tensor_specs else None
        fused = _module_fused(name, group, layouts)
        tests = [f"({_hoist_torch_constants(_replace_source(g.expr, name, local), scope)})" for g in group
                 if (spec is None or g.kind != "TENSOR_MATCH") and g not in fused]  # one C++ call replaces those
        tests = _singleton_tests(tests, local)
        if spec is not None:
            tests.append(f"{_tensor_matcher(spec, scope, matchers)}({local})")
        if fused:
            no_hooks = len(fused) == len(_MODULE_TABLES) + 1
            tests.insert(1, f"{_module_matcher(layouts[name].tables + (no_hooks,), scope, module_matchers)}({local})")
        tests = " and ".join(tests)
        lines.append(f"    if not ({tests}):")
        lines.append("        return False")
        if name in fused_items:
            matcher = _items_matcher(fused_items[name], folded.get(name), scope, matchers)
            lines += [f"    if not {matcher}({local}):", "        return False"]
    longest_first = sorted(bound, key=len, reverse=True)
    for g in guards:  # sizes of the inputs whose types and ranks are checked above (dynamic_shapes.py)
        if g.kind in ("SHAPE_ENV", "DUPLICATE_INPUT"):  # from the locals bound above: 2 <= L['x'].size()[0] is
            # 2 <= ___s4.size()[0] (Note [A duplicate input is one guard over two sources], output_graph.py)
            expr = g.expr
            for name in longest_first:
                if name in expr:
                    expr = _replace_source(expr, name, bound[name])
            lines += [f"    if not ({expr}):", "        return False"]
    no_aliasing = tensor_match.no_aliasing() if tensor_specs else None
    for g in over_many:  # identity tests between the written inputs and the others: one C++ call, or unrolled
        if no_aliasing is not None:
            scope["___no_aliasing"] = no_aliasing
            lines.append(f"    if not {_no_aliasing_call(g, bound)}:")
        else:
            lines.append(f"    if {_unrolled_not_aliased(g, bound)}:")
        lines.append("        return False")
    lines.append("    return True")
    return "\n".join(lines) + "\n"


def _singleton_tests(tests: list[str], local: str) -> list[str]:
    """Note [An identity test with a singleton implies the type]

    A bool or None read by the trace has two guards, ``type(x) is bool`` (TYPE_MATCH)
    and ``x is False`` (ID_MATCH on the constant). ``None``, ``True`` and ``False``
    are the only instances of their types, so the identity test alone decides both:
    the type test is left out of the check function (a T5 check held 288 of them),
    and stays in the guard list, the tree and the failure reasons.
    """
    singles = {f"({local} is None)": f"(type({local}) is type(None))",
               f"({local} is True)": f"(type({local}) is bool)",
               f"({local} is False)": f"(type({local}) is bool)"}
    implied = {singles[t] for t in tests if t in singles}
    return [t for t in tests if t not in implied] if implied else tests


# Note [A sequence of tensors is one C++ call]
#     ``def f(*xs)`` called with 200 tensors has 200 item sources, each with its
#     TYPE_MATCH and its TensorMatch call: as generated code, a subscript, a type
#     test and a C++ call per item, about 10 us per call, plus the NO_TENSOR_ALIASING
#     call over 200 locals. Torch's guard tree has one child GuardManager per item
#     (``TupleGetItemGuardAccessor``), each with its TENSOR_MATCH and five
#     DIMENSION_DYNAMIC_MARKING ``hasattr`` leaves, and NO_TENSOR_ALIASING over all
#     200 tensors, all in C++. Ours, where the extension is built, checks the items of
#     one tuple or list whose guards are only their type and TENSOR_MATCH in one
#     ``ItemsMatch`` call after the sequence's own guards (``type(___s0) is tuple and
#     len(___s0) == 200``): for each item its exact type and its ``TensorMatch``, and,
#     when every input of the NO_TENSOR_ALIASING guard is such an item, the identity
#     tests of the written items against the others. The readable guards and
#     ``first_failure`` stay the per-item Python ones.
def _fusable_items(groups: dict, sources: dict, tensor_specs: Optional[dict], scope: dict) -> dict[str, list]:
    """Parent source name -> [(index, item name, type, spec)] for the tensor items one ``ItemsMatch`` checks."""
    if not tensor_specs or tensor_match.items_match() is None:
        return {}
    found: dict[str, list] = {}
    for name, group in groups.items():
        source, spec = sources[name], tensor_specs.get(name)
        base = getattr(source, "base", None)
        if spec is None or not isinstance(source, GetItemSource) or type(source.index) is not int \
                or source.index < 0 or not isinstance(base, Source) or base.name() not in groups:
            continue
        kinds = [g.kind for g in group]
        if kinds.count("TYPE_MATCH") != 1 or any(k not in ("TYPE_MATCH", "TENSOR_MATCH") for k in kinds):
            continue
        parent = base.name()
        if not any(g.kind == "TYPE_MATCH" and g.expr in (f"type({parent}) is tuple", f"type({parent}) is list")
                   for g in groups[parent]):
            continue
        type_guard = next(g for g in group if g.kind == "TYPE_MATCH")
        try:
            expected = eval(type_guard.expr.rsplit(" is ", 1)[1], dict(scope))  # noqa: S307 - our own type name
        except Exception:  # noqa: BLE001
            continue
        if isinstance(expected, type):
            found.setdefault(parent, []).append((source.index, name, expected, spec))
    return {parent: items for parent, items in found.items() if len(items) >= 2}


def _fold_no_aliasing(fused_items: dict, over_many: list) -> dict:
    """Parent name -> the NO_TENSOR_ALIASING guard its ``ItemsMatch`` also checks (all its inputs are its items)."""
    folded: dict = {}
    for g in over_many:
        written, names = g.operands
        for parent, items in fused_items.items():
            positions = {name: index for index, name, _, _ in items}
            if parent not in folded and all(n in positions for n in names):
                folded[parent] = g
                break
    return folded


def _items_matcher(items: list, no_aliasing: Optional[Guard], scope: dict, matchers: dict) -> str:
    """A scope name bound to the ``ItemsMatch`` of one sequence's tensor items (and its no-aliasing tests)."""
    indices = tuple(index for index, _, _, _ in items)
    types = tuple(t for _, _, t, _ in items)
    tensor_matchers = tuple(scope[_tensor_matcher(spec, scope, matchers)] for _, _, _, spec in items)
    written = distinct = ()
    if no_aliasing is not None:
        positions = {name: index for index, name, _, _ in items}
        written = tuple(positions[n] for n in no_aliasing.operands[0])
        distinct = tuple(positions[n] for n in no_aliasing.operands[1])
    name = f"___items_match_{sum(k.startswith('___items_match_') for k in scope)}"
    scope[name] = tensor_match.items_match()(indices, types, tensor_matchers, written, distinct)
    return name


def _module_read(source: Source, scope: dict[str, Any]) -> Optional[str]:
    """``sys.modules['helpers']`` read as the module object bound at compile time (Note [A module is bound once]).

    Note [A module is bound once]
        A function inlined from ``helpers.py`` reads its globals from its module's
        ``__dict__``, and the global hooks of ``nn.Module`` are read from
        ``torch.nn.modules.module``'s: their guards read ``sys.modules['...']``, a
        global, an attribute and a dict lookup per call. A module's ``__dict__``
        cannot be replaced, and the functions traced read the ``__dict__`` of the
        module they were defined in (their ``__globals__``), whatever ``sys.modules``
        says later; so the module object (or its ``__dict__``, ``sys.modules['helpers'].__dict__``)
        is bound once into the check function's scope and its guards read from it:
        ``___module_helpers_dict['SCALE'] == 2``, the same values, and a rebinding of
        any of those globals still fails its guard. Torch's guards reach a
        module's globals the same way, from an object held by the guard manager.
    """
    of_dict = type(source) is AttrSource and source.member == "__dict__"  # a module's __dict__ is read-only
    module_source = source.base if of_dict else source
    if type(module_source) is not ModuleSource or module_source.module_name not in sys.modules:
        return None
    value = sys.modules[module_source.module_name]
    value = vars(value) if of_dict else value
    name = "___module_" + "".join(c if c.isalnum() else "_" for c in module_source.module_name) + ("_dict" if of_dict else "")
    if scope.setdefault(name, value) is not value:
        return None
    return name


_CLASS_ATTRIBUTE = re.compile(r"___getattr_static\((\w+), ('\w+'), None\) is (\w+)")


def _class_attribute_test(expr: str, scope: dict[str, Any]) -> Optional[str]:
    """``___getattr_static(C, 'forward', None) is F`` as dict lookups along C's MRO, or None to keep it.

    Note [A class attribute guard without inspect]
        ``inspect.getattr_static(C, name)`` is a Python function of a dozen calls
        (about 3 us), one per class the trace read ``forward`` from: 30 us for a
        small CNN. For a class whose metaclass is ``type`` (or one, like ``abc.ABCMeta``, that
        leaves ``__mro__`` and ``__dict__`` to ``type``) it returns the first
        ``__dict__`` along ``C.__mro__`` that holds ``name``, so the same test is
        ``C.__mro__ is <the MRO traced> and 'forward' not in <each class before
        the owner>.__dict__ and <owner>.__dict__.get('forward') is F``: a few C
        lookups. A new ``__bases__`` makes a new ``__mro__`` tuple, so the identity
        test sees it. The readable guard stays the ``getattr_static`` one.
    """
    m = _CLASS_ATTRIBUTE.fullmatch(expr)
    if m is None or m.group(1) not in scope or m.group(3) not in scope:
        return None
    cls, name, attr = scope[m.group(1)], eval(m.group(2)), scope[m.group(3)]  # noqa: S307 - a quoted identifier
    if not isinstance(cls, type) or attr is None or not all(_plain_metaclass(type(k)) for k in cls.__mro__):
        return None
    owners = [k for k in cls.__mro__ if name in vars(k)]
    if not owners or vars(owners[0])[name] is not attr:
        return None
    before = cls.__mro__[: cls.__mro__.index(owners[0])]
    mro = f"___mro_{m.group(1).lstrip('_')}"
    scope[mro] = cls.__mro__
    tests = [f"{m.group(1)}.__mro__ is {mro}"]
    for k in before:
        tests.append(f"{name!r} not in {_scope_name(k, scope)}.__dict__")
    tests.append(f"{_scope_name(owners[0], scope)}.__dict__.get({name!r}) is {m.group(3)}")
    return " and ".join(tests)


_TYPE_SLOTS = ("__mro__", "__dict__", "__getattribute__", "__getattr__")


def _plain_metaclass(meta: type) -> bool:
    """``type``, or a metaclass (``abc.ABCMeta``) that leaves a class's ``__mro__`` and ``__dict__`` to
    ``type``: then ``getattr_static`` reads a class attribute as Note [A class attribute guard without
    inspect] does (``inspect._shadowed_dict`` finds nothing of its own)."""
    return meta is type or all(not any(n in vars(k) for n in _TYPE_SLOTS) for k in meta.__mro__
                               if k is not type and k is not object)


def _scope_name(obj: Any, scope: dict[str, Any]) -> str:
    """A scope name bound to ``obj`` (an existing one if any)."""
    for k, v in scope.items():
        if v is obj and k.startswith("___"):
            return k
    name = f"___cls_{''.join(c if c.isalnum() else '_' for c in obj.__name__)}_{id(obj) % 100000}"
    scope[name] = obj
    return name


def _module_fused(name: str, group: list[Guard], layouts: dict) -> list[Guard]:
    """The guards of a module's group that one ``ModuleMatch`` call replaces (none without the extension)."""
    if name not in layouts:
        return []
    fused = [g for g in group if g.kind == "NN_MODULE_LAYOUT"]
    if len(fused) != len(_MODULE_TABLES):
        return []
    return fused + [g for g in group if g.kind == "NN_MODULE_CALL" and g.expr == _no_hooks_expr(name)][:1]


def _module_matcher(spec: tuple, scope: dict[str, Any], matchers: dict[tuple, str]) -> str:
    """The scope name of the ``ModuleMatch`` for ``spec`` (three layouts, no_hooks), one per distinct spec."""
    if spec not in matchers:
        name = matchers[spec] = f"___module_match_{len(matchers)}"
        scope[name] = tensor_match.module_match()(*spec)
    return matchers[spec]


def _tensor_matcher(spec: tuple, scope: dict[str, Any], matchers: dict[tuple, str]) -> str:
    """The scope name of the ``TensorMatch`` for ``spec``, made once per distinct spec."""
    if spec not in matchers:
        name = matchers[spec] = f"___tensor_match_{len(matchers)}"
        scope[name] = tensor_match.get()(*spec)
    return matchers[spec]


def _read_from_bound(source: Source, bound: dict[str, str]) -> str:
    """``L['xs'][7]`` read as ``___s0[7]`` when ``L['xs']`` is already in local ``___s0``.

    A nested source starts from its nearest enclosing source that an earlier
    guard has bound, so with 200 items of one tuple the tuple is looked up once,
    not 200 times.
    """
    name = source.name()
    for base in source.bases():
        base_name = base.name()
        if base_name in bound and name.startswith(base_name):
            return bound[base_name] + name[len(base_name):]
    return name


def torch_guard_order(guard: Guard, module_sources: Optional[dict] = None) -> tuple:
    """Note [Guards in torch's order]

    Torch sorts an entry's guards before it builds the tree (``torch/_guards.py``:
    ``Guard.sort_key``: the guards without a source first, then by the source's
    ``GuardSource``, the length of its name, the name), so its managers are ``L['n']``
    before ``L['x']`` before ``L['xs']`` before ``G``, and a recompile names the first
    failure in that order. The ``GuardSource`` of a value read through a module is the
    module's: torch's builder wraps every module's source (``UnspecializedNNModuleSource``,
    or ``UnspecializedBuiltinNNModuleSource`` for torch.nn's own modules but containers,
    variables/builder.py), so ``L['self']`` and all it reaches come after the globals:
    locals 0, globals 1, a user module's locals 12 and globals 13, torch.nn's 14 and 15
    (``GuardSource`` in torch/_guards.py). Ours sorts the same way (``module_sources``:
    the sources the builder wrapped as modules), so the check function walks the tree
    in torch's order and names the guard torch names; the size guards of dynamic shapes,
    the duplicate inputs and NO_TENSOR_ALIASING, over many sources, stay last.
    """
    source = guard.source
    if source is None:
        return (99, 0, "") if guard.kind in ("SHAPE_ENV", "NO_TENSOR_ALIASING", "DUPLICATE_INPUT") else (-1, 0, "")
    if guard.kind == "DICT_CONTAINS" and isinstance(source, AttrSource) and source.member == "__dict__":  # torch's
        source = source.base  # guard on an instance dict is the instance's (``self.source.make_guard(
        # DICT_NOT_CONTAINS)``, user_defined.py ``get_source_by_walking_mro``): sorted by its name
    chain = [source, *source.bases()]
    rank = 0 if isinstance(chain[-1], LocalSource) else 1
    for s in chain if module_sources else ():
        builtin = module_sources.get(s.name())
        if builtin is not None:  # the nearest module on the way
            rank += 14 if builtin else 12
            break
    name = source.name()
    return (rank, len(name), name)


class CheckFunction:
    """All guards of an entry compiled into one function (``CheckFunctionManager``)."""

    def __init__(self, guard_set: GuardSet):
        modules = guard_set.module_sources  # Note [Guards in torch's order]
        self.guards = sorted(guard_set.guards, key=lambda g: torch_guard_order(g, modules))
        no_aliasing = _no_aliasing_guard(guard_set)
        if no_aliasing is not None:
            self.guards.append(no_aliasing)
        self.scope = guard_set.scope
        if guard_set.global_state is not None:
            self.scope["___global_state"] = guard_set.global_state
        self.tensor_specs = dict(guard_set.tensor_specs)  # source -> TENSOR_MATCH's fields (the tree's leaves)
        self._tree = None
        self._printed: dict = {}  # what the tree prints beside the guards (note_values)
        specs = guard_set.tensor_specs if tensor_match.get() is not None else None
        self.source = _check_fn_source(self.guards, self.scope, specs, guard_set)
        exec(compile(self.source, "<minidynamo guards>", "exec"), self.scope)  # noqa: S102
        self.fn = self.scope["___check_guards"]

    def __call__(self, L: dict, G: dict) -> bool:
        try:
            return bool(self.fn(L, G))
        except Exception:  # a guard that cannot even be evaluated has failed
            return False

    def first_failure(self, L: dict, G: dict) -> tuple[Optional[Guard], str]:
        """The first guard that fails on this frame, and what the value is now."""
        for guard in self.guards:
            scope = dict(self.scope, L=L, G=G)
            try:
                ok = eval(guard.expr, scope)
            except Exception as e:  # noqa: BLE001
                return guard, f"could not evaluate: {type(e).__name__}: {e}"
            if not ok and guard.kind == "NO_TENSOR_ALIASING":
                return guard, _aliasing_change(guard, scope)
            if not ok:
                try:
                    now = eval(guard.value_expr, scope) if guard.value_expr else "?"
                except Exception as e:  # noqa: BLE001
                    now = f"<{type(e).__name__}>"
                return guard, f"{guard.value_expr or guard.expr} is now {now!r}"
        return None, ""

    @property
    def tree(self):
        """These guards as a tree of guard managers (guard_tree.py), in the shape of ``TORCH_LOGS=guards``."""
        if self._tree is None:
            from .guard_tree import build_tree

            self._tree = build_tree(self.guards, self.tensor_specs, **self._printed)
        return self._tree

    def note_values(self, L: dict, G: dict, code) -> None:
        """Keep what the tree prints of the traced values: each source's type, each local's index
        in the frame, each tensor's dispatch keys (Note [The tree prints as torch's], guard_tree.py).

        Called once per entry when it is made; only types and strings are kept, never the values.
        """
        from minidynamo.dispatch import key_set

        from .guard_tree import _code

        scope = dict(self.scope, L=L, G=G)
        types, keys = {}, {}
        tls_in, tls_out = set(key_set.tls_included()), set(key_set.tls_excluded())  # as key_set.keys, once
        for g in self.guards:
            if g.source is None:
                continue
            for source in (g.source, *g.source.bases()):
                name = source.name()
                if name in types:
                    break
                try:
                    value = eval(_code(name), scope)  # noqa: S307 - our own source expression
                except Exception:  # noqa: BLE001 - not readable now: printed without its type
                    break
                types[name] = type(value)
                if name in self.tensor_specs and isinstance(value, torch.Tensor):
                    try:  # torch's check_tensor prints the class and the key set the dispatcher computes
                        names = (set(key_set.tensor_keys(value)) | tls_in) - tls_out
                        keys[name] = f"{type(value).__name__}, DispatchKeySet({', '.join(reversed(key_set.order(names)))})"
                    except Exception:  # noqa: BLE001 - a tensor our key-set model does not cover
                        pass
        names = code.co_varnames + tuple(n for n in code.co_cellvars if n not in code.co_varnames) + code.co_freevars
        self._printed = {"value_types": types, "local_index": {n: i for i, n in enumerate(names)}, "tensor_keys": keys}
        self._tree = None

    def record_failure(self, L: dict, G: dict) -> None:
        """These guards failed in a lookup: count it in the tree, as torch's managers do (guard_tree.py)."""
        self.tree.first_failure(L, G, self.scope, update=True)

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)


def _aliasing_change(guard: Guard, scope: dict) -> str:
    """Which inputs are now one tensor: ``L['a'] and L['b'] are now the same tensor``."""
    names = guard.operands[1]
    by_id: dict[int, list[str]] = {}
    for name in names:
        by_id.setdefault(id(eval(name, scope)), []).append(name)  # noqa: S307
    same = [" and ".join(group) for group in by_id.values() if len(group) > 1]
    return "; ".join(f"{s} are now the same tensor" for s in same)

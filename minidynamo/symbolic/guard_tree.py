"""The guard tree: an entry's guards as guard managers, one per source path, with leaf guards at each node.

Place in the pipeline: after guard codegen. ``guard_codegen.CheckFunction`` holds an
entry's guards; ``build_tree`` groups them into a ``RootGuardManager`` whose children are
``GuardManager`` nodes reached from their parent through an accessor (a frame local, an
attribute, a dict or tuple item), each with its leaf guards. The tree is what
``entry.check.tree`` prints (in the shape of torch's ``TORCH_LOGS=guards``), what
``check`` walks root first, stopping at the first failure, and what the recompile
reasons read (``fail_reason``: torch's phrasing). Mirrors ``GuardManagerWrapper`` /
``RootGuardManager`` / ``GuardManager`` in ``torch/_dynamo/guards.py`` and their C++ in
``torch/csrc/dynamo/guards.cpp`` (``TensorCheck::check_verbose``, ``GlobalStateGuard``),
and ``get_guard_fail_reason`` in ``torch/_dynamo/guards.py``.

Note [The tree is walked by one generated function]
    Torch walks its tree in C++: the root's leaves first (GLOBAL_STATE, ...), then
    each child manager, which reads its value once through its accessor and runs its
    leaves, then its own children; the first leaf that fails stops the walk. Ours
    generates one Python function that does exactly this walk, flattened: the
    root's leaves, then for each source (in the order the trace first guarded it)
    one read into a local and its leaves, a child read from its parent's local
    (Note [Each source is read once], guard_codegen.py). ``RootGuardManager.check``
    walks the tree itself in Python, node by node, and agrees with the generated
    function (tests/test_cache_like_torch.py); it is for reading, not for the hot path.
    One place differs from torch on purpose: a tensor's TENSOR_MATCH is five
    readable guards that run as one C++ call, printed here as one leaf. The size
    guards of dynamic shapes run after the children, as torch's epilogue
    ``LAMBDA_GUARD``s; NO_TENSOR_ALIASING sits on each of its tensors' nodes, each node
    checking its own tensor against those before it (torch's ``RelationalGuard``, Note [A
    relational guard fails where the duplicate shows]).

Note [The tree prints as torch's]
    ``GuardManagerWrapper.__str__`` (``torch/_dynamo/guards.py``) prints a manager as
    ``GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x',
    framelocals_idx=0), type=<class 'torch.Tensor'>, tag_safe=(False, False)``:
    ``type`` is the type of the value the manager guarded when traced; ``tag_safe`` is
    (``is_tag_safe``, ``is_tag_safe_root``), which only ``find_tag_safe_roots`` sets,
    run under ``config.use_recursive_dict_tags_for_guards`` (False by default), so it
    reads ``(False, False)`` by default, and always in ours, which has no dict tags.
    Globals hang under one ``G`` manager (``GlobalsGuardAccessor``), each read through a
    ``DictGetItemGuardAccessor``; a list item is read by ``ListGetItemGuardAccessor``,
    a tuple item by ``TupleGetItemGuardAccessor``. The global state is one leaf,
    ``___check_global_state() against {...}``; a relational guard (NO_TENSOR_ALIASING)
    prints its code on the first node that holds it and its bare name on the others.
    Our kinds print under torch's names where torch names the same test differently
    (``EQUALS_MATCH`` / ``TRUE_MATCH`` / ``FALSE_MATCH`` / ``NONE_MATCH`` for a constant,
    ``TORCH_FUNCTION_MODE_STACK``, ``LAMBDA_GUARD`` for a shape guard); a guard torch
    has and we do not (``DIMENSION_DYNAMIC_MARKING_GUARD``, the saved-tensors-hooks
    ``LAMBDA_GUARD``) is not printed, and ours keep their readable expressions.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from .guards import Guard
from .source import AttrSource, GetItemSource, GlobalSource, LocalSource, Source

# root leaves our walk runs last (aliasing: when no node holds it)
_AFTER_CHILDREN = ("SHAPE_ENV", "DUPLICATE_INPUT", "NO_TENSOR_ALIASING")
_TORCH_KIND = {"TORCH_FUNCTION_STATE": "TORCH_FUNCTION_MODE_STACK", "SHAPE_ENV": "LAMBDA_GUARD",  # Note [The tree
               "DUPLICATE_INPUT": "LAMBDA_GUARD"}  # prints as torch's]


@dataclass
class GuardManager:
    """One node: the value at ``source``, reached from the parent ``accessed_by``, with its leaf guards."""

    source: Optional[Source]
    accessed_by: str = ""
    leaves: list = field(default_factory=list)
    children: dict = field(default_factory=dict)  # source name -> GuardManager, in the order first guarded
    tensor_spec: Optional[tuple] = None  # (dtype, device, sizes, strides, requires_grad) of a TENSOR_MATCH
    fail_count: int = 0  # how often a leaf here or below failed (Note [A manager that fails is tried first])
    tensor_check: Any = None  # the C++ TensorMatch of this node's TENSOR_MATCH leaf, where the extension is built
    value_type: Optional[type] = None  # the type of the value when traced (Note [The tree prints as torch's])
    tensor_keys: str = ""  # "Tensor, DispatchKeySet(CPU, ...)": what TENSOR_MATCH printed, when traced
    relational: list = field(default_factory=list)  # [guard, index of this node's tensor among its operands]

    def lines(self, depth: int, printed: set) -> list[str]:
        bar = "| " * depth
        out = []
        done_tensor = False
        constant = any(g.kind == "CONSTANT_MATCH" for g in self.leaves)
        tensor = any(g.kind == "TENSOR_MATCH" for g in self.leaves)
        for g in self.leaves:
            if g.kind == "TYPE_MATCH" and (constant or tensor):  # one leaf in torch: EQUALS_MATCH / TENSOR_MATCH
                continue  # check the type themselves
            if g.kind == "TENSOR_MATCH":  # five readable guards, one C++ leaf (Note [TENSOR_MATCH runs in C++])
                if not done_tensor:
                    out.append(f"{bar}| +- TENSOR_MATCH: {_check_tensor_text(self)}")
                    done_tensor = True
                continue
            out.append(f"{bar}| +- {_leaf_text(g)}")
        for g, _ in self.relational:  # a relational guard: its code once, then its name (torch's printed_relational_guards)
            out.append(f"{bar}| +- {g.kind}" + ("" if id(g) in printed else f": {_relational_text(g)}"))
            printed.add(id(g))
        for child in self.children.values():
            out.append(f"{bar}| +- {_manager_line(child)}")
            out += child.lines(depth + 1, printed)
        return out

    def first_failure(self, scope: dict, update: bool = False) -> Optional[list[Guard]]:
        """The leaves that fail (a TENSOR_MATCH leaf is all of a node's tensor guards), or None.

        With ``update``, count the failure on this node and reorder its children as
        torch's ``GuardManager::check_accessors_nopybind`` does (Note [A manager that fails is tried first]).
        """
        failed = self._failed_leaf(scope)
        if failed is None:
            failed = _walk_children(self, scope, update)
        if failed is not None and update:
            self.fail_count += 1
        return failed

    def _failed_leaf(self, scope: dict) -> Optional[list[Guard]]:
        tensor = None
        constant = next((g for g in self.leaves if g.kind == "CONSTANT_MATCH"), None)
        for g in self.leaves:
            if g.kind == "TYPE_MATCH" and constant is not None:  # torch's EQUALS_MATCH checks the type itself
                if not _holds(g, scope):
                    return [constant]
                continue
            if g.kind == "TENSOR_MATCH":
                if tensor is None:
                    tensor = [t for t in self.leaves if t.kind == "TENSOR_MATCH"]
                    if not self._tensor_holds(tensor, scope):
                        return tensor
                continue
            if not _holds(g, scope):
                return [g]
        for g, i in self.relational:  # Note [A relational guard fails where the duplicate shows]
            if i and _is_duplicate(g.operands[1], i, scope):
                return [g]
        return None

    def _tensor_holds(self, tensor: list, scope: Any) -> bool:
        """The TENSOR_MATCH leaf: one C++ call on the node's value where built, else its five Python guards."""
        if self.tensor_check is not None and type(scope) is tuple:
            try:
                value = eval(_code(self.source.name()), scope[0], scope[1])  # noqa: S307 - our own source
            except Exception:  # noqa: BLE001 - the value cannot be read: the leaf fails
                return False
            return bool(self.tensor_check(value))
        return all(_holds(t, scope) for t in tensor)


def _walk_children(node: GuardManager, scope: dict, update: bool) -> Optional[list[Guard]]:
    """Note [A manager that fails is tried first]

    Torch's guard managers learn: a child manager whose guards failed counts it
    (``_fail_count``), and when a child other than the first failed, the parent sorts
    its children by that count, most failures first (``GuardManager::
    check_accessors_nopybind``, guards.cpp), so the next call that will fail fails at
    once. This also decides which guard a recompile names: after ``n`` has failed
    once, ``L['x']`` is checked second. Ours counts and sorts the same way on every
    entry whose guards failed during a lookup (``CheckFunction.record_failure``,
    only on a miss of that entry, never on a hit), and names the failure by walking
    the tree in that order.
    """
    children = list(node.children.values())
    for i, child in enumerate(children):
        failed = child.first_failure(scope, update)
        if failed is not None:
            if update and i:
                order = sorted(children, key=lambda c: -c.fail_count)  # stable, as std::sort on a few
                node.children = {c.source.name(): c for c in order}
            return failed
    return None


@dataclass
class RootGuardManager(GuardManager):
    """The root: global guards, then one child per local or global read, then the guards over many sources."""

    after_children: list = field(default_factory=list)

    def __str__(self) -> str:
        """The tree as ``TORCH_LOGS=guards`` prints torch's (Note [The tree prints as torch's])."""
        lines = ["TREE_GUARD_MANAGER:", "+- RootGuardManager"]
        state = [g for g in self.leaves if g.kind == "GLOBAL_STATE"]
        if state:  # one C++ leaf in both (GlobalStateGuard): one line, its fields as torch names them
            lines.append(f"| +- GLOBAL_STATE: ___check_global_state() against {_global_state_text(state)}")
        lines += [f"| +- {_leaf_text(g)}" for g in self.leaves if g.kind != "GLOBAL_STATE"]
        printed: set = set()
        for child in self.children.values():
            lines.append(f"| +- {_manager_line(child)}")
            lines += child.lines(1, printed)
        lines += [f"| +- {_leaf_text(g)}" for g in self.after_children]
        return "\n".join(lines)

    def first_failure(self, L: dict, G: dict, scope: Optional[dict] = None,  # type: ignore[override]
                      update: bool = False) -> Optional[list[Guard]]:
        """Walk root first, fail fast: the first failing leaf (all of a TENSOR_MATCH leaf's guards), or None."""
        scope = (scope or {}, {"L": L, "G": G})  # globals, locals: no copy of the check's scope per walk
        global_state = scope[0].get("___global_state")  # the five GLOBAL_STATE leaves in one C++ call
        if global_state is not None and global_state():
            failed = _failed_leaf_of(self, scope, skip="GLOBAL_STATE")
        else:
            failed = self._failed_leaf(scope)
        if failed is None:
            failed = _walk_children(self, scope, update)
        if failed is None:
            failed = next(([g] for g in self.after_children if not _holds(g, scope)), None)
        if failed is not None and update:
            self.fail_count += 1
        return failed

    def check(self, L: dict, G: dict, scope: Optional[dict] = None) -> bool:
        return self.first_failure(L, G, scope) is None


_compiled: dict[str, Any] = {}  # a guard's expression -> its code object, compiled once


def _failed_leaf_of(node: GuardManager, scope: Any, skip: str) -> Optional[list[Guard]]:
    """The root's leaves but those of kind ``skip`` (checked already)."""
    leaves = node.leaves
    node.leaves = [g for g in leaves if g.kind != skip]
    try:
        return node._failed_leaf(scope)
    finally:
        node.leaves = leaves


def _code(expr: str) -> Any:
    code = _compiled.get(expr)
    if code is None:
        if len(_compiled) > 20_000:
            _compiled.clear()
        code = _compiled[expr] = compile(expr, "<guard>", "eval")
    return code


def _holds(guard: Guard, scope: Any) -> bool:
    """Evaluate one leaf; ``scope`` is a dict, or (the check's scope, {"L": L, "G": G}) to spare a copy."""
    code = _code(guard.expr)
    try:
        if type(scope) is tuple:
            try:
                return bool(eval(code, scope[0], scope[1]))  # noqa: S307 - our own guard expression
            except NameError:  # L read inside a comprehension (3.11): it needs one namespace
                return bool(eval(code, dict(scope[0], **scope[1])))  # noqa: S307
        return bool(eval(code, scope))  # noqa: S307 - our own guard expression
    except Exception:  # noqa: BLE001 - a guard that cannot be evaluated has failed
        return False


class GlobalsDictSource(Source):
    """``G``, the frame's globals dict: the one manager all globals hang under (torch's ``GlobalsGuardAccessor``)."""

    def name(self) -> str:
        return "G"


_GLOBALS = GlobalsDictSource()


def accessor(source: Source, parent_type: Optional[type] = None, local_index: Optional[dict] = None) -> str:
    """How a node's value is read from its parent's, named as torch's guard accessors."""
    if isinstance(source, LocalSource):
        index = (local_index or {}).get(source.local_name)
        where = "" if index is None else f", framelocals_idx={index}"
        return f"FrameLocalsGuardAccessor(key={source.local_name!r}{where})"
    if isinstance(source, GlobalsDictSource):
        return "GlobalsGuardAccessor"
    if isinstance(source, GlobalSource):
        return f"DictGetItemGuardAccessor({source.global_name!r})"
    if isinstance(source, (AttrSource, GetItemSource)) and source.table:  # torch's last hop: an item of the table
        key = source.member if isinstance(source, AttrSource) else str(source.index)
        return f"DictGetItemGuardAccessor({key!r})"
    if isinstance(source, AttrSource) and source.member == "__code__":  # torch's accessor of a function's code
        return "CodeGuardAccessor"
    if isinstance(source, AttrSource) and source.member == "__dict__" and not source.table \
            and not (parent_type is not None and issubclass(parent_type, type(torch))):  # an instance's dict
        return "GetGenericDictGuardAccessor"
    if isinstance(source, AttrSource):
        return f"GetAttrGuardAccessor({source.member})"
    if isinstance(source, GetItemSource):
        if parent_type is not None and issubclass(parent_type, list):
            kind = "ListGetItem"
        elif parent_type is not None and issubclass(parent_type, dict) or type(source.index) is not int:
            kind = "DictGetItem"
        else:
            kind = "TupleGetItem"
        return f"{kind}GuardAccessor({source.index!r})"
    return f"{type(source).__name__}Accessor"


def _path(source: Source) -> list[Source]:
    """The sources from the root to ``source``: a global's goes through ``G`` (Note [The tree prints as torch's])."""
    path = [*reversed(list(source.bases())), source]
    return [_GLOBALS, *path] if isinstance(path[0], GlobalSource) else path


def build_tree(guards: list[Guard], tensor_specs: Optional[dict] = None, value_types: Optional[dict] = None,
               local_index: Optional[dict] = None, tensor_keys: Optional[dict] = None) -> RootGuardManager:
    """Group ``guards`` by source path into a tree of managers (``GuardBuilder.get_guard_manager``).

    ``value_types`` (source name -> type when traced), ``local_index`` (a local's index
    among the frame's locals) and ``tensor_keys`` are only printed (Note [The tree prints as torch's]).
    """
    from . import tensor_match

    make_matcher = tensor_match.get()
    value_types = value_types or {}
    root = RootGuardManager(None)
    relational = []
    for g in guards:
        if g.source is None:
            if g.kind == "NO_TENSOR_ALIASING" and g.operands:
                relational.append(g)
                continue
            (root.after_children if g.kind in _AFTER_CHILDREN else root.leaves).append(g)
            continue
        node: GuardManager = root
        for s in _path(g.source):
            name = s.name()
            if name not in node.children:
                node.children[name] = GuardManager(s, accessor(s, node.value_type, local_index),
                                                   value_type=value_types.get(name, dict if s is _GLOBALS else None))
            node = node.children[name]
        node.leaves.append(g)
        if g.kind == "TENSOR_MATCH" and tensor_specs and node.tensor_spec is None:
            node.tensor_spec = tensor_specs.get(g.source.name())
            node.tensor_keys = (tensor_keys or {}).get(g.source.name(), "")
            if node.tensor_spec is not None and make_matcher is not None:
                node.tensor_check = make_matcher(*node.tensor_spec)
    for g in relational:  # on each of its tensors' nodes (Note [A relational guard fails where the duplicate shows])
        nodes = [_find(root, name) for name in g.operands[1]]
        if any(n is None for n in nodes):
            root.after_children.append(g)
            continue
        for i, n in enumerate(nodes):
            n.relational.append([g, i])
    root.leaves.sort(key=lambda g: g.kind != "GLOBAL_STATE")  # GLOBAL_STATE is checked first
    return root


def _is_duplicate(names: tuple, i: int, scope: Any) -> bool:
    """Note [A relational guard fails where the duplicate shows]

    Torch's NO_TENSOR_ALIASING is one ``RelationalGuard`` (``guards.cpp``) that each of its
    tensors' managers calls with its value: it remembers the tensors seen so far in this
    walk and fails at the first one seen twice. So ``f(a, b, c)`` traced with three tensors
    and called with ``(y, z, y)`` fails at ``c``'s node, after ``b``'s leaves. Ours checks,
    at the node of the ``i``-th tensor, that it is none of the ones before it.
    """
    try:
        value = _value(names[i], scope)
        return any(_value(name, scope) is value for name in names[:i])
    except Exception:  # noqa: BLE001 - a value that cannot be read fails the guard
        return True


def _value(name: str, scope: Any) -> Any:
    code = _code(name)
    if type(scope) is tuple:
        return eval(code, scope[0], scope[1])  # noqa: S307 - our own source expression
    return eval(code, scope)  # noqa: S307


def _find(root: GuardManager, name: str) -> Optional[GuardManager]:
    """The manager of the source named ``name``, or None."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.source is not None and node.source.name() == name:
            return node
        stack.extend(node.children.values())
    return None


def _manager_line(node: GuardManager) -> str:
    """``GuardManager: source=..., accessed_by=..., type=<class ...>, tag_safe=(False, False)``."""
    kind = "" if node.value_type is None else f", type={node.value_type}"
    return f"GuardManager: source={node.source.name()}, accessed_by={node.accessed_by}{kind}, tag_safe=(False, False)"


def _leaf_text(g: Guard) -> str:
    """``KIND: code``, with torch's kind where torch names the same test otherwise (Note [The tree prints ...])."""
    kind, expr = _TORCH_KIND.get(g.kind, g.kind), g.expr
    if g.kind == "CONSTANT_MATCH":
        if expr.endswith((" is True", " is False")):  # TRUE_MATCH / FALSE_MATCH print ``== True``
            head, value = expr.rsplit(" is ", 1)
            kind, expr = f"{value.upper()}_MATCH", f"{head} == {value}"
        elif expr.endswith(" is None"):
            kind = "NONE_MATCH"
        else:
            kind = "EQUALS_MATCH"
    return f"{kind}: {expr}"


def _relational_text(g: Guard) -> str:
    written, sources = g.operands
    if len(written) == len(sources):  # every pair: torch's check_no_aliasing(...)
        return f"check_no_aliasing({', '.join(sources)})"
    return g.expr


_STATE_FIELDS = {  # our GLOBAL_STATE leaf's value -> the name of its field in torch's GlobalStateGuard
    "torch.is_grad_enabled()": "grad_mode",
    "torch.is_inference_mode_enabled()": "inference_mode",
    "___autocast_state()": "autocast_state",
    "torch.get_default_dtype()": "default_dtype",
    "___deterministic_algorithms()": "deterministic_algorithms",
    "torch.backends.cuda.matmul.allow_tf32": "allow_tf32",
    "___cublas_reduced_precision()": "allow_fp16_bf16_reduce",
    "torch.get_num_threads()": "num_threads",
    "___torch_function_state()": "torch_function",
    "torch.is_autocast_cache_enabled()": "cached_enabled",
}


def _global_state_text(state: list) -> str:
    """``{"allow_tf32": False, "autocast_state": (), ...}``: the fields in torch's order (sorted by name)."""
    fields = {}
    for g in state:
        value = g.expr[len(g.value_expr):].strip()
        value = value.split(" ", 1)[1] if value.startswith(("is ", "== ")) else value
        fields[_STATE_FIELDS.get(g.value_expr, g.value_expr)] = value
    return "{" + ", ".join(f'"{k}": {v}' for k, v in sorted(fields.items())) + "}"


def _check_tensor_text(node: GuardManager) -> str:
    """``check_tensor(L['x'], torch.float32, device=None, requires_grad=False, size=[2, 3], stride=[3, 1])``."""
    name = node.source.name()
    if node.tensor_spec is None:
        return " and ".join(g.expr for g in node.leaves if g.kind == "TENSOR_MATCH")
    dtype, device, sizes, strides, requires_grad = node.tensor_spec
    size = "[" + ", ".join("None" if s == -1 else str(s) for s in sizes) + "]"  # torch prints None for a symbol
    if strides is None:
        strides = _contiguous_strides(sizes)
    stride = "[" + ", ".join("None" if s is None or s == -1 else str(s) for s in strides) + "]"
    keys = f"{node.tensor_keys}, " if node.tensor_keys else ""
    return (f"check_tensor({name}, {keys}{dtype}, device={None if device is None else device.index}, "
            f"requires_grad={requires_grad}, size={size}, stride={stride})")


def _contiguous_strides(sizes: tuple) -> list:
    out, acc = [], 1
    for s in reversed(sizes):
        out.append(None if acc is None else acc)
        acc = None if s == -1 or acc is None else acc * max(s, 1)
    return list(reversed(out))


# --- recompile reasons, phrased as torch phrases them ---------------------------------------------

_GLOBAL_STATE_FIELDS = {  # our GLOBAL_STATE guard's value -> the field of torch's GlobalStateGuard it is
    "torch.is_grad_enabled()": "grad_mode",
    "torch.is_inference_mode_enabled()": "grad_mode",  # inference mode turns grad mode off
    "___autocast_state()": "autocast_state",
    "torch.get_default_dtype()": "default_dtype",
    "___deterministic_algorithms()": "deterministic_algorithms",
}


def strip_local_scope(text: str) -> str:
    """``L['x']`` -> ``x``, as torch's recompile messages read (``guards.py``: ``strip_local_scope``)."""
    return re.sub(r"L\[\s*['\"](.*?)['\"]\s*\]", r"\1", text)


def _scalar_type_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``Float``, the C++ ScalarType name torch's TENSOR_MATCH message uses."""
    return torch.empty(0, dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")


def tensor_mismatch(name: str, spec: tuple, value: Any) -> Optional[str]:
    """``TensorCheck::check_verbose`` (guards.cpp): the first field of ``value`` that differs from ``spec``."""
    if not isinstance(value, torch.Tensor):
        return None
    dtype, device, sizes, strides, requires_grad = spec
    t = f"tensor '{name}'"  # guards.cpp TensorCheck::check_verbose quotes the name as it is
    if value.device.type != (device.type if device is not None else "cpu"):  # the dispatch keys differ first
        keys = _key_set_text(torch.empty(0, dtype=dtype, device=device or "cpu")), _key_set_text(value)
        if None not in keys:
            return f"{t} dispatch key set mismatch. expected {keys[0]}, actual {keys[1]}"
    if value.dtype != dtype:
        return f"{t} dtype mismatch. expected {_scalar_type_name(dtype)}, actual {_scalar_type_name(value.dtype)}"
    if (device is None) != (value.device.type == "cpu") or (device is not None and value.device != device):
        return f"{t} device mismatch. expected {device or 'cpu'}, actual {value.device}"
    if value.requires_grad != requires_grad:
        return f"{t} requires_grad mismatch. expected requires_grad={int(requires_grad)}"
    if value.dim() != len(sizes):
        return f"{t} rank mismatch. expected {len(sizes)}, actual {value.dim()}"
    for i, (want, got) in enumerate(zip(sizes, value.shape)):
        if want != -1 and want != got:
            return f"{t} size mismatch at index {i}. expected {want}, actual {got}"
    want_strides = strides if strides is not None else _contiguous_strides(sizes)
    if strides is not None or not value.is_contiguous():
        for i, (want, got) in enumerate(zip(want_strides, value.stride())):
            if want is not None and want != -1 and want != got and value.shape[i] > 1:  # -1: a symbolic stride
                return f"{t} stride mismatch at index {i}. expected {want}, actual {got}"
    return None


def _key_set_text(t: torch.Tensor) -> Optional[str]:
    """``DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)``: the keys TENSOR_MATCH compares."""
    from minidynamo.dispatch import key_set

    try:
        names = (set(key_set.tensor_keys(t)) | set(key_set.tls_included())) - set(key_set.tls_excluded())
        return f"DispatchKeySet({', '.join(reversed(key_set.order(names)))})"
    except Exception:  # noqa: BLE001 - a tensor our key-set model does not cover
        return None


def _autocast_changes(g: Guard, scope: dict) -> list:
    """``autocast(cpu)_enabled``, ``autocast(cuda)_dtype``: the fields of torch's GlobalStateGuard::reason."""
    from .guards import AUTOCAST_DEVICES

    try:
        expected = dict(eval(g.expr.split("==", 1)[1], scope))  # noqa: S307 - our own guard's literal
    except Exception:  # noqa: BLE001
        return []
    out = []
    for d in AUTOCAST_DEVICES:
        on = torch.is_autocast_enabled(d)
        if on != (d in expected):
            out.append(f"autocast({d})_enabled")
        elif on and torch.get_autocast_dtype(d) != expected[d]:
            out.append(f"autocast({d})_dtype")
    return out


def _class_text(t: type) -> str:
    """``<class 'int'>``, ``<class 'pkg.mod.Mode'>``: a class as torch's guard messages print it (an enum too)."""
    name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
    return f"<class '{name}'>"


def failed_leaf_text(failed: list[Guard], scope: dict, tensor_specs: dict) -> str:
    """One failed leaf in torch's words: TENSOR_MATCH's field message, GLOBAL_STATE's fields, else the code."""
    g = failed[0]
    if g.kind == "TENSOR_MATCH" and g.source is not None and g.source.name() in tensor_specs:
        name = g.source.name()
        try:
            value = eval(name, scope)  # noqa: S307 - our own source expression
        except Exception:  # noqa: BLE001
            value = None
        text = tensor_mismatch(strip_local_scope(name), tensor_specs[name], value)
        if text is not None and isinstance(value, torch.nn.Parameter):  # guards.cpp TENSOR_MATCH::check_verbose
            text += (". Guard failed on a parameter, consider using torch._dynamo.config.force_parameter_static_shapes"
                     " = False to allow dynamism on parameters.")
        if text is not None:
            return text
    if g.kind == "NO_TENSOR_ALIASING" and g.operands:  # guards.py: recompilation_reason_for_no_tensor_aliasing_guard
        groups: dict[int, list] = {}
        for name in g.operands[1]:
            try:
                groups.setdefault(id(eval(_code(name), scope)), []).append(name)  # noqa: S307 - our own source
            except Exception:  # noqa: BLE001 - not readable: not a duplicate
                pass
        duplicates = ", ".join(f"{names}" for names in groups.values() if len(names) > 1)
        return strip_local_scope(f"Duplicate tensors found: {duplicates}")
    if g.kind == "GLOBAL_STATE":
        changed = [c for x in failed for c in (_autocast_changes(x, scope) if x.value_expr == "___autocast_state()"
                                                else []) or [_GLOBAL_STATE_FIELDS.get(x.value_expr, x.value_expr)]]
        return "GLOBAL_STATE changed: " + "".join(f"{c} " for c in dict.fromkeys(changed))
    if g.kind == "DICT_KEYS" and g.source is not None:  # torch guards a dict's length, then each key in order
        name = g.source.name()
        try:
            expected = eval(g.expr.split(" == ", 1)[1], scope)  # noqa: S307 - our own guard's literal
            actual = list(eval(_code(name), scope))  # noqa: S307 - our own source
        except Exception:  # noqa: BLE001
            expected = actual = None
        if isinstance(expected, list) and isinstance(actual, list):
            if len(actual) != len(expected):  # torch's DICT_LENGTH leaf's words
                return strip_local_scope(f"len({name}) != {len(expected)}")
            i = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), None)
            if i is not None:  # torch's per-key guard (guards.py: DICT_KEYS_MATCH's key_manager)
                return strip_local_scope(f"list(dict.keys({name}))[{i}] == {expected[i]!r}")
    bound = g.expr.rsplit(" is ", 1)[-1]
    if g.kind in ("ID_MATCH", "CONSTANT_MATCH") and g.source is not None and bound.startswith("___") \
            and bound in scope and bound != "___NULL" and (g.kind == "ID_MATCH" or isinstance(scope[bound], enum.Enum)):
        expected = scope[bound]  # guards.py: ID_MATCH's code part (an enum member is ID_MATCHed in torch)
        return strip_local_scope(f"___check_obj_id({g.source.name()}, {id(expected)}), type={_class_text(type(expected))}")
    if g.kind == "LENGTH_CHECK" and re.fullmatch(r"len\((.*)\) == 0", g.expr):  # torch's code part for an empty one
        return strip_local_scope(f"not {g.expr[4:-6]}")
    if g.kind == "TYPE_MATCH" and g.source is not None and " is " in g.expr:  # guards.py: TYPE_MATCH's code part
        try:
            expected = eval(g.expr.rsplit(" is ", 1)[1], scope)  # noqa: S307 - our own guard's type name
        except Exception:  # noqa: BLE001
            expected = None
        if isinstance(expected, type):
            return strip_local_scope(f"___check_type_id({g.source.name()}, {id(expected)}), type={_class_text(expected)}")
    if g.kind == "SHAPE_ENV":  # a LAMBDA_GUARD that raises: its text is the exception's (torch/csrc/dynamo/guards.cpp
        try:  # LAMBDA_GUARD::check_verbose_nopybind), ``L['x']._base.size()[0]`` of a tensor that is no view now
            eval(_code(g.expr), scope)  # noqa: S307 - our own guard expression
        except Exception as e:  # noqa: BLE001
            return str(e)
    expr = g.expr
    if g.kind == "CONSTANT_MATCH" and expr.endswith((" is True", " is False")):  # torch's TRUE_MATCH / FALSE_MATCH
        expr = expr.rsplit(" is ", 1)[0] + " == " + expr.rsplit(" is ", 1)[1]
    return strip_local_scope(expr)


def fail_reason(entry, L: dict, G: dict, backend_key: Any = None) -> str:
    """``get_guard_fail_reason``: ``"0/1: tensor 'x' size mismatch at index 0. expected 2, actual 3"``."""
    check = entry.check
    scope = dict(check.scope, L=L, G=G)
    root = check.tree
    global_state = [g for g in root.leaves if g.kind == "GLOBAL_STATE" and not _holds(g, scope)]
    failed = global_state or root.first_failure(L, G, check.scope)  # the order the lookup left (record_failure)
    if failed is None:
        if backend_key is not None and entry.backend_key != backend_key:
            return (f"{entry.compile_id}: BACKEND_MATCH failure: the entry was compiled for another backend "
                    f"({_describe_backend(entry.backend_key)}, this call: {_describe_backend(backend_key)})")
        return f"{entry.compile_id}: Unable to find recompilation reasons"
    return f"{entry.compile_id}: {failed_leaf_text(failed, scope, check.tensor_specs)}"


def _describe_backend(key: Any) -> str:
    backend, dynamic = key if isinstance(key, tuple) else (key, None)
    name = getattr(backend, "__name__", type(backend).__name__)
    return name if dynamic is None else f"{name}, dynamic={dynamic}"

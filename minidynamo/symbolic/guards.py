"""Guards: the assumptions a compiled entry made, as readable Python checked before every call.

Place in the pipeline: the symbolic interpreter installs guards while it wraps inputs
(``variables/builder.py``); the cache (``eval_frame.py``) evaluates them before every
call. Mirrors ``torch/_dynamo/guards.py`` (``GuardBuilder``: TYPE_MATCH, ID_MATCH,
CONSTANT_MATCH / EQUALS_MATCH, TENSOR_MATCH, LENGTH_CHECK, and the compiled
``CheckFunctionManager``).

Note [A guard is one readable expression]
    Each guard is one Python expression over ``L`` and ``G`` (``L['x'].shape == (2, 3)``)
    with its source and the reason it exists. All guards of an entry are compiled
    once into one function (Note [Each source is read once]), so a steady-state call
    costs one Python call. Only when it says no do we evaluate the guards one by one to name
    the one that failed and show what changed. Real Dynamo builds a tree of C++ guard
    managers (``GuardManager``) for speed; TENSOR_MATCH checks dtype, device, shape,
    stride, requires_grad and dispatch keys in one C++ call.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from typing import Any, Optional

import torch

from minidynamo import events

from .source import Source


@dataclass
class Guard:
    """One assumption: ``expr`` must be true for the compiled entry to be reused."""

    source: Optional[Source]
    kind: str  # TYPE_MATCH, ID_MATCH, CONSTANT_MATCH, TENSOR_MATCH, LENGTH_CHECK
    expr: str
    why: str
    value_expr: str = ""  # the part of expr that shows "what changed" ("L['x'].shape")

    @property
    def reason(self) -> str:
        return self.why

    def __str__(self) -> str:
        return f"{self.expr:<48}  # {self.kind}: {self.why}"


# Names a guard expression may use besides L and G; objects matched by identity are
# added per guard set as ___obj<N>.
_BASE_SCOPE = {"torch": torch}


class GuardSet:
    """The guards of one entry, plus the scope their expressions need."""

    def __init__(self) -> None:
        self.guards: list[Guard] = []
        self.scope: dict[str, Any] = dict(_BASE_SCOPE)
        self._seen: set[str] = set()
        self._obj_names: dict[int, str] = {}

    def name_for(self, obj: Any, hint: str = "obj") -> str:
        """A stable scope name for an object that a guard compares by identity."""
        key = id(obj)
        if key not in self._obj_names:
            clean = "".join(c if c.isalnum() else "_" for c in hint)[:30]
            name = f"___{clean}_{len(self._obj_names)}"
            self._obj_names[key] = name
            self.scope[name] = obj
        return self._obj_names[key]

    def add(self, source, kind, expr, why, value_expr="") -> None:
        if expr in self._seen:
            return
        self._seen.add(expr)
        guard = Guard(source, kind, expr, why, value_expr)
        self.guards.append(guard)
        events.emit("guard", source=str(source), guard_kind=kind, expr=expr, why=why)

    # --- the GuardBuilder methods (torch/_dynamo/guards.py) -------------------
    def TYPE_MATCH(self, source: Source, value: Any, why: str) -> None:
        t = type(value)
        tname = f"torch.{t.__name__}" if getattr(torch, t.__name__, None) is t else self.name_for(t, t.__name__)
        if t is torch.nn.Parameter:
            tname = "torch.nn.Parameter"
        elif t is type(None):
            tname = "type(None)"
        elif getattr(builtins, t.__name__, None) is t:
            tname = t.__name__
        self.add(source, "TYPE_MATCH", f"type({source.name()}) is {tname}", why, f"type({source.name()})")

    def ID_MATCH(self, source: Source, value: Any, why: str) -> None:
        hint = getattr(value, "__name__", type(value).__name__)
        self.add(source, "ID_MATCH", f"{source.name()} is {self.name_for(value, hint)}", why, source.name())

    def CONSTANT_MATCH(self, source: Source, value: Any, why: str) -> None:
        self.TYPE_MATCH(source, value, why)
        if value is None or isinstance(value, bool):
            self.add(source, "CONSTANT_MATCH", f"{source.name()} is {value!r}", why, source.name())
        elif isinstance(value, float) and value != value:  # nan
            self.add(source, "CONSTANT_MATCH", f"{source.name()} != {source.name()}", why, source.name())
        elif isinstance(value, (torch.dtype, torch.device)):
            self.add(source, "CONSTANT_MATCH", f"{source.name()} == {self.name_for(value, str(value))}", why, source.name())
        else:
            self.add(source, "CONSTANT_MATCH", f"{source.name()} == {value!r}", why, source.name())

    def LENGTH_CHECK(self, source: Source, value: Any, why: str) -> None:
        self.TYPE_MATCH(source, value, why)
        self.add(source, "LENGTH_CHECK", f"len({source.name()}) == {len(value)}", why, f"len({source.name()})")

    def TENSOR_MATCH(self, source: Source, value: torch.Tensor, why: str) -> None:
        n = source.name()
        self.TYPE_MATCH(source, value, why)
        self.add(source, "TENSOR_MATCH", f"{n}.dtype == {value.dtype}", why, f"{n}.dtype")
        self.add(source, "TENSOR_MATCH", f"{n}.device.type == {value.device.type!r}", why, f"{n}.device")
        self.add(source, "TENSOR_MATCH", f"{n}.shape == {tuple(value.shape)!r}", why, f"{n}.shape")
        self.add(source, "TENSOR_MATCH", f"{n}.stride() == {tuple(value.stride())!r}", why, f"{n}.stride()")
        self.add(source, "TENSOR_MATCH", f"{n}.requires_grad is {value.requires_grad}", why, f"{n}.requires_grad")


def _check_fn_source(guards: list[Guard]) -> str:
    """One function checking every guard, each source read once (Note [Each source is read once]).

    Note [Each source is read once]
        A tensor input has six guards (type, dtype, device, shape, stride,
        requires_grad). Joined naively, ``L['xs'][7]`` would be looked up six
        times per call; with 200 inputs that dominates a call. So the guards are
        grouped by source, in order of first appearance, the source is bound to a
        local once, and its guards test the local. Real Dynamo's guard managers
        do the same in C++: one manager per source, its checks as leaves.
    """
    groups: dict[str, list[Guard]] = {}
    for g in guards:
        groups.setdefault(g.source.name(), []).append(g)
    lines = ["def ___check_guards(L, G):"]
    for i, (name, group) in enumerate(groups.items()):
        local = f"___s{i}"
        lines.append(f"    {local} = {name}")
        pattern = re.compile(re.escape(name) + r"(?![\w'\]])")
        tests = " and ".join(f"({pattern.sub(local, g.expr)})" for g in group)
        lines.append(f"    if not ({tests}):")
        lines.append("        return False")
    lines.append("    return True")
    return "\n".join(lines) + "\n"


class CheckFunction:
    """All guards of an entry compiled into one function (``CheckFunctionManager``)."""

    def __init__(self, guard_set: GuardSet):
        self.guards = list(guard_set.guards)
        self.scope = guard_set.scope
        self.source = _check_fn_source(self.guards)
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
            if not ok:
                try:
                    now = eval(guard.value_expr, scope) if guard.value_expr else "?"
                except Exception as e:  # noqa: BLE001
                    now = f"<{type(e).__name__}>"
                return guard, f"{guard.value_expr or guard.expr} is now {now!r}"
        return None, ""

    def __str__(self) -> str:
        return "\n".join(str(g) for g in self.guards)

"""Our guard tree prints in the shape of torch's ``TORCH_LOGS=guards`` (chapter 4), line for line.

Five functions (two tensors, a module, a global tensor, a list argument, two tensors that
could alias) are compiled by torch and by us; torch's tree is read from torch itself
(``str(cache_entry.guard_manager)``, through ``minidynamo._torch_private``). Both trees are
turned into rows: a manager line is (depth, source, accessor, type, tag_safe); a leaf line
is (depth, kind) with its code where both systems write the same code (TENSOR_MATCH's
``check_tensor``, NO_TENSOR_ALIASING's ``check_no_aliasing``, constants). Leaves torch has
and the rebuild does not (``DIMENSION_DYNAMIC_MARKING_GUARD``, the saved-tensors-hooks
``LAMBDA_GUARD``) are left out of torch's rows (Note [The tree prints as torch's], guard_tree.py).
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_guard_tree, dynamo_reset

pytestmark = pytest.mark.ch04

W = torch.ones(3)


def two_tensors(x, y):
    return x * y + 1


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3, stride=(2, 1), padding=1)

    def forward(self, x):
        return self.conv(x)


def a_global(x):
    return x + W


def a_list(xs):
    return xs[0] + xs[1]


def may_alias(a, b):
    return a.add_(1) + b


def _cases():
    torch.manual_seed(0)
    return {
        "tensors": (two_tensors, (torch.ones(2, 3), torch.ones(2, 3))),
        "module": (Net(), (torch.ones(2, 3),)),
        "global": (a_global, (torch.ones(3),)),
        "list": (a_list, ([torch.ones(3), torch.ones(3)],)),
        "aliasable": (may_alias, (torch.ones(3), torch.ones(3))),
        "conv": (ConvNet(), (torch.ones(1, 2, 6, 6),)),
    }


_TORCH_ONLY = ("DIMENSION_DYNAMIC_MARKING_GUARD",)
_SAME_CODE = ("TENSOR_MATCH", "NO_TENSOR_ALIASING", "EQUALS_MATCH", "TRUE_MATCH", "FALSE_MATCH", "LENGTH_CHECK")
_MANAGER = re.compile(r"GuardManager: source=(.*?), accessed_by=(.*?)(?:, type=(<class '.*?'>))?, tag_safe=(\(.*?\))$")


def rows(text: str, rename=lambda s: s) -> list[tuple]:
    out = []
    for line in text.strip().splitlines()[2:]:  # after TREE_GUARD_MANAGER: / +- RootGuardManager
        line = re.sub(r"\s+# .*$", "", line)  # torch's comment: the user's line the guard came from
        depth = line.index("+- ") // 2
        body = line[line.index("+- ") + 3:]
        m = _MANAGER.match(body)
        if m:
            out.append((depth, "manager", rename(m.group(1)), rename(m.group(2)), m.group(3), m.group(4)))
            continue
        kind, _, code = body.partition(": ")
        if kind in _TORCH_ONLY or "top_saved_tensors_hooks" in code:
            continue
        out.append((depth, kind, rename(code) if kind in _SAME_CODE else None))
    return out


def trees(name: str, **flags) -> tuple[str, str]:
    """Our tree and torch's for one case, under the same config flags in both."""
    from minidynamo._torch_private import dynamo_config_patch

    fn, args = _cases()[name]
    code = (type(fn).forward if isinstance(fn, torch.nn.Module) else fn).__code__
    dynamo_reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with dynamo_config_patch(**flags):
            torch.compile(fn, backend="eager")(*args)
        theirs = dynamo_guard_tree(code)
        dynamo_reset()
        md.reset()
        with md.config.patch(**flags):
            ours = str(md.explain(fn, *args).guards)
    md.reset()
    return ours, theirs


@pytest.mark.parametrize("name", ["tensors", "global", "list", "aliasable"])
def test_the_tree_prints_line_for_line_as_torchs(name):
    ours, theirs = trees(name)
    assert rows(ours) == rows(theirs), f"ours:\n{ours}\n\ntorch:\n{theirs}"


@pytest.mark.parametrize("flags", [{}, {"inline_inbuilt_nn_modules": False}], ids=["default", "inline_false"])
def test_a_module_tree_has_torchs_managers_and_tensor_leaves(flags):
    """Both name a parameter by its table's item (``L['self']._modules['lin']._parameters['weight']``,
    Note [A module's member is an item of its table], source.py), but torch's path has a manager for
    each ``__dict__`` and table on the way, ours one per module: the managers of the frame's locals, the
    tensor leaves and the absence of NO_TENSOR_ALIASING over parameters are the same.
    ``inline_inbuilt_nn_modules=False`` changes nothing in either (deprecated in torch 2.13: Note [A
    deprecated flag does nothing])."""
    ours, theirs = trees("module", **flags)
    ours_rows, theirs_rows = rows(ours), rows(theirs)
    locals_ = lambda rs: sorted(r for r in rs if r[1] == "manager" and r[2].startswith("L[") and r[2].endswith("]")
                                and r[2].count("[") == 1)
    assert locals_(ours_rows) == locals_(theirs_rows)
    tensors = lambda rs: sorted(r[2] for r in rs if r[1] == "TENSOR_MATCH")
    assert tensors(ours_rows) == tensors(theirs_rows)
    assert not any(r[1] == "NO_TENSOR_ALIASING" for r in ours_rows + theirs_rows)


def test_root_leaves_come_in_torchs_order_and_kinds():
    ours, theirs = trees("tensors")
    root = lambda text: [r[1] for r in rows(text) if r[0] == 1 and r[1] != "manager"]
    assert root(ours) == root(theirs) == ["GLOBAL_STATE", "TORCH_FUNCTION_MODE_STACK", "DEFAULT_DEVICE"]


def test_the_guards_log_prints_the_tree_as_torchs_guards_log():
    """``MINIDYNAMO_LOGS=guards`` (``md.set_logs(guards=True)``): ``GUARDS:``, a blank line, then the tree,
    as ``TORCH_LOGS=guards`` logs ``GUARDS:`` then ``str(guard_manager)`` (torch/_dynamo/guards.py)."""
    import subprocess
    import sys

    program = ("import torch, minidynamo as md\n"
               "md.compile(lambda x, y: x * y, backend='eager')(torch.ones(2), torch.ones(2))\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "MINIDYNAMO_LOGS": "guards"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = [line.split("[__guards] ", 1)[1] for line in proc.stderr.splitlines() if "[__guards] " in line]
    assert body[:4] == ["GUARDS:", "", "TREE_GUARD_MANAGER:", "+- RootGuardManager"]
    assert any(line.startswith("| | +- NO_TENSOR_ALIASING: check_no_aliasing(L['x'], L['y'])") for line in body)


def test_a_modules_tuple_of_constants_is_one_equals_guard_as_torchs():
    """A conv's ``stride``/``padding``/``dilation``: torch guards each tuple whole (type, length,
    ``== (2, 1)``: ``VariableBuilder.wrap_listlike``, builder.py), never its items; so does ours
    (Note [A module's tuple of constants is one guard])."""
    ours, theirs = trees("conv")
    root = re.compile(r"^L\['self'\]\._modules\['conv'\]")  # both spell the submodule as torch's

    def tuple_leaves(text, rename=lambda s: s):
        out = []
        for r in rows(text, rename):
            if r[1] != "manager" and r[2] and re.search(r"\.(stride|padding|dilation)\b", r[2]):
                out.append((r[1], root.sub("M", r[2])))
        return sorted(out)

    theirs_leaves = tuple_leaves(theirs)
    assert ("EQUALS_MATCH", "M.stride == (2, 1)") in theirs_leaves
    assert tuple_leaves(ours) == theirs_leaves, f"ours:\n{ours}\n\ntorch:\n{theirs}"
    assert "stride[0]" not in ours and "stride[0]" not in theirs

"""Frames reached from an eager call: compiled as frames of their own, as torch compiles them.

In torch every Python frame passes the PEP 523 hook (``torch/csrc/dynamo/eval_frame.c``), so
when a graph break runs a call eagerly, a user frame that call reaches (a hook, an
``autograd.Function``'s forward, a callback a C builtin or a library makes) is compiled on its
own, while torch's own files and skipped modules run as they are
(``torch/_dynamo/trace_rules.py`` ``check_verbose``; an inbuilt ``nn.Module.forward`` whose
module has hooks is the exception there). Each program runs through real torch
(``torch._dynamo.explain``) and through ``md.explain``: graphs, breaks, break types and lines
compared (the first held-out set's ``compare``), and the compiled result against eager.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
import torch.nn as nn

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path
from _helpers import strict_xfails  # tests/ is on sys.path


def _cube(t):
    return t * t * t


def _loud_cube(t):
    print("cube")
    return t * t * t


class _UserLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu() + 1


def _print_pre_hook(mod, args):
    print("pre hook")


def _print_hook(mod, args, out):
    print("hook")


def _scaling_pre_hook(mod, args):
    print("scale")
    return (args[0] * 3,)


torch.manual_seed(0)
_LIN_PRE = nn.Linear(4, 4)
_LIN_PRE.register_forward_pre_hook(_print_pre_hook)
_LIN_POST = nn.Linear(4, 4)
_LIN_POST.register_forward_hook(_print_hook)
_USER_PRE = _UserLinear()
_USER_PRE.register_forward_pre_hook(_print_pre_hook)
_USER_SCALE = _UserLinear()
_USER_SCALE.register_forward_pre_hook(_scaling_pre_hook)
_LIN_SCALE = nn.Linear(4, 4)
_LIN_SCALE.register_forward_pre_hook(_scaling_pre_hook)


class _LoudFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        print("fwd")
        return t * 2 + 1

    @staticmethod
    def backward(ctx, g):
        return g * 2


def e_builtin_module_pre_hook(x):
    return _LIN_PRE(x) * 2


def e_builtin_module_forward_hook(x):
    return _LIN_POST(x) - 1


def e_user_module_pre_hook(x):
    return _USER_PRE(x) * 2


def e_user_module_scaling_hook(x):
    return _USER_SCALE(x.sin()) * 2


def e_builtin_module_scaling_hook(x):
    return _LIN_SCALE(x.cos()) + 1


def e_autograd_function_print(x):
    return _LoudFn.apply(x) + 1


def e_map_callback(x):
    print("go")
    return sum(map(_cube, [x, x + 1]))


def e_sorted_key(x):
    print("go")
    parts = sorted([x, x * 2, x - 1], key=lambda t: float(t.sum()))
    return parts[0] + parts[-1]


def e_reduce_callback(x):
    print("go")
    return functools.reduce(lambda a, b: a * b + 1, [x, x.cos(), x.sin()])


def e_starmap_callback(x):
    print("go")
    return list(itertools.starmap(lambda a, b: a @ b + a, [(x, x), (x + 1, x)]))[1]


def e_loud_callback_in_map(x):
    y = x * 2
    return list(map(_loud_cube, [y]))[0] + 1


def e_user_fn_after_break(x):
    y = x + 1
    print("mid")
    return _cube(y) + _cube(x)


def e_partial_callback(x):
    print("go")
    f = functools.partial(_cube)
    return f(x.sin()) + 1


def e_max_key(x):
    print("go")
    return max([x, x + 1], key=lambda t: t.sum().item())


def e_filter_callback(x):
    print("go")
    return list(filter(lambda t: t.sum() > -100, [x.cos(), x.sin()]))[0] * 2


@torch.compiler.disable
def _disabled_cube(t):
    return _cube(t) + 1


def e_disabled_callback_in_map(x):
    print("go")
    return list(map(_disabled_cube, [x.cos()]))[0] * 2


def e_checkpoint_callback_in_map(x):
    print("go")
    return list(map(lambda t: torch.utils.checkpoint.checkpoint(_cube, t, use_reentrant=False), [x]))[0] + 1


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("e_")}
NEEDS_GRAD = {"e_autograd_function_print"}

# Where we still differ from torch, and why (each a strict xfail).
KNOWN: dict[str, str] = {
}


@pytest.mark.parametrize("name", strict_xfails(PROGRAMS, KNOWN))
def test_eager_frames_break_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, NEEDS_GRAD, __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_eager_frames_run_like_eager(name, capsys):
    fn = PROGRAMS[name]
    torch.manual_seed(0)
    x = torch.randn(4, requires_grad=name in NEEDS_GRAD)
    expected = fn(x)
    md.reset()
    got = md.compile(fn, backend="eager")(x)
    torch.testing.assert_close(got, expected)


# --- builtins that read their caller's frame, in a frame our interpreter runs -----------------------
# (Note [A builtin that reads its caller's frame], resume_execution.py)

import collections  # noqa: E402


class _Record(collections.OrderedDict):
    """transformers' ModelOutput pattern: an attribute that is also a key, written through super()."""

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)


class _Frames:
    scale = 2

    def after_break(self, x):
        y = x * 3
        print("break")
        return y + 1, sorted(locals()), "__name__" in globals(), super().__repr__() == object.__repr__(self)


def _record_writes(setattr_fn, setitem_fn):
    rec = _Record()
    rec["a"] = torch.zeros(2)
    x = torch.ones(2)
    setattr_fn(rec, "a", x + 1)
    setattr_fn(rec, "b", 3)
    setitem_fn(rec, "c", x * 2)
    return dict(rec), {k: v for k, v in vars(rec).items()}


def test_super_in_an_ordered_dict_subclass_frame_writes_as_eager():
    expected = _record_writes(_Record.__setattr__, _Record.__setitem__)
    md.reset()
    got = _record_writes(md.compile(_Record.__setattr__, backend="eager"),
                         md.compile(_Record.__setitem__, backend="eager"))
    torch._dynamo.reset()
    theirs = _record_writes(torch.compile(_Record.__setattr__, backend="eager"),
                            torch.compile(_Record.__setitem__, backend="eager"))
    for other in (got, theirs):
        assert [list(d) for d in other] == [list(d) for d in expected]
        for d_exp, d_got in zip(expected, other):
            for k in d_exp:
                torch.testing.assert_close(d_got[k], d_exp[k])


def test_locals_globals_and_super_after_a_break_read_the_users_frame(capsys):
    obj = _Frames()
    x = torch.ones(2)
    expected = obj.after_break(x)
    md.reset()
    got = md.compile(_Frames.after_break, backend="eager")(obj, x)
    torch.testing.assert_close(got[0], expected[0])
    # locals(): the user's variables (those still live after the break: torch's resume function, too,
    # passes only those, and adds its own), never our interpreter's
    assert "y" in got[1] and set(got[1]) <= set(expected[1])
    assert got[2:] == expected[2:] == (True, True)

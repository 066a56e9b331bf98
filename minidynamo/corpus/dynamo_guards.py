"""Chapter 4 cases: functions whose compiled code depends on guarded Python values.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``); each case's
``alt`` input set must fail a guard. ``FLAG``, the global one case reads, lives here with
the inputs factory that sets it. Mirrors PyTorch's ``test/dynamo/test_recompiles.py`` and
the guard cases of ``test/dynamo/test_misc.py``.
"""

from __future__ import annotations

import torch

from .dynamo_testing import guarded, T
from .dynamo_helpers import _mod, Config, MLP


FLAG = True


# ===========================================================================
# Chapter 4: guards (each has an ``alt`` input set that must fail a guard)
# ===========================================================================


@guarded(lambda: (T(3, 4),), alt=lambda: (T(5, 4),))
def guard_shape(x):
    return x * 2


@guarded(lambda: (T(3, 4),), alt=lambda: (T(3, 4, dtype=torch.float64),))
def guard_dtype(x):
    return x + 1


@guarded(lambda: (T(3, 4),), alt=lambda: (T(3, 4, requires_grad=True),))
def guard_requires_grad(x):
    return x.sin()


@guarded(lambda: (T(3, 4), 2), alt=lambda: (T(3, 4), 3))
def guard_int_constant(x, n):
    return x * n


@guarded(lambda: (T(3, 4), 2), alt=lambda: (T(3, 4), 4))
def guard_loop_count(x, n):
    for _ in range(n):
        x = x + 1
    return x


@guarded(lambda: (T(3, 4), True), alt=lambda: (T(3, 4), False))
def guard_bool_branch(x, flag):
    if flag:
        return x + 1
    return x - 1


@guarded(lambda: (T(3, 4), None), alt=lambda: (T(3, 4), T(3, 4, seed=1)))
def guard_optional(x, y):
    if y is None:
        return x * 2  # an op: a first trace that makes no graph is skipped for good (torch's SkipFrame)
    return x + y


@guarded(lambda: (T(3, 4),), alt=lambda: (T(4, 3).t(),))
def guard_stride(x):
    return x * 3


@guarded(lambda: (T(4, 4),), alt=lambda: (T(2, 4),))
def guard_shape_branch(x):
    if x.shape[0] > 3:
        return x.sum(0)
    return x.sum(1)


@guarded(lambda: (T(3, 4),), alt=lambda: (T(3, 4, dtype=torch.float64),))
def guard_dtype_branch(x):
    if x.dtype == torch.float64:
        return x * 2
    return x * 3


@guarded(lambda: (T(3, 4), "relu"), alt=lambda: (T(3, 4), "tanh"))
def guard_string_arg(x, act):
    return getattr(torch, act)(x)


@guarded(lambda: (T(3, 4), [1, 2]), alt=lambda: (T(3, 4), [1, 2, 3]))
def guard_list_length(x, ks):
    for k in ks:
        x = x * k
    return x


def _flag_inputs(v):
    """An inputs factory that also sets the global FLAG the case reads."""

    def inputs():
        global FLAG
        FLAG = v
        return (T(3, 4),)

    return inputs


@guarded(_flag_inputs(True), alt=_flag_inputs(False))
def guard_global_flag(x):
    if FLAG:
        return x + 1
    return x - 1


@guarded(lambda: (T(3, 4), Config()), alt=lambda: (T(3, 4), _cfg(scale=5)))
def guard_object_attr(x, cfg):
    return x * cfg.scale


def _cfg(**kw):
    c = Config()
    for k, v in kw.items():
        setattr(c, k, v)
    return c


@guarded(lambda: (T(3, 4), 2.0), alt=lambda: (T(3, 4), 3.5))
def guard_float_arg(x, s):
    return x * s


# One module instance, switched between train() and eval(): only the flag changes.
_TRAIN_MLP = _mod(MLP, seed=7)


@guarded(lambda: (_TRAIN_MLP.train(), T(2, 4)), alt=lambda: (_TRAIN_MLP.eval(), T(2, 4)))
def guard_module_training(m, x):
    y = m(x)
    if m.training:
        return y + 1
    return y


@guarded(lambda: ({"a": T(3)},), alt=lambda: ({"a": T(3), "b": T(3, seed=1)},))
def guard_dict_keys(d):
    out = 0
    for k in d:
        out = out + d[k]
    return out


@guarded(lambda: (T(3, 4), 3), alt=lambda: (T(3, 4), 3.0))
def guard_input_type(x, n):
    return x * n

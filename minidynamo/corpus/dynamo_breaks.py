"""Chapter 5 cases: graph breaks.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``); each case's
graph and break counts are compared with ``torch._dynamo.explain``. The global one case
writes (``COUNTER``) lives here with its ``reset``/``observe``. Mirrors PyTorch's
``test/dynamo/test_repros.py`` graph-break cases and ``test/dynamo/test_misc.py``.
"""

from __future__ import annotations

import os

import torch
import torch.nn as nn

from .dynamo_testing import breaks, T
from .dynamo_helpers import _mod, Counting, helper_branch, helper_item, helper_print, PrintingModule


COUNTER = 0


def _reset_globals():
    global COUNTER
    COUNTER = 0


def _observe_globals():
    return {"COUNTER": COUNTER}


# ===========================================================================
# Chapter 5: graph breaks
# ===========================================================================


@breaks(lambda: (T(3, 4),), aot=True)
def break_print_middle(x):
    y = x * 2
    print("break_print_middle")
    return y + 1


@breaks(lambda: (T(3, 4),))
def break_print_first(x):
    print("break_print_first")
    return x.sin() + 1


@breaks(lambda: (T(3, 4),))
def break_print_last(x):
    y = x.cos() * 2
    print("break_print_last")
    return y


@breaks(lambda: (T(3, 4),))
def break_print_twice(x):
    x = x + 1
    print("one")
    x = x * 2
    print("two")
    return x - 3


@breaks(lambda: (T(3, 4),))
def break_print_three(x):
    x = x + 1
    print("one")
    x = x * 2
    print("two")
    x = x - 3
    print("three")
    return x.relu()


@breaks(lambda: (T(3, 4),))
def break_print_tensor(x):
    y = x + 1
    print(y.shape)
    return y * 2


@breaks(lambda: (T(3, 4),), aot=True)
def break_data_dependent_if(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@breaks(lambda: (-T(3, 4).abs(),))
def break_data_dependent_else(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


@breaks(lambda: (T(3, 4),))
def break_data_dependent_if_no_else(x):
    y = x.cos()
    if (y > 0.5).any():
        y = y * 3
    return y + 1


@breaks(lambda: (T(3, 4),))
def break_data_dependent_bool(x):
    if bool(x.max() > 10):
        return x
    return x * 2


@breaks(lambda: (T(3, 4),))
def break_item(x):
    s = x.sum().item()
    return x * s


@breaks(lambda: (T(3, 4),))
def break_item_at_end(x):
    y = x * 2
    return y.sum().item()


@breaks(lambda: (T(3, 4),))
def break_tolist(x):
    vals = (x[0] * 2).tolist()
    return x + vals[0]


@breaks(lambda: (T(3, 4),))
def break_float_of_tensor(x):
    y = x.mean()
    return x * float(y)


@breaks(lambda: (T(3, 4),))
def break_unsupported_c_function(x):
    y = x * 2
    _ = os.getpid()
    return y + 1


@breaks(lambda: (T(3, 4),))
def break_in_helper_print(x):
    return helper_print(x) * 3


@breaks(lambda: (T(3, 4),), aot=True)
def break_in_helper_branch(x):
    y = x + 1
    z = helper_branch(y)
    return z * 3


@breaks(lambda: (-T(3, 4).abs() - 1,))
def break_in_helper_branch_else(x):
    y = x + 1
    z = helper_branch(y)
    return z * 3


@breaks(lambda: (T(3, 4),))
def break_in_helper_item(x):
    s = helper_item(x * 2)
    return x + s


@breaks(lambda: (T(3, 4),))
def break_in_loop_print(x):
    for i in range(3):
        x = x + i
        print(i)
    return x


@breaks(lambda: (T(3, 4),))
def break_in_loop_data_dependent(x):
    for _ in range(3):
        if x.sum() > 0:
            x = x - 1
        else:
            x = x + 1
    return x


@breaks(lambda: (T(3, 4),))
def break_while_tensor_condition(x):
    n = 0
    while x.sum() > -5:
        x = x - 1
        n += 1
    return x, n


@breaks(lambda: (T(3, 4),))
def break_keeps_locals(x):
    a = x + 1
    b = 5
    print("break_keeps_locals")
    return a * b


@breaks(lambda: (T(3, 4),))
def break_mixed_item_print(x):
    y = x.relu()
    s = y.sum().item()
    print("mixed")
    return y * s


@breaks(lambda: (_mod(PrintingModule), T(2, 4)))
def break_in_module(m, x):
    return m(x) + 1


@breaks(lambda: (T(3, 4),))
def break_nonzero(x):
    idx = torch.nonzero(x > 0)
    return idx.shape[0] + x


@breaks(lambda: (T(3, 4), []))
def break_side_effect_before(x, out):
    out.append(1)
    print("side")
    return x + len(out)


@breaks(lambda: (T(3, 4),), reset=_reset_globals, observe=_observe_globals)
def break_global_write_then_print(x):
    global COUNTER
    COUNTER = COUNTER + 10
    print("global")
    return x * COUNTER


@breaks(lambda: (T(3, 4),))
def break_no_tensor_ops(x):
    print("nothing traced")
    return x


@breaks(lambda: (T(3, 4),))
def break_print_in_nested_def(x):
    def inner(y):
        print("inner")
        return y * 2

    return inner(x + 1) - 1


@breaks(lambda: (T(3, 4),))
def break_data_dependent_ternary(x):
    return x * 2 if x.mean() > 0 else x * 3


@breaks(lambda: (T(3, 4),))
def break_item_in_python_arith(x):
    n = int(x.abs().sum().item())
    return x + n * 2


@breaks(lambda: (T(3, 4),))
def break_two_helpers(x):
    x = helper_print(x)
    x = helper_branch(x)
    return x


# Modules whose forward branches on data (a break inside an inlined forward).
class BranchyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:
            return y.relu()
        return y.sigmoid()


@breaks(lambda: (_mod(BranchyModule), T(2, 4)))
def break_in_module_branch(m, x):
    return m(x) * 2


@breaks(lambda: (T(3, 4),))
def break_data_ptr(x):
    y = x * 2
    _ = y.data_ptr()
    return y + 1


@breaks(lambda: (T(3, 4, requires_grad=True),))
def break_in_no_grad_block(x):
    with torch.no_grad():
        y = x * 2
        print("inside no_grad")
        z = y + 1
    return z * 3


@breaks(lambda: (T(3, 4),))
def break_closure_cell_after(x):
    total = 1

    def bump():
        nonlocal total
        total += 1

    bump()
    print("cell")
    bump()
    return x * total


@breaks(lambda: (_mod(Counting), T(2, 4)))
def break_module_attr_then_print(m, x):
    m.calls = m.calls + 1
    y = m(x)
    print("after module")
    return y * m.calls


@breaks(lambda: (T(3, 4), []))
def break_append_input_list_then_item(x, out):
    out.append(x * 2)
    s = x.sum().item()
    out.append(s)
    return x + s


@breaks(lambda: (T(3, 4),))
def break_return_in_try(x):
    try:
        print("in try")
        return x + 1
    finally:
        pass


@breaks(lambda: (T(3, 4),))
def break_print_kwargs(x):
    y = x + 1
    print("a", "b", sep="-")
    return y


@breaks(lambda: (T(3, 4),))
def break_repeated_helper_calls(x):
    return helper_print(x) + helper_print(x * 2)

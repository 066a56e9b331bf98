"""Scenarios on module globals and inputs that alias them (see ``dynamo_scenarios``).

Place in the pipeline: part of the scenario corpus. Ported, in our own words, from
PyTorch's test/dynamo/test_global.py (``test_store_global_*``, ``test_delete_global*``)
and test_recompiles.py (``test_aliasing_guard_failures*``). The globals the scenarios
write live here; each scenario sets them first, so each of the three runs starts from
the same world.
"""

from __future__ import annotations

import torch

from .dynamo_scenarios_base import _x, scenario

G_COUNTER = 1
G_LIST = [0, 1, 2]
G_DICT = {"a": 0, "b": 1}
G_T1 = torch.zeros(3)
G_T2 = torch.zeros(3)
_NAMES = 0


class _Pair:
    def __init__(self, x, y):
        self.x, self.y = x, y


G_OBJECT = _Pair(1, 1)


# --- test_global.py ------------------------------------------------------------------


def _bump_once(x):
    global G_COUNTER
    val = x + G_COUNTER
    G_COUNTER += 1
    return val


@scenario("test_global.py::test_store_global_1")
def store_global_int(compile):
    global G_COUNTER
    G_COUNTER = 1
    f = compile(_bump_once)
    for _ in range(3):
        f(_x(4))
        f.note(G_COUNTER)


def _bump_twice(x):
    global G_COUNTER
    val = x + G_COUNTER
    G_COUNTER += 1
    G_COUNTER += 1
    return val


@scenario("test_global.py::test_store_global_2")
def store_global_int_twice(compile):
    global G_COUNTER
    G_COUNTER = 1
    f = compile(_bump_twice)
    f(_x(4))
    g = compile(_bump_twice)  # compiled a second time, as the torch test does
    g(_x(4))
    g.note(G_COUNTER)


def _store_new_global(x):
    global G_NEW
    G_NEW = x + 1
    return x + G_NEW


@scenario("test_global.py::test_store_global_new")
def store_global_new_name(compile):
    globals().pop("G_NEW", None)
    f = compile(_store_new_global)
    f(_x(4))
    f.note(G_NEW)
    f(_x(4, seed=1))
    globals().pop("G_NEW", None)


def _list_item_bump(x):
    val = x + G_LIST[1]
    G_LIST[1] += 1
    return val


@scenario("test_global.py::test_store_global_list")
def store_global_list_item(compile):
    G_LIST[:] = [0, 1, 2]
    f = compile(_list_item_bump)
    for _ in range(2):
        f(_x(4))
        f.note(list(G_LIST))


def _list_rebind(x):
    global G_LIST
    val = x + G_LIST[1]
    G_LIST = [v + 1 for v in G_LIST]
    return val


@scenario("test_global.py::test_store_global_list_2")
def store_global_list_rebound(compile):
    global G_LIST
    G_LIST = [0, 1, 2]
    f = compile(_list_rebind)
    for _ in range(2):
        f(_x(4))
        f.note(G_LIST)


def _dict_rebind(x):
    global G_DICT
    G_DICT = {k: v + 1 for k, v in G_DICT.items()}
    return x + G_DICT["b"]


@scenario("test_global.py::test_store_global_dict_2")
def store_global_dict_rebound(compile):
    global G_DICT
    G_DICT = {"a": 0, "b": 1}
    f = compile(_dict_rebind)
    for _ in range(2):
        f(_x(4))
        f.note(G_DICT)


def _dict_item_bump(x):
    val = x + G_DICT["b"]
    G_DICT["b"] += 1
    return val


@scenario("test_global.py::test_store_global_dict")
def store_global_dict_item(compile):
    global G_DICT
    G_DICT = {"a": 0, "b": 1}
    f = compile(_dict_item_bump)
    for _ in range(2):
        f(_x(4))
        f.note(dict(G_DICT))


def _object_attr_bump(x):
    val = x + G_OBJECT.y
    G_OBJECT.y += 1
    return val


@scenario("test_global.py::test_store_global_object")
def store_global_object_attr(compile):
    global G_OBJECT
    G_OBJECT = _Pair(1, 1)
    f = compile(_object_attr_bump)
    for _ in range(2):
        f(_x(4))
        f.note(G_OBJECT.y)


def _fresh_name():
    global _NAMES
    name = f"v{_NAMES}"
    _NAMES += 1
    return name


class _Var:
    def __init__(self, value, name=None):
        self.value = value
        self.name = name or _fresh_name()

    @staticmethod
    def constant(value, name=None):
        return _Var(value, name)


def _named_sum(a, b):
    a, b = _Var(a), _Var.constant(b)
    return a.value + b.value, a.name + b.name


@scenario("test_global.py::test_store_global_inline_1 / _inline_2")
def store_global_in_inlined_init(compile):
    global _NAMES
    _NAMES = 0
    f = compile(_named_sum)
    f(_x(3), _x(3, seed=1))
    f(_x(3), _x(3, seed=2))  # the names go on: v2v3
    f.note(_NAMES)


def _delete_global(x):
    global G_DOOMED
    del G_DOOMED
    return x + 1


@scenario("test_global.py::test_delete_global / test_delete_missing_global")
def delete_global_then_missing(compile):
    globals()["G_DOOMED"] = 10
    f = compile(_delete_global)
    f(_x(2))
    f.note("G_DOOMED" in globals())
    f(_x(2))  # now missing: the user's NameError, unchanged


def _delete_global_guarded(x):
    global G_DOOMED
    y = x + 1
    try:
        del G_DOOMED
    except NameError:
        y = y + 1
    return y


@scenario("test_global.py::test_delete_global_presence_flip")
def delete_global_presence_flip(compile):
    globals()["G_DOOMED"] = 1
    f = compile(_delete_global_guarded)
    f(_x(2))
    f(_x(2))
    globals()["G_DOOMED"] = 2
    f(_x(2))
    f.note("G_DOOMED" in globals())


# --- test_recompiles.py: aliasing guards ----------------------------------------------


def _add_into_first(a, b, c):
    a.add_(b)
    return c + 1


@scenario("test_recompiles.py::test_aliasing_guard_failures", backend="aot_eager")
def aliasing_between_inputs(compile):
    x, y, z = _x(3), _x(3, seed=1), _x(3, seed=2)
    f = compile(_add_into_first)
    f(x.clone(), y.clone(), z.clone())
    f(z.clone(), y.clone(), x.clone())  # distinct again: no recompile
    shared = x.clone()
    f(shared, y.clone(), shared)  # a and c alias: c + 1 must see the add_


def _add_global_into(a):
    a.add_(G_T1)
    return G_T2 + 1


@scenario("test_recompiles.py::test_aliasing_guard_failures_with_globals", backend="aot_eager")
def aliasing_with_a_global(compile):
    global G_T1, G_T2
    G_T1, G_T2 = _x(3), _x(3, seed=1)
    f = compile(_add_global_into)
    f(_x(3, seed=2))
    f(G_T1)  # the argument is the global it adds
    f.note(G_T1)
    f(G_T2)  # the argument is the global it reads after the add_
    f.note(G_T2)

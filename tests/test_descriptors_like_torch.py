"""A descriptor with a Python ``__get__`` on an object made in the frame, against torch's.

``functools.cached_property`` (3.12 dropped its lock, so torch traces its ``__get__`` whole
there) and a user's descriptor class: torch inlines ``type(descr).__get__(descr, obj, cls)``
(torch/_dynamo/variables/user_defined.py ``UserDefinedObjectVariable.var_getattr``); ours
too (Note [A descriptor's Python __get__ is inlined], variables/new_object.py). Graphs,
breaks, gb types, lines (the held-out sets' ``compare``) and results, on 3.11 to 3.13.
"""

from __future__ import annotations

import functools

import pytest
import torch

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]


class _Cached:
    def __init__(self, k):
        self.k = k

    @functools.cached_property
    def value(self):
        return self.k * 2


class _Twice:
    def __get__(self, obj, owner=None):
        return self if obj is None else obj.k * 2


class _WithDescriptor:
    twice = _Twice()

    def __init__(self, k):
        self.k = k


def d_cached_property_read_twice(x):
    c = _Cached(5)
    a = c.value
    return x + a + c.value + c.__dict__["value"]


def d_cached_property_of_a_tensor(x):
    c = _Cached(x)
    return c.value + c.value


def d_user_descriptor(x):
    return x * _WithDescriptor(3).twice


def d_user_descriptor_of_a_tensor(x):
    return _WithDescriptor(x.sin()).twice + 1


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("d_")}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_descriptor_breaks_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, set(), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_descriptor_results_like_eager(name):
    fn, x = PROGRAMS[name], torch.randn(4)
    md.reset()
    torch.testing.assert_close(md.compile(fn, backend="eager")(x), fn(x))

"""``_torch_private.tree_map`` (a fast path for flat containers) against torch's ``tree_map``."""

from __future__ import annotations

import collections

import pytest
import torch

from minidynamo._torch_private import _torch_tree_map, tree_map

Point = collections.namedtuple("Point", "x y")

TREES = [(), [], {}, 3, None, "s", torch.ones(2), (1, 2.0, None, torch.ones(1)), [1, [2, 3]], {"b": 1, "a": 2},
         {"a": (1,), "b": [torch.zeros(1)]}, torch.Size([2, 3]), (torch.Size([1]), 2), Point(1, 2), [Point(1, 2)],
         collections.OrderedDict(a=1), torch.return_types.max((torch.ones(1), torch.zeros(1))),
         (torch.ones(1), [2, 2], {"k": [torch.ones(1), (None, 1.5)]}),  # nested plain containers (conv's args)
         ([1, (2, Point(3, 4))], 5), [[[[[[[[[[1]]]]]]]]], 2]]  # a node deep inside; a tree deeper than the fast path


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__)
def test_tree_map_matches_torchs(tree):
    calls_ours, calls_torch = [], []
    ours = tree_map(lambda x: calls_ours.append(x) or ("leaf", id(x)), tree)
    theirs = _torch_tree_map(lambda x: calls_torch.append(x) or ("leaf", id(x)), tree)
    assert type(ours) is type(theirs) and repr(ours) == repr(theirs)
    assert [id(x) for x in calls_ours] == [id(x) for x in calls_torch]

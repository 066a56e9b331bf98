"""``md.explain(...).op_count`` against torch's where a call stays in the graph for its effect.

``torch._C._log_api_usage_once`` is one of torch's in-graph functions; ``nn.Module.__init__``
calls it, so building a module in forward (DeBERTa-v2) and slicing a ModuleList (transformers' ``self.layers[: config.num_hidden_layers]``,
Llama and DeBERTa-v2) leaves one node in torch's graph (Note [A call kept in the graph for
its effect], variables/torch.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import minidynamo as md
from minidynamo._torch_private import dynamo_explain

pytestmark = pytest.mark.usefixtures("real_dynamo")


def _counts(e):
    return e.graph_count, e.graph_break_count, e.op_count


class Act(nn.Module):  # a user module built in forward (DeBERTa-v2's pooler builds GELUActivation)
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.relu()


@pytest.mark.parametrize("kind", ["direct", "module_list_slice", "sequential_slice", "user_module_made_in_trace"])
def test_op_count_equals_torchs(kind):
    torch.manual_seed(0)
    layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
    seq = nn.Sequential(*layers)

    def f(x):
        if kind == "direct":
            torch._C._log_api_usage_once("realmodels.test")
            return layers[0](x)
        if kind == "sequential_slice":
            return seq[:2](x)
        if kind == "user_module_made_in_trace":
            return Act()(layers[0](x))
        for layer in layers[:2]:
            x = layer(x)
        return x

    x = torch.randn(2, 3)
    ours, theirs = md.explain(f, x), dynamo_explain(f, x)
    assert _counts(ours) == _counts(theirs)
    assert theirs.graph_count == 1
    torch.testing.assert_close(md.compile(f, backend="aot_eager")(x), f(x))

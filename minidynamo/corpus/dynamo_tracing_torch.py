"""Chapter 3 cases, torch: ``torch.*`` and ``F.*`` calls, Tensor methods and attributes, sizes, ``nn.Module`` calls.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``). Mirrors the
same kinds of functions in PyTorch's ``test/dynamo/test_functions.py`` (torch functions,
Tensor methods) and ``test/dynamo/test_modules.py``.
"""

from __future__ import annotations

import math
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dynamo_testing import T, tracing
from .dynamo_helpers import _mod, Config, MLP, Nested, WithBuffer, WithDict, WithHelper, WithList


# --- torch.* functions ------------------------------------------------------


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)), aot=True)
def torch_cat_stack(x, y):
    return torch.cat([x, y], dim=0).sum(0) + torch.stack((x, y)).mean(0).sum(0)


@tracing(lambda: (T(3, 4),), aot=True)
def torch_unary(x):
    return torch.sin(x) + torch.exp(x) * torch.tanh(x) - torch.sigmoid(x)


@tracing(lambda: (T(3, 4),))
def torch_factories(x):
    return x + torch.ones(3, 4) * torch.zeros(4) + torch.full((3, 1), 2.0)


@tracing(lambda: (T(3, 4),))
def torch_factory_like(x):
    return torch.ones_like(x) + torch.zeros_like(x) + torch.empty_like(x).fill_(2)


@tracing(lambda: (T(3, 4),))
def torch_arange_linspace(x):
    return x * torch.arange(4) + torch.linspace(0, 1, 4)


@tracing(lambda: (T(3, 4),))
def torch_max_namedtuple(x):
    r = torch.max(x, dim=1)
    return r.values + r.indices


@tracing(lambda: (T(6, 4),))
def torch_split(x):
    parts = torch.split(x, 2)
    return parts[0] * parts[2]


@tracing(lambda: (T(3, 4), T(4, seed=1)))
def torch_matmul_outer(x, v):
    return torch.matmul(x, v) + torch.outer(v, v).sum()


@tracing(lambda: (T(3, 4),))
def torch_clamp_minmax(x):
    return torch.clamp(x, min=-0.5, max=0.5) + torch.maximum(x, torch.tensor(0.0))


@tracing(lambda: (T(3, 4),))
def torch_reductions(x):
    return torch.sum(x, dim=1) + torch.mean(x, 1) + torch.amax(x, dim=-1) + x.std(1)


@tracing(lambda: (T(3, 4),))
def torch_einsum(x):
    return torch.einsum("ij,kj->ik", x, x)


@tracing(lambda: (T(3, 4),))
def torch_dtype_arg(x):
    return torch.zeros(3, 4, dtype=torch.float64) + x.to(torch.float64)


@tracing(lambda: (T(3, 4),))
def torch_no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


# --- torch.nn.functional ----------------------------------------------------


@tracing(lambda: (T(3, 4),), aot=True)
def functional_activations(x):
    return F.relu(x) + F.gelu(x) + F.silu(x) + F.leaky_relu(x, 0.1)


@tracing(lambda: (T(3, 4),), aot=True)
def functional_softmax(x):
    return F.softmax(x, dim=-1) + F.log_softmax(x, dim=1)


@tracing(lambda: (T(3, 4), T(5, 4, seed=1), T(5, seed=2)), aot=True)
def functional_linear(x, w, b):
    return F.linear(x, w, b)


@tracing(lambda: (T(3, 4),))
def functional_layer_norm(x):
    return F.layer_norm(x, (4,))


@tracing(lambda: (T(3, 4),))
def functional_pad_dropout_eval(x):
    return F.dropout(F.pad(x, (1, 1)), p=0.5, training=False)


@tracing(lambda: (T(3, 4), torch.tensor([0, 2, 1])))
def functional_cross_entropy(x, target):
    return F.cross_entropy(x, target)


@tracing(lambda: (T(3, 4),))
def functional_normalize(x):
    return F.normalize(x, dim=1) * F.mse_loss(x, torch.zeros_like(x))


# --- Tensor methods ---------------------------------------------------------


@tracing(lambda: (T(3, 4),), aot=True)
def tensor_view_methods(x):
    return x.view(4, 3).t().reshape(-1) + x.flatten()


@tracing(lambda: (T(2, 3, 4),))
def tensor_permute_transpose(x):
    return x.permute(2, 0, 1).transpose(0, 1).contiguous().sum(-1)


@tracing(lambda: (T(3, 4),))
def tensor_unsqueeze_expand(x):
    return x.unsqueeze(0).expand(2, 3, 4).sum(0) + x.unsqueeze(-1).squeeze(-1)


@tracing(lambda: (T(3, 4),))
def tensor_reduction_methods(x):
    return x.sum(dim=1, keepdim=True) * x.mean() - x.max() + x.amin(0)


@tracing(lambda: (T(3, 4),))
def tensor_elementwise_methods(x):
    return x.exp().log1p().clamp(max=2).relu().sqrt()


@tracing(lambda: (T(3, 4),))
def tensor_dtype_methods(x):
    return x.double().float() + x.to(torch.int32).to(x.dtype) + x.type_as(x)


@tracing(lambda: (T(3, 4),))
def tensor_repeat_flip(x):
    return x.repeat(2, 1).flip(0)[:3] + x.roll(1, 0)


@tracing(lambda: (T(3, 4),))
def tensor_mT_T(x):
    return x.T @ x + x.mT @ x


@tracing(lambda: (T(3, 4),))
def tensor_new_methods(x):
    return x.new_zeros(3, 4) + x.new_ones((3, 4)) + x.new_full((3, 4), 3.0)


@tracing(lambda: (T(3, 4),))
def tensor_inplace_method_chain(x):
    y = x.clone()
    y.add_(1).mul_(2).clamp_(max=3)
    return y


@tracing(lambda: (T(3, 4),))
def tensor_detach_grad_flag(x):
    return x.detach() * 2


@tracing(lambda: (T(3, 4, requires_grad=True),), aot=True)
def requires_grad_input(x):
    return (x * 2).sin().sum()


# --- Tensor attributes and size arithmetic ----------------------------------


@tracing(lambda: (T(3, 4),))
def tensor_shape_attr(x):
    return x * x.shape[0] + x.shape[-1]


@tracing(lambda: (T(3, 4),))
def tensor_size_dim_ndim(x):
    return x + x.size(1) * x.dim() + x.ndim + x.numel()


@tracing(lambda: (T(3, 4),))
def tensor_dtype_attr(x):
    if x.dtype == torch.float32:
        return x + 1
    return x


@tracing(lambda: (T(3, 4),))
def tensor_device_attr(x):
    if x.device.type == "cpu":
        return x * 2
    return x


@tracing(lambda: (T(3, 4),))
def size_arithmetic_view(x):
    n = x.shape[0] * x.shape[1]
    return x.view(n) + torch.zeros(n)


@tracing(lambda: (T(2, 3, 4),))
def size_arithmetic_reshape(x):
    return x.reshape(-1, x.size(-1)) * (x.size(0) + 1)


@tracing(lambda: (T(3, 4),))
def return_shape(x):
    return x.shape


@tracing(lambda: (T(3, 4),))
def return_size_tuple(x):
    return tuple(x.size()), x.dtype


@tracing(lambda: (T(3, 4),))
def shape_in_factory(x):
    return torch.zeros(x.shape) + torch.ones(x.size(0), 1)


@tracing(lambda: (T(3, 4),))
def is_floating_point(x):
    if x.is_floating_point():
        return x * 2
    return x


# --- isinstance, len, getattr, range ----------------------------------------


@tracing(lambda: (T(3, 4), 3))
def isinstance_checks(x, n):
    out = x
    if isinstance(x, torch.Tensor):
        out = out + 1
    if isinstance(n, int):
        out = out * n
    if isinstance(n, (float, str)):
        out = out * 100
    return out


@tracing(lambda: ([T(3), T(3, seed=1)],))
def len_of_list(xs):
    return xs[0] * len(xs)


@tracing(lambda: (T(5, 4),))
def len_of_tensor(x):
    return x * len(x)


@tracing(lambda: (T(3, 4), Config()))
def getattr_builtin(x, cfg):
    return x * getattr(cfg, "scale") + getattr(cfg, "missing", 7)


@tracing(lambda: (T(3, 4), Config()))
def hasattr_builtin(x, cfg):
    if hasattr(cfg, "scale") and not hasattr(cfg, "nope"):
        return x + 1
    return x


@tracing(lambda: (T(3, 4),))
def range_len_list(x):
    xs = [1, 2, 3]
    out = x
    for i in range(len(xs)):
        out = out + xs[i]
    return out


@tracing(lambda: (T(3, 4),))
def builtin_sum_list(x):
    return x * sum([1, 2, 3])


@tracing(lambda: (T(3, 4),))
def builtin_any_all(x):
    flags = [True, False]
    if any(flags) and not all(flags):
        return x + 1
    return x


@tracing(lambda: (T(3, 4),))
def builtin_sorted_reversed(x):
    ks = sorted([3, 1, 2])
    rs = list(reversed(ks))
    return x * ks[0] + rs[0]


@tracing(lambda: (T(3, 4),))
def builtin_type_constructors(x):
    t = tuple([1, 2])
    l = list((3, 4))
    d = dict(a=1)
    return x * (t[1] + l[0] + d["a"] + bool(1))


@tracing(lambda: (T(3, 4),))
def builtin_map_filter(x):
    ks = list(map(lambda k: k * 2, [1, 2, 3]))
    return x * ks[2]


@tracing(lambda: (T(3, 4),))
def operator_module(x):
    return operator.add(x, 1) * operator.getitem([1, 2], 1)


@tracing(lambda: (T(3, 4),))
def math_module(x):
    return x * math.sqrt(4.0) + math.pi


# --- nn.Module calls --------------------------------------------------------


@tracing(lambda: (_mod(MLP), T(2, 4)), aot=True)
def module_mlp(m, x):
    return m(x)


@tracing(lambda: (_mod(WithBuffer), T(2, 4)), aot=True)
def module_buffer_param(m, x):
    return m(x)


@tracing(lambda: (_mod(WithList), T(2, 4)))
def module_list_loop(m, x):
    return m(x)


@tracing(lambda: (_mod(WithDict), T(2, 4)))
def module_dict_heads(m, x):
    return m(x)


@tracing(lambda: (_mod(WithHelper), T(2, 4)))
def module_with_method(m, x):
    return m(x)


@tracing(lambda: (_mod(Nested), T(2, 4)), aot=True)
def module_nested_sequential(m, x):
    return m(x)


@tracing(lambda: (_mod(MLP), T(2, 4)))
def module_submodule_direct(m, x):
    return m.fc1(x).sum() + m.fc2.weight.sum()


@tracing(lambda: (_mod(MLP), T(2, 4)))
def module_parameters_loop(m, x):
    total = x.sum()
    for p in m.parameters():
        total = total + p.sum()
    return total


GLOBAL_MLP = _mod(MLP, seed=5)


@tracing(lambda: (T(2, 4),))
def module_global(x):
    return GLOBAL_MLP(x)


@tracing(lambda: (_mod(MLP), T(2, 4)))
def module_training_flag(m, x):
    if m.training:
        return m(x) * 2
    return m(x)


@tracing(lambda: (T(2, 4),))
def module_created_inline_functional(x):
    return nn.functional.relu(x) + torch.nn.functional.tanh(x)

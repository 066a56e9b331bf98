"""mode.from_tensor against torch's FakeTensorConverter: aliasing, views, memo, metadata."""

from __future__ import annotations

import pytest
import torch

from minidynamo._torch_private import StorageWeakRef, real_fake_tensor_mode
from minidynamo.fake import FakeTensor, FakeTensorError, FakeTensorMode, MixedFakeTensorError

pytestmark = pytest.mark.ch06


def _shared_storage(a, b) -> bool:
    return StorageWeakRef(a.untyped_storage()) == StorageWeakRef(b.untyped_storage())


def _describe(tensors, mode):
    """Everything the converter should keep, with aliasing expressed as indices into ``tensors``."""
    fakes = [mode.from_tensor(t) for t in tensors]
    again = [mode.from_tensor(t) for t in tensors]
    rows = []
    for i, f in enumerate(fakes):
        base = f._base
        base_idx = next((j for j, g in enumerate(fakes) if g is base), "other" if base is not None else None)
        rows.append(
            dict(
                shape=tuple(f.shape),
                stride=f.stride(),
                offset=f.storage_offset(),
                dtype=f.dtype,
                device=str(f.device),
                requires_grad=f.requires_grad,
                is_leaf=f.is_leaf,
                is_view=f._is_view(),
                base=base_idx,
                shares=[j for j, g in enumerate(fakes) if _shared_storage(f, g)],
                memo_hit=again[i] is f,
                meta_underneath=f.untyped_storage().device.type == "meta",
            )
        )
    return rows


def _case_views():
    base = torch.randn(6, 8)
    return [base, base[1:, ::2], base.t(), base.view(48)[3:], base.diagonal()]


def _case_view_before_base():
    base = torch.randn(4, 4)
    return [base[2:], base]  # the view is converted first: its base gets converted on the way


def _case_as_strided():
    base = torch.arange(20.0)
    return [base.as_strided((3, 3), (2, 1), 4), base]


def _case_view_of_view():
    base = torch.randn(2, 3, 4)
    v1 = base.transpose(0, 2)
    return [v1[1], v1, base]


def _case_shared_storage_no_view():
    a = torch.randn(10)
    b = torch.empty(0).set_(a.untyped_storage(), 2, (2, 3), (3, 1))
    return [a, b, torch.randn(10)]


def _case_requires_grad():
    leaf = torch.randn(3, 4, requires_grad=True)
    nonleaf = leaf * 2
    view = leaf[1:]
    with torch.no_grad():
        nograd_view = leaf[:1]
    return [leaf, nonleaf, view, nograd_view]


def _case_strides_and_dtypes():
    return [
        torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        torch.arange(12).reshape(3, 4),
        torch.zeros(3, dtype=torch.bool),
        torch.randn(2, 2, dtype=torch.float64).expand(3, 2, 2),
        torch.randn(()),
        torch.nn.Parameter(torch.randn(3)),
    ]


def _case_view_as_real():
    z = torch.complex(torch.arange(5.0), torch.ones(5))
    return [torch.view_as_real(z), z]  # a float view of a complex base: the fake is float, as torch's


CASES = {f.__name__[len("_case_") :]: f for f in [
    _case_view_as_real,
    _case_views,
    _case_view_before_base,
    _case_as_strided,
    _case_view_of_view,
    _case_shared_storage_no_view,
    _case_requires_grad,
    _case_strides_and_dtypes,
]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_converter_matches_torch(name):
    tensors = CASES[name]()
    ours = _describe(tensors, FakeTensorMode())
    theirs = _describe(tensors, real_fake_tensor_mode())
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert o == t, f"tensor {i} of case {name}"


def test_aliasing_is_kept_across_calls():
    base = torch.randn(4, 4)
    mode = FakeTensorMode()
    fa = mode.from_tensor(base[:2])
    fb = mode.from_tensor(base[2:])  # a later call, same real storage
    assert _shared_storage(fa, fb)
    assert fa._base is fb._base is mode.from_tensor(base)
    assert not _shared_storage(fa, mode.from_tensor(torch.randn(4, 4)))


def test_version_counter_semantics_match_torch():
    real = torch.randn(3)
    real.add_(1)  # real version 1
    for mode in (FakeTensorMode(), real_fake_tensor_mode()):
        f = mode.from_tensor(real)
        with mode:
            v = f[1:]
            before = (f._version, v._version)
            v.mul_(2)
            after = (f._version, v._version)
        assert (before, after) == ((0, 0), (1, 1)), type(mode)


def test_mutating_a_fake_view_keeps_metadata_in_sync():
    def fn(x):
        g = x.clone()
        g.t_()
        g.unsqueeze_(0)
        return g

    real = torch.randn(3, 4)
    mode = FakeTensorMode()
    with mode:
        g = fn(mode.from_tensor(real))
    expected = fn(real)
    assert (g.shape, g.stride()) == (expected.shape, expected.stride())


def test_from_tensor_is_idempotent_on_own_fakes_and_rejects_other_modes():
    mode = FakeTensorMode()
    f = mode.from_tensor(torch.randn(2))
    assert mode.from_tensor(f) is f
    with pytest.raises(MixedFakeTensorError):
        FakeTensorMode().from_tensor(f)


def test_from_tensor_rejects_what_it_cannot_fake():
    mode = FakeTensorMode()
    with pytest.raises(FakeTensorError, match="sparse|layout"):
        mode.from_tensor(torch.randn(3, 3).to_sparse())
    with pytest.raises(TypeError, match="torch.Tensor"):
        mode.from_tensor([1.0, 2.0])


def test_device_override_claims_cuda():
    mode = FakeTensorMode()
    f = mode.from_tensor(torch.randn(2, 3), device="cuda")
    assert isinstance(f, FakeTensor)
    assert f.device == torch.device("cuda", 0)
    assert "CUDA" in str(torch._C._dispatch_keys(f))  # noqa: SLF001 (public enough: keys of a tensor)


def test_covered_elements_of_fakes_match_real_data():
    from minidynamo.fake.storage_map import covered_elements

    base = torch.arange(24.0).reshape(4, 6)  # each element's value is its storage index
    mode = FakeTensorMode()
    for view in [base, base[1:, ::2], base.t(), base.diagonal(), base[:, 2], base.view(2, 12)[1, 3:]]:
        real_indices = sorted({int(v) for v in view.flatten().tolist()})
        assert covered_elements(mode.from_tensor(view)) == real_indices

"""The FakeTensor dispatch cache (Note [The dispatch cache]): a hit gives what torch's FakeTensorMode gives."""

from __future__ import annotations

import pytest
import torch

from minidynamo import events
from minidynamo._torch_private import StorageWeakRef, real_fake_tensor_mode
from minidynamo.fake import FakeTensorMode
from minidynamo.fake import dispatch_cache

pytestmark = pytest.mark.ch06

aten = torch.ops.aten


@pytest.fixture
def fresh_cache(monkeypatch):
    monkeypatch.setattr(FakeTensorMode, "cache_crosscheck", False)  # hits must stand on their own here
    dispatch_cache.clear_cache()
    yield dispatch_cache
    dispatch_cache.clear_cache()


def _layout(t, inputs):
    alias = next((i for i, x in enumerate(inputs)
                  if StorageWeakRef(x.untyped_storage()) == StorageWeakRef(t.untyped_storage())), None)
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, str(t.device), t.requires_grad,
            t.untyped_storage().nbytes(), alias, any(t is x for x in inputs))


def _flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


PROGRAMS = {
    "addmm": (lambda b, x, w: aten.addmm.default(b, x, w), [(4,), (3, 5), (5, 4)]),
    "layer_norm": (lambda x, w: aten.native_layer_norm.default(x, [6], w, w, 1e-5), [(2, 6), (6,)]),
    "add_scalar_int": (lambda x: aten.add.Tensor(x, 1), [(3, 4)]),
    "add_scalar_float": (lambda x: aten.mul.Tensor(x.to(torch.int64), 1.5), [(3, 4)]),
    "inplace_add_": (lambda x, y: x.add_(y), [(3, 4), (4,)]),
    "sum_dim": (lambda x: x.sum(1, keepdim=True), [(3, 4, 5)]),
    "channels_last_mul": (lambda x: x.contiguous(memory_format=torch.channels_last) * 2, [(2, 3, 4, 5)]),
    "transposed_mm": (lambda x, y: x.t() @ y, [(4, 3), (4, 5)]),
    "var_mean": (lambda x: torch.var_mean(x, 0), [(5, 3)]),
    "gelu": (lambda x: torch.nn.functional.gelu(x), [(7,)]),
    "split_views": (lambda x: torch.split(x, 2), [(5, 3)]),
    "to_double": (lambda x: x.double(), [(3,)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_hit_gives_torchs_fake_outputs(fresh_cache, name):
    fn, shapes = PROGRAMS[name]
    reals = [torch.randn(*s) for s in shapes]
    theirs_mode = real_fake_tensor_mode()
    their_in = [theirs_mode.from_tensor(r.clone()) for r in reals]
    with theirs_mode:
        theirs = _flat(fn(*their_in))
    ours_mode = FakeTensorMode()
    for attempt in range(2):  # the first call fills the cache, the second is answered from it
        our_in = [ours_mode.from_tensor(r.clone()) for r in reals]
        with ours_mode:
            ours = _flat(fn(*our_in))
        assert [_layout(o, our_in) for o in ours] == [_layout(t, their_in) for t in theirs], attempt
    if name != "split_views":  # views are not cached (Note [Views are not cached])
        assert fresh_cache.stats().hits > 0


def test_the_cache_is_shared_by_modes_and_keeps_op_events(fresh_cache):
    x = torch.randn(8, 16)
    w = torch.randn(16)
    logs = []
    for _ in range(2):
        mode = FakeTensorMode()
        fx, fw = mode.from_tensor(x), mode.from_tensor(w)
        with events.record() as log, mode:
            out = aten.native_layer_norm.default(fx, [16], fw, fw, 1e-5)
        assert all(o.fake_mode is mode for o in out)
        logs.append([(e.kind, e.op, e.details["output_shapes"]) for e in log if e.kind == "op"])
    assert logs[0] == logs[1] and logs[0]
    assert fresh_cache.stats().hits == 1 and fresh_cache.stats().misses == 1


def test_an_op_that_changes_an_inputs_layout_is_not_cached(fresh_cache):
    mode = FakeTensorMode()
    for _ in range(2):
        fx, out = mode.from_tensor(torch.randn(4, 5)), mode.from_tensor(torch.randn(2))
        with mode:
            y = torch.add(fx, 1, out=out)  # resizes out: its tag says out, not inplace_view
        assert y is out and tuple(out.shape) == (4, 5) and out.stride() == (5, 1)
    assert fresh_cache.stats().bypasses.get("changes an input's metadata", 0) == 1
    assert fresh_cache.stats().bypasses.get("remembered", 0) == 1


def test_a_different_layout_is_a_different_key(fresh_cache):
    mode = FakeTensorMode()
    a = mode.from_tensor(torch.randn(4, 6))
    b = mode.from_tensor(torch.randn(6, 4)).t()
    with mode:
        ya, yb = a * 2, b * 2
    real_a, real_b = torch.randn(4, 6) * 2, torch.randn(6, 4).t() * 2
    assert (ya.stride(), yb.stride()) == (real_a.stride(), real_b.stride())
    assert fresh_cache.stats().hits == 0


def test_a_compile_gives_the_same_graphs_with_and_without_the_cache(fresh_cache, monkeypatch):
    import minidynamo as md
    from minidynamo.aot import aot_module_simplified
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(4, 8)
    graphs = []
    for enabled in (False, True, True):  # no cache; filling it; answered from it
        monkeypatch.setattr(FakeTensorMode, "cache_enabled", enabled)
        md.reset()
        seen: list[str] = []

        def keep(gm, example_inputs, seen=seen):
            seen.append(gm.code)
            return gm.forward

        def backend(gm, example_inputs):
            return aot_module_simplified(gm, example_inputs, keep, keep, partition_fn=min_cut_rematerialization_partition)

        out = md.compile(lambda t: model(t).sum(), backend=backend)(x)
        torch.testing.assert_close(out, model(x).sum())
        graphs.append(seen)
    assert len(graphs[0]) == 2 and graphs[0] == graphs[1] == graphs[2]
    assert fresh_cache.stats().hits > 0

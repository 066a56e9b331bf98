"""Our FakeTensorMode against torch's on OpInfo samples (op_db), float32 on CPU.

For each sample both modes convert the same real inputs and run the op; we compare,
output by output, shape, stride, dtype, storage offset and which inputs the output
shares storage with. Sample choice is deterministic: ops sorted by (name, variant),
every STEP-th op, its first SAMPLES_PER_OP samples with torch.manual_seed(0).
"""

from __future__ import annotations

import collections
import concurrent.futures
import warnings

import pytest
import torch

from minidynamo._torch_private import StorageWeakRef, op_db, real_fake_tensor_mode
from minidynamo.fake import FakeTensorMode

pytestmark = pytest.mark.ch06

STEP = 3
SAMPLES_PER_OP = 2
MIN_RATE = 0.95

# Where ours and torch's differ, and why (op name -> reason). Found by running every op
# (STEP = 1); STEP = 3 meets a subset of these.
KNOWN_DIFFERENCES = {
    # No Meta kernel: ours raises UnsupportedOperatorError by design. Torch's fake mode
    # falls back to running the real CPU kernel on zero-filled tensors (run_fallback_kernel).
    "geqrf": "no Meta kernel; torch runs the CPU kernel on zeros (fallback kernel), ours refuses",
    "histogram": "no Meta kernel for histogram.bin_ct/bins_tensor; torch falls back to the CPU kernel",
    "histogramdd": "no Meta kernel for _histogramdd_*; torch falls back to the CPU kernel",
    "to_sparse": "no Meta kernel for _to_sparse (and sparse fakes are out of our scope)",
    # Torch's fake mode runs some ops through decompositions / CPU-faithful paths that the
    # Meta kernel does not reproduce exactly; ours runs the Meta kernel only.
    "native_batch_norm": "eval mode: the CPU kernel returns empty save_mean/save_invstd, the Meta kernel sized ones",
    "_native_batch_norm_legit": "same as native_batch_norm (Meta kernel sizes save_mean in eval mode)",
    "fft.rfftn": "output strides: torch's fake mode matches the CPU kernel's layout, the Meta kernel another",
    "linalg.eig": "eigenvector strides (column- vs row-major) differ between the Meta kernel and torch's fake",
    "nonzero_static": "stride of an empty (0, 0) output: (1, 0) from the Meta kernel, (1, 1) in torch's fake",
    "pca_lowrank": "built on linalg.qr/svd: their output strides differ between the Meta kernel and torch's fake",
    "svd_lowrank": "built on linalg.qr/svd: their output strides differ between the Meta kernel and torch's fake",
}


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _flat(y)]
    if isinstance(x, dict):
        return [t for y in x.values() for t in _flat(y)]
    return []


def _convert(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_convert(y, fn) for y in x)
    if isinstance(x, dict):
        return {k: _convert(v, fn) for k, v in x.items()}
    return x


def _run(mode, opinfo, sample):
    """('ok', [per-output metadata]) or ('raise', exception type name)."""
    args, rest, kwargs = _convert((sample.input, sample.args, sample.kwargs), mode.from_tensor)
    inputs = _flat((args, rest, kwargs))
    try:
        with mode:
            out = opinfo.op(args, *rest, **kwargs)
    except Exception as e:  # noqa: BLE001 (we compare refusals too)
        return ("raise", type(e).__name__)
    storages = [StorageWeakRef(t.untyped_storage()) for t in inputs]

    def describe(t):
        if t.layout != torch.strided:
            return (tuple(t.shape), str(t.layout))
        s = StorageWeakRef(t.untyped_storage())
        aliases = [j for j, si in enumerate(storages) if si == s]
        return (tuple(t.shape), t.stride(), t.dtype, t.storage_offset(), aliases)

    return ("ok", [describe(t) for t in _flat(out)])


@pytest.fixture(scope="module")
def results():
    # OpInfo sample iterators call inspect.stack() for every sample (TrackedInputIter,
    # to report which input failed), which costs seconds under pytest's deep stack.
    # A fresh thread has a shallow stack.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_collect).result()


def _collect():
    warnings.filterwarnings("ignore")
    ops = sorted(
        (o for o in op_db() if o.supports_dtype(torch.float32, "cpu")),
        key=lambda o: (o.name, o.variant_test_name),
    )[::STEP]
    rows = []
    for opinfo in ops:
        torch.manual_seed(0)
        samples = [s for _, s in zip(range(SAMPLES_PER_OP), opinfo.sample_inputs("cpu", torch.float32))]
        for sample in samples:
            if any(t.layout != torch.strided for t in _flat((sample.input, sample.args, sample.kwargs))):
                continue  # sparse inputs: neither converter's subject here
            ours = _run(FakeTensorMode(), opinfo, sample)
            theirs = _run(real_fake_tensor_mode(), opinfo, sample)
            rows.append((opinfo.name, ours, theirs))
    return rows


def test_agreement_with_torch_fake_tensor_mode(results):
    torch_ran = [(name, o, t) for name, o, t in results if t[0] == "ok"]
    agree = [r for r in torch_ran if r[1] == r[2]]
    differ = collections.Counter(name for name, o, t in torch_ran if o != t)
    ops = {name for name, _, _ in torch_ran}
    rate = len(agree) / len(torch_ran)
    summary = f"{len(agree)}/{len(torch_ran)} samples agree ({rate:.1%}) over {len(ops)} ops; differ: {dict(differ)}"
    print(summary)
    assert len(torch_ran) >= 300 and len(ops) >= 100, summary
    assert rate >= MIN_RATE, summary
    unexplained = set(differ) - set(KNOWN_DIFFERENCES)
    assert not unexplained, f"new differences, explain them in KNOWN_DIFFERENCES: {unexplained}; {summary}"


def test_when_torch_refuses_ours_refuses(results):
    # Samples torch's fake mode cannot run (data-dependent outputs, ...): ours must not invent an output.
    refused = [(name, o) for name, o, t in results if t[0] == "raise"]
    invented = [name for name, o in refused if o[0] == "ok"]
    assert not invented, invented

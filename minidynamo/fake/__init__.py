"""The mini FakeTensor: tensors with metadata and no data (chapter 06).

Place in the pipeline: under all three tracing passes (Dynamo's symbolic
interpreter, AOT metadata collection, AOT joint tracing). Mirrors
``torch/_subclasses/fake_tensor.py`` and ``torch/_subclasses/meta_utils.py``.

    mode = FakeTensorMode(); fx = mode.from_tensor(real)   # aliasing kept (memo)
    with mode: y = fx.t().add_(1)                          # meta kernels, FakeTensor results
"""

from minidynamo.fake.converter import FakeTensorConverter
from minidynamo.fake.fake_mode import FakeTensorMode
from minidynamo.fake.fake_tensor import (
    DataDependentOutputError,
    FakeTensor,
    FakeTensorError,
    MixedFakeTensorError,
    UnsupportedOperatorError,
    shares_storage,
)

__all__ = [
    "FakeTensor",
    "FakeTensorMode",
    "FakeTensorConverter",
    "FakeTensorError",
    "DataDependentOutputError",
    "UnsupportedOperatorError",
    "MixedFakeTensorError",
    "shares_storage",
]

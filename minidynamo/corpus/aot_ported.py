"""The ported AOT corpus: cases after PyTorch's test_functionalization.py and test/dynamo/test_aot_autograd.py.

Place in the pipeline: none; a corpus beside ``aot_cases`` (same ``AOTCase`` shape and
conventions), kept out of ``aot_cases.CASES`` so that chapter 09's table stays as it is.
``tests/test_aot_ported.py`` runs every case through ``collect_metadata`` (vs torch's
``run_functionalized_fw_and_collect_metadata``), ``aot_function`` (vs eager, each case
called twice) and ``md.compile(backend="aot_eager")`` (vs ``torch.compile(backend="aot_eager")``).
The themed modules: ``aot_functionalization`` (holds the registry) and ``aot_dynamo_tests``.
"""

from __future__ import annotations

from . import aot_dynamo_tests, aot_functionalization  # noqa: F401
from .aot_functionalization import PORTED_CASES, TORCH_TEST
from .aot_testing import AOTCase

__all__ = ["PORTED_CASES", "PORTED_BY_NAME", "TORCH_TEST"]

PORTED_BY_NAME: dict[str, AOTCase] = {c.name: c for c in PORTED_CASES}
assert len(PORTED_BY_NAME) == len(PORTED_CASES), "duplicate case names"

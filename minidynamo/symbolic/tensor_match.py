"""The C++ TENSOR_MATCH (``tensor_match.cpp``): built on first use, or the reason it is not there.

Place in the pipeline: ``guards.py`` asks ``get()`` for the ``TensorMatch`` type when it
compiles a check function. The first call in a fresh environment compiles
``tensor_match.cpp`` with ``torch.utils.cpp_extension.load`` (about 30 s on two cores;
``python -m minidynamo tour`` does it as part of the install); later processes load the
cached build. Where it cannot be built (no C++ compiler, no ninja) or
``MINIDYNAMO_PYTHON_GUARDS=1`` is set, ``get()`` returns None, ``reason()`` says why, and
the check functions run the readable Python guards instead: slower, same answers.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional

_SOURCE = Path(__file__).with_name("tensor_match.cpp")
_state: dict[str, Any] = {}


def get() -> Optional[type]:
    """The ``TensorMatch`` type, building it the first time; None when unavailable (see ``reason()``)."""
    if "type" not in _state:
        _state["type"], _state["reason"] = _load()
    return _state["type"]


def reason() -> str:
    """Why the C++ guard is not used ("" when it is)."""
    get()
    return _state["reason"]


def _load() -> tuple[Optional[type], str]:
    if os.environ.get("MINIDYNAMO_PYTHON_GUARDS"):
        return None, "MINIDYNAMO_PYTHON_GUARDS is set"
    try:
        from torch.utils import cpp_extension

        with warnings.catch_warnings():  # compiler-version notes must not reach a notebook's stderr
            warnings.simplefilter("ignore")
            module = cpp_extension.load(
                name="minidynamo_tensor_match",
                sources=[str(_SOURCE)],
                extra_cflags=["-O2", "-w"],
                verbose=False,
            )
        return module.TensorMatch, ""
    except Exception as e:  # noqa: BLE001 - no compiler, no ninja, a build error: the Python guards still work
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"the C++ guard could not be built ({type(e).__name__}: {first[:200]})"


@contextlib.contextmanager
def python_guards() -> Iterator[None]:
    """Check functions built inside run the Python TENSOR_MATCH guards, as where the extension is missing."""
    saved = dict(_state)
    _state.update(type=None, reason="inside tensor_match.python_guards()")
    try:
        yield
    finally:
        _state.clear()
        _state.update(saved)

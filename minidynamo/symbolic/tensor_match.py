"""The C++ TENSOR_MATCH, GLOBAL_STATE, module layout and tuple-of-tensors guards (``tensor_match.cpp``): built on first use, or the reason not.

Place in the pipeline: ``guards.py`` asks ``get()`` for the ``TensorMatch`` type,
``global_state()`` for the ``GlobalState`` type and ``module_match()`` for the
``ModuleMatch`` type and ``items_match()`` for the ``ItemsMatch`` type when it compiles a check function. The first call in a fresh environment compiles
``tensor_match.cpp`` with ``torch.utils.cpp_extension.load`` (about 30 s on two cores;
``python -m minidynamo tour`` does it as part of the install) into
``~/.cache/minidynamo/<name>/`` (``MINIDYNAMO_CACHE`` moves it), the name carrying a hash
of the source, torch's version and Python's, so a changed file is a new build. Later
processes import that build directly. Where it cannot be built (no C++ compiler, no
ninja) or ``MINIDYNAMO_PYTHON_GUARDS=1`` is set, ``get()`` returns None, ``reason()`` says
why, and the check functions run the readable Python guards instead: slower, same answers.
Mirrors ``torch/csrc/dynamo/guards.cpp`` (``TensorCheck``, ``GlobalStateGuard``, the
``GuardManager`` leaves) and its build through ``torch/utils/cpp_extension.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional

_SOURCE = Path(__file__).with_name("tensor_match.cpp")
_state: dict[str, Any] = {}
_STALE_LOCK_S = 600  # a build takes ~30 s; a lock this old was left by a build that died


def get() -> Optional[type]:
    """The ``TensorMatch`` type, building it the first time; None when unavailable (see ``reason()``)."""
    if "type" not in _state:
        module, _state["reason"] = _load()
        _state["type"] = getattr(module, "TensorMatch", None)
        _state["global_state"] = getattr(module, "GlobalState", None)
        _state["module_match"] = getattr(module, "ModuleMatch", None)
        _state["no_aliasing"] = getattr(module, "no_aliasing", None)
        _state["items_match"] = getattr(module, "ItemsMatch", None)
    return _state["type"]


def global_state() -> Optional[type]:
    """The ``GlobalState`` type (Note [Global state is one guard]); None where the extension is missing."""
    get()
    return _state.get("global_state")


def module_match() -> Optional[type]:
    """The ``ModuleMatch`` type (Note [A module's layout is one C++ call]); None where the extension is missing."""
    get()
    return _state.get("module_match")


def no_aliasing() -> Optional[Any]:
    """``no_aliasing(n_written, *tensors)`` (Note [Distinct tensors stay distinct]); None where missing."""
    get()
    return _state.get("no_aliasing")


def items_match() -> Optional[type]:
    """The ``ItemsMatch`` type (Note [A sequence of tensors is one C++ call]); None where the extension is missing."""
    get()
    return _state.get("items_match")


def reason() -> str:
    """Why the C++ guard is not used ("" when it is)."""
    get()
    return _state["reason"]


@contextlib.contextmanager
def python_guards() -> Iterator[None]:
    """Check functions built inside run the Python TENSOR_MATCH guards, as where the extension is missing."""
    saved = dict(_state)
    _state.update(type=None, global_state=None, module_match=None, no_aliasing=None, items_match=None,
                  reason="inside tensor_match.python_guards()")
    try:
        yield
    finally:
        _state.clear()
        _state.update(saved)


def build_location() -> tuple[str, Path]:
    """The extension's module name and build folder."""
    import torch

    digest = hashlib.sha256(_SOURCE.read_bytes())
    digest.update(f"{torch.__version__} {sys.version} {sys.platform}".encode())
    name = f"minidynamo_tensor_match_{digest.hexdigest()[:12]}"
    root = Path(os.environ.get("MINIDYNAMO_CACHE") or Path.home() / ".cache" / "minidynamo").expanduser()
    return name, root / name


def _load() -> tuple[Any, str]:
    if os.environ.get("MINIDYNAMO_PYTHON_GUARDS"):
        return None, "MINIDYNAMO_PYTHON_GUARDS is set"
    try:
        name, folder = build_location()
        built, lock = folder / f"{name}.so", folder / "lock"  # the lock is cpp_extension's, held while it builds
        if built.exists() and not lock.exists():  # built before, and no build running now
            spec = importlib.util.spec_from_file_location(name, built)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module, ""
        from torch.utils import cpp_extension

        # a build killed midway leaves its lock, and the next build would wait on it for ever
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK_S:
            lock.unlink(missing_ok=True)
        folder.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():  # compiler-version notes must not reach a notebook's stderr
            warnings.simplefilter("ignore")
            module = cpp_extension.load(name=name, sources=[str(_SOURCE)], build_directory=str(folder),
                                        extra_cflags=["-O2", "-w"], verbose=False)
        return module, ""
    except Exception as e:  # noqa: BLE001 - no compiler, no ninja, a build error: the Python guards still work
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"the C++ guard could not be built ({type(e).__name__}: {first[:200]})"

"""Lazy package exports: a name's module is imported the first time the name is used.

``minidynamo.aot`` and ``minidynamo.widgets`` use it so that importing the package
loads neither functionalization nor ipywidgets until a chapter asks for them.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], list[str]]:
    """``(__getattr__, __all__)`` for ``package``, where ``exports`` maps a name to its submodule."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__, sorted(exports)

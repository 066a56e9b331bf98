"""Which code is "library code": run natively, never traced into a frame of its own, its globals unguarded.

Place in the pipeline: the one definition that the concrete interpreter (which calls
to interpret, ``interpreter/ceval.py``), the cache (which frames a graph break routes
through the compiler, ``symbolic/eval_frame.py``) and the symbolic interpreter (whose
module attributes and globals get guards) all use. Mirrors
``torch/_dynamo/trace_rules.py`` (``check_file``, ``BUILTIN_SKIPLIST``,
``THIRDPARTY_SKIPLIST``, ``is_torch_inline_allowed``), much smaller.

Note [Library code is the stdlib, torch, and a short skip list]
    As in torch, library code is the standard library, torch itself, and a few
    third-party packages whose code Dynamo never traces (numpy, hypothesis, ...).
    Every other file is user code, including installed packages such as
    transformers or timm: Dynamo traces those, and so do we. Library globals and
    module attributes (``torch.nn.functional.relu``, ``math.pi``) are read as
    constants without a guard: the trace assumes nobody reassigns them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import sysconfig
import types

# torch/_dynamo/trace_rules.py THIRDPARTY_SKIPLIST (the packages of it that are commonly installed), and the
# tools around the user's code (test runners, notebook kernels), never traced or compiled
THIRDPARTY_SKIPLIST = (
    "numpy", "hypothesis", "networkx", "onnx", "onnxruntime", "pandas", "sklearn", "tabulate", "tqdm", "tree",
    "sympy", "matplotlib", "typing_extensions",
    "_pytest", "pytest", "pluggy", "xdist", "execnet", "nbval", "coverage", "IPython", "ipykernel", "ipywidgets",
    "jupyter_client", "traitlets", "tornado", "zmq", "comm", "debugpy", "_distutils_hack", "setuptools",
    "pkg_resources", "jupyter_core", "jupyter_server", "nbformat", "nbclient", "dateutil", "psutil", "platformdirs",
    "prompt_toolkit", "pygments", "decorator", "executing", "stack_data", "asttokens", "pexpect", "parso", "jedi",
    "wcwidth", "packaging",
)


@functools.lru_cache(None)
def _site_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.join(paths[key], "") for key in ("purelib", "platlib")})


@functools.lru_cache(None)
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({os.path.join(paths[key], "") for key in ("stdlib", "platstdlib")})


@functools.lru_cache(None)
def library_dirs() -> tuple[str, ...]:
    """The folders of library code outside the stdlib (Note [Library code is the stdlib, torch, ...])."""
    dirs = set()
    for name in ("torch", *THIRDPARTY_SKIPLIST):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or ()) if spec is not None else ():
            dirs.add(os.path.join(location, ""))
        if spec is not None and spec.origin and not spec.submodule_search_locations:
            dirs.add(spec.origin)  # a single-file module (typing_extensions.py)
    return tuple(sorted(dirs))


@functools.lru_cache(4096)
def is_library_file(filename: str) -> bool:
    """True for a file of the stdlib, of torch, or of a skip-listed package; False for user code."""
    if not filename or filename.startswith("<"):
        return filename.startswith("<frozen")  # "<frozen importlib._bootstrap>" is stdlib; "<string>" is user code
    if filename.startswith(library_dirs()):
        return True
    if filename.startswith(_site_dirs()):
        return False  # an installed package not on the skip list (site-packages may lie inside the stdlib's folder)
    return filename.startswith(_stdlib_dirs())


def is_library_function(fn) -> bool:
    return isinstance(fn, types.FunctionType) and is_library_file(fn.__code__.co_filename)


def is_library_module(module: types.ModuleType) -> bool:
    """torch, the stdlib, a skip-listed package (or a builtin module, which has no file)."""
    filename = getattr(module, "__file__", None)
    if filename is None:
        return module.__name__ in sys.builtin_module_names or module.__name__.split(".")[0] in sys.stdlib_module_names
    return is_library_file(filename)

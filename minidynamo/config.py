"""``minidynamo.config``: the flags of our Dynamo, with ``torch._dynamo.config``'s names and defaults.

Place in the pipeline: read by every stage when it decides something a user can change
(the cache, automatic dynamic, what ``.item()`` does); set by the user, never by a stage.
Mirrors ``torch/_dynamo/config.py`` (the flags) and ``torch/utils/_config_module.py``
(``install_config_module``: ``patch`` as a context manager and a decorator, an unknown
name refused by name). Only the flags the rebuild honours are here; each docstring line
names where torch reads the same flag.

    >>> import minidynamo as md
    >>> md.config.recompile_limit
    8
    >>> with md.config.patch(recompile_limit=2):
    ...     md.config.recompile_limit
    2

Note [Our config is a module of plain attributes]
    torch's config module is a ``ConfigModule`` subclass installed over the module, with
    typed entries, environment overrides, and pickling for compile workers. Ours is a
    plain module whose ``patch`` and ``__setattr__`` checks refuse unknown names the way
    torch's do (``AttributeError: minidynamo.config.X does not exist``); the rest of
    torch's machinery serves its compile workers, which we do not have.
"""

from __future__ import annotations

import contextlib
import sys
import types
import warnings

# -- the cache and recompiles (torch/_dynamo/config.py; read in torch/_dynamo/cache_size.py) --

#: Compiled entries one code object (per ID-matched object) may have before its frame
#: becomes run-only (``cache_size.py``: ``exceeds_recompile_limit``).
recompile_limit: int = 8
#: Entries a code object may have over all ID-matched objects (``cache_size.py``).
accumulated_recompile_limit: int = 256
#: An internal error while tracing: warn and run eagerly (True), or raise (False).
#: torch's default is False (``convert_frame.py``: ``ConvertFrame.__call__``); ours is True so a
#: learner's notebook keeps running, and the warning says what happened.
suppress_errors: bool = True
#: Raise instead of recompiling (``convert_frame.py``: ``_compile``'s ``is_recompilation``).
error_on_recompile: bool = False

# -- dynamic shapes (torch/_dynamo/config.py; read in variables/builder.py, automatic_dynamic) --

#: A size that changes between calls is made symbolic on the recompile (``pgo.py``: frame state).
automatic_dynamic_shapes: bool = True
#: Sizes start static unless marked or seen to change (``variables/builder.py``).
assume_static_by_default: bool = True
#: An int argument is a constant of the graph (True) or a symbol once it changes (False).
specialize_int: bool = False
#: A float argument is a constant of the graph (True) or a graph input once it changes (False).
specialize_float: bool = False
#: Parameters' sizes stay static even under ``dynamic=True`` (``variables/builder.py``).
force_parameter_static_shapes: bool = True
#: An nn.Module's sizes read as properties stay static (``variables/builder.py``).
force_nn_module_property_static_shapes: bool = True
#: ints that are nn.Module attributes stay constants (``variables/builder.py``).
allow_unspec_int_on_nn_module: bool = False

# -- modules (torch/_dynamo/config.py) --

# ``inline_inbuilt_nn_modules``: see _DEPRECATED below (Note [A deprecated flag does nothing]).

# -- values that decide (torch/_dynamo/config.py; read in variables/tensor.py) --

#: ``.item()`` gives an unbacked SymInt/SymFloat in the graph instead of a graph break.
capture_scalar_outputs: bool = False
#: ``nonzero`` and friends give tensors of unbacked size in the graph instead of a break.
capture_dynamic_output_shape_ops: bool = False
#: ``assert t`` on a tensor becomes ``torch._assert_async(t, msg)`` in the graph instead of a
#: data-dependent break (torch/_dynamo/config.py; symbolic_convert.py ``generic_jump``).
rewrite_assert_with_torch_assert: bool = True

# -- NumPy in a traced frame (torch/_dynamo/config.py; read in symbolic/variables/numpy.py) --

#: ``Tensor.numpy()``, ``np.*`` calls and ndarray arguments are traced into the graph through
#: ``torch._numpy`` (torch's NumPy on tensors) instead of breaking the graph.
trace_numpy: bool = True
#: ``np.random.*`` in a trace breaks the graph (runs NumPy's own generator eagerly) instead of
#: drawing from torch's generator in the graph (torch/_dynamo/variables/misc.py ``NumpyVariable``).
use_numpy_random_stream: bool = False

# Note [A deprecated flag does nothing]
#     torch 2.13 keeps ``inline_inbuilt_nn_modules`` as a deprecated ``Config`` entry
#     (``torch/_dynamo/config.py``: ``deprecated=True``, "does not do anything,
#     inline_inbuilt_nn_modules is always True"): it can be read, set and patched, reads
#     back what was set, and the first read or write warns once (``FutureWarning``,
#     ``torch/utils/_config_module.py``: ``_warn_if_deprecated``); tracing never reads it,
#     so ordinary nn.Modules are always inlined (parameters and buffers graph inputs, the
#     module TYPE_MATCHed, instances of one class sharing entries). Ours the same.
_DEPRECATED = {
    "inline_inbuilt_nn_modules": [True, "does not do anything, inline_inbuilt_nn_modules is always True"],
}
_deprecation_warned: set = set()

# Note [An alias reads and writes its target]
#     torch 2.13 renamed ``cache_size_limit`` to ``recompile_limit`` and keeps the old names as
#     ``Config(alias="torch._dynamo.config.recompile_limit")`` (torch/_dynamo/config.py): reading
#     the alias reads the target, setting or patching it sets the target. Learners' notebooks
#     set ``cache_size_limit``; ours takes it the same way.
_ALIASES = {"cache_size_limit": "recompile_limit", "accumulated_cache_size_limit": "accumulated_recompile_limit"}

_NAMES = frozenset([name for name in dir() if not name.startswith("_") and name not in {
    "annotations", "contextlib", "sys", "types", "warnings"}] + list(_DEPRECATED) + list(_ALIASES))


def _warn_if_deprecated(name: str) -> None:
    if name not in _deprecation_warned:
        _deprecation_warned.add(name)
        warnings.warn(f"{__name__}.{name} is deprecated and {_DEPRECATED[name][1]}. It will be removed in a "
                      "future version of PyTorch.", FutureWarning, stacklevel=3)  # torch's words


class _ConfigModule(types.ModuleType):
    """This module's class: an unknown name is refused when it is set, as torch's ``ConfigModule``."""

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in _NAMES:
            raise AttributeError(f"{self.__name__}.{name} does not exist")
        if name in _DEPRECATED:  # Note [A deprecated flag does nothing]
            _warn_if_deprecated(name)
            _DEPRECATED[name][0] = value
            return
        super().__setattr__(_ALIASES.get(name, name), value)  # Note [An alias reads and writes its target]

    def __getattr__(self, name):  # only reached when ``name`` is not there
        if name in _DEPRECATED:
            _warn_if_deprecated(name)
            return _DEPRECATED[name][0]
        if name in _ALIASES:
            return getattr(self, _ALIASES[name])
        raise AttributeError(f"{self.__name__}.{name} does not exist")


def _check(changes: dict) -> None:
    for name in changes:
        if name not in _NAMES:
            raise AttributeError(f"{__name__}.{name} does not exist")


def patch(arg=None, value=None, /, **changes):
    """Set flags for a ``with`` block or a decorated function, as ``torch._dynamo.config.patch``.

    ``patch(recompile_limit=2)``, ``patch("recompile_limit", 2)`` or ``patch({"recompile_limit": 2})``.
    """
    if isinstance(arg, str):
        changes = {arg: value, **changes}
    elif isinstance(arg, dict):
        changes = {**arg, **changes}
    _check(changes)
    return _Patch(changes)


class _Patch(contextlib.ContextDecorator):
    def __init__(self, changes: dict):
        self.changes, self.saved = changes, []

    def __enter__(self):
        module = sys.modules[__name__]
        self.saved.append({name: getattr(module, name) for name in self.changes})
        for name, value in self.changes.items():
            setattr(module, name, value)
        return self

    def __exit__(self, *exc):
        module = sys.modules[__name__]
        for name, value in self.saved.pop().items():
            setattr(module, name, value)
        return False

    def __call__(self, fn):
        if isinstance(fn, type):  # a class: patch around each of its test methods, as torch's
            for name, attr in list(vars(fn).items()):
                if name.startswith("test") and callable(attr):
                    setattr(fn, name, self.__class__(self.changes)(attr))
            return fn
        return super().__call__(fn)  # ContextDecorator wraps with functools.wraps itself


def get_config_copy() -> dict:
    """Every flag and its value now (``torch._dynamo.config.get_config_copy``)."""
    module = sys.modules[__name__]
    return {name: _DEPRECATED[name][0] if name in _DEPRECATED else getattr(module, name) for name in sorted(_NAMES - set(_ALIASES))}


sys.modules[__name__].__class__ = _ConfigModule

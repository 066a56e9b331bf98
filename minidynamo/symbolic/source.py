"""Sources: where a traced value came from, as a Python expression over ``L`` and ``G``.

Place in the pipeline: inside ``minidynamo.symbolic``; guards and graph inputs are
written in terms of sources. Mirrors ``torch/_dynamo/source.py``.

Note [Sources are expressions]
    A source prints as the Python expression that fetches the value again from the
    frame: ``L['x']`` (a local or argument), ``G['scale']`` (a global),
    ``L['cfg'].eps`` (an attribute chain), ``L['xs'][0]`` (an item). ``L`` is
    the dict of the frame's locals (arguments and closure values), ``G`` the function's
    globals. Guards and the transformed function are plain Python over these names,
    so what the reader sees is exactly what runs.

Note [A module's member is an item of its table]
    ``self.fc.weight`` in a forward is no attribute of the module object: Python finds
    nothing in the instance ``__dict__`` or the class and calls ``Module.__getattr__``,
    which looks in ``_parameters``, ``_buffers`` and ``_modules``. Torch's Dynamo reads
    those tables itself (``UnspecializedNNModuleVariable.manually_trace_nn_module_getattr``
    in torch/_dynamo/variables/nn_module.py, a ``DictGetItemSource`` over
    ``AttrSource(module, "_modules")``), so its guards, recompile reasons and graph
    inputs say ``L['self']._modules['fc']._parameters['weight']``. Ours spells the
    same: an ``AttrSource`` or ``GetItemSource`` that knows the table it was found in
    prints as that table's item (``variables/nn_module.py`` sets ``table``), and a
    placeholder is named after the same text (``L_self_modules_fc_parameters_weight_``,
    as torch's ``SubgraphTracer.create_graph_input`` names it). ``table`` is not
    compared: ``self.fc`` read either way is one source, one guard and one graph input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


_compiled: dict[str, Any] = {}  # expression text -> its code object (Source.get)


class Source:
    """Base class: ``name()`` is a Python expression over ``L`` and ``G``.

    Note [A source's name is computed once]
        A guard, a graph input and the side-effect table each ask a source for its
        name, and ``L['self'].layer1[0].bn1.weight`` asks its bases in turn: tens of
        thousands of f-strings for a ResNet. Sources are frozen dataclasses, so a
        subclass's ``name()`` is remembered on the instance (outside the fields:
        equality and hashing are unchanged) when every field is a string, an int or
        a source whose own name is remembered; an item source with any other key
        (its ``repr`` is computed again each time) is never remembered.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        compute = cls.__dict__.get("name")
        if compute is None:
            return

        def name(self) -> str:
            d = self.__dict__
            text = d.get("_name")
            if text is None:
                text = compute(self)
                if self._stable():
                    d["_name"] = text  # frozen dataclass: bypass __setattr__ (Note [A source's name is computed once])
            return text

        name.__doc__, name.__qualname__ = compute.__doc__, compute.__qualname__
        cls.name = name

    def _stable(self) -> bool:
        """Every field a str, an int or a stable source: the name cannot change."""
        d = self.__dict__
        stable = d.get("_stable_")
        if stable is None:
            stable = all(type(v) in (str, int) or (isinstance(v, Source) and v._stable())
                         for k, v in d.items() if not k.startswith("_"))
            d["_stable_"] = stable
        return stable

    def name(self) -> str:
        raise NotImplementedError

    def get(self, L: dict, G: dict) -> Any:
        """Evaluate the expression on a frame (used when wrapping values)."""
        expr = self.name()
        code = _compiled.get(expr)
        if code is None:  # compiled once per expression text (eval of a str compiles it every time)
            if len(_compiled) >= 10_000:
                _compiled.clear()
            code = _compiled[expr] = compile(expr, "<string>", "eval")
        return eval(code, {"L": L, "G": G})

    def fx_name(self) -> str:
        """The placeholder's target in the fx graph: L['x'] -> L_x_ (Note [A placeholder is named after its source])."""
        return re.sub(r"[^a-zA-Z0-9]+", "_", self.name())

    def __str__(self) -> str:
        return self.name()

    def __repr__(self) -> str:
        return self.name()

    def bases(self):
        """The sources this one is read through, nearest first (``L['m'].fc`` -> ``L['m']``)."""
        base = getattr(self, "base", None)
        while isinstance(base, Source):
            yield base
            base = getattr(base, "base", None)


@dataclass(frozen=True, repr=False)
class LocalSource(Source):
    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"


@dataclass(frozen=True, repr=False)
class GlobalSource(Source):
    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"


@dataclass(frozen=True, repr=False)
class ModuleSource(Source):
    """A Python module by name: ``sys.modules['helpers']``.

    The globals of a function inlined from another module are read through it
    (``sys.modules['helpers'].__dict__['SCALE']``), so they are guarded as the
    root frame's ``G[...]`` are. Guards and transformed functions have ``sys`` in scope.
    """

    module_name: str

    def name(self) -> str:
        return f"sys.modules[{self.module_name!r}]"

    def get(self, L: dict, G: dict) -> Any:
        import sys

        return sys.modules[self.module_name]


@dataclass(frozen=True, repr=False)
class AttrSource(Source):
    """``base.member``; ``table`` names the nn.Module dict it was found in (``_parameters``,
    ``_buffers``, ``_modules``), and then the source is that dict's item, as torch's
    (Note [A module's member is an item of its table])."""

    base: Source
    member: str
    table: str = field(default="", compare=False)

    def name(self) -> str:
        if self.table:
            return f"{self.base.name()}.{self.table}[{self.member!r}]"
        if self.member.isidentifier():
            return f"{self.base.name()}.{self.member}"
        return f"getattr({self.base.name()}, {self.member!r})"


@dataclass(frozen=True, repr=False)
class GetItemSource(Source):
    """``base[index]``; ``table`` as AttrSource's: an item of an nn.ModuleList, Sequential or
    ParameterList is ``base._modules['0']``, as torch's (Note [A module's member is an item of its table])."""

    base: Source
    index: Any
    table: str = field(default="", compare=False)

    def name(self) -> str:
        if self.table:
            return f"{self.base.name()}.{self.table}[{str(self.index)!r}]"
        return f"{self.base.name()}[{self.index!r}]"


@dataclass(frozen=True, repr=False)
class DictGetItemSource(Source):
    """An entry of a dict subclass read as ``dict.__getitem__`` reads it, past the subclass's own
    ``__getitem__`` (torch's ``DictGetItemSource``, whose guard accessor calls ``PyDict_GetItem``)."""

    base: Source
    index: Any

    def name(self) -> str:
        return f"dict.__getitem__({self.base.name()}, {self.index!r})"


@dataclass(frozen=True, repr=False)
class DictGetItemByKeyIndexSource(Source):
    """The value under a dict's ``index``-th key, a key that is no literal (a class, ``typing.Union``):
    ``G['d'][list(G['d'])[3]]``, torch's ``DictGetItemSource`` over a ``ConstDictKeySource``."""

    base: Source
    index: int

    def name(self) -> str:
        return f"{self.base.name()}[list({self.base.name()})[{self.index}]]"


@dataclass(frozen=True, repr=False)
class ClosureSource(Source):
    """A cell of a function's closure: ``G['f'].__closure__[0].cell_contents``."""

    base: Source
    index: int

    def name(self) -> str:
        return f"{self.base.name()}.__closure__[{self.index}].cell_contents"


@dataclass(frozen=True, repr=False)
class SizeSource(Source):
    """``L['x'].size()[0]``: one size of a tensor input (torch's ``TensorPropertySource``)."""

    base: Source
    dim: int

    def name(self) -> str:
        return f"{self.base.name()}.size()[{self.dim}]"


@dataclass(frozen=True, repr=False)
class TensorPropertySource(Source):
    """``L['x'].stride()[1]`` or ``L['x'].storage_offset()`` (torch's ``TensorPropertySource``)."""

    base: Source
    prop: str  # "stride" or "storage_offset"
    index: int = -1

    def name(self) -> str:
        if self.prop == "storage_offset":
            return f"{self.base.name()}.storage_offset()"
        return f"{self.base.name()}.{self.prop}()[{self.index}]"


@dataclass(frozen=True, repr=False)
class FloatTensorSource(Source):
    """``torch.tensor(L['scale'], dtype=torch.float64)``: a float input passed to the graph as a 0-d
    tensor (torch's ``FloatTensorSource``, Note [A float input is lifted once it changes] in
    dynamic_shapes.py). Only the graph call reads it; guards are on ``base``, the float."""

    base: Source

    def name(self) -> str:
        return f"torch.tensor({self.base.name()}, dtype=torch.float64)"

    def fx_name(self) -> str:
        return self.base.fx_name()

    def get(self, L: dict, G: dict) -> Any:
        import torch

        return torch.tensor(self.base.get(L, G), dtype=torch.float64)


@dataclass(frozen=True, repr=False)
class RandomValueSource(Source):
    """``___random_values[0]``: the value of the trace's first ``random`` call, drawn again on each run of
    the transformed function before the graph (torch's ``RandomValueSource``, Note [A random number is a
    graph input] in variables/misc.py)."""

    random_call_index: int

    def name(self) -> str:
        return f"___random_values[{self.random_call_index}]"

    def fx_name(self) -> str:
        return f"random_value_{self.random_call_index}"


@dataclass(frozen=True, repr=False)
class AsTensorSource(Source):
    """``torch.as_tensor(base)``: a Python number passed to the graph as a 0-d tensor (torch's
    ``GraphArg.pass_arg_as_tensor``, torch/_dynamo/variables/builder.py)."""

    base: Source

    def name(self) -> str:
        return f"torch.as_tensor({self.base.name()})"

    def fx_name(self) -> str:
        return self.base.fx_name()


@dataclass(frozen=True, repr=False)
class NumpyTensorSource(Source):
    """``torch.as_tensor(L['a'])``: an ndarray argument as the tensor the graph takes (torch's
    ``NumpyTensorSource``, whose name is ``___from_numpy(L['a'])``; variables/numpy.py). The tensor
    shares the array's memory; its guards are a tensor's, on this expression. A read-only array
    is copied (``torch.tensor(L['a'])``), as torch clones it: a tensor cannot share read-only memory."""

    base: Source
    copy: bool = False

    def name(self) -> str:
        return f"torch.{'tensor' if self.copy else 'as_tensor'}({self.base.name()})"

    def fx_name(self) -> str:
        return self.base.fx_name()

    def get(self, L: dict, G: dict) -> Any:
        import torch

        return (torch.tensor if self.copy else torch.as_tensor)(self.base.get(L, G))


def globals_source_for(fn_globals: dict, code, fn_source: Any = None) -> Any:
    """Where an inlined function's globals are read from, when they are not the root frame's ``G``.

    Note [Every module's globals are guarded]
        A method defined in ``helpers.py`` reads ``helpers.SCALE``; the trace folds
        it, so it must be guarded like a global of the compiled function. Its
        source is its module, ``sys.modules['helpers'].__dict__['SCALE']``, whatever
        way the function was reached (a method, a property, a hook); a function with
        a source and globals of no module gives ``<fn>.__globals__['SCALE']``.
        Library code (``minidynamo.trace_rules``) returns False: its globals
        (``F``, ``math``) are read as constants, without guards.
    """
    from minidynamo.trace_rules import is_library_file

    if is_library_file(code.co_filename):
        return False
    import sys

    name = fn_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is not None and getattr(module, "__dict__", None) is fn_globals:
        return AttrSource(ModuleSource(name), "__dict__")
    if fn_source is not None:
        return AttrSource(fn_source, "__globals__")
    return False  # no way to reach them again: read as constants

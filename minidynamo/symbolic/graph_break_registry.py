"""Graph-break types: which entry of torch's registry each of our graph breaks names.

Place in the pipeline: inside ``minidynamo.symbolic``, beside ``exc.py``: every
``unimplemented(...)`` names the kind of break by the id torch gives it. Mirrors
``torch/_dynamo/graph_break_registry.json`` (read from the installed torch) and the
readers of it in ``torch/_dynamo/exc.py`` (``_load_gb_type_to_gb_id_map``,
``get_gbid_documentation_link``, ``format_graph_break_message``).

Note [Graph-break types come from torch's registry]
    torch 2.13 raises every graph break through ``unimplemented(gb_type=...,
    context=..., explanation=..., hints=...)``, and ships a registry that gives each
    ``gb_type`` a stable id (``GB0059``) and a page on the graph-break site. A break of
    ours names the same id torch reports for the same program, and its words
    (``gb_type``) are read from the installed torch's file at run time, never copied
    here: a reader sees torch's name for the break, and can look it up. Our own
    explanation says what happened in this program; class names of ours
    (``ConstantVariable``...) go in the developer context only, as torch's do. A torch
    without the registry (or an id it dropped) shows our explanation alone.
"""

from __future__ import annotations

from typing import Optional

from minidynamo._torch_private import graph_break_registry

# Our names for the registry ids our breaks use (the words are torch's, read at run time).
BUILTIN_OPERATOR = "GB0059"      # a builtin (print, open, str...) on values it cannot trace
SKIPPED_FUNCTION = "GB0007"
INVALID_BUILTIN_CALL = "GB0193"  # a builtin's handler cannot take these arguments (max(..., key=f))
BUILD_CLASS = "GB8977"       # a class statement inside the compiled function (LOAD_BUILD_CLASS, then its call)
COMPILER_DISABLED = "GB0098"  # a call of a function wrapped with torch.compiler.disable      # a C function or a function torch's trace rules skip
GRAPH_BREAK_CALL = "GB0025"      # torch._dynamo.graph_break()
DATA_DEPENDENT_BRANCH = "GB0170"
ITEM = "GB0124"                  # Tensor.item() (and int()/float() of a tensor)
TOLIST = "GB0109"
NUMPY = "GB0105"
DYNAMIC_SHAPE_OPERATOR = "GB0036"
DATA_DEPENDENT_OPERATOR = "GB0033"
NO_FAKE_KERNEL = "GB0090"
BACKWARD = "GB0123"
REPR_TENSOR = "GB0569"
LOGGER_METHOD = "GB0291"
UNSUPPORTED_METHOD = "GB0156"
UNSUPPORTED_FUNCTION = "GB0147"
CONTEXT_MANAGER = "GB0142"
NON_GENERATOR_CONTEXTMANAGER = "GB0221"  # @contextlib.contextmanager on a function without yield
MISSING_BYTECODE = "GB0082"
NOT_A_CONSTANT = "GB0086"
RECONSTRUCTION = "GB0092"
UNDEFINED_LOCAL = "GB0011"
UNINITIALIZED_CELL = "GB0091"
IMMUTABLE_CELL = "GB0169"
UNDEFINED_NAME = "GB0354"
KEY_NOT_FOUND = "GB0196"
OBSERVED_EXCEPTION = "GB0088"
NEXT = "GB0160"
ID = "GB0191"
INSPECT = "GB0151"
SUPER = "GB0113"
EXCEPTION_KWARGS = "GB0273"       # ValueError(msg=...): keyword args to a builtin exception
SUPER_ATTRIBUTE = "GB0006"         # super().name that is not a function (BaseException.__init__)
DEEPCOPY = "GB0179"
SETATTR = "GB0467"
TENSOR_SETATTR = "GB0058"
UNPACK = "GB0063"
UNPACK_LENGTH = "GB0077"
HASATTR = "GB0150"
CALL_INTRINSIC_1 = "GB0079"
INDEX_LIST_WITH_TENSOR = "GB0070"
FAKE_TENSOR_ERROR = "GB0064"
BUILD_STRING = "GB0021"
MODULE_ATTRIBUTE = "GB0161"
UNINITIALIZED_MODULE = "GB0119"
MODULE_BACKWARD_HOOKS = "GB0083"
TENSOR_SUBCLASS = "GB0163"
SPARSE_TENSOR = "GB0015"
SOURCELESS = "GB0116"
ISINSTANCE = "GB0175"
NEXT_UNIMPLEMENTED = "GB0118"
GETATTR_NONCONST = "GB0190"
RESTARTS = "GB0052"
FAKE_ID = "GB4501"               # an id() of a value made in the trace, needed after the break
DEEPCOPY_TENSOR = "GB4198"       # copy.deepcopy reaching Tensor.__deepcopy__
SORT_NON_CONSTANT_KEYS = "GB0207"
REQUIRES_GRAD_LEAK = "GB8985"    # requires_grad_() on an intermediate that is returned
SET_DATA = "GB0056"              # y.data = ... on a tensor made in the trace
PYTHON_TYPE = "GB4841"           # an object with no python_type() (a logger's data attribute)
GENERATOR = "GB0003"             # a generator (or its yield) outside an inlined call
INLINE_SKIPPED = "GB0008"        # a function torch will not inline (a coroutine, recursion too deep)
DICT_KEYS_NONCONST = "GB0203"    # a dict whose keys are not constants
NESTED_CLOSURE = "GB9528"        # a nested function with a closure that cannot be rebuilt
COND_ARGS = "GB0309"             # torch.cond with other than pred, true_fn, false_fn, operands
COND_PRED = "GB0310"
HOP_NOT_CALLABLE = "GB0302"      # a higher-order op given a non-callable
HOP_NON_TENSOR_LEAF = "GB0301"   # a higher-order op's operand that is not a tensor (a while_loop carry)
DUNDER_INLINE = "GB0131"         # __setattr__/__delattr__ of a class that overrides them
HASATTR_TYPE = "GB9522"          # hasattr() on a type we do not look into
MODULE_GETITEM_KEY = "GB0153"    # a module container indexed by a non-constant
MODULE_NO_SOURCE = "GB0188"      # an nn.Module reached without a source
MODULE_NONCONST_ARG = "GB0202"   # an nn.Module method with non-constant arguments
SUPER_INIT = "GB0162"            # nn.Module.__init__ that cannot be traced
NAMEDTUPLE_CONSTRUCT = "GB0201"  # constructing a namedtuple/ModelOutput with these inputs
DICT_ACCESS = "GB6999"           # __dict__ of an object we cannot read
DICT_KEY_NONSTRING = "GB5849"    # a __dict__ update with a non-constant key


def gb_entry(gb_id: str) -> Optional[dict]:
    """The registry's newest entry for ``gb_id`` (Gb_type, Context, Explanation, Hints), or None."""
    entries = graph_break_registry().get(gb_id) if gb_id else None
    return entries[0] if entries else None


def gb_type(gb_id: str) -> Optional[str]:
    """torch's ``gb_type`` for ``gb_id``: the first line torch prints for such a break."""
    entry = gb_entry(gb_id)
    return entry["Gb_type"] if entry else None


def gb_id_of(gb_type_text: str) -> Optional[str]:
    """The id of a ``gb_type`` (torch/_dynamo/exc.py ``_load_gb_type_to_gb_id_map``: historical wordings too)."""
    for gb_id, entries in graph_break_registry().items():
        if any(e["Gb_type"] == gb_type_text for e in entries):
            return gb_id
    return None


def documentation_link(gb_id: str) -> Optional[str]:
    """torch/_dynamo/exc.py ``get_gbid_documentation_link``: the break's page on the graph-break site."""
    if gb_entry(gb_id) is None:
        return None
    return f"https://meta-pytorch.github.io/compile-graph-break-site/gb/gb{gb_id.lstrip('GB')}.html"

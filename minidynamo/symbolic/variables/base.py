"""VariableTracker: what the symbolic interpreter keeps on its stack instead of real values.

Place in the pipeline: every slot of the symbolic stack and every local of a traced
frame holds a VariableTracker. Mirrors ``torch/_dynamo/variables/base.py``.

Note [The VariableTracker interface]
    A VariableTracker answers the questions bytecode asks of a value:
    ``as_python_constant`` (is it known now?), ``as_proxy`` (what fx value stands for it
    in the graph), ``var_getattr`` (``LOAD_ATTR``), ``call_function`` (``CALL``),
    ``call_method`` (``LOAD_METHOD`` + ``CALL``), ``unpack_var_sequence`` (iteration,
    unpacking) and ``reconstruct`` (how to rebuild the real value after the graph has
    run: the Python expression the transformed function evaluates). ``source`` says
    where the value came from, if it came from the frame's inputs (Note [Sources are
    expressions]). Trackers are treated as immutable, except the items of a list or
    dict, which are mutated in place and recorded in SideEffects, as modern Dynamo does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..exc import unimplemented
from .. import graph_break_registry as gb

if TYPE_CHECKING:
    from ..codegen import PyCodegen
    from ..source import Source


class VariableTracker:
    """Base class. Subclasses override what they support; the rest is a graph break."""

    def __init__(self, *, source: Optional["Source"] = None):
        self.source = source

    # --- what kind of value -------------------------------------------------
    def python_type(self) -> type:
        try:
            return type(self.as_python_constant())
        except Exception:  # noqa: BLE001
            unimplemented("the Python type of this value is unknown", gb_id="GB4841", context=f"python_type of {self}")

    def as_python_constant(self) -> Any:
        unimplemented("this value is not a Python constant", gb_id=gb.NOT_A_CONSTANT, context=f"{self}")

    def as_dict_key(self) -> Any:
        """The Python object this value is as a dict's key: its constant (a module's: itself, nn_module.py)."""
        return self.as_python_constant()

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
            return True
        except Exception:  # noqa: BLE001 - Unsupported or anything else: not a constant
            return False

    def as_proxy(self) -> Any:
        """The fx argument for this value (a Proxy, or a constant)."""
        return self.as_python_constant()

    # --- what bytecode asks ---------------------------------------------------
    def set_name_hint(self, name: str) -> None:
        """The local this value is stored in (``STORE_FAST``); only a tensor's node takes the name."""

    def var_getattr(self, tx, name: str) -> "VariableTracker":
        try:
            ptype = self.python_type()
        except Exception:  # noqa: BLE001
            ptype = None
        if ptype is not None and callable(getattr(ptype, name, None)):
            return GetAttrVariable(self, name)  # a method, called by the next CALL
        unimplemented(f"reading attribute {name!r} of this value", gb_id=gb.UNSUPPORTED_METHOD,
                      context=f"getattr({self}, {name!r})")

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        unimplemented("calling this value", gb_id=gb.UNSUPPORTED_FUNCTION, context=f"calling {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        if name == "__len__" and self.has_unpack_var_sequence(tx):
            return tx.wrap_constant_result(len(self.unpack_var_sequence(tx)))
        unimplemented(f"method {name}() of this value", gb_id=gb.UNSUPPORTED_METHOD, context=f"method {name} on {self}")

    def has_unpack_var_sequence(self, tx) -> bool:
        try:
            self.unpack_var_sequence(tx)
            return True
        except Exception:  # noqa: BLE001
            return False

    def unpack_var_sequence(self, tx) -> list["VariableTracker"]:
        unimplemented("iterating over this value", gb_id=gb.UNSUPPORTED_METHOD, context=f"iterating over {self}")

    def truth(self, tx) -> bool:
        """bool(value), for jumps; tensors override this to request a graph break."""
        try:
            return bool(self.as_python_constant())
        except Exception:  # noqa: BLE001
            unimplemented("the truth value of this object", gb_id="GB0035", context=f"truth value of {self}")

    # --- after the graph ------------------------------------------------------
    def reconstruct(self, codegen: "PyCodegen") -> str:
        """A Python expression that rebuilds the real value (Note [Reconstruct is an expression])."""
        if self.source is not None:
            return codegen.source_expr(self.source)
        unimplemented("a value the graph break needs cannot be rebuilt", gb_id=gb.RECONSTRUCTION,
                      context=f"cannot rebuild {self} after a graph break")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# Note [A method read off a value is a GetAttrVariable]: the base class's var_getattr makes
# one, so it lives beside it; every tracker below the builder can return it without an import
# climbing the layers (torch keeps it in torch/_dynamo/variables/misc.py).
class GetAttrVariable(VariableTracker):
    """``obj.name`` where name is a method not yet called (``x.add`` before ``(y)``)."""

    def __init__(self, obj: VariableTracker, name: str, **kwargs):
        super().__init__(**kwargs)
        self.obj = obj
        self.name = name

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.obj.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.obj)}.{self.name}"

    def __repr__(self) -> str:
        return f"GetAttrVariable({self.obj!r}, {self.name!r})"

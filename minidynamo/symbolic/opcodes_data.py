"""The data opcodes of the symbolic interpreter: operators, subscripts, containers, unpacking.

Place in the pipeline: part of ``InstructionTranslatorBase`` (``symbolic_convert.py``),
split out so each file reads in one sitting. Every handler pops trackers, asks them
(or ``call_operator``) for the result, and pushes a tracker: on constants that folds,
on tensors it adds graph nodes. Mirrors the same handlers in
``torch/_dynamo/symbolic_convert.py`` (``BINARY_OP``, ``COMPARE_OP``, ``BUILD_*``,
``UNPACK_SEQUENCE``, ``FORMAT_VALUE``...).
"""

from __future__ import annotations

import operator

import torch.fx

from .exc import unimplemented
from . import graph_break_registry as gb
from .variables.base import VariableTracker
from .variables.builtin import call_operator
from .variables.constant import ConstantVariable
from .variables.dicts import ConstDictVariable
from .variables.lists import ListVariable, SliceVariable, TupleVariable
from .variables.misc import StringFormatVariable
from .variables.numpy import NumpyNdarrayVariable
from .variables.sets import SetVariable
from .variables.tensor import TensorVariable

BINARY_OPS = [operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul, operator.mul,
              operator.mod, operator.or_, operator.pow, operator.rshift, operator.sub, operator.truediv, operator.xor]
INPLACE_OPS = [operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul, operator.imul,
               operator.imod, operator.ior, operator.ipow, operator.irshift, operator.isub, operator.itruediv,
               operator.ixor]
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
               ">=": operator.ge}


def stack_op(fn, nargs: int):
    """Early TorchDynamo's ``stack_op``: pop ``nargs`` values, apply ``fn``, push the result."""

    def handler(self, inst) -> None:
        self.push(call_operator(self, fn, self.popn(nargs)))

    handler.__name__ = f"stack_op({fn.__name__})"
    return handler


class DataOpcodes:
    """Mixed into InstructionTranslatorBase (which provides push/pop/peek/output)."""

    ## Operators
    def BINARY_OP(self, inst) -> None:
        a, b = self.popn(2)  # realized left first, as torch's call on the operator (a lazy input, lazy.py)
        fn = BINARY_OPS[inst.arg] if inst.arg < 13 else INPLACE_OPS[inst.arg - 13]
        self.push(call_operator(self, fn, [a, b]))

    UNARY_NEGATIVE = stack_op(operator.neg, 1)
    UNARY_POSITIVE = stack_op(operator.pos, 1)
    UNARY_INVERT = stack_op(operator.invert, 1)

    def UNARY_NOT(self, inst) -> None:
        self.push(ConstantVariable(not self.pop().truth(self)))

    def COMPARE_OP(self, inst) -> None:
        # 3.13's bool bit (COMPARE_BOOL_BIT) is not applied: the jump it feeds asks the truth itself.
        a, b = self.popn(2)
        self.push(call_operator(self, COMPARE_OPS[inst.argval], [a, b]))

    def IS_OP(self, inst) -> None:
        b, a = self.pop(), self.pop()
        self.push(call_operator(self, operator.is_not if inst.arg else operator.is_, [a, b]))

    def CONTAINS_OP(self, inst) -> None:
        b, a = self.pop(), self.pop()
        result = call_operator(self, operator.contains, [b, a])
        self.push(ConstantVariable(not result.as_python_constant()) if inst.arg else result)

    ## Subscripts
    def BINARY_SUBSCR(self, inst) -> None:
        obj, index = self.popn(2)
        if isinstance(obj, NumpyNdarrayVariable):  # NumPy's indexing (variables/numpy.py)
            self.push(obj.call_method(self, "__getitem__", [index], {}))
        elif isinstance(obj, TensorVariable):
            from .variables.builder import wrap_fx_proxy

            if type(index).__name__ == "SymNodeVariable":
                # x[x.size(0) - 1]: indexing calls the SymInt's __index__, which would fix the size;
                # torch records torch.select(x, 0, i) instead (TensorVariable.method___getitem__)
                self.push(wrap_fx_proxy(self, "call_function", torch.select, (obj.proxy, 0, index.as_proxy()), {}))
                return
            self.push(wrap_fx_proxy(self, "call_function", operator.getitem, (obj.proxy, index.as_proxy()), {}))
        else:
            if isinstance(index, TensorVariable):
                unimplemented("indexing a Python container with a tensor", gb_id=gb.INDEX_LIST_WITH_TENSOR)
            self.push(obj.call_method(self, "__getitem__", [index], {}))

    def store_subscr(self, obj, index, value) -> VariableTracker:
        if isinstance(obj, TensorVariable):
            from .fake_values import get_fake_value

            proxy = self.output.create_proxy("call_function", operator.setitem,
                                             (obj.proxy, index.as_proxy(), value.as_proxy()), {})
            ex = lambda a: a.meta["example_value"] if isinstance(a, torch.fx.Node) else a  # noqa: E731
            fargs = torch.fx.node.map_arg(proxy.node.args, ex)
            get_fake_value(self.output.fake_mode, operator.setitem, fargs, {}, "Tensor.__setitem__")
            proxy.node.meta["example_value"] = None
            return ConstantVariable(None)
        return obj.call_method(self, "__setitem__", [index, value], {})

    def STORE_SUBSCR(self, inst) -> None:
        index, obj, value = self.pop(), self.pop(), self.pop()
        self.store_subscr(obj, index, value)

    def BINARY_SLICE(self, inst) -> None:  # 3.12: container[start:stop] without BUILD_SLICE
        start, stop = self.popn(2)
        self.push(SliceVariable([start, stop]))
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst) -> None:  # 3.12: container[start:stop] = value
        start, stop = self.popn(2)
        obj, value = self.pop(), self.pop()
        self.store_subscr(obj, SliceVariable([start, stop]), value)

    def DELETE_SUBSCR(self, inst) -> None:
        index, obj = self.pop(), self.pop()
        obj.call_method(self, "__delitem__", [index], {})

    ## Building containers
    def BUILD_TUPLE(self, inst) -> None:
        self.push(TupleVariable(self.popn(inst.arg)))

    def BUILD_LIST(self, inst) -> None:
        self.push(ListVariable(self.popn(inst.arg)))

    def BUILD_SET(self, inst) -> None:
        self.push(SetVariable.build(self, self.popn(inst.arg)))  # Note [A set is a dict of hashable trackers]

    def SET_UPDATE(self, inst) -> None:
        other = self.pop()
        self.peek(inst.arg).call_method(self, "update", [other], {})

    def BUILD_MAP(self, inst) -> None:
        flat = self.popn(2 * inst.arg)
        self.push(ConstDictVariable({flat[i].as_python_constant(): flat[i + 1] for i in range(0, len(flat), 2)}))

    def BUILD_CONST_KEY_MAP(self, inst) -> None:
        keys = self.pop().as_python_constant()
        values = self.popn(inst.arg)
        self.push(ConstDictVariable(dict(zip(keys, values))))

    def BUILD_SLICE(self, inst) -> None:
        self.push(SliceVariable(self.popn(inst.arg)))

    def BUILD_STRING(self, inst) -> None:
        parts = self.popn(inst.arg)
        if any(isinstance(p, StringFormatVariable) for p in parts):  # Note [An f-string of a tensor is formatted ...]
            fmt, args = "", []
            for p in parts:
                if isinstance(p, StringFormatVariable):
                    fmt, args = fmt + p.format_string, args + p.args
                else:
                    fmt += p.as_python_constant().replace("{", "{{").replace("}", "}}")
            self.push(StringFormatVariable(fmt, args))
            return
        self.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))

    def FORMAT_VALUE(self, inst) -> None:
        flags = inst.arg
        spec = self.pop().as_python_constant() if flags & 0x04 else ""
        value = self.pop()
        if isinstance(value, TensorVariable) and not flags & 0x03:  # f"{y}": formatted after the graph
            self.push(StringFormatVariable("{:" + spec + "}" if spec else "{}", [value]))
            return
        if isinstance(value, TensorVariable):
            unimplemented("formatting a tensor into a string needs its data", gb_id=gb.BUILTIN_OPERATOR)
        v = value.as_python_constant()
        conv = {0: lambda x: x, 1: str, 2: repr, 3: ascii}[flags & 0x03]
        self.push(ConstantVariable(format(conv(v), spec)))

    # 3.13 split FORMAT_VALUE in three: CONVERT_VALUE (!s !r !a), FORMAT_SIMPLE, FORMAT_WITH_SPEC.
    def _constant_to_format(self) -> object:
        value = self.pop()
        if isinstance(value, TensorVariable):
            unimplemented("formatting a tensor into a string needs its data", gb_id=gb.BUILTIN_OPERATOR)
        return value.as_python_constant()

    def CONVERT_VALUE(self, inst) -> None:
        self.push(ConstantVariable({1: str, 2: repr, 3: ascii}[inst.arg](self._constant_to_format())))

    def FORMAT_SIMPLE(self, inst) -> None:
        if isinstance(self.peek(), TensorVariable):  # Note [An f-string of a tensor is formatted after the graph]
            self.push(StringFormatVariable("{}", [self.pop()]))
            return
        self.push(ConstantVariable(format(self._constant_to_format(), "")))

    def FORMAT_WITH_SPEC(self, inst) -> None:
        spec = self.pop().as_python_constant()
        if isinstance(self.peek(), TensorVariable):
            self.push(StringFormatVariable("{:" + spec + "}", [self.pop()]))
            return
        self.push(ConstantVariable(format(self._constant_to_format(), spec)))

    def LIST_APPEND(self, inst) -> None:
        v = self.pop()
        self.peek(inst.arg).items.append(v)

    def LIST_EXTEND(self, inst) -> None:
        v = self.pop()
        self.peek(inst.arg).items.extend(v.unpack_var_sequence(self))

    def LIST_TO_TUPLE(self, inst) -> None:
        self.push(TupleVariable(self.pop().items))

    def SET_ADD(self, inst) -> None:
        v = self.pop()
        self.peek(inst.arg).call_method(self, "add", [v], {})

    def MAP_ADD(self, inst) -> None:
        value, key = self.pop(), self.pop()
        self.peek(inst.arg).items[key.as_python_constant()] = value

    def DICT_UPDATE(self, inst) -> None:
        other = self.pop()
        self.peek(inst.arg).call_method(self, "update", [other], {})

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst) -> None:
        seq = self.pop()
        items = seq.unpack_var_sequence(self)
        if len(items) != inst.arg:
            unimplemented(f"unpacking {len(items)} values into {inst.arg} names (eager raises ValueError)",
                          gb_id=gb.UNPACK_LENGTH)
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().unpack_var_sequence(self)
        if len(items) < before + after:
            unimplemented("not enough values to unpack", gb_id=gb.UNPACK_LENGTH)
        middle = items[before : len(items) - after]
        for item in reversed(items[len(items) - after :]):
            self.push(item)
        self.push(ListVariable(middle))
        for item in reversed(items[:before]):
            self.push(item)

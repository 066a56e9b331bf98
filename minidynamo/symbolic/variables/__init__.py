"""VariableTrackers: the values on the symbolic interpreter's stack (torch/_dynamo/variables/)."""

from .base import GetAttrVariable, VariableTracker
from .builder import VariableBuilder, wrap_fx_proxy
from .builtin import BuiltinVariable
from .constant import ConstantVariable
from .dicts import ConstDictVariable
from .functions import NestedUserFunctionVariable, UserFunctionVariable, UserMethodVariable
from .iter import ListIteratorVariable
from .lists import ListVariable, SliceVariable, TupleVariable
from .misc import NullVariable, UserDefinedObjectVariable
from .nn_module import NNModuleVariable
from .tensor import TensorVariable
from .torch import PythonModuleVariable, TorchInGraphFunctionVariable
from .user_class import UserDefinedClassVariable

__all__ = [
    "VariableTracker", "VariableBuilder", "wrap_fx_proxy", "BuiltinVariable", "ConstantVariable",
    "ConstDictVariable", "NestedUserFunctionVariable", "UserFunctionVariable", "UserMethodVariable",
    "ListIteratorVariable", "ListVariable", "SliceVariable", "TupleVariable", "GetAttrVariable", "NullVariable",
    "UserDefinedClassVariable", "UserDefinedObjectVariable", "NNModuleVariable", "TensorVariable",
    "PythonModuleVariable", "TorchInGraphFunctionVariable",
]

"""Exercises of chapter 02 (a Python interpreter in Python): extend and observe the VM.

Place in the pipeline: none; ``notebooks/02_a_python_interpreter_in_python.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
"""

from __future__ import annotations

from minidynamo.exercises import NotYet, correct

__all__ = [
    "check_max_stack_depth",
    "solution_max_stack_depth",
    "check_logging_vm",
    "solution_logging_vm",
]


def _programs():
    def poly(x):
        return ((x + 1) * (x + 2) * (x + 3), [x, x * 2, [x, (x, x + 1)]])

    def loop(n):
        out = 0
        for i in range(n):
            out += i * i
        return out

    return [(poly, (3,)), (loop, (5,))]


def check_max_stack_depth(answer) -> str:
    """``answer``: a function ``(fn, *args) -> int``, the deepest value stack of ``fn``'s own frame.

    Hint: ``VirtualMachine(trace=...)`` calls the hook with the frame before every instruction.
    CPython computes an upper bound at compile time, ``fn.__code__.co_stacksize``: your answer
    must be positive and at most that.
    """
    if answer is None or not callable(answer):
        raise NotYet("no answer yet: give a function (fn, *args) -> int")
    from minidynamo.interpreter import VirtualMachine

    for fn, args in _programs():
        seen = []
        VirtualMachine(trace=lambda frame, inst: frame.code is fn.__code__ and seen.append(len(frame.stack))).run(fn, *args)
        want = max(seen)
        got = answer(fn, *args)
        if not isinstance(got, int) or not 0 < got <= fn.__code__.co_stacksize:
            raise NotYet(f"{fn.__name__}: {got!r} is not between 1 and co_stacksize={fn.__code__.co_stacksize}")
        if got != want:
            raise NotYet(f"{fn.__name__}: the stack gets {want} deep in its own frame, you said {got}")
    return correct("the deepest stack we observe, never above CPython's co_stacksize")


def solution_max_stack_depth():
    from minidynamo.interpreter import VirtualMachine

    def max_stack_depth(fn, *args):
        depth = 0

        def hook(frame, inst):
            nonlocal depth
            if frame.code is fn.__code__:
                depth = max(depth, len(frame.stack))

        VirtualMachine(trace=hook).run(fn, *args)
        return depth

    return max_stack_depth


def check_logging_vm(answer) -> str:
    """``answer``: a subclass of ``VirtualMachine`` whose ``byte_BINARY_OP`` also appends
    ``(symbol, lhs, rhs)`` to ``self.log`` (a list, created in ``__init__``) before doing the op.
    """
    from minidynamo.interpreter import VirtualMachine

    if not (isinstance(answer, type) and issubclass(answer, VirtualMachine)):
        raise NotYet("no answer yet: give a subclass of minidynamo.interpreter.VirtualMachine")
    vm = answer()
    result = vm.run(lambda a, b: (a + b) * b - 1, 2, 5)
    if result != 34:
        raise NotYet(f"the VM computed {result!r}, CPython computes 34: call the real handler too")
    want = [("+", 2, 5), ("*", 7, 5), ("-", 35, 1)]
    if getattr(vm, "log", None) != want:
        raise NotYet(f"vm.log is {getattr(vm, 'log', None)!r}, expected {want!r}")
    return correct("every binary operator went through your handler")


def solution_logging_vm():
    from minidynamo.interpreter import VirtualMachine

    class LoggingVM(VirtualMachine):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.log = []

        def byte_BINARY_OP(self, inst):
            lhs, rhs = self.frame.stack[-2:]
            self.log.append((inst.argrepr, lhs, rhs))
            super().byte_BINARY_OP(inst)

    return LoggingVM

"""The concrete interpreter's generators: a real Python generator drives a suspended ``Frame``.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting. Calling a generator function returns ``make_generator``'s
generator; ``YIELD_VALUE`` leaves the frame loop with the frame kept as it is, and
``next``/``send``/``throw``/``close`` re-enter it (Note [Generators suspend the frame loop]
in ``interpreter.py``). Mirrors ``Objects/genobject.c`` (``gen_send_ex``, ``gen_throw``,
whose ``yield from`` delegation is ``throw_to_delegate``) and the generator instructions
of ``Python/bytecodes.c``.
"""

from __future__ import annotations

import types
from typing import Any

from minidynamo.bytecode import SEND_KEEPS_RECEIVER, Instruction
from minidynamo.interpreter.frameobject import Frame, _Yield


class GeneratorOpcodes:
    """``VirtualMachine``'s generator support: the driving generator and the generator handlers."""

    def make_generator(self, frame: Frame, fn: types.FunctionType) -> types.GeneratorType:
        """A real generator that drives ``frame`` (Note [Generators suspend the frame loop])."""

        def drive():
            thrown = None
            while True:
                try:
                    return self.run_frame(frame, throw=thrown)
                except _Yield as suspended:
                    value = suspended.value
                while True:
                    try:
                        sent, thrown = (yield value), None
                        frame.stack.append(sent)
                    except BaseException as exc:  # gen.throw(...) and gen.close()
                        kind, thrown = self.throw_to_delegate(frame, exc)
                        if kind == "yield":  # the sub-iterator of `yield from` handled it and yielded again
                            value, thrown = thrown, None
                            continue
                    break

        gen = drive()
        gen.__name__, gen.__qualname__ = fn.__name__, fn.__qualname__
        return gen

    def throw_to_delegate(self, frame: Frame, exc: BaseException) -> tuple[str, Any]:
        """gen.throw(exc) while suspended in ``yield from``: CPython throws into the sub-iterator first.

        Returns ("throw", exc) to raise in our frame, ("yield", value) when the sub-iterator
        yields again, ("resume", None) when it returned (3.11: SEND's exit, done here).
        """
        resume = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
        if resume is None or resume.opname != "RESUME" or resume.arg != 2 or not frame.stack:
            return "throw", exc  # a plain `yield`
        receiver = frame.stack[-1]
        if isinstance(exc, GeneratorExit) or not hasattr(receiver, "throw"):
            if isinstance(exc, GeneratorExit) and hasattr(receiver, "close"):
                receiver.close()
            return "throw", exc
        try:
            return "yield", receiver.throw(exc)
        except StopIteration as stop:
            if SEND_KEEPS_RECEIVER:
                return "throw", stop  # 3.12+: CLEANUP_THROW turns it into the value of `yield from`
            back = frame.instructions[frame.ip + 1]  # 3.11: JUMP_BACKWARD_NO_INTERRUPT to the SEND
            frame.stack[-1] = stop.value
            frame.ip = frame.index_of[frame.instructions[frame.index_of[back.argval]].argval]
            return "resume", None
        except BaseException as raised:  # noqa: BLE001 - the sub-iterator's exception goes on up
            return "throw", raised

    ## Generators

    def byte_RETURN_GENERATOR(self, inst: Instruction) -> None:
        # CPython creates the generator here and returns it; ours exists already
        # (make_generator). On first resume CPython pushes the sent None, which POP_TOP drops.
        self.push(None)

    def byte_YIELD_VALUE(self, inst: Instruction) -> None:
        raise _Yield(self.pop())

    def byte_GET_YIELD_FROM_ITER(self, inst: Instruction) -> None:
        if not isinstance(self.top(), types.GeneratorType):
            self.push(iter(self.pop()))

    def byte_SEND(self, inst: Instruction) -> None:
        # `yield from`: pass the sent value on to the sub-iterator; when it returns, jump past the loop.
        value, receiver = self.pop(), self.top()
        try:
            result = next(receiver) if value is None else receiver.send(value)
        except StopIteration as stop:
            if not SEND_KEEPS_RECEIVER:  # 3.12+: END_SEND at the target drops the receiver
                self.pop()
            self.push(stop.value)
            self.jump(inst.argval)
        else:
            self.push(result)


def _stopiteration_error(exc: BaseException) -> BaseException:
    """3.12's INTRINSIC_STOPITERATION_ERROR: a StopIteration leaving a generator becomes RuntimeError (PEP 479)."""
    if not isinstance(exc, StopIteration):
        return exc
    error = RuntimeError("generator raised StopIteration")
    error.__cause__ = error.__context__ = exc
    return error

"""Iterators while tracing: ``iter(seq)``, advanced by ``FOR_ITER`` and ``next()``.

Place in the pipeline: the iterator every other one builds on (a generator, ``zip``,
``map``, a dict view's iterator subclass it), under the containers that hand it out and the
constants that consume it (``"-".join(it)``). Mirrors ``torch/_dynamo/variables/iter.py``
(``IteratorVariable``) and ``ListIteratorVariable`` of ``torch/_dynamo/variables/lists.py``.
"""

from __future__ import annotations

from .base import VariableTracker


class ListIteratorVariable(VariableTracker):
    """``iter(seq)`` while tracing: the items, and how far we got (``FOR_ITER`` advances it)."""

    def __init__(self, items: list, index: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.items = list(items)
        self.index = index

    def next_variable(self, tx):
        if self.index >= len(self.items):
            return None
        if self.source is not None:  # Note [A carried iterator is advanced in place]
            tx.output.side_effects.mutation(self)
        self.index += 1
        return self.items[self.index - 1]

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        """The rest of the items; the iterator is consumed to the end, as eager's ``list(it)`` leaves it."""
        rest = self.items[self.index :]
        if rest and self.source is not None:
            tx.output.side_effects.mutation(self)
        self.index = len(self.items)
        return rest

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            # Note [A carried iterator is advanced in place]
            #     An iterator carried over a graph break (a ResumeIterator argument) may be
            #     held by another object too (an ``islice`` over it, run eagerly). So the
            #     items the trace took from it are taken from the real one too: its
            #     ``resume_index`` is written back after the graph (side_effects.py), and
            #     the object itself, not a copy, is what the rest of the frame gets.
            return codegen.source_expr(self.source)
        rest = [codegen.expr(v) for v in self.items[self.index :]]
        return f"___ResumeIterator([{', '.join(rest)}])"

    def __repr__(self) -> str:
        return f"ListIteratorVariable({self.index}/{len(self.items)})"

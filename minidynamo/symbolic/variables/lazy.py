"""A frame input that is wrapped (and guarded) only when the trace first reads it.

Place in the pipeline: ``convert_frame`` puts one ``LazyVariableTracker`` per local of the
frame it traces; the translator's stack helpers (``translator_base.py``) realize it
through ``VariableBuilder`` on first read, so an input nobody reads gets no guard.
Mirrors ``torch/_dynamo/variables/lazy.py`` (``LazyVariableTracker``).
"""

from __future__ import annotations

from typing import Any, Optional

from .base import VariableTracker


class LazyVariableTracker(VariableTracker):
    """A frame input not read yet: it is wrapped (and guarded) on first read only."""

    def __init__(self, value: Any, source):
        super().__init__(source=source)
        self.value = value
        self.realized: Optional[VariableTracker] = None

    def __repr__(self) -> str:  # torch's LazyVariableTracker.__str__
        if self.realized is not None:
            return f"LazyVariableTracker(realized: {self.realized!r})"
        return f"LazyVariableTracker(unrealized: {type(self.value)})"

    def realize(self, tx) -> VariableTracker:
        # once: every read of the same input is the same tracker (``y is _nil`` in copy.deepcopy)
        if self.realized is None:
            self.realized = tx.variable_builder(self.source)(self.value)
        return self.realized


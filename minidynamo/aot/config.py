"""Flags of mini AOTAutograd that no entry point takes as an argument.

Mirrors ``torch/_functorch/config.py`` (a module of plain attributes, read when a
graph is compiled; tests set them with ``monkeypatch.setattr``). The per-call
options (``keep_inference_input_mutations``, the compilers, the partitioner) are
arguments of ``aot_function`` / ``aot_module_simplified`` and travel in
graph_compile's ``AOTConfig``, which copies these flags when it is made.
"""

from __future__ import annotations

# Note [A mutated intermediate that autograd saved] (graph_capture.py): a forward
# that mutates an intermediate after autograd saved it. torch's AOTAutograd
# refuses such a program at compile time (its joint trace meets the stale saved
# tensor and raises eager's backward error), even where eager runs it. False,
# torch's meaning: ours refuses too, and the graph runs eagerly with an
# AOTFallbackWarning giving torch's reason. True: ours compiles it, with a
# backward that raises eager's error only when a gradient reaches the stale node
# (what it would take for AOT to accept what eager accepts).
compile_mutated_saved_intermediates: bool = False

# Note [Why CSE before the cut] (cse.py): the min-cut partitioner first merges equal
# nodes of the joint graph. torch's name and default (torch/_functorch/config.py: ``cse``,
# read by partitioners.py's min_cut_rematerialization_partition); False keeps duplicates.
cse: bool = True

"""The shared AOTAutograd test corpus: small functions full of mutation and aliasing.

Place in the pipeline: none; tests of every AOT stage run these cases (metadata in
``tests/test_aot_metadata.py``, joint graph / runtime wrappers in chapter 10-11 tests) and
chapter 09 shows the metadata comparison over all of them.

Shape::

    CASES: list[AOTCase]            # >= 80 cases
    case.name                       # unique, the function's name
    case.fn(*args)                  # returns one value or a tuple (flat: tensors and plain Python values)
    case.make_inputs()              # a FRESH list of args each call, same values every call (seeded)
    case.tags                       # categories below, e.g. ("data_mutation", "out_alias_input")
    CASES_BY_NAME[name]

Conventions every case follows, so any stage can run it eagerly and compare:

* The function is valid in eager PyTorch on the inputs ``make_inputs`` builds (inputs
  that are mutated and require grad are built as non-leaves, ``randn(...).requires_grad_().clone()``).
* Gradients: compare ``torch.autograd.grad`` of the outputs that require grad with
  respect to the tensor inputs that require grad (inputs may be non-leaves, so ``.grad``
  is not populated on them). ``case.grad_inputs(args)`` lists those inputs.
* Aliasing inputs are built from one base inside ``make_inputs`` (tag ``aliased_inputs``);
  the same tensor passed twice has tag ``dup_input``.
* Non-tensor inputs and outputs are ints, floats and bools (tag ``non_tensor``).

Tags: data_mutation, metadata_mutation, no_grad_mutation, out_alias_input, out_is_input,
out_alias_intermediate, multi_out_alias_intermediate, intermediate_returned, out_mutation,
aliased_inputs, dup_input, non_tensor, detach, no_grad_output, view_chain, multi_output_view,
custom_function, strided_input, plain.

The cases live in themed modules, imported here in the corpus's order (a case's seed is
its place in ``CASES``): ``aot_testing`` (``AOTCase``, the registry, the input builders),
``aot_mutation``, ``aot_aliasing`` and ``aot_inputs``.
"""

from __future__ import annotations

from . import aot_mutation, aot_aliasing, aot_inputs  # noqa: F401
from .aot_testing import CASES, AOTCase

__all__ = ["AOTCase", "CASES", "CASES_BY_NAME"]


CASES_BY_NAME: dict[str, AOTCase] = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"

"""Mini AOTAutograd: the second half of the front of torch.compile.

Place in the pipeline: after the symbolic interpreter (Dynamo) hands over an
fx graph. Mirrors ``torch/_functorch/aot_autograd.py`` and the files of
``torch/_functorch/_aot_autograd/``, one file per stage:

    functional_tensor.py          mini functionalization (a dispatch mode)
    collect_metadata_analysis.py  FakeTensor pass 2 -> ViewAndMutationMeta
    schemas.py                    ViewAndMutationMeta, InputAliasInfo, OutputAliasInfo, OutputType
    make_fx.py                    a mini make_fx: a dispatch-mode tracer into torch.fx
    graph_capture.py              FakeTensor pass 3: the joint forward+backward graph
    partitioners.py               split the joint graph into forward and backward
    runtime_wrappers.py           CompiledFunction and the wrappers (mutations, aliases)
    aot_autograd.py               aot_function, aot_module, aot_module_simplified

Names are imported lazily, so ``import minidynamo.aot`` stays cheap.
"""

from __future__ import annotations

from minidynamo._lazy import lazy_exports

_EXPORTS = {
    "collect_metadata": "collect_metadata_analysis",
    "ViewAndMutationMeta": "schemas",
    "InputAliasInfo": "schemas",
    "OutputAliasInfo": "schemas",
    "OutputType": "schemas",
    "TensorAlias": "schemas",
    "aot_function": "aot_autograd",
    "aot_module": "aot_autograd",
    "aot_module_simplified": "aot_autograd",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)

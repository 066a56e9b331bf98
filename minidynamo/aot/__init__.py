"""Mini AOTAutograd: the second half of the front of torch.compile.

Place in the pipeline: after the symbolic interpreter (Dynamo) hands over an
fx graph. Mirrors ``torch/_functorch/aot_autograd.py`` and the files of
``torch/_functorch/_aot_autograd/``, one file per stage:

    functional_tensor.py          mini functionalization (a dispatch mode)
    collect_metadata_analysis.py  FakeTensor pass 2 -> ViewAndMutationMeta
    schemas.py                    ViewAndMutationMeta, InputAliasInfo, OutputAliasInfo, OutputType
    make_fx.py                    a mini make_fx: a dispatch-mode tracer into torch.fx
    graph_capture_wrappers.py     what pass 3 traces: fn_prepped_for_autograd, create_joint, functionalized
    graph_capture.py              FakeTensor pass 3: the joint forward+backward graph
    partitioners.py               split the joint graph into forward and backward
    compiled_function.py          CompiledFunction: the autograd.Function around both graphs
    functional_utils.py           gen_alias_from_base: rebuild an aliased output from its base
    input_output_analysis.py      compute_overlapping_inputs: which inputs may share memory
    runtime_wrappers.py           the wrappers (mutations written back, aliases, dedupe, synthetic base)
    compilers.py                  the default fw/bw compilers: run the graph (boxed for the backward)
    config.py                     flags read at compile time (torch: _functorch/config.py)
    graph_compile.py              one compile: metadata, joint graph, partition, CompiledFunction, wrappers
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

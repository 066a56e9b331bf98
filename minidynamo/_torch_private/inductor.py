"""torch's Inductor, as the ``inductor`` backend uses it (imported only when a graph is compiled).

Place in the pipeline: after AOTAutograd; part of the seam ``minidynamo._torch_private``.
What is here, minidynamo *uses*: Inductor compiles our forward, backward and inference
graphs; nothing of it is rebuilt. Every import is inside a function: importing
``torch._inductor`` costs seconds (tests/test_cold_start.py).
Mirrors ``torch/_inductor/compile_fx.py`` (the entry points ``_compile_fx_main`` uses).
"""

from __future__ import annotations

import types


def inductor_compile_fx():
    """torch._inductor.compile_fx's pieces that ``_compile_fx_main`` calls per graph.

    ``compile_fx_forward`` / ``compile_fx_backward`` (fw_compiler_base and bw_compiler's bodies),
    ``compile_fx_inner``, ``create_compiler_config_extra``, ``get_num_model_outputs``,
    ``_recursive_joint_graph_passes`` (what its ``partition_fn`` runs on the joint before min-cut),
    ``V`` (the virtualized fake mode), ``tracing`` / ``TracingContext`` (torch._guards),
    ``FakeTensorMode`` / ``ShapeEnv`` / ``FakeTensorProp``, ``enable_python_dispatcher``,
    ``select_decomp_table``, ``config`` (torch._inductor.config), ``ConstantSource`` (torch._dynamo.source)
    and ``DimDynamic`` (symbolic_shapes): how a symbol of ours is made one of torch's ShapeEnv.
    """
    import torch._guards
    from torch._dynamo.utils import detect_fake_mode
    from torch._inductor import compile_fx as cfx
    from torch._inductor import config
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch._dispatch.python import enable_python_dispatcher
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    return types.SimpleNamespace(
        compile_fx_forward=cfx.compile_fx_forward, compile_fx_backward=cfx.compile_fx_backward,
        compile_fx_inner=cfx.compile_fx_inner, create_compiler_config_extra=cfx.create_compiler_config_extra,
        get_num_model_outputs=cfx.get_num_model_outputs, get_inputs_devices=cfx.get_inputs_devices,
        joint_graph_passes=cfx._recursive_joint_graph_passes, V=V, tracing=torch._guards.tracing,
        TracingContext=torch._guards.TracingContext, FakeTensorMode=FakeTensorMode, ShapeEnv=ShapeEnv,
        FakeTensorProp=FakeTensorProp, enable_python_dispatcher=enable_python_dispatcher,
        select_decomp_table=select_decomp_table, config=config, detect_fake_mode=detect_fake_mode,
        ConstantSource=ConstantSource, DimDynamic=DimDynamic,
    )


class inductor_graphs_recorder:
    """Observe torch's ``compile_fx_inner`` (through ``_compile_fx_inner``, oracle/observer): every graph Inductor compiles, in order.

    ``with inductor_graphs_recorder() as seen:`` ... ; ``seen`` is a list of ``(kind, gm, output_code)``,
    kind ``"forward"``, ``"backward"`` or ``"inference"``, ``gm`` a copy of the graph as it was handed to
    Inductor (before its passes, the same whether or not its cache served it); ``output_code.source_code`` is the Python
    wrapper Inductor wrote (what ``TORCH_LOGS=output_code`` prints). Works for our backend and for
    ``torch.compile(backend="inductor")`` alike: both call that function. torch's AOTAutograd cache
    is off inside (``torch._functorch.config.enable_autograd_cache``): a hit there would skip Inductor.
    """

    def __enter__(self) -> list:
        from torch._inductor import compile_fx as cfx

        # the module global compile_fx_inner calls at run time (torch's compile_fx binds compile_fx_inner
        # itself as a default argument, so only this one is seen by both paths)
        self._cfx, self._real, seen = cfx, cfx._compile_fx_inner, []
        real = self._real

        def recording(gm, example_inputs, *args, **kwargs):
            import copy

            import torch.fx

            # The graph as handed to Inductor: its post-grad passes rewrite ``gm`` in place (``view`` becomes
            # ``reshape``), unless its FX graph cache serves the graph, when they do not run at all.
            handed = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
            out = real(gm, example_inputs, *args, **kwargs)
            kind = "backward" if kwargs.get("is_backward") else "inference" if kwargs.get("is_inference") else "forward"
            seen.append((kind, handed, out))
            return out

        cfx._compile_fx_inner = recording
        from torch._functorch import config as functorch_config

        self._patch = functorch_config.patch(enable_autograd_cache=False)
        self._patch.__enter__()
        return seen

    def __exit__(self, *exc) -> None:
        self._cfx._compile_fx_inner = self._real
        self._patch.__exit__(*exc)


def inductor_phase_points() -> list:
    """Where torch's compile spends its phases (oracle/observer, for minidynamo/bench/inductor.py's phase table).

    ``(owner, attribute, phase)``: the module globals torch's own path calls at run time, so a
    wrapper put there sees both ``torch.compile`` and our backend. ``_compile_fx_inner`` (one
    graph through Inductor: post-grad passes, lowering, scheduling, code generation and the C++
    kernel builds), ``_recursive_joint_graph_passes`` (what ``partition_fn`` runs on the joint
    before min-cut) and ``aot_module_simplified`` as ``torch/_dynamo/backends/common.py``'s
    ``AotAutograd`` calls it (torch's AOTAutograd; ours is timed through ``minidynamo.aot``).
    """
    from torch._dynamo.backends import common
    from torch._inductor import compile_fx as cfx

    return [(cfx, "_compile_fx_inner", "inductor"), (cfx, "_recursive_joint_graph_passes", "joint passes"),
            (common, "aot_module_simplified", "aot")]

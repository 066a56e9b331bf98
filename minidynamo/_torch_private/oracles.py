"""The real torch, run to compare against: torch's Dynamo, FakeTensor, make_fx, AOTAutograd.

Place in the pipeline: beside it; part of the seam ``minidynamo._torch_private`` (its
``__init__`` says the rule and re-exports every name). Tests, chapters, exercises,
widgets, the corpora and the benchmark call these for torch's own answer (the oracle)
to what ours rebuilds; a compile of ours never needs them. The torch internals
minidynamo builds on are in ``internals.py``. The sections follow the pipeline, in
chapter order. Mirrors no single torch file: each name says which torch function it calls.
"""

from __future__ import annotations

import contextlib

import torch


# --- the real Dynamo's state -----------------------------------------------------------


def dynamo_reset() -> None:
    """torch._dynamo.reset(): clear the real Dynamo's caches (notebooks, tests)."""
    import torch._dynamo

    torch._dynamo.reset()


def silence_dynamo_logs() -> None:
    """Keep real torch.compile's graph-break warnings off stderr (nbval compares it)."""
    import logging

    import torch._logging

    torch._logging.set_logs(dynamo=logging.ERROR, aot=logging.ERROR, graph_breaks=False, recompiles=False)


# --- bytecode, chapter 01 (oracle) ----------------------------------------------------


def dynamo_cleaned_instructions(code):
    """torch._dynamo.bytecode_transformation.cleaned_instructions: the instruction list real Dynamo traces."""
    from torch._dynamo.bytecode_transformation import cleaned_instructions

    return cleaned_instructions(code)


def dynamo_parse_exception_table(exntab: bytes):
    """torch._dynamo.bytecode_transformation.parse_exception_table: real Dynamo's exception table parser."""
    from torch._dynamo.bytecode_transformation import parse_exception_table

    return parse_exception_table(exntab)


# --- the interpreter, chapter 02 (oracle) ------------------------------------------------


def dynamo_instruction_translator_base():
    """torch._dynamo.symbolic_convert.InstructionTranslatorBase: real Dynamo's frame loop (one method per opname)."""
    from torch._dynamo.symbolic_convert import InstructionTranslatorBase

    return InstructionTranslatorBase


# --- the symbolic interpreter (our Dynamo), chapters 03-05 -----------------------------


def dynamo_global_state_fields() -> set:
    """The fields of torch's ``GlobalStateGuard`` (torch/csrc/dynamo/guards.cpp), as its ``__getstate__`` lists them."""
    import json

    return set(json.loads(torch._C._dynamo.guards.GlobalStateGuard().__getstate__()))


def dynamo_explain(fn, *args, **kwargs):
    """Oracle: torch._dynamo.explain(fn)(*args, **kwargs) -> its ExplainOutput.

    Its ``graph_break_count`` is ``graph_count - 1`` by construction (see
    torch/_dynamo/eval_frame.py); ``break_reasons`` may be longer or shorter.
    """
    import torch._dynamo

    return torch._dynamo.explain(fn)(*args, **kwargs)


def dynamo_explain_with_gb_types(fn, *args, **kwargs):
    """Oracle: ``torch._dynamo.explain(fn)(*args)`` and each break reason's registry ``gb_type``.

    Returns ``(explain_output, gb_types)``, one ``gb_type`` per break reason (None if
    none is found). A reason's text starts with its ``gb_type`` (exc.py
    ``format_graph_break_message``), except a data-dependent jump's (``generic_jump
    TensorVariable()``, symbolic_convert.py ``jump_graph_break``): its ``gb_type`` is read
    from the ``graph_breaks`` log record torch writes for the same user line; a 3.12+
    comprehension's (``comprehension_graph_break``, torch/_dynamo/comprehension_graph_break.py)
    from the record at its line, else the one whose user traceback passes through that line.
    """
    import json
    import logging
    import re
    from pathlib import Path

    import torch._dynamo
    import torch._logging

    registry = json.loads((Path(torch._dynamo.__file__).parent / "graph_break_registry.json").read_text())
    known = {e["Gb_type"] for entries in registry.values() for e in entries}
    logged: list[tuple[str, int, str]] = []
    outer: list[tuple[str, int, str]] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines = record.getMessage().splitlines()
            if not lines or not lines[0].startswith("Graph break"):
                return
            where = lines[0].rsplit(" at ", 1)[-1]
            file, _, line = where.rpartition(":")
            texts = [ln.strip().removeprefix("Graph Break Reason: ") for ln in lines[1:]]
            gb = next((t for t in texts if t in known), None)
            if line.isdigit():
                logged.append((file, int(line), gb))
            # the frames of its user traceback, matched second: a break inside a call made from a
            # 3.12+ comprehension is reported at the comprehension's line (comprehension_graph_break.py)
            if "User code traceback:" in texts:
                for text in texts[texts.index("User code traceback:") + 1 :]:
                    m = re.match(r'File "(.*)", line (\d+)', text)
                    if m:
                        outer.append((m.group(1), int(m.group(2)), gb))

    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    handler, old = Collect(), (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        with torch._dynamo.config.patch(verbose=False):
            out = torch._dynamo.explain(fn)(*args, **kwargs)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old[0])
        logger.propagate = old[1]
    gb_types = []
    for reason in out.break_reasons:
        first = reason.reason.splitlines()[0].strip() if reason.reason else ""
        if first in known:
            gb_types.append(first)
            continue
        last = reason.user_stack[-1] if reason.user_stack else None
        match = [gb for file, line, gb in logged + outer if last is not None and (file, line) == (last.filename, last.lineno)]
        gb_types.append(match[0] if match else None)
    return out, gb_types


def dynamo_cache_entries(code) -> list:
    """Oracle: the cache entries torch's frame hook keeps for a code object (chapters 05, 15).

    ``torch._dynamo.eval_frame._debug_get_cache_entry_list(code)`` (``code`` may be a
    function): one per compiled version of the frame, most recently used first; none for a frame
    torch skips.
    """
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    return _debug_get_cache_entry_list(code)


# --- fake tensors, chapter 06 ----------------------------------------------------------


def real_fake_tensor_mode(**kwargs):
    """torch._subclasses.fake_tensor.FakeTensorMode (the oracle for our FakeTensorMode)."""
    from torch._subclasses.fake_tensor import FakeTensorMode as _RealFakeTensorMode

    return _RealFakeTensorMode(**kwargs)


def real_fake_tensor_class():
    """torch._subclasses.fake_tensor.FakeTensor (for isinstance checks in tests)."""
    from torch._subclasses.fake_tensor import FakeTensor as _RealFakeTensor

    return _RealFakeTensor


def real_fake_errors():
    """The real fake mode's data-dependent and unsupported-op exceptions, as a tuple."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    return (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException)


def op_db():
    """torch.testing._internal.common_methods_invocations.op_db (needs expecttest)."""
    from torch.testing._internal.common_methods_invocations import op_db as _op_db

    return _op_db


# --- decompositions, chapter 08 ---------------------------------------------------------


def torch_decomposition_table():
    """torch._decomp.decomposition_table: every registered Python decomposition."""
    from torch._decomp import decomposition_table

    return decomposition_table


def torch_core_aten_decompositions():
    """torch._decomp.core_aten_decompositions(): what export/Inductor decompose to core ATen."""
    from torch._decomp import core_aten_decompositions

    return core_aten_decompositions()


def torch_get_decompositions(ops):
    """torch._decomp.get_decompositions(ops): the table restricted to ``ops``."""
    from torch._decomp import get_decompositions

    return get_decompositions(ops)


def torch_inductor_decompositions():
    """torch._inductor.decomposition.select_decomp_table(): the table torch.compile's AOT uses."""
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


# --- functionalization and metadata (FakeTensor pass 2), chapter 09 ----------------------


def torch_collect_metadata(fn, *args, keep_input_mutations: bool = False):
    """Oracle: torch's run_functionalized_fw_and_collect_metadata on fake copies of ``args``.

    Called as torch 2.13's create_aot_state calls it: flat args, PlainAOTInput
    descriptors, under the python dispatcher, inside a FakeTensorMode whose
    from_tensor memo keeps the inputs' aliasing. ``fn`` must return a flat
    tuple/list (or one value).
    """
    from torch._dispatch.python import enable_python_dispatcher
    from torch._functorch._aot_autograd.collect_metadata_analysis import (
        run_functionalized_fw_and_collect_metadata,
    )
    from torch._functorch._aot_autograd.descriptors import PlainAOTInput
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode()
    fake_args = [fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]

    def flat_fn(*a):
        out = fn(*a)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    with fake_mode, enable_python_dispatcher():
        return run_functionalized_fw_and_collect_metadata(
            flat_fn,
            flat_args_descs=[PlainAOTInput(i) for i in range(len(fake_args))],
            keep_input_mutations=keep_input_mutations,
        )(*fake_args)


# --- the joint graph, partitioning and the runtime, chapters 10-11 ----------------------


def torch_make_fx(fn, tracing_mode: str = "real"):
    """Oracle: the real torch.fx.experimental.proxy_tensor.make_fx."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn, tracing_mode=tracing_mode)


def torch_aot_function(fn, fw_compiler, bw_compiler=None, **kwargs):
    """Oracle: the real functorch.compile.aot_function."""
    from functorch.compile import aot_function

    return aot_function(fn, fw_compiler, bw_compiler, **kwargs)


def torch_make_boxed_func(fn):
    """functorch.compile.make_boxed_func: what a real aot_function compiler returns."""
    from functorch.compile import make_boxed_func

    return make_boxed_func(fn)


def torch_aot_keeping_graphs(fn, **kwargs):
    """Oracle: the real aot_function of ``fn`` with compilers that keep the graphs they get.

    Returns ``(graphs, compiled)``; ``graphs["fw"]`` is filled by the first call of
    ``compiled``, ``graphs["bw"]`` by the first backward through its outputs.
    """
    graphs = {}

    def compiler(name):
        def compile_(gm, example_inputs):
            graphs[name] = gm
            return torch_make_boxed_func(gm)

        return compile_

    return graphs, torch_aot_function(fn, compiler("fw"), compiler("bw"), **kwargs)


def torch_min_cut_partition(joint_module, *, num_fwd_outputs, static_lifetime_input_indices=None):
    """Oracle: torch's min_cut_rematerialization_partition on a joint graph (it edits the graph: pass a copy)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return min_cut_rematerialization_partition(
        joint_module, None, num_fwd_outputs=num_fwd_outputs,
        static_lifetime_input_indices=static_lifetime_input_indices,
    )


def torch_fx_graph_cse(graph):
    """Oracle: torch's ``fx_graph_cse`` (torch/_functorch/compile_utils.py): a new graph, duplicates merged.

    It writes ``mutation_region_id`` into the meta of ``graph``'s nodes: pass a copy.
    """
    from torch._functorch.compile_utils import fx_graph_cse

    return fx_graph_cse(graph)


def functorch_config_patch(**changes):
    """``torch._functorch.config.patch`` (e.g. ``cse=False``): a context manager and decorator."""
    from torch._functorch import config

    return config.patch(**changes)


def torch_min_cut_ban_reasons(joint_module, *, num_fwd_outputs) -> dict[str, str]:
    """Oracle: why torch's min-cut partition may not recompute each node, as torch words it.

    ``solve_min_cut`` (``torch/_functorch/partitioners.py``) keeps each reason on the
    network's ``source -> node_in`` edge (``reason="cannot recompute: ..."``) and hands the
    network to ``networkx.minimum_cut``; we read the reasons there, then let the cut run.
    Node name -> reason (``"not in recomputable allowlist"``, ``"materialized in backward"``, ...).
    """
    import networkx

    reasons: dict[str, str] = {}
    real_cut = networkx.minimum_cut

    def reading_cut(graph, source, sink, *args, **kwargs):
        for _, node_in, data in graph.out_edges(source, data=True):
            reason = data.get("reason", "cannot recompute")  # no stated reason: "cannot recompute"
            reasons.setdefault(node_in.removesuffix("_in"), reason.removeprefix("cannot recompute: "))
        return real_cut(graph, source, sink, *args, **kwargs)

    networkx.minimum_cut = reading_cut
    try:
        torch_min_cut_partition(joint_module, num_fwd_outputs=num_fwd_outputs)
    finally:
        networkx.minimum_cut = real_cut
    return reasons


def torch_fake_cache_crosscheck_failure(fn, reals, settings) -> str | None:
    """Oracle: torch's FakeTensorMode with its cache crosscheck on (``torch._dynamo.config.
    fake_tensor_cache_crosscheck_enabled``: every hit also runs the kernel and compares). ``fn``
    runs on fakes of ``reals`` under each ``(python_dispatcher, grad_enabled)`` of ``settings`` in
    turn, on a cleared cache; returns the first crosscheck failure's message, or None."""
    import contextlib

    import torch._dynamo.config
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.fake_tensor import FakeTensorMode

    FakeTensorMode.cache_clear()
    try:
        with torch._dynamo.config.patch(fake_tensor_cache_enabled=True, fake_tensor_cache_crosscheck_enabled=True):
            for python_dispatcher, grad in settings:
                mode = FakeTensorMode()
                fakes = [mode.from_tensor(r) for r in reals]
                with (mode, enable_python_dispatcher() if python_dispatcher else contextlib.nullcontext(),
                      torch.set_grad_enabled(grad)):
                    fn(*fakes)
    except RuntimeError as e:
        if "crosscheck" not in str(e):
            raise
        return f"{e}: {e.__cause__}"
    finally:
        FakeTensorMode.cache_clear()
    return None


def torch_aot_module_simplified(gm, example_inputs, fw_compiler, bw_compiler=None, **kwargs):
    """Oracle: torch._functorch.aot_autograd.aot_module_simplified (tests of AOT over SymInts)."""
    from torch._functorch.aot_autograd import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler, **kwargs)


def torch_autograd_would_have_decomposed(func, flat_args) -> bool:
    """Oracle: torch.utils._python_dispatch.autograd_would_have_decomposed, the test functionalization and
    make_fx's proxy mode apply before decomposing a CompositeImplicitAutograd op (chapter 08's forward graph)."""
    from torch.utils._python_dispatch import autograd_would_have_decomposed

    return autograd_would_have_decomposed(func, flat_args)


def torch_lookup_backend(name: str):
    """Oracle: torch._dynamo.backends.registry.lookup_backend (chapter 10 reads what aot_eager passes)."""
    from torch._dynamo.backends.registry import lookup_backend

    return lookup_backend(name)


def torch_gen_alias_from_base():
    """Oracle: torch._functorch._aot_autograd.functional_utils.gen_alias_from_base (chapter 11 reads
    its source and watches which of its returns a call leaves by)."""
    from torch._functorch._aot_autograd.functional_utils import gen_alias_from_base

    return gen_alias_from_base


def torch_compute_overlapping_tensors(tensors):
    """Oracle: torch._C._dynamo.guards.compute_overlapping_tensors (static shapes), what
    ``compute_overlapping_inputs`` asks before it makes a synthetic base."""
    from torch._C._dynamo.guards import compute_overlapping_tensors

    return set(compute_overlapping_tensors(list(tensors), symbolic=False))


# --- the three FakeTensor passes and the backward, chapters 12-13 (real_passes.py, bench/__init__.py) ---


def philox_state_tracker():
    """Oracle: torch's ``PhiloxStateTracker`` (``torch/_decomp/decompositions_for_rng.py``), chapter 12.

    ``create_aot_state`` (``torch/_functorch/aot_autograd.py``) enters it around every
    AOT compile; its ``reset`` builds ``PhiloxState`` objects whose seed and offset are
    ``torch.tensor(())``, which under the fake mode are ``aten.lift_fresh`` dispatches.
    """
    from torch._decomp.decompositions_for_rng import PhiloxStateTracker

    return PhiloxStateTracker


def real_pass_hook_points():
    """Where the real torch makes its FakeTensor passes, for ``minidynamo.real_passes``.

    Returns (FakeTensorMode class, the module whose globals ``create_aot_state`` and
    ``aot_module_simplified`` look names up in, the runtime_wrappers module, the
    Dynamo backend lookup).
    """
    import torch._dynamo.backends.registry as registry
    import torch._functorch._aot_autograd.runtime_wrappers as runtime_wrappers
    import torch._functorch.aot_autograd as aot_autograd
    from torch._subclasses.fake_tensor import FakeTensorMode as RealFakeTensorMode

    return RealFakeTensorMode, aot_autograd, runtime_wrappers, registry.lookup_backend


def compiled_autograd_enabled(compiler_fn):
    """torch._dynamo.compiled_autograd._enable(compiler_fn): a context manager; inside it,
    ``.backward()`` turns the autograd graph into Python and Dynamo traces that."""
    from torch._dynamo import compiled_autograd

    return compiled_autograd._enable(compiler_fn)


# --- chapter 15 / tests/test_dynamic_shapes.py: torch's dynamic shapes, as the oracle ---


def tracing_shape_env():
    """The ShapeEnv of the graph torch is compiling now (call it inside a backend), or None."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    return None if ctx is None or ctx.fake_mode is None else ctx.fake_mode.shape_env


def dynamo_mark_dynamic(t, dim) -> None:
    """torch._dynamo.mark_dynamic (public in torch._dynamo, listed here with its siblings)."""
    import torch._dynamo

    torch._dynamo.mark_dynamic(t, dim)


def dynamo_mark_static(t, dim) -> None:
    import torch._dynamo

    torch._dynamo.mark_static(t, dim)


def dynamo_maybe_mark_dynamic(t, dim) -> None:
    import torch._dynamo

    torch._dynamo.maybe_mark_dynamic(t, dim)


def torch_symbolic_run(fn, t, dynamic_dims=(0,)):
    """``fn`` on a fake of ``t`` from torch's FakeTensorMode + ShapeEnv, dims ``dynamic_dims`` symbolic.

    Returns (output, the input's size symbols): the oracle of our ShapeEnv's output sizes.
    """
    from torch._dynamo.source import LocalSource
    from torch._subclasses.fake_tensor import FakeTensorMode as TorchFake
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv as TorchShapeEnv, StatelessSymbolicContext

    mode = TorchFake(shape_env=TorchShapeEnv(), allow_non_fake_inputs=True)
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if i in dynamic_dims else DimDynamic.STATIC
                                                  for i in range(t.dim())])
    x = mode.from_tensor(t, symbolic_context=ctx, source=LocalSource("x"))
    with mode:
        out = fn(x)
    return out, [s.node.expr for s in x.shape if isinstance(s, torch.SymInt)]


def dynamo_unique_graphs() -> int:
    """torch._dynamo.utils.counters["stats"]["unique_graphs"]: graphs torch's Dynamo compiled since reset."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def dynamo_serving_entry(code, f_locals: dict):
    """Oracle: which of torch's cache entries for ``code`` would serve these locals, numbered in compile order.

    Torch's list is most-recently-used first (``extra_state.cpp``: ``lookup`` tries the
    entries in list order and moves the one that holds to the front); the first whose
    guards pass (``CacheEntry.guard_manager.check``) serves. Returns its
    ``compile_id.frame_compile_id + 1`` (1 for the first graph compiled), or None.
    """
    for e in dynamo_cache_entries(code):
        if e.guard_manager.check(f_locals):
            return e.compile_id.frame_compile_id + 1
    return None


def dynamo_cache_order(code) -> list:
    """Oracle: torch's cache entries of ``code`` in list order (most recently used first), as frame_compile_ids."""
    return [e.compile_id.frame_compile_id for e in dynamo_cache_entries(code)]


def dynamo_guard_tree(code, index: int = 0) -> str:
    """Oracle: torch's guard tree of one cache entry of ``code``, as ``TORCH_LOGS=guards`` prints it.

    ``str(CacheEntry.guard_manager)``: ``GuardManagerWrapper.__str__`` (``torch/_dynamo/guards.py``).
    """
    return str(dynamo_cache_entries(code)[index].guard_manager)


def dynamo_config_patch(**changes):
    """``torch._dynamo.config.patch(...)``: torch's flags (``recompile_limit``, ...) for a ``with`` block."""
    import torch._dynamo

    return torch._dynamo.config.patch(**changes)


@contextlib.contextmanager
def dynamo_warnings():
    """Collect the warnings torch's ``convert_frame.py`` logs (``torch._dynamo hit config.recompile_limit``)."""
    import logging

    records: list = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("torch._dynamo.convert_frame")
    handler, level, propagate = Collect(logging.WARNING), logger.level, logger.propagate
    logger.setLevel(logging.WARNING)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def dynamo_guard_failures(code) -> list:
    """Oracle: every recompile reason torch gave for ``code`` since reset, one per entry checked, in order.

    ``torch._dynamo.utils.guard_failures``, filled by ``guards.py``: ``get_guard_fail_reason``
    (``"0/1: tensor 'x' size mismatch at index 0. expected 2, actual 3"``).
    """
    from torch._dynamo.utils import guard_failures

    return list(guard_failures.get(code, []))


def dynamo_all_guard_failures() -> dict:
    """Oracle: every recompile reason torch gave since reset, per function name (``guard_failures``, all codes)."""
    from torch._dynamo.utils import guard_failures

    out: dict = {}
    for code, reasons in guard_failures.items():
        out.setdefault(code.co_name, []).extend(reasons)
    return out


def dynamo_counters():
    """``torch._dynamo.utils.counters``: torch's compile statistics (``["stats"]["unique_graphs"]``)."""
    from torch._dynamo.utils import counters

    return counters


# --- values that decide (chapter 16): higher-order ops, checkpointing, unbacked symbols ---------


def dynamo_recorded_graphs(fn, *args, **kwargs) -> list:
    """Oracle: the fx graphs torch.compile's Dynamo hands its backend (``EagerAndRecordGraphs``), one call."""
    import torch._dynamo
    from torch._dynamo.testing import EagerAndRecordGraphs

    torch._dynamo.reset()
    backend = EagerAndRecordGraphs()
    torch.compile(fn, backend=backend)(*args, **kwargs)
    return list(backend.graphs)


def dynamo_mark_unbacked(t, dim) -> None:
    """Oracle: torch._dynamo.decorators.mark_unbacked."""
    import torch._dynamo

    torch._dynamo.decorators.mark_unbacked(t, dim)


def torch_aot_eager_saved(fn, *args) -> list:
    """Oracle: what torch's ``aot_eager`` saves for the backward, ``[(name, bytes), ...]`` per graph, in order.

    The backend is ``aot_eager``'s own recipe (torch/_dynamo/backends/debugging.py: ``aot_autograd`` with
    the min-cut partition and no-op compilers); the partition's saved values are read off the backward
    graph's non-tangent placeholders. The function is called once and its output's sum back-propagated.
    """
    import torch._dynamo
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    saved = []

    def partition(joint, inputs, **kw):
        fw, bw = min_cut_rematerialization_partition(joint, inputs, **kw)
        saved.append([(n.name, _nbytes(n.meta.get("val"))) for n in bw.graph.nodes
                      if n.op == "placeholder" and not n.name.startswith("tangents")])
        return fw, bw

    def nop(gm, _inputs):
        return make_boxed_func(gm)

    torch._dynamo.reset()
    backend = aot_autograd(fw_compiler=nop, bw_compiler=nop, partition_fn=partition,
                           keep_inference_input_mutations=True)
    out = torch.compile(fn, backend=backend)(*args)
    out.sum().backward()
    return saved


def torch_aot_eager_forward_graphs(fn, *args) -> tuple[list, list, object]:
    """Oracle: the forward graphs torch's ``aot_eager`` compiles for ``fn(*args)`` (inference or the
    partition's forward), the class names of the errors its backend raised (torch then falls back), and
    the output. The backend is ``aot_eager``'s recipe (``aot_autograd`` with no-op compilers)."""
    import torch._dynamo
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    graphs, errors = [], []

    def fw(gm, _inputs):
        graphs.append(gm)
        return make_boxed_func(gm)

    inner = aot_autograd(fw_compiler=fw, bw_compiler=lambda gm, _i: make_boxed_func(gm))

    def backend(gm, example_inputs):
        try:
            return inner(gm, example_inputs)
        except Exception as exc:
            errors.append(type(getattr(exc, "inner_exception", None) or exc.__cause__ or exc).__name__)
            raise

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(*args)
    return graphs, errors, out


def _nbytes(val) -> int:
    if isinstance(val, torch.Tensor):
        return val.numel() * val.element_size()
    return 0


def torch_counting_aot_eager(counts: dict, graphs: dict | None = None):
    """Oracle: torch's ``aot_eager`` built from ``torch._dynamo.backends.common.aot_autograd`` with compilers
    that count: ``counts["dynamo"]`` graphs handed to the backend, ``counts["aot_fw"]`` forward (or inference)
    graphs compiled, ``counts["aot_bw"]`` backward graphs (torch compiles the backward lazily, at the first
    backward). Min-cut partition and kept inference mutations, as ``torch/_dynamo/backends/debugging.py``'s.
    ``graphs``, if given, keeps each compiled graph under the same keys."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    def counting(key):
        def compile_(gm, _inputs):
            counts[key] = counts.get(key, 0) + 1
            if graphs is not None:
                graphs.setdefault(key, []).append(gm)
            return make_boxed_func(gm.forward)
        return compile_

    aot = aot_autograd(fw_compiler=counting("aot_fw"), bw_compiler=counting("aot_bw"),
                       partition_fn=min_cut_rematerialization_partition, keep_inference_input_mutations=True)

    def backend(gm, example_inputs):
        counts["dynamo"] = counts.get("dynamo", 0) + 1
        return aot(gm, example_inputs)

    return backend

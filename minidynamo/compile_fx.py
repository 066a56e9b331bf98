"""The ``inductor`` backend: our Dynamo and our AOTAutograd in front, torch's Inductor behind.

Place in the pipeline: a backend, after AOTAutograd. Dynamo hands a captured graph to
:func:`compile_fx`; mini AOTAutograd (``aot_module_simplified``) functionalizes it,
traces the joint graph with Inductor's decomposition table, partitions it with the
min-cut partitioner and wraps it at runtime; each forward, backward and inference graph
it produces is compiled by torch's Inductor (``compile_fx_forward`` /
``compile_fx_backward`` around ``compile_fx_inner``). Mirrors
``torch/_inductor/compile_fx.py`` (``_compile_fx_main``: ``fw_compiler_base``,
``bw_compiler``, ``partition_fn``, the ``FakeTensorMode`` / ``TracingContext`` it sets up).
Inductor itself is used, never rebuilt; its imports are in ``_torch_private/inductor.py``.

Note [One boundary between our fakes and Inductor's]
    Every graph of ours carries our FakeTensors in ``node.meta["val"]``; Inductor
    reads torch's (``V.fake_mode``, ``detect_fake_mode``, strides for layouts). At
    one place, :func:`_torch_fake_inputs`, each graph's inputs become torch fakes of
    the same sizes, strides, dtype and device, in one torch ``FakeTensorMode`` per
    Dynamo graph (torch too has one mode per frame), and torch's ``FakeTensorProp``
    recomputes every node's value in that mode. Nothing else crosses: the graph,
    its ops and its partition are ours.

Note [A graph crosses once]
    In training, the joint graph crosses (its values recomputed in torch's mode) before
    Inductor's joint-graph passes and our partition; the forward and backward graphs cut
    from it copy its nodes with their values, so they are torch's already and are not
    propagated again (torch's, too, carry the values of the joint trace). Only their
    example inputs may differ: a saved activation in the layout Inductor chose for the
    forward (graph_compile's Note [Saved activations in the forward's layout]).

Note [Our symbols in Inductor's ShapeEnv]
    A graph over our symbols (``s0`` for a dynamic batch) reaches Inductor once, for
    every size, as torch's does. At the same boundary (:class:`_Symbols`), each
    symbol of our ShapeEnv becomes one of a torch ``ShapeEnv`` (``create_symbol``
    with the same example value; ``duck_shape=False``, since ours already
    duck-sized), our expressions are rewritten over those symbols, and our
    guards so far are given to torch's ShapeEnv, so Inductor knows what Dynamo
    assumed. What Inductor decides while compiling becomes guards in torch's
    ShapeEnv; each is rewritten over our symbols and recorded in ours
    (``evaluate_expr``), so it joins the frame's guards, which Dynamo produces
    after the backend returns. Symbols cross at this one place only.

Note [Inductor's compilers, as _compile_fx_main configures them]
    torch's ``compile_fx`` calls ``aot_autograd`` with ``decompositions=
    select_decomp_table()``, ``partition_fn`` (Inductor's joint-graph passes, then
    ``min_cut_rematerialization_partition(compiler="inductor")``),
    ``keep_inference_input_mutations=True``, and three compilers:
    ``fw_compiler_base(is_inference=False)``, ``bw_compiler`` and
    ``fw_compiler_base(is_inference=True)`` for inference graphs (which runs the
    joint-graph passes itself). Ours passes the same to our
    ``aot_module_simplified``, with our min-cut partitioner; its compilers call
    torch's ``compile_fx_forward`` / ``compile_fx_backward`` as torch's do. The
    compiled code is called boxed (one list it empties), torch's convention.

Note [What a warm cache saves us, and what it saves torch]
    With ``TORCHINDUCTOR_CACHE_DIR`` filled by an earlier process, Inductor's FX graph
    cache (``torch/_inductor/codecache.py``: ``FxGraphCache``) serves our forward and
    backward graphs as it serves torch's: our graphs are the same from one process to
    the next, so their keys are. torch's ``AOTAutogradCache``
    (``torch/_functorch/_aot_autograd/autograd_cache.py``) also skips its AOTAutograd,
    Inductor's joint-graph passes (``partition_fn``) included; ours is not that cache, so
    a warm compile of ours still traces, carries the joint graph's values into torch's
    mode (once: Note [A graph crosses once]), runs the joint-graph passes (their pattern
    registration, ``joint_graph.lazy_init``, is the larger part) and partitions. The rest
    of a warm compile, ours or torch's, is importing Inductor, probing the CPU's vector
    ISA and loading the cached kernels.

Note [The backward is compiled when it first runs]
    torch's AOTAutograd lowers the backward graph lazily (``torch/_functorch/_aot_autograd/
    graph_compile.py``: ``_aot_stage2b_bw_compile`` keeps it in an
    ``AutogradLazyBackwardCompileInfo``; runtime_wrappers.py's Note [Backward graph lazy
    lowering]): Inductor compiles it when the first backward runs, so a call that never
    reaches ``.backward()`` (a train-mode model called outside ``no_grad``) pays for the
    forward's kernels only. Ours does the same (:class:`_LazyBackward`), with torch's
    exception: when the graphs carry symbols, Inductor may add guards while compiling
    the backward, and they must join the frame's guards before Dynamo emits them, so
    the backward is compiled at once (torch: ``num_symints_saved_for_bw > 0``). If
    Inductor refuses the backward then, the frame cannot run eagerly any more: the
    backward graph runs as it is (what ``aot_eager`` runs), with an ``AOTFallbackWarning``
    carrying the message of Note [When Inductor refuses a graph].

Note [When Inductor refuses a graph]
    An exception inside Inductor is raised again as ``InductorCompileError`` naming
    the graph (forward, backward or inference of which Dynamo graph) and, when
    Inductor's lowering says it, the op. Our AOTAutograd treats it like any failure
    inside AOT (aot_autograd's Note [AOT failures run the graph eagerly]): the
    Dynamo graph runs eagerly, with an ``AOTFallbackWarning`` carrying that message.
"""

from __future__ import annotations

import contextlib
import types
import warnings
from typing import Any, Callable

import torch
import torch.fx as fx

__all__ = ["compile_fx", "InductorCompileError", "inductor_decompositions"]


class InductorCompileError(RuntimeError):
    """torch's Inductor refused one of our graphs (Note [When Inductor refuses a graph])."""


def _inductor():
    from minidynamo._torch_private.inductor import inductor_compile_fx

    return inductor_compile_fx()


def inductor_decompositions() -> dict:
    """The table torch's ``compile_fx`` traces with: ``torch._inductor.decomposition.select_decomp_table()``."""
    return _inductor().select_decomp_table()


class _Symbols:
    """Note [Our symbols in Inductor's ShapeEnv]: our symbols, as torch's, and torch's guards, as ours."""

    def __init__(self, ti: Any, env: Any) -> None:
        self.ti, self.env = ti, env
        self.ours: Any = None  # our ShapeEnv, once a symbol of it is seen
        self.to_torch: dict = {}
        self.to_ours: dict = {}
        self.guards_given = 0

    def _symbol(self, sym: Any) -> Any:
        if sym not in self.to_torch:
            ti, hint = self.ti, self.ours.var_to_val[sym]
            source = ti.ConstantSource(str(sym))
            if sym in self.ours.int_symbols:
                torch_sym = self.env.create_unspecified_symbol(hint, source, dynamic_dim=ti.DimDynamic.DYNAMIC)
            else:
                torch_sym = self.env.create_symbol(hint, source, dynamic_dim=ti.DimDynamic.DYNAMIC)
            self.to_torch[sym], self.to_ours[torch_sym] = torch_sym, sym
        return self.to_torch[sym]

    def expr(self, expr: Any) -> Any:
        return expr.xreplace({s: self._symbol(s) for s in expr.free_symbols})

    def value(self, v: Any) -> Any:
        """A size, stride or int input: ours as torch's (a plain int stays one)."""
        if not isinstance(v, torch.SymInt):
            return v
        node = v.node
        if node.shape_env is self.env:  # already torch's (a graph partitioned after the joint crossed)
            return v
        if self.ours is None:
            self.ours = node.shape_env
        expr = self.ours.simplify(node.expr)
        if expr.is_Integer:
            return int(expr)
        return self.env.create_symintnode(self.expr(expr), hint=int(node.hint))

    def give_guards(self) -> None:
        """Our guards so far, as torch's (Inductor reads what Dynamo assumed)."""
        if self.ours is None:
            return
        for guard in self.ours.guards[self.guards_given:]:
            if guard.expr.free_symbols <= set(self.to_torch):
                self.env.evaluate_expr(self.expr(guard.expr))
        self.guards_given = len(self.ours.guards)

    def take_guards(self, since: int) -> None:
        """Guards Inductor added to torch's ShapeEnv, recorded in ours."""
        for guard in self.env.guards[since:]:
            expr = guard.expr.xreplace(self.to_ours)
            if expr.free_symbols and self.ours is not None:
                self.ours.evaluate_expr(expr, True, "torch's Inductor assumed it while compiling")
        self.guards_given = len(self.ours.guards) if self.ours is not None else 0


def _fake_like(mode: Any, symbols: _Symbols, v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        # read outside the mode, sizes as torch's symbols (Note [Our symbols in Inductor's ShapeEnv])
        size = tuple(symbols.value(d) for d in v.shape)
        stride = tuple(symbols.value(d) for d in v.stride())
        dtype, device = v.dtype, v.device
        with mode:
            return torch.empty_strided(size, stride, dtype=dtype, device=device)
    return symbols.value(v)


def _crossed(gm: fx.GraphModule, mode: Any, env: Any) -> bool:
    """Every value of ``gm`` is already torch's: a forward or backward cut from a joint graph that crossed."""
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        if "val" not in n.meta:
            return False
        v = n.meta["val"]
        if n.op == "placeholder":
            if isinstance(v, torch.Tensor) and getattr(v, "fake_mode", None) is not mode:
                return False
            if isinstance(v, torch.SymInt) and v.node.shape_env is not env:
                return False
    return True


def _torch_fake_inputs(ti: Any, gm: fx.GraphModule, mode: Any, symbols: _Symbols,
                       example_inputs: list[Any] | None = None) -> list[Any]:
    """Note [One boundary between our fakes and Inductor's]: torch fakes for ``gm``'s inputs, values re-propagated.

    The graph's values are propagated from its placeholders' values (the strides it was traced
    with); an example input of other strides (a saved activation in the layout Inductor gave
    the forward, graph_compile's Note [Saved activations in the forward's layout]) is returned
    with its own strides, as torch's ``as_strided`` of the example input.
    """
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if _crossed(gm, mode, symbols.env):  # Note [A graph crosses once]
        fakes = [n.meta["val"] for n in placeholders]
        symbols.give_guards()
    else:
        fakes = [_fake_like(mode, symbols, n.meta.get("val")) for n in placeholders]
        symbols.give_guards()
        for n in gm.graph.nodes:
            n.meta.pop("val", None)
            n.meta.pop("tensor_meta", None)
        with mode:
            ti.FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fakes)
    for i, ours in enumerate(example_inputs or ()):
        if isinstance(ours, torch.Tensor) and isinstance(fakes[i], torch.Tensor):
            stride = tuple(symbols.value(d) for d in ours.stride())
            if stride != tuple(fakes[i].stride()):
                with mode:
                    fakes[i] = fakes[i].as_strided(fakes[i].shape, stride)
    return fakes


def _boxed(compiled: Callable, positional: bool) -> Callable:
    """Inductor's ``OutputCode`` is called with one list; ours calls forwards positionally."""
    if not positional:
        compiled._boxed_call = True  # type: ignore[attr-defined]
        return compiled

    def call(*args):
        return tuple(compiled(list(args)))

    call.compiled = compiled  # type: ignore[attr-defined]
    return call


class _LazyBackward:
    """Note [The backward is compiled when it first runs]: a boxed backward that compiles on its first call."""

    _boxed_call = True  # called with one list, which it empties (torch's convention)

    def __init__(self, compile_now: Callable[[], Callable], gm: fx.GraphModule) -> None:
        self._compile_now, self._gm = compile_now, gm
        self.compiled: Callable | None = None

    def __call__(self, args: list) -> Any:
        if self.compiled is None:
            try:
                self.compiled = self._compile_now()
            except InductorCompileError as exc:
                from minidynamo.aot.aot_autograd import AOTFallbackWarning

                warnings.warn(f"{exc}; the backward graph runs uncompiled", AOTFallbackWarning, stacklevel=2)
                self.compiled = self._uncompiled
        return self.compiled(args)

    def _uncompiled(self, args: list) -> Any:
        out = self._gm(*args)
        args.clear()
        return out


def _has_symbols(values: list[Any]) -> bool:
    def sym(v: Any) -> bool:
        return isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))

    return any(sym(v) or (isinstance(v, torch.Tensor) and any(map(sym, (*v.shape, *v.stride())))) for v in values)


def _op_of(exc: BaseException) -> str:
    """The op Inductor's lowering names in its error, if any (``LoweringException: ... target: aten.x``)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith("target:"):
            return line.split(":", 1)[1].strip()
    return ""


def compile_fx(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
    """The ``inductor`` backend (Note [Inductor's compilers, as _compile_fx_main configures them])."""
    from minidynamo.aot import aot_module_simplified
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition

    ti = _inductor()
    env = ti.ShapeEnv(duck_shape=False)
    mode = ti.FakeTensorMode(allow_non_fake_inputs=True, shape_env=env)
    symbols = _Symbols(ti, env)
    config_extra = ti.create_compiler_config_extra(gm)
    num_orig_model_outputs = ti.get_num_model_outputs(gm)
    num_example_inputs = len(example_inputs)
    user = getattr(gm, "meta", {}).get("user_code")
    label = f"graph of {user}" if user else f"graph {type(gm).__name__}"

    @contextlib.contextmanager
    def inductor_context(graph_gm: fx.GraphModule):
        meta = graph_gm.meta.pop("fw_metadata", None)  # not part of the graph Inductor hashes
        context = ti.TracingContext(mode)
        if meta is not None:  # what compile_fx_forward reads of torch's ViewAndMutationMeta
            context.fw_metadata = types.SimpleNamespace(
                num_mutated_inp_runtime_indices=meta.num_mutated_inp_runtime_indices,
                static_input_indices=[], bw_donated_idxs=None)
        since = len(env.guards)
        with ti.V.set_fake_mode(mode), ti.tracing(context), ti.enable_python_dispatcher():
            yield
        symbols.take_guards(since)

    def refused(which: str, exc: BaseException) -> InductorCompileError:
        op = _op_of(exc)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return InductorCompileError(
            f"torch's Inductor refused the {which} graph of {label}" + (f" at {op}" if op else "")
            + f": {type(exc).__name__}: {first}")

    def fw_compiler_base(fw_gm: fx.GraphModule, _our_inputs: list, is_inference: bool) -> Callable:
        which = "inference" if is_inference else "forward"
        try:
            fakes = _torch_fake_inputs(ti, fw_gm, mode, symbols)
            with inductor_context(fw_gm), ti.TracingContext.report_output_strides() as strides:
                out = ti.compile_fx_forward(
                    fw_gm, fakes, num_orig_model_outputs=num_orig_model_outputs,
                    num_example_inputs=num_example_inputs, compiler_config_extra=config_extra,
                    inner_compile=ti.compile_fx_inner, is_inference=is_inference)
        except Exception as exc:  # Note [When Inductor refuses a graph]
            raise refused(which, exc) from exc
        call = _boxed(out, positional=True)
        call.output_strides = strides  # graph_compile's Note [Saved activations in the forward's layout]
        return call

    def bw_compiler(bw_gm: fx.GraphModule, our_inputs: list) -> Callable:
        def compile_now() -> Callable:
            try:
                fakes = _torch_fake_inputs(ti, bw_gm, mode, symbols, our_inputs)
                with inductor_context(bw_gm):
                    out = ti.compile_fx_backward(bw_gm, fakes, compiler_config_extra=config_extra,
                                                 inner_compile=ti.compile_fx_inner)
            except Exception as exc:  # Note [When Inductor refuses a graph]
                raise refused("backward", exc) from exc
            return _boxed(out, positional=False)

        if symbols.ours is not None or _has_symbols(our_inputs):  # Note [The backward is compiled when it first runs]
            return compile_now()
        return _LazyBackward(compile_now, bw_gm)

    def partition_fn(joint: fx.GraphModule, *, num_fwd_outputs: int, static_lifetime_input_indices: Any = None,
                     mutated_input_indices: Any = None) -> Any:
        """torch's ``compile_fx.partition_fn``: Inductor's joint-graph passes, then the min-cut partition."""
        try:
            fakes = _torch_fake_inputs(ti, joint, mode, symbols)
            devices = ti.get_inputs_devices(fakes, joint)
            with inductor_context(joint):
                joint = ti.joint_graph_passes(joint, skip_invoke_subgraph=True, input_device=next(iter(devices)))
        except Exception as exc:  # Note [When Inductor refuses a graph]
            raise refused("joint", exc) from exc
        return min_cut_rematerialization_partition(
            joint, num_fwd_outputs=num_fwd_outputs, static_lifetime_input_indices=static_lifetime_input_indices,
            mutated_input_indices=mutated_input_indices)

    return aot_module_simplified(
        gm, example_inputs,
        fw_compiler=lambda g, i: fw_compiler_base(g, i, is_inference=False),
        bw_compiler=bw_compiler,
        inference_compiler=lambda g, i: fw_compiler_base(g, i, is_inference=True),
        partition_fn=partition_fn,
        decompositions=inductor_decompositions(),
        keep_inference_input_mutations=True,
    )


def output_code_summary(source_code: str) -> str:
    """What ``TORCH_LOGS=output_code`` prints, cut to what a reader compares: the kernels and ``call``.

    The names of the C++ kernels Inductor generated, then the Python ``call`` function
    that runs them (the wrapper), as Inductor wrote it; cache paths and hashes are dropped.
    """
    lines = source_code.splitlines()
    kernels = [ln.split(" = ")[0] for ln in lines if "= async_compile.cpp_pybinding(" in ln]
    out = ["kernels: " + ", ".join(kernels)]
    inside = False
    for ln in lines:
        if ln.strip().startswith("def call(self, args)") or ln.startswith("def call(args)"):
            inside = True
        if inside:
            if "torchinductor" in ln or ln.strip().startswith("# Topologically Sorted"):
                continue
            out.append(ln.rstrip())
            if ln.strip().startswith("return "):
                break
    return "\n".join(out)

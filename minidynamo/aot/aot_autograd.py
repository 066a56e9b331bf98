"""``aot_function``, ``aot_module``, ``aot_module_simplified``: the entry points of mini AOTAutograd.

Place in the pipeline: the entry points. Dynamo's ``aot_eager`` backend calls
``aot_module_simplified`` on each captured graph; a reader can call ``aot_function``
on any function. Mirrors ``torch/_functorch/aot_autograd.py``. What a compile does
(metadata, joint graph, partition, wrappers) is graph_compile.py; the default
compilers are compilers.py. This module flattens the arguments, keeps one compiled
variant per grad mode and input aliasing, and runs a graph eagerly when AOT fails.

Note [Compiled once, like torch's aot_function]
    torch's ``aot_function`` compiles on the first call and reuses the result
    for every later call without checking the arguments again: guarding is
    Dynamo's job. Ours does the same, except for the two things Dynamo does not
    guard for us (Note [Aliasing is part of the compile key]), so the per-call
    cost is the runtime wrapper's plus one grad-mode check.

Note [Aliasing is part of the compile key]
    Whether the graph is a training or an inference graph follows grad mode
    when it is compiled; a call in the other grad mode must not reuse it (a first
    call under ``no_grad`` would freeze an inference graph for later training).
    Dynamo's global-state guard already keeps each graph in its grad mode;
    ``aot_function`` checks it too (one C call), and compiles a variant per mode.
    Which inputs share a storage decides the dedupe and synthetic-base
    wrappers, but only matters when the graph mutates an input: then every call
    checks the inputs' aliasing (storages, identities, offsets) against the one
    compiled for (Note [The aliasing check per call]), and a new aliasing compiles
    its own variant. torch instead adds storage-overlap guards to Dynamo for the
    inputs it found overlapping, and checks nothing for inputs it did not: after
    ``f(x, y)``, torch's ``f(x, x[:])`` with ``x`` mutated reuses the graph
    compiled for two storages (``x[:]`` does not see the write).

Note [AOT failures run the graph eagerly]
    Any exception inside AOT (an op functionalization does not handle, a joint
    trace autograd refuses) makes that graph run eagerly, with an
    ``AOTFallbackWarning`` naming the graph, the user's function, the op and its
    source line, and the reason. At call time only the compiled graphs and the
    wrappers run, so nothing of AOT's is raised there that eager would not raise.
"""

from __future__ import annotations

import collections
import functools
import operator
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx

from minidynamo import events
from minidynamo._torch_private import SUPPORTED_NODES, tree_flatten, tree_unflatten
from minidynamo.aot.activation_checkpoint import (is_cond, is_tag_activation_checkpoint, is_while_loop,
                                                  recompute_region)
from minidynamo.aot.compilers import _boxed_graph, _run_graph  # noqa: F401 - _boxed_graph: importable from here
from minidynamo.aot.graph_compile import (  # noqa: F401 - importable from here, as before the split
    AOTConfig,
    CompiledArtifacts,
    aot_dispatch,
    create_aot_dispatcher_function,
)
from minidynamo.aot.partitioners import default_partition
from minidynamo.aot.sym_tracing import (SymbolicAOTFailed, is_dynamic_graph, rebind_unbacked, shape_env_of_graph,
                                        static_copy, symbolic_example_inputs)

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "AOTConfig", "AOTFallbackWarning", "CompiledArtifacts",
           "SymbolicAOTFailed"]


@dataclass
class _Entry:
    """One compiled variant: for a grad mode and, if it mutates inputs, an aliasing of its inputs."""

    compiled: Callable
    alias_sig: tuple | None  # None: aliasing does not matter (no input is mutated)
    art: CompiledArtifacts
    fast: Callable | None = None
    variants: dict = field(default_factory=dict)  # other alias signatures, same grad mode
    alias_ok: Callable | None = None  # args -> whether they alias as alias_sig says; None: no check


def _aliasing_check(sig: tuple | None, flat_args: list[Any]) -> Callable[[tuple], bool] | None:
    """The per-call check that arguments alias as ``sig`` says, chosen once (Note [The aliasing check per call]).

    Note [The aliasing check per call]
        A graph that mutates no input checks nothing. One compiled for inputs of
        which no two share a storage (``sig == ()``, by far the common case)
        checks exactly that: the tensors' storages, one C call each through
        ``map``, are all distinct (a storage has one Python object while it is
        alive: PyObject preservation, so a ``set`` of them counts the distinct
        ones). Any sharing, or an argument that is not a tensor where one was,
        falls to the full ``_alias_signature``, which picks or compiles the
        variant for it. Only a graph compiled for shared storages computes the
        full signature on every call. What this cannot see is two storages over
        the same memory (two ``torch.from_numpy`` of one array), as torch's
        guards cannot either.
    """
    if sig is None:
        return None
    if sig:
        return lambda args: _alias_signature(args) == sig
    positions = [i for i, a in enumerate(flat_args) if isinstance(a, torch.Tensor)]
    count = len(positions)
    if count < 2:
        return lambda args: True
    if count == len(flat_args):
        def no_shared_storage(args: tuple) -> bool:
            try:
                return len(set(map(_untyped_storage, args))) == count
            except Exception:  # a non-tensor, or a tensor without a storage
                return _alias_signature(args) == ()
    else:
        pick = operator.itemgetter(*positions)

        def no_shared_storage(args: tuple) -> bool:
            try:
                return len(set(map(_untyped_storage, pick(args)))) == count
            except Exception:
                return _alias_signature(args) == ()
    return no_shared_storage



# Arguments pytree would look into; anything else is a leaf.
_CONTAINERS = (tuple, list, dict)


def _all_leaves(args: tuple) -> bool:
    """True when pytree would flatten ``args`` to itself: no argument is a container.

    Checked per distinct type (usually one: ``torch.Tensor``), so 200 tensor
    arguments cost one ``set(map(type, args))``, not 200 ``isinstance`` calls.
    """
    return not any(k in SUPPORTED_NODES or issubclass(k, _CONTAINERS) for k in set(map(type, args)))


def _fast_call(compiled: Callable, out_spec: Any, returns_tuple: bool | None = True) -> Callable:
    """``compiled`` plus the output unflatten, specialised once for the common output shapes.

    Note [The hot path skips pytree]
        Every call of a compiled function would flatten its arguments and
        unflatten its outputs. When the first call's arguments were already flat
        (positional tensors, no containers), later calls like it pass straight
        through; a tuple of tensors comes back as it is. Anything else takes the
        pytree path, which also checks that the structure is the compiled one.
    """
    if out_spec.is_leaf():
        return lambda *args: compiled(*args)[0]
    if out_spec.type is tuple and all(out_spec.child(i).is_leaf() for i in range(out_spec.num_children)):
        return compiled if returns_tuple else lambda *args: tuple(compiled(*args))
    return lambda *args: tree_unflatten(list(compiled(*args)), out_spec)


_Parameter = torch.nn.Parameter
_PLAIN = frozenset({int, float, bool, type(None), str})
_untyped_storage = torch.Tensor.untyped_storage


def _alias_signature(flat_args: tuple) -> tuple:
    """Which flat arguments share a storage, and how (Note [Aliasing is part of the compile key]).

    Tensors are grouped by their storage (a view, ``x.detach()``, ``y.set_(x.untyped_storage())``
    all share ``x``'s). ``()`` when no two share one; else one entry per argument:
    ``None`` for a non-tensor or a tensor alone, else ``(first position in its group,
    same object as that one, storage offset)``. Per call, Note [The aliasing check per call]
    decides when this is needed.
    """
    first: dict[int, int] = {}
    keys: list[int | None] = []
    shared = False
    for i, a in enumerate(flat_args):
        t = type(a)  # isinstance on a Parameter costs ~0.4 us (a Python __instancecheck__): test the type first
        if t is torch.Tensor or t is _Parameter or (t not in _PLAIN and isinstance(a, torch.Tensor)):
            try:
                k = id(a.untyped_storage())  # alive as long as ``a`` is: ids cannot be reused meanwhile
            except Exception:  # no storage (sparse, ...): its autograd base stands for it
                base = a._base
                k = id(a if base is None else base)
            if k in first:
                shared = True
            else:
                first[k] = i
            keys.append(k)
        else:
            keys.append(None)
    if not shared:
        return ()
    counts = collections.Counter(keys)
    return tuple(
        None if k is None or counts[k] == 1
        else (first[k], flat_args[first[k]] is flat_args[i], flat_args[i].storage_offset())
        for i, k in enumerate(keys)
    )


class AOTFallbackWarning(UserWarning):
    """A graph AOTAutograd could not compile runs eagerly instead (the message says why)."""


def _failure_reason(exc: BaseException) -> str:
    where = getattr(exc, "_md_aot_node", None)
    reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    if where is not None:
        op, line = where
        return f"at {op}" + (f" (line {line})" if line else "") + f": {reason}"
    return reason


def aot_function(fn: Callable, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None, *,
                 partition_fn: Callable = default_partition, decompositions: dict | None = None,
                 keep_inference_input_mutations: bool = False, inference_compiler: Callable | None = None,
                 name: str | None = None) -> Callable:
    """Compile ``fn`` through mini AOTAutograd (Note [Compiled once, like torch's aot_function]).

    ``fw_compiler(gm, example_inputs)`` / ``bw_compiler`` return a callable taking
    the graph's inputs positionally; the default runs the graph. ``decompositions``: an
    op -> decomposition table the joint trace applies, as torch's (Note [Decomposing with
    the backend's table], make_fx.py); ``inference_compiler``: the inference graph's
    compiler (default ``fw_compiler``), as torch's. The returned
    function has ``.artifacts`` (meta, joint graph, partition) of its latest compile,
    and ``.compile_now(*flat_args)``, which compiles for those arguments right away
    (the Dynamo backend calls it at Dynamo's compile time).
    """
    config = AOTConfig(fw_compiler or _run_graph, bw_compiler, partition_fn, keep_inference_input_mutations,
                       decompositions=decompositions, inference_compiler=inference_compiler)
    label = name or getattr(fn, "__qualname__", repr(fn))
    state: dict[str, Any] = {}
    # Note [Aliasing is part of the compile key]: grad mode -> the entry compiled for it.
    by_grad: dict[bool, _Entry] = {}

    def flat_fn_for(in_spec):
        def flat_fn(*flat):
            a, kw = tree_unflatten(list(flat), in_spec)
            out = fn(*a, **kw)
            flat_out, out_spec = tree_flatten(out)
            state["out_spec"] = out_spec
            return tuple(flat_out)
        return flat_fn

    def compile_flat(flat_args: list[Any], in_spec: Any, flat: bool) -> _Entry:
        grad = torch.is_grad_enabled()
        sig = _alias_signature(flat_args)
        entry = by_grad.get(grad)
        if entry is not None and (entry.alias_sig is None or entry.alias_sig == sig):
            return entry
        if entry is not None and sig in entry.variants:
            return entry.variants[sig]
        art = CompiledArtifacts()
        flat_fn = flat_fn_for(in_spec)
        try:
            compiled = create_aot_dispatcher_function(flat_fn, flat_args, config, art)
            mutates = art.meta is not None and any(
                i.mutates_data or i.mutates_metadata for i in art.meta.input_info)
        except Exception as exc:  # Note [AOT failures run the graph eagerly]
            warnings.warn(
                f"minidynamo.aot: {label} runs eagerly, AOTAutograd could not compile it {_failure_reason(exc)}",
                AOTFallbackWarning, stacklevel=3,
            )
            art.fallback = _failure_reason(exc)
            compiled, mutates = flat_fn, False
        returned_function.artifacts = art
        new = _Entry(compiled, sig if mutates else None, art)
        new.alias_ok = _aliasing_check(new.alias_sig, flat_args)
        if "out_spec" in state and flat and not art.fallback:
            new.fast = _fast_call(compiled, state["out_spec"], returns_tuple=True)
        if entry is None:
            by_grad[grad] = new
        else:
            entry.variants[sig] = new
        return new

    def returned_function(*args, **kwargs):
        entry = by_grad.get(torch.is_grad_enabled())
        if (entry is not None and entry.fast is not None and not kwargs and len(args) == state["num_args"]
                and _all_leaves(args) and (entry.alias_ok is None or entry.alias_ok(args))):
            return entry.fast(*args)  # the hot path: flat positional arguments flatten to themselves
        flat_args, in_spec = tree_flatten((args, kwargs))
        if "in_spec" not in state:
            state["num_args"], state["in_spec"] = len(flat_args), in_spec
        elif in_spec != state["in_spec"]:
            raise TypeError(
                f"aot_function: compiled for arguments shaped {state['in_spec']}, called with {in_spec} "
                "(a new structure needs a new aot_function)"
            )
        flat = not kwargs and _all_leaves(args)
        entry = compile_flat(flat_args, in_spec, flat)
        outs = entry.compiled(*flat_args)
        if entry.fast is None and flat and not entry.art.fallback:
            entry.fast = _fast_call(entry.compiled, state["out_spec"], returns_tuple=type(outs) is tuple)
        return tree_unflatten(list(outs), state["out_spec"])

    def compile_now(*flat_args):
        """Compile for these flat arguments now (under the current grad mode), without running."""
        _, in_spec = tree_flatten((flat_args, {}))
        if "in_spec" not in state:
            state["num_args"], state["in_spec"] = len(flat_args), in_spec
        compile_flat(list(flat_args), in_spec, True)

    def call_flat(*flat_args):
        """Like the function, for callers that promise flat positional leaves (Dynamo's backend entry)."""
        entry = by_grad.get(torch.is_grad_enabled())
        if (entry is not None and entry.fast is not None and len(flat_args) == state["num_args"]
                and (entry.alias_ok is None or entry.alias_ok(flat_args))):
            return entry.fast(*flat_args)
        return returned_function(*flat_args)

    returned_function.artifacts = CompiledArtifacts()
    returned_function.call_flat = call_flat
    returned_function.compile_now = compile_now
    returned_function.__wrapped__ = fn
    return returned_function


def aot_module(module: torch.nn.Module, fw_compiler: Callable | None = None, bw_compiler: Callable | None = None,
               **kwargs: Any) -> torch.nn.Module:
    """An ``nn.Module`` whose forward runs ``module`` through ``aot_function``, parameters as inputs."""
    names = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]

    def functional_call(params_and_buffers, *args, **kw):
        return torch.func.functional_call(module, dict(zip(names, params_and_buffers)), args, kw)

    compiled = aot_function(functional_call, fw_compiler, bw_compiler, **kwargs)

    class AOTModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.orig_module = module

        def forward(self, *args, **kw):
            params = [p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()]
            return compiled(params, *args, **kw)

    out = AOTModule()
    out.artifacts = compiled.artifacts
    return out


class _SourceLineInterpreter(fx.Interpreter):
    """Runs Dynamo's graph node by node, each node's FakeTensor ops stamped with its user source line.

    Note [AOT ops carry Dynamo's source lines]
        Dynamo records on every node the line of user code it was interpreting
        (``node.meta["source_line"]``, ``OutputGraph.create_proxy``). The AOT
        passes (metadata collection, joint capture) run that graph; run through
        this interpreter, each forward op event carries the same line, so the
        pass timeline lights one source line in all three passes. Backward ops
        come from the autograd engine, not from a node, and carry none. Only the
        tracing passes use it: the compiled function runs the captured graph.
    """

    unbacked = False  # the graph's values hold unbacked symbols (set by _SourceLined)

    def run_node(self, n: fx.Node) -> Any:
        with events.source_line(n.meta.get("source_line")):
            try:
                if n.op == "call_function" and is_tag_activation_checkpoint(n.target):
                    return self._run_checkpointed(n)
                if n.op == "call_function" and is_cond(n.target):  # aot/higher_order.py
                    from minidynamo.aot.higher_order import run_cond

                    return run_cond(*self.fetch_args_kwargs_from_env(n)[0])
                if n.op == "call_function" and is_while_loop(n.target):  # aot/higher_order.py
                    from minidynamo.aot.higher_order import run_while_loop

                    return run_while_loop(*self.fetch_args_kwargs_from_env(n)[0])
                out = super().run_node(n)
                if self.unbacked:  # Note [Unbacked symbols are rebound to Dynamo's] (sym_tracing.py)
                    rebind_unbacked(n.meta.get("example_value"), out)
                return out
            except Exception as exc:  # name the user's op in the fallback warning
                if not hasattr(exc, "_md_aot_node"):
                    exc._md_aot_node = (_node_label(n), n.meta.get("source_line"))
                raise


    def _run_checkpointed(self, n: fx.Node) -> Any:
        """The body of a ``tag_activation_checkpoint`` node, in place, its ops tagged (activation_checkpoint.py)."""
        body, *operands = self.fetch_args_kwargs_from_env(n)[0]
        regions = [m for m in n.graph.nodes if m.op == "call_function" and is_tag_activation_checkpoint(m.target)]
        with recompute_region(regions.index(n) + 1, body.meta.get("_checkpoint_context_fn")):
            return tuple(_SourceLineInterpreter(body).run(*operands))


def _node_label(n: fx.Node) -> str:
    t = n.target
    return getattr(t, "__name__", None) or str(t) if n.op == "call_function" else f"{n.op} {t}"


class _SourceLined(torch.nn.Module):
    """``gm`` as a submodule (so ``functional_call`` can swap its parameters), run by the interpreter."""

    def __init__(self, gm: fx.GraphModule):
        super().__init__()
        self.gm = gm
        env = shape_env_of_graph(gm)
        self.unbacked = env is not None and bool(env.unbacked)

    def forward(self, *args: Any) -> Any:
        interp = _SourceLineInterpreter(self.gm)
        interp.unbacked = self.unbacked
        return interp.run(*args)


def aot_module_simplified(gm: torch.nn.Module, example_inputs: list[Any], fw_compiler: Callable | None = None,
                          bw_compiler: Callable | None = None, *, partition_fn: Callable = default_partition,
                          decompositions: dict | None = None, keep_inference_input_mutations: bool = False,
                          inference_compiler: Callable | None = None) -> Callable:
    """The Dynamo backend entry: ``gm``'s parameters and buffers become graph inputs.

    Note [Compiled inside the backend call]
        Like torch's, ours compiles right away, at Dynamo's compile time, for the
        grad mode that is on now (Dynamo's global-state guard keeps later calls
        in it; a call in another grad mode compiles its own variant rather than
        reuse this one). Every pass runs on fake copies of ``example_inputs``
        (the converter keeps their aliasing), so the real tensors' data is never
        read or written. If any pass fails, the graph runs eagerly (Note [AOT
        failures run the graph eagerly]): nothing AOT raises reaches a call.
    """
    named = [*gm.named_parameters(), *gm.named_buffers()]
    names, params = [n for n, _ in named], [p for _, p in named]
    num_params = len(params)
    num_example = len(example_inputs)
    lined = _SourceLined(gm) if isinstance(gm, fx.GraphModule) else None

    def flat_module_fn(*flat):
        ps, args = flat[:num_params], flat[num_params:]
        if lined is None:
            return torch.func.functional_call(gm, dict(zip(names, ps)), tuple(args))
        return torch.func.functional_call(lined, {f"gm.{n}": p for n, p in zip(names, ps)}, tuple(args))

    user = getattr(gm, "meta", {}).get("user_code")
    label = f"graph {type(gm).__name__} of {user}" if user else type(gm).__name__
    compiled = aot_function(flat_module_fn, fw_compiler, bw_compiler, partition_fn=partition_fn,
                            decompositions=decompositions, keep_inference_input_mutations=keep_inference_input_mutations,
                            inference_compiler=inference_compiler, name=label)
    if is_dynamic_graph(gm):  # Note [AOT traces Dynamo's symbols] (sym_tracing.py)
        return _compile_symbolic(gm, compiled, params, example_inputs, label, fw_compiler=fw_compiler,
                                 bw_compiler=bw_compiler, partition_fn=partition_fn, decompositions=decompositions,
                                 keep_inference_input_mutations=keep_inference_input_mutations,
                                 inference_compiler=inference_compiler)
    compiled.compile_now(*params, *example_inputs)
    if compiled.artifacts.fallback is not None:
        eager = functools.partial(gm.forward)
        eager.artifacts = compiled.artifacts  # type: ignore[attr-defined]
        return eager
    call_flat = compiled.call_flat  # Dynamo passes tensors and ints, never containers: no pytree per call

    def forward(*runtime_args):
        if len(runtime_args) != num_example:
            raise TypeError(f"aot_module_simplified: compiled for {num_example} inputs, got {len(runtime_args)}")
        return call_flat(*params, *runtime_args)

    forward.artifacts = compiled.artifacts
    forward.aot_function = compiled
    forward.zero_grad = lambda: None
    return forward


# -- the symbolic path of aot_module_simplified: one compile for every size, or SymbolicAOTFailed ---


def _compile_symbolic(gm: fx.GraphModule, compiled: Callable, params: list, example_inputs: list[Any], label: str,
                      **options: Any) -> Callable:
    """One compile for every size (Note [AOT traces Dynamo's symbols]); raises SymbolicAOTFailed.

    Note [Variants of a symbolic graph]
        The compile is for the grad mode on now and the inputs' aliasing seen now
        (Note [Aliasing is part of the compile key]). A later call in the other
        grad mode, or one whose aliasing differs where the graph mutates an input,
        cannot get a symbolic variant (aliased inputs have no symbolic fakes): it
        gets a static compile for its own sizes, one per distinct set of sizes, so
        no variant traced for one size ever runs another.
    """
    try:
        sym_inputs, mode = symbolic_example_inputs(gm, example_inputs)
    except Exception as exc:  # noqa: BLE001
        raise SymbolicAOTFailed(_failure_reason(exc)) from exc
    env = mode.shape_env
    saved = _snapshot(env)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AOTFallbackWarning)
            compiled.compile_now(*params, *sym_inputs)
        reason = compiled.artifacts.fallback
    except Exception as exc:  # noqa: BLE001 - internal: the per-size path takes over
        reason = _failure_reason(exc)
    if reason is not None:
        _restore(env, saved)  # a failed trace's decisions guard nothing
        if not any(_our_symint_input(n) for n in gm.graph.nodes if n.op == "placeholder"):
            # only unbacked symbols (.item(), nonzero): no size to specialize on, so no per-size compile
            # helps; the graph runs eagerly (Note [AOT failures run the graph eagerly])
            warnings.warn(f"minidynamo.aot: {label} runs eagerly, AOTAutograd could not compile it {reason}",
                          AOTFallbackWarning, stacklevel=2)
            eager = functools.partial(gm.forward)
            eager.artifacts = compiled.artifacts  # type: ignore[attr-defined]
            return eager
        raise SymbolicAOTFailed(reason)
    art = compiled.artifacts
    grad = torch.is_grad_enabled()
    mutates = any(i.mutates_data or i.mutates_metadata for i in art.meta.input_info)
    sig = _alias_signature((*params, *sym_inputs)) if mutates else None
    alias_ok = _aliasing_check(sig, [*params, *sym_inputs])
    call_flat = compiled.call_flat
    num_example = len(example_inputs)
    per_size: dict = {}

    def static_variant(runtime_args):
        key = (torch.is_grad_enabled(), _alias_signature(runtime_args), tuple(
            (tuple(a.shape), a.stride(), a.dtype, a.requires_grad) if isinstance(a, torch.Tensor) else (type(a), a)
            for a in runtime_args))
        fn = per_size.get(key)
        if fn is None:
            fn = per_size[key] = aot_module_simplified(static_copy(gm), list(runtime_args), **options)
        return fn(*runtime_args)

    def forward(*runtime_args):
        if len(runtime_args) != num_example:
            raise TypeError(f"aot_module_simplified: compiled for {num_example} inputs, got {len(runtime_args)}")
        if torch.is_grad_enabled() is not grad or (alias_ok is not None and not alias_ok((*params, *runtime_args))):
            return static_variant(runtime_args)  # Note [Variants of a symbolic graph]
        return call_flat(*params, *runtime_args)

    forward.artifacts = art
    forward.aot_function = compiled
    forward.symbolic = True
    forward.zero_grad = lambda: None
    return forward


def _our_symint_input(n: fx.Node) -> bool:
    v = n.meta.get("example_value")
    return isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and not all(isinstance(s, int) for s in v.shape)
                                           and any(getattr(s.node, "hint", None) is not None for s in v.shape
                                                   if isinstance(s, torch.SymInt)))


def _snapshot(env: Any) -> tuple:
    return (list(env.guards), dict(env.replacements), dict(env.divisible), list(env.specializations))


def _restore(env: Any, saved: tuple) -> None:
    env.guards[:], env.specializations[:] = saved[0], saved[3]
    env.replacements.clear(), env.replacements.update(saved[1])
    env.divisible.clear(), env.divisible.update(saved[2])

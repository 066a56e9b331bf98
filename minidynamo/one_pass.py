"""Could one FakeTensor pass do the work of three? Two experiments that answer it.

Place in the pipeline: beside it, for chapter 12. The real stack runs fake tensors
through the program three times (Dynamo's ``get_fake_value``, AOTAutograd's
``run_functionalized_fw_and_collect_metadata``, its ``make_fx`` joint capture);
mirrors no single PyTorch file, it argues with ``torch/_dynamo/utils.py``,
``torch/_functorch/_aot_autograd/collect_metadata_analysis.py`` and
``graph_capture.py`` together.

1. :func:`watch_levels`: a ``TorchFunctionMode`` (the level Dynamo sees: Python
   calls of torch functions) and a ``TorchDispatchMode`` (below autograd: ATen ops)
   both watch a forward and its backward (Note [The backward is invisible to Dynamo]).
2. :func:`one_pass_compile`: the one-pass design. The frame's tensor ops run once,
   on fake tensors, under autograd, functionalization and a tracer together; at
   the end ``autograd.grad`` is called inside the same trace, so the ATen joint
   graph falls out of the single pass (Note [The one-pass design]).

Note [The backward is invisible to Dynamo]
    ``loss.backward()`` hands the graph autograd recorded to the autograd engine,
    which is C++: it calls each node's backward formula, whose ATen ops enter the
    dispatcher directly. No Python frame runs and no ``torch.*`` function is
    called, so a TorchFunctionMode (and Dynamo, which interprets Python frames)
    sees nothing of the backward; a TorchDispatchMode sees every op. That is why
    the backward graph must be traced at the ATen level, by AOTAutograd.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from minidynamo._torch_private import TorchDispatchMode

__all__ = ["LevelWatch", "watch_levels", "one_pass_compile", "OnePassCompiled", "merged_backend", "MergedStats"]


# --- experiment 1: which level sees the backward ---------------------------------


@dataclass
class LevelWatch:
    """What each level saw, per phase: ``function["forward"]``, ``dispatch["backward"]``, ..."""

    function: dict[str, list[str]] = field(default_factory=lambda: {"forward": [], "backward": []})
    dispatch: dict[str, list[str]] = field(default_factory=lambda: {"forward": [], "backward": []})

    def table(self) -> str:
        rows = [f"{'level':<28}{'forward':>9}{'backward':>10}"]
        for name, seen in (("TorchFunctionMode (Dynamo)", self.function), ("TorchDispatchMode (ATen)", self.dispatch)):
            rows.append(f"{name:<28}{len(seen['forward']):>9}{len(seen['backward']):>10}")
        return "\n".join(rows)


class _FunctionWatcher(TorchFunctionMode):
    def __init__(self, watch: LevelWatch, phase: list[str]):
        super().__init__()
        self.watch, self.phase = watch, phase

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
        self.watch.function[self.phase[0]].append(name)
        return func(*args, **(kwargs or {}))


class _DispatchWatcher(TorchDispatchMode):
    def __init__(self, watch: LevelWatch, phase: list[str]):
        super().__init__()
        self.watch, self.phase = watch, phase

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watch.dispatch[self.phase[0]].append(str(func))
        return func(*args, **(kwargs or {}))


def watch_levels(fn: Callable, *args: Any) -> LevelWatch:
    """Run ``fn(*args)`` then ``.backward()`` on its (scalar) result under both modes at once."""
    watch, phase = LevelWatch(), ["forward"]
    with _DispatchWatcher(watch, phase), _FunctionWatcher(watch, phase):
        out = fn(*args)
    if not (isinstance(out, torch.Tensor) and out.dim() == 0 and out.requires_grad):
        raise ValueError(f"watch_levels: {getattr(fn, '__name__', fn)} must return a scalar that requires grad")
    phase[0] = "backward"
    with _DispatchWatcher(watch, phase), _FunctionWatcher(watch, phase):
        out.backward()  # the function level sees this one call and nothing inside it
    return watch


# --- experiment 2: the one-pass design ------------------------------------------
#
# Note [The one-pass design]
#     The question: why not let Dynamo's own pass do everything? Put autograd,
#     functionalization and a tracer under the fake values Dynamo computes, and at
#     the end call autograd.grad inside the same trace: the ATen joint graph falls
#     out of pass 1, and passes 2 and 3 disappear. ``one_pass_compile`` builds that
#     design from the package's own parts: our FakeTensorMode, our functionalization
#     (``aot/functional_tensor.py``) and our make_fx tracer (``aot/make_fx.py``),
#     with the partitioner of ``aot/partitioners.py`` after it.
#     Where ours is simpler: the frame's Python runs natively instead of in the
#     symbolic interpreter. Under a dispatcher-level mode the interpreter would add
#     only Python-level knowledge (guards, graph breaks); what that costs the
#     one-pass design is exactly what chapter 12's failures show.
#     What the design cannot have: anything known only after the forward. The
#     tangents' shapes (placeholders are made when the outputs appear), which
#     outputs alias inputs (so get no tangent and must be regenerated), which
#     inputs are mutated (a mutated input that requires grad must be cloned before
#     the first op touches it). The three-pass stack learns these in pass 2.

ONE_PASS = "one_pass"


def _lifted_parameters(fn: Callable) -> list[tuple[dict, str, torch.Tensor]]:
    """(owner ``_parameters`` dict, name, tensor) of every module ``fn`` is or closes over.

    Dynamo lifts module parameters as graph inputs; so must we, or the trace would
    meet real tensors mixed with fake ones.
    """
    modules: list[torch.nn.Module] = []
    if isinstance(fn, torch.nn.Module):
        modules.append(fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, torch.nn.Module):
            modules.append(value)
    code = getattr(fn, "__code__", None)
    for name in code.co_names if code is not None else ():
        value = getattr(fn, "__globals__", {}).get(name)
        if isinstance(value, torch.nn.Module):
            modules.append(value)
    seen: set[int] = set()
    found = []
    for module in modules:
        for sub in module.modules():
            for name, p in sub._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    found.append((sub._parameters, name, p))
    return found


@contextlib.contextmanager
def _swapped(params: list[tuple[dict, str, torch.Tensor]], values: list[Any]):
    saved = [(owner, name, owner[name]) for owner, name, _ in params]
    try:
        for (owner, name, _), value in zip(params, values):
            owner[name] = value
        yield
    finally:
        for owner, name, value in saved:
            owner[name] = value


class OnePassCompiled:
    """``one_pass_compile(fn)``: traced on the first call, in one FakeTensor pass; no guards.

    After the first call: ``joint`` (the ATen joint graph), ``fw_module`` and
    ``bw_module`` (partitioned), ``num_traces`` (always 1: nothing is ever retraced).
    """

    def __init__(self, fn: Callable, *, clone_inputs_requiring_grad: bool = False, check_aliases: bool = False):
        self.fn = fn
        # Note [The merged design]: clone every input that requires grad before the first op,
        # because which of them will be mutated is not known yet; give up (Defer) when an
        # output turns out to alias an input.
        self.clone_inputs_requiring_grad = clone_inputs_requiring_grad
        self.check_aliases = check_aliases
        self.params = _lifted_parameters(fn)
        self.joint = self.fw_module = self.bw_module = None
        self.num_traces = 0
        self._num_user_outs = 0
        self._mutated_inputs: list[int] = []

    def __call__(self, *args: Any) -> Any:
        flat = [p for _, _, p in self.params] + list(args)
        if self.joint is None:
            self._trace(flat)
        outs = _OnePassFunction.apply(self, *flat)
        user_outs = outs[: self._num_user_outs]
        with torch.no_grad():  # mutations the trace saw at its end are written back
            for i, new in zip(self._mutated_inputs, outs[self._num_user_outs:]):
                flat[i].copy_(new)
        return user_outs[0] if self._single else tuple(user_outs)

    def _trace(self, flat: list[Any]) -> None:
        from minidynamo._torch_private import no_dispatch
        from minidynamo.aot.functional_tensor import FunctionalTensorMode
        from minidynamo.aot.make_fx import make_fx
        from minidynamo.aot.partitioners import default_partition
        from minidynamo.fake import FakeTensorMode

        fake_mode, func_mode = FakeTensorMode(), FunctionalTensorMode()
        num_params = len(self.params)
        info: dict[str, Any] = {}

        def joint(*primals):
            fun = [func_mode.to_fun(p) if isinstance(p, torch.Tensor) else p for p in primals]
            work = list(fun)
            if self.clone_inputs_requiring_grad:
                work = [w.clone() if isinstance(w, torch.Tensor) and w.requires_grad else w for w in fun]
            with _swapped(self.params, work[:num_params]):
                out = self.fn(*work[num_params:])
            single = not isinstance(out, (tuple, list))
            outs = [out] if single else list(out)
            tracer = info["tracer"]
            for node in tracer.graph.nodes:  # everything so far is the forward
                node.meta["partitioner_tag"] = "is_forward"
            # Only now are the outputs known: make a tangent placeholder for each that needs one.
            # The one-pass design cannot ask "does this output alias an input?" before the trace,
            # so every output requiring grad gets a tangent (Note [The one-pass design]).
            if self.check_aliases:
                _check_merged_outputs(fun, work, outs, primals, func_mode)
            need = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
            first_op = next(n for n in tracer.graph.nodes if n.op != "placeholder")
            tangents = []
            for i, o in enumerate(need):
                with no_dispatch():  # on meta, claiming the output's device (issue 29: never cpu by default)
                    real = torch.zeros(tuple(o.shape), dtype=o.dtype, device="meta")
                fake = fake_mode.from_tensor(real, device=o.device)
                with tracer.graph.inserting_before(first_op):
                    node = tracer.graph.placeholder(f"tangents_{i + 1}")
                tracer.track(fake, node)
                tangents.append(func_mode.to_fun(fake, mirror_leaf=False))
            grad_primals = [p for p in fun if isinstance(p, torch.Tensor) and p.requires_grad]
            if need:
                grads = list(torch.autograd.grad(need, grad_primals, tangents, allow_unused=True))
            else:  # no output requires grad: nothing to differentiate
                grads = [None] * len(grad_primals)
            it = iter(grads)
            input_grads = [next(it) if isinstance(p, torch.Tensor) and p.requires_grad else None for p in fun]
            # Mutations are known at the end of the pass: return the new values to write back.
            mutated = [i for i, p in enumerate(work) if isinstance(p, torch.Tensor) and func_mode.was_mutated(p)]
            tangent_outs = [
                (i, tuple(o.shape), o.dtype, o.device)
                for i, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad
            ]
            info.update(single=single, num_user_outs=len(outs), mutated=mutated, tangent_outs=tangent_outs)
            fw_outs = outs + [work[i] for i in mutated]
            unwrapped = [func_mode.from_fun(o) for o in fw_outs + input_grads]
            return tuple(unwrapped)

        names = [f"primals_{i + 1}" for i in range(len(flat))]
        gm = make_fx(
            joint, fake_mode=fake_mode, placeholder_names=names, outer_modes=[func_mode],
            pass_name=ONE_PASS, on_start=lambda tracer: info.__setitem__("tracer", tracer),
            dead_code_elimination=True,
        )(*flat)
        for node in gm.graph.nodes:
            node.meta.setdefault("partitioner_tag", "is_backward")
        self._single, self._num_user_outs = info["single"], info["num_user_outs"]
        self._mutated_inputs = info["mutated"]
        self._tangent_outs = info["tangent_outs"]
        num_fwd = info["num_user_outs"] + len(info["mutated"])
        parts = default_partition(gm, num_fwd_outputs=num_fwd)
        self.joint, self.fw_module, self.bw_module = gm, parts.fw_module, parts.bw_module
        self._num_fwd = num_fwd
        self.num_traces += 1


class _OnePassFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, compiled: OnePassCompiled, *flat):
        outs = compiled.fw_module(*flat)
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        fw_outs, saved = outs[: compiled._num_fwd], outs[compiled._num_fwd:]
        ctx.compiled = compiled
        ctx.save_for_backward(*saved)
        # Mutated inputs' new values are outputs without gradients.
        ctx.mark_non_differentiable(*fw_outs[compiled._num_user_outs:])
        return tuple(fw_outs)

    @staticmethod
    def backward(ctx, *grad_outs):
        compiled = ctx.compiled
        # One tangent per output that required grad at trace time, zeros where autograd passes None.
        tangents = []
        for i, shape, dtype, device in compiled._tangent_outs:
            g = grad_outs[i]
            tangents.append((g if g is not None else torch.zeros(shape, dtype=dtype, device=device)).contiguous())
        grads = compiled.bw_module(*ctx.saved_tensors, *tangents)
        grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
        return (None, *grads)


def one_pass_compile(fn: Callable) -> OnePassCompiled:
    """Compile ``fn`` in ONE FakeTensor pass (Note [The one-pass design]); equal to eager or a concrete failure."""
    return OnePassCompiled(fn)


# --- experiment 3: the merged design, under Dynamo's interpreter -------------------
#
# Note [The merged design]
#     The fair version of the question keeps Dynamo's interpreter (guards, graph
#     breaks, side effects, the fake values it needs for Python decisions) and merges
#     the FakeTensor passes beneath it as far as they can be merged: AOTAutograd's
#     metadata pass (2) and joint pass (3) become one trace of Dynamo's graph, which
#     must decide up front what pass 2 would have told it:
#     * which inputs to clone before the first op (a mutated input that requires
#       grad must be): it clones *every* input that requires grad, a cost the
#       forward graph then carries (counted in ``MergedStats.clones``);
#     * a leaf that requires grad mutated in place is an error in eager; the clone
#       would hide it, so the end of the trace checks for it and raises eager's error;
#     * inputs that alias each other: known from the real inputs before any trace
#       (storages overlap), handed to the three-pass path (``deferred_before``);
#     * an output that aliases an input, or an input whose metadata was mutated
#       (``t_()``): known only at the end of the single forward; ours then hands the
#       graph to the three-pass path, and the merged trace was wasted
#       (``deferred_after``). A fuller version could regenerate the view, or replay
#       the metadata change on the real input, there: the knowledge comes in time.
#     Pass 1 stays separate: Dynamo needs each fake value to decide what the Python
#     program does before it knows what the graph will be (a graph break or a restart
#     throws its work away), and AOTAutograd runs on the finished graph.


class _Defer(Exception):
    """The merged trace cannot finish this graph: hand it to the three-pass path."""


def _check_merged_outputs(fun, work, outs, primals, func_mode) -> None:
    for i, (p, w) in enumerate(zip(fun, work)):
        if (
            isinstance(p, torch.Tensor)
            and primals[i].is_leaf
            and primals[i].requires_grad
            and w is not p
            and torch.is_grad_enabled()
            and func_mode.was_mutated(w)
        ):
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    for i, w in enumerate(work):
        if isinstance(w, torch.Tensor) and func_mode.metadata_mutated(w, primals[i]):
            raise _Defer("an input's metadata was mutated (t_, as_strided_, ...)")
    ins = [w for w in work if isinstance(w, torch.Tensor)]
    for o in outs:
        if isinstance(o, torch.Tensor) and any(getattr(o, "storage_", None) is getattr(w, "storage_", 0) for w in ins):
            raise _Defer("an output aliases an input")


@dataclass
class MergedStats:
    """What the merged backend did, over all graphs it was given."""

    merged: int = 0
    deferred_before: int = 0  # inputs alias each other: known before any trace
    deferred_after: int = 0  # an output aliases an input: known after the merged trace
    clones: int = 0  # clone ops of inputs in the merged forward graphs

    def __str__(self) -> str:
        return (
            f"merged {self.merged}, deferred before tracing {self.deferred_before}, "
            f"deferred after tracing {self.deferred_after}, input clones {self.clones}"
        )


def _inputs_overlap(tensors: list[torch.Tensor]) -> bool:
    from minidynamo.fake import shares_storage

    return any(shares_storage(a, b) for i, a in enumerate(tensors) for b in tensors[i + 1 :])


def merged_backend(stats: MergedStats | None = None) -> Callable:
    """A backend for ``md.compile``: AOTAutograd's passes 2 and 3 merged (Note [The merged design])."""
    stats = MergedStats() if stats is None else stats

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        from minidynamo.backends import aot_eager

        tensors = [t for t in example_inputs if isinstance(t, torch.Tensor)]
        if _inputs_overlap(tensors):
            stats.deferred_before += 1
            return aot_eager(gm, example_inputs)
        compiled = OnePassCompiled(gm, clone_inputs_requiring_grad=True, check_aliases=True)
        try:
            compiled._trace([p for _, _, p in compiled.params] + list(example_inputs))
        except _Defer:
            stats.deferred_after += 1
            return aot_eager(gm, example_inputs)
        stats.merged += 1
        stats.clones += sum(
            1 for n in compiled.fw_module.graph.nodes if n.op == "call_function" and "clone" in str(n.target)
        )

        def run(*args):
            out = compiled(*args)
            return out if isinstance(out, tuple) else (out,)  # Dynamo's graphs return tuples

        return run

    backend.stats = stats
    return backend

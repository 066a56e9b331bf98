"""RuntimeEpilogue: one real call of an AOT-compiled function, and what its runtime wrapper did after the graph.

Place in the pipeline: beside it, for chapter 11. It calls a function compiled by
``minidynamo.aot.aot_function`` once, records the event log and the inputs before
and after, and steps through the wrapper's epilogue: what the compiled forward
returned, which input was written back and how (seen in its version counter and
value), which output was regenerated from which base and by which route (the
``alias_regen`` events of ``aot/runtime_wrappers.py``). It is a
:class:`~minidynamo.widgets.stepper.Stepper`, so the slider turns its pages in the
static book too.

PyTorch has no such widget; the nearest is reading
``torch/_functorch/_aot_autograd/runtime_wrappers.py`` (``_create_runtime_wrapper``:
``_apply_input_mutations``, then the output handlers of ``make_output_handler``).

Note [What the epilogue reads]
    Everything shown is observed on the call or read from the compiled
    artifacts, never recomputed by the widget: the forward's return values are
    the fx graph's output node (their names as the graph prints them), the
    classification of inputs and outputs is the call's ``ViewAndMutationMeta``,
    a write-back shows as the input's ``_version`` and value before and after
    the call, and a regenerated output is the ``alias_regen`` event the wrapper
    emitted for it, plus what the returned tensor is a view of. Indices are
    those of the graph's inputs: after a dedupe or a synthetic base (listed on
    the first page) they differ from the caller's.
"""

from __future__ import annotations

import html as _html
from typing import Any, Callable

import torch

from minidynamo import events
from minidynamo.widgets.stepper import Stepper

__all__ = ["RuntimeEpilogue"]

_ALIAS_TYPES = {"alias_of_input", "is_input", "alias_of_intermediate", "alias_of_intermediate_save_as_output",
                "alias_of_intermediate_base_is_user_output"}


def _value(t: Any) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    if t.numel() > 12:
        return f"tensor of shape {tuple(t.shape)}"
    return f"{[round(v, 4) for v in t.detach().flatten().tolist()]} shape {tuple(t.shape)}"


def _snapshot(args: tuple) -> list[dict | None]:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append({"version": a._version, "value": _value(a), "shape": tuple(a.shape), "stride": a.stride(),
                        "grad_fn": type(a.grad_fn).__name__ if a.grad_fn is not None else None})
        else:
            out.append(None)
    return out


def _page(rows: list[tuple[str, str]], note: str = "") -> str:
    """One page: a row per fact, ``key: value`` (so the page's text reads the same as its HTML)."""
    lines = "".join(
        f'<div><span style="color:#555">{_html.escape(k)}:</span> <code>{_html.escape(v)}</code></div>'
        for k, v in rows
    )
    extra = f'<div style="margin-top:4px"><i>{_html.escape(note)}</i></div>' if note else ""
    return f"<div>{lines}{extra}</div>"


class RuntimeEpilogue(Stepper):
    """The steps of the runtime wrapper's epilogue on one call (``RuntimeEpilogue.run(compiled, *args)``)."""

    def __init__(self, steps: list[str], labels: list[str], title: str, record: dict):
        super().__init__(steps, title=title, labels=labels)
        self.record = record  # what was observed (tests and curious readers)

    @classmethod
    def run(cls, compiled: Callable, *args: Any, title: str | None = None) -> "RuntimeEpilogue":
        """Call ``compiled(*args)`` once (an ``aot_function`` result) and build the pages from what happened."""
        before = _snapshot(args)
        with events.record() as log:
            outs = compiled(*args)
        after = _snapshot(args)
        art = compiled.artifacts
        meta = art.meta
        outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        fw = art.partition.fw_module if art.partition is not None else art.fw_module
        returned = [getattr(a, "name", repr(a)) for a in next(n for n in fw.graph.nodes if n.op == "output").args[0]]
        regen = {e.output_index: e for e in log if e.kind == "alias_regen"}
        name = title or f"runtime epilogue of {getattr(compiled, '__name__', 'the compiled function')}"
        steps, labels = [], []

        # 1. the call
        rows = [(f"input {i}", "not a tensor" if b is None else f"{b['value']} (version {b['version']})")
                for i, b in enumerate(before)]
        rows.append(("wrappers", " -> ".join(art.wrappers)))
        steps.append(_page(rows))
        labels.append("the call: inputs before it, and the wrappers around the compiled graph")

        # 2. what the compiled forward returned
        n_mut = meta.num_mutated_inp_runtime_indices
        n_out = meta.num_outputs
        n_inter = meta.num_intermediate_bases
        rows = []
        for pos, value in enumerate(returned):
            if pos < n_mut:
                what = f"new value of input {meta.mutated_inp_runtime_indices[pos]} (for the wrapper to write back)"
            elif pos < n_mut + n_out:
                j = pos - n_mut
                what = f"output {j}: {meta.output_info[j].output_type.name}"
            elif pos < n_mut + n_out + n_inter:
                what = "an intermediate base (extra output: aliases of it are regenerated from it)"
            else:
                what = "saved for the backward (stays in the autograd graph, the caller never sees it)"
            rows.append((f"[{pos}] {value}", what))
        handled = meta.mutated_graph_handled_indices
        note = (f"inputs {handled} were written inside the graph (aten.copy_ at its end), not by the wrapper"
                if handled else "")
        steps.append(_page(rows, note))
        labels.append(f"the compiled forward returned {len(returned)} values")

        # 3. input mutations: in the graph, or written back by the wrapper
        written = []
        for idx in list(handled) + list(meta.mutated_inp_runtime_indices):
            info = meta.input_info[idx]
            b, a = before[idx], after[idx]
            kinds = [k for k, on in (("data", info.mutates_data), ("metadata", info.mutates_metadata)) if on]
            where = "inside the graph (aten.copy_)" if idx in handled else "by the runtime wrapper"
            if idx in handled:
                how = "copy_ of the new value, the graph's last op"
            elif info.mutates_metadata and info.mutates_data:
                how = "as_strided_ to the new size/stride, then copy_ of the new value"
            elif info.mutates_metadata:
                how = "as_strided_ to the new size/stride/offset (no data is copied)"
            elif info.mutations_under_no_grad_or_inference_mode:
                how = "copy_ through a detached alias: the write is not recorded by autograd, as under eager's no_grad"
            else:
                how = "copy_ of the new value (autograd records it, as it recorded eager's in-place op)"
            rows = [("mutation", " and ".join(kinds)), ("written", where), ("how", how),
                    ("value", f"{b['value']}  ->  {a['value']}"),
                    ("version counter", f"{b['version']} -> {a['version']}"),
                    ("stride", f"{b['stride']} -> {a['stride']}")]
            steps.append(_page(rows))
            labels.append(f"input {idx}: written back " + ("in the graph" if idx in handled else "by the wrapper"))
            written.append(idx)
        untouched = [i for i, b in enumerate(before) if b is not None and i not in written]
        if untouched:
            same = all(before[i]["version"] == after[i]["version"] for i in untouched)
            steps.append(_page([(f"input {i}", f"version {before[i]['version']} -> {after[i]['version']}") for i in untouched],
                               "no mutation recorded for them, so no work per call: the indices above were fixed "
                               "at compile time" + ("" if same else " (a version changed: see above)")))
            labels.append("inputs left alone")

        # 4. outputs: returned as they are, or regenerated from a base
        for j, info in enumerate(meta.output_info):
            out = outs[j] if j < len(outs) else None
            kind = info.output_type.name
            rows = [("output type", kind)]
            if kind == "is_input":
                rows.append(("returned", f"the caller's own input {info.base_idx} object: {out is args[info.base_idx]}"))
            elif kind in _ALIAS_TYPES:
                e = regen.get(j)
                if kind == "alias_of_input":
                    base = f"input {info.base_idx}"
                    is_view = isinstance(out, torch.Tensor) and out._base is not None and (
                        out._base is args[info.base_idx] or out._base is args[info.base_idx]._base)
                elif kind == "alias_of_intermediate_base_is_user_output":
                    base = f"output {info.base_idx} (a user output)"
                    is_view = isinstance(out, torch.Tensor) and out._base is not None
                else:
                    base = f"intermediate base {info.base_idx} (the extra forward output)"
                    is_view = isinstance(out, torch.Tensor) and out._base is not None
                chain = " -> ".join(str(s) for s in info.view_meta_sequence) if info.view_meta_sequence else "-"
                rows += [("regenerated from", base), ("route", e.how if e is not None else "no alias_regen event"),
                         ("recorded view chain", chain), ("the caller's tensor is a view", str(is_view))]
            else:
                rows.append(("returned", "as the graph computed it (no alias to rebuild)"))
            if isinstance(out, torch.Tensor):
                rows.append(("value", _value(out)))
                rows.append(("grad_fn", type(out.grad_fn).__name__ if out.grad_fn is not None else "None"))
            steps.append(_page(rows))
            labels.append(f"output {j}: " + ("regenerated" if kind in _ALIAS_TYPES and kind != "is_input"
                                             else "the input itself" if kind == "is_input" else "returned as computed"))

        record = {"before": before, "after": after, "returned": returned, "written": written,
                  "regen": {j: e.how for j, e in regen.items()}, "outputs": outs}
        return cls(steps, labels, name, record)

"""``python -m minidynamo.bench.inductor_models``: real models we did not write, ours + Inductor against torch's.

Place in the pipeline: outside it; it sweeps the ``inductor`` backend (minidynamo/compile_fx.py)
over small real models built from configs (random weights, no downloads): transformers' GPT-2,
BERT, DistilBERT, Llama, T5, DeBERTa-v2 and ViT, timm's resnet10t, ViT-tiny, MobileNetV3,
EfficientNet-B0 and ConvNeXt-atto (minidynamo/zoo.py, Note [timm without torchvision]). Mirrors
the spirit of torch's ``benchmarks/dynamo/huggingface.py`` and ``timm_models.py`` at toy size.

Per model and mode (``infer``: eval mode under ``no_grad``; ``train``: train mode, the loss's
``backward()``), with ``torch.set_num_threads(1)`` and every dropout probability set to 0 (so
eager, ours and torch's draw no random numbers and must agree):

- cold compile: ``compile()`` and the first step in a fresh process with a fresh
  ``TORCHINDUCTOR_CACHE_DIR`` (every C++ kernel built), once for ours, once for torch's, or
  ``--cold-repeats N`` times each, the median printed (Note [Cold samples in both orders]);
- graphs/breaks/eager: what each Dynamo compiled in that first step, and every warning of ours
  (an ``AOTFallbackWarning`` is a graph run eagerly), printed as it is;
- a third fresh process, over both caches, compiles both again (warm) and runs eager, ours and
  torch's on copies of one model: numerics (outputs, loss, gradients, buffers) of ours against
  eager and against torch's Inductor (``bitwise``, ``fp32`` within rtol 1e-4 / atol 1e-5, else
  the largest difference, also relative to the tensor's largest value), then per call in paired
  interleaved rounds (median of each round's compiled/eager ratio, ours and torch's against the
  same eager; ``ours/torch`` is their quotient) and, less sensitive to a loaded machine,
  ``min`` (ours' fastest call over torch's); with ``--paired-repeats N``, N such processes
  (Note [Paired samples over processes]).

Nothing here asserts a time; times are whatever the machine gives.

Note [Paired rounds in both orders]
    A round calls eager, then the two compiled models one after the other. The one that
    runs second runs the Inductor kernels the first has just run (both systems' graphs are
    the same, so their kernels are the same code from one cache), in a warm allocator, while
    the first follows eager's hundreds of ATen calls; on models this small (a call of a few
    hundred microseconds) the position alone moves the ratio. Measured on DistilBERT
    inference, 200 rounds, one process each: ours/torch 0.97 and 0.98 with ours always right
    after eager, 0.73 and 0.77 with ours always after torch's. The sweep before this note
    always ran ours first. So the order alternates from round to round (eager, ours, torch;
    then eager, torch, ours): each system takes each place in half the rounds.

Note [Cold samples in both orders]
    A cold compile builds every C++ kernel with g++, reading the same headers and the same
    Python modules from disk: the system whose fresh process runs second finds them in the
    page cache. One sample per system also moves by about 10% between runs on 2 cores. With
    ``--cold-repeats N`` the pair's order alternates (ours then torch's, then torch's then
    ours) and each system's median is printed beside all its samples.

Note [Paired samples over processes]
    The per-call ratio moves more between processes than within one: MobileNetV3 training
    gave ours/torch 1.10 in the sweep's one paired process and 0.98, 0.99, 1.02 and 0.99 in
    four more of the same worker on the same warm cache (each process lays the kernels'
    code and the allocator's blocks out anew). With ``--paired-repeats N`` each row runs N
    paired processes over the same caches and shows the one whose ours/torch is the median
    (the lower middle of an even count), all N ratios printed beside it, and the numerics
    of every process (they must all agree).

Note [Ill-conditioned training rows]
    MobileNetV3 and EfficientNet-B0 in training, 2 images of 32x32 (or 64x64), end in
    BatchNorms over a 1x1 (2x2) map of 2 images: normalizing two values leaves only
    rounding error to differentiate, so their gradients are rounding noise blown up by
    ``1/sqrt(var + eps)`` (eager in float32 against eager in float64: over 1e8 times the
    largest value apart; resnet10t at 32x32, mildly: 7e-5 of the largest gradient). Any reordering of the sums (Inductor's fused kernels, ours or
    torch's) moves them: on those rows ``differs`` against eager is expected, and ours
    against torch's Inductor is the figure to read.
tests/test_inductor_models_like_torch.py checks a few of these differentially in CI.

    python -m minidynamo.bench.inductor_models [--only NAMES] [--modes infer,train] [--rounds N]
        [--cold-repeats N] [--paired-repeats N] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

ROUNDS = 40


def _hf(config: str, model: str, **cfg):
    from minidynamo import zoo

    zoo._without_broken_torchvision()
    zoo._quiet_transformers()
    import torch
    import transformers

    torch.manual_seed(0)
    return getattr(transformers, model)(getattr(transformers, config)(**cfg))


def _ids():
    import torch

    return torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(0))


def _image(size: int = 32):
    import torch

    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))


def build(name: str):
    """``(model, args, kwargs)``: one of ``MODELS``, seeded, float32, on CPU, dropout off."""
    import torch

    from minidynamo import zoo

    if name in zoo.BUILDERS:
        model, args, kwargs = zoo.BUILDERS[name]()
    elif name == "distilbert":
        model = _hf("DistilBertConfig", "DistilBertForSequenceClassification", n_layers=2, dim=64, n_heads=4,
                    hidden_dim=128, vocab_size=128, max_position_embeddings=32, num_labels=3)
        args, kwargs = (), {"input_ids": _ids(), "labels": torch.tensor([0, 2])}
    elif name == "hf_vit":
        model = _hf("ViTConfig", "ViTForImageClassification", num_hidden_layers=2, hidden_size=64,
                    num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8, num_labels=3)
        args, kwargs = (), {"pixel_values": _image(), "labels": torch.tensor([0, 2])}
    elif name in TIMM:
        model = zoo.timm_model(name, **TIMM[name])
        args, kwargs = (_image(),), {}
    else:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    _dropout_off(model)
    return model, args, kwargs


TIMM = {"mobilenetv3_small_050": {"num_classes": 10}, "efficientnet_b0": {"num_classes": 10},
        "convnext_atto": {"num_classes": 10}}
MODELS = ("gpt2", "bert", "distilbert", "llama", "t5", "deberta_v2", "hf_vit", "resnet10t", "vit_tiny",
          "mobilenetv3_small_050", "efficientnet_b0", "convnext_atto")


def _dropout_off(model) -> None:
    """Every dropout probability 0: ``nn.Dropout`` modules and the float ``*drop*`` attributes
    attention functions read (``attention_dropout``, DeBERTa's ``drop_prob``)."""
    import torch

    for m in model.modules():
        if isinstance(m, (torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d,
                          torch.nn.AlphaDropout, torch.nn.FeatureAlphaDropout)):
            m.p = 0.0
        for k, v in list(vars(m).items()):
            if "drop" in k.lower() and isinstance(v, float):
                setattr(m, k, 0.0)


def _loss(out):
    """The scalar a training step differentiates: the model's loss, else the sum of its output."""
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    return out.sum()


def _tensors(out) -> dict:
    """The output's tensors by name (a ModelOutput's fields, or the one tensor)."""
    import torch

    if isinstance(out, torch.Tensor):
        return {"out": out.detach()}
    return {k: v.detach() for k, v in out.items() if isinstance(v, torch.Tensor)}


def _step(fn, model, args, kwargs, mode: str):
    import torch

    if mode == "infer":
        with torch.no_grad():
            return fn(*args, **kwargs)
    out = fn(*args, **kwargs)
    _loss(out).backward()
    return out


def _prepare(model, mode: str):
    return model.train() if mode == "train" else model.eval()


def _state(model, out) -> dict:
    return {"outputs": _tensors(out),
            "grads": {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
            "buffers": {n: b.clone() for n, b in model.named_buffers()}}


def _compile(system: str, model):
    import torch

    if system == "ours":
        import minidynamo as md

        return md.compile(model, backend="inductor")
    return torch.compile(model, backend="inductor")


def _graphs_figure(system: str, caught: list) -> str:
    """``graphs/breaks/eager``: graphs compiled, graph breaks, frames or graphs run eagerly instead."""
    if system == "ours":
        from minidynamo.aot.aot_autograd import AOTFallbackWarning
        from minidynamo.symbolic import counters

        aot_eager = sum(1 for w in caught if issubclass(w.category, AOTFallbackWarning))
        return f"{counters['graphs']}/{counters['graph_breaks']}/{counters['eager_fallbacks'] + aot_eager}"
    from minidynamo._torch_private import dynamo_counters

    c = dynamo_counters()
    return f"{c['stats']['unique_graphs']}/{sum(c['graph_break'].values())}/-"


def cold_worker(name: str, mode: str, system: str, out_path: str) -> None:
    """A fresh process, a fresh Inductor cache: compile and the first step, timed; graphs and warnings."""
    import torch

    torch.set_num_threads(1)
    model, args, kwargs = build(name)
    _prepare(model, mode)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _step(_compile(system, model), model, args, kwargs, mode)
    compile_s = time.perf_counter() - start
    notes = [f"{w.category.__name__}: {str(w.message).strip().splitlines()[0][:300]}" for w in caught
             if w.category is not DeprecationWarning and str(w.message).strip()]
    with open(out_path, "w") as f:
        json.dump({"compile_s": compile_s, "graphs": _graphs_figure(system, caught), "warnings": notes}, f)


def _diff(a: dict, b: dict) -> str:
    """``bitwise``, ``fp32`` (rtol 1e-4 / atol 1e-5), or the largest difference (also relative to
    the largest value of that tensor) and where."""
    import torch

    worst, where, rel = 0.0, "", 0.0
    exact, close = True, True
    for group in ("outputs", "grads", "buffers"):
        if a[group].keys() != b[group].keys():
            return f"differs: {group} {sorted(set(a[group]) ^ set(b[group]))[:3]}"
        for k, x in a[group].items():
            y = b[group][k]
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"differs: {group}.{k} {tuple(x.shape)}/{x.dtype} vs {tuple(y.shape)}/{y.dtype}"
            if torch.equal(x, y):
                continue
            exact = False
            if not x.is_floating_point():
                return f"differs: {group}.{k}"
            if not torch.allclose(x, y, rtol=1e-4, atol=1e-5):
                close = False
            d = (x - y).abs().max().item()
            if d > worst:
                worst, where = d, f"{group}.{k}"
                rel = d / max(y.abs().max().item(), 1e-30)
    if exact:
        return "bitwise"
    if close:
        return "fp32"
    return f"differs: max|d| {worst:.1e} ({rel:.1e} of max|ref|) at {where}"


def paired_worker(name: str, mode: str, out_path: str, rounds: int) -> None:
    """Eager, ours and torch's on copies of one model, in one process: numerics, then paired rounds."""
    import torch

    torch.set_num_threads(1)
    base, args, kwargs = build(name)
    _prepare(base, mode)
    models = {s: copy.deepcopy(base) for s in ("eager", "ours", "torch")}
    fns = {"eager": models["eager"]}
    warm = {}
    for system in ("ours", "torch"):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fns[system] = _compile(system, models[system])
            first = _step(fns[system], models[system], args, kwargs, mode)
        warm[system] = time.perf_counter() - start
    states = {"eager": _state(models["eager"], _step(fns["eager"], models["eager"], args, kwargs, mode))}
    for system in ("ours", "torch"):
        states[system] = _state(models[system], first)
    ratios: dict[str, list[float]] = {"ours": [], "torch": []}
    fastest = {"eager": float("inf"), "ours": float("inf"), "torch": float("inf")}
    for i in range(rounds):
        times = {}
        # Note [Paired rounds in both orders]
        for system in ("eager", "ours", "torch") if i % 2 == 0 else ("eager", "torch", "ours"):
            t0 = time.perf_counter()
            _step(fns[system], models[system], args, kwargs, mode)
            times[system] = time.perf_counter() - t0
            fastest[system] = min(fastest[system], times[system])
        for system in ("ours", "torch"):
            ratios[system].append(times[system] / times["eager"])

    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if xs else None

    with open(out_path, "w") as f:
        json.dump({"warm_compile_s": warm, "ours_vs_eager": _diff(states["ours"], states["eager"]),
                   "ours_vs_torch": _diff(states["ours"], states["torch"]),
                   "torch_vs_eager": _diff(states["torch"], states["eager"]),
                   "per_call": {s: median(r) for s, r in ratios.items()},
                   "fastest_ours_over_torch": fastest["ours"] / fastest["torch"] if rounds else None}, f)


def _subprocess(argv: list[str], cache_dir: str) -> None:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, PYTHONWARNINGS="ignore::DeprecationWarning")
    subprocess.run([sys.executable, "-m", "minidynamo.bench.inductor_models", *argv], check=True, env=env)


def _cold_order(repeats: int) -> list[str]:
    """Which system each cold sample belongs to, in the order they run: the first system of
    each pair alternates (Note [Cold samples in both orders])."""
    order = []
    for i in range(repeats):
        order += ["ours", "torch"] if i % 2 == 0 else ["torch", "ours"]
    return order


def _paired_median(samples: list[dict]) -> dict:
    """The paired rounds of several processes as one row (Note [Paired samples over processes])."""
    done = [s for s in samples if s.get("per_call", {}).get("ours") and s.get("per_call", {}).get("torch")]
    if len(samples) == 1 or not done:
        return samples[0]
    rel = sorted(s["per_call"]["ours"] / s["per_call"]["torch"] for s in done)
    middle = rel[(len(rel) - 1) // 2]
    row = next(s for s in done if s["per_call"]["ours"] / s["per_call"]["torch"] == middle)
    return dict(row, per_call_samples=[s["per_call"]["ours"] / s["per_call"]["torch"] for s in done],
                numerics_in_every_process=sorted({s.get("ours_vs_torch", "-") for s in samples}))


def measure(name: str, mode: str, rounds: int, cold_repeats: int = 1, paired_repeats: int = 1) -> dict:
    row: dict = {"model": name, "mode": mode}
    with tempfile.TemporaryDirectory() as tmp:
        samples: dict[str, list[dict]] = {"ours": [], "torch": []}
        for i, system in enumerate(_cold_order(cold_repeats)):
            path = os.path.join(tmp, f"{system}-{i}.json")
            cache = os.path.join(tmp, f"cache-{system}-{i}")
            try:
                _subprocess(["--cold", name, mode, system, path], cache)
                with open(path) as f:
                    samples[system].append(json.load(f))
            except subprocess.CalledProcessError as exc:
                samples[system].append({"error": f"worker exited {exc.returncode}"})
            if len(samples[system]) == 1 and os.path.isdir(cache):
                os.replace(cache, os.path.join(tmp, f"cache-{system}"))  # it serves the paired run
            else:
                shutil.rmtree(cache, ignore_errors=True)
        for system, got in samples.items():
            row[system] = _median_sample(got)
        both = os.path.join(tmp, "cache-both")
        for system in ("ours", "torch"):
            if os.path.isdir(os.path.join(tmp, f"cache-{system}")):
                shutil.copytree(os.path.join(tmp, f"cache-{system}"), both, dirs_exist_ok=True)
        paired = []
        for i in range(paired_repeats):  # Note [Paired samples over processes]
            path = os.path.join(tmp, f"paired-{i}.json")
            try:
                _subprocess(["--paired", name, mode, path, str(rounds)], both)
                with open(path) as f:
                    paired.append(json.load(f))
            except subprocess.CalledProcessError as exc:
                paired.append({"error": f"worker exited {exc.returncode}"})
        row["paired"] = _paired_median(paired)
    return row


def _median_sample(samples: list[dict]) -> dict:
    """The first sample's graphs and warnings, with ``compile_s`` the median of every sample that
    finished (the lower middle one of an even count) and ``compile_samples`` all of them."""
    done = [s for s in samples if "compile_s" in s]
    if not done:
        return samples[0]
    times = sorted(s["compile_s"] for s in done)
    return dict(done[0], compile_s=times[(len(times) - 1) // 2], compile_samples=[s["compile_s"] for s in done])


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def print_row(r: dict, header: bool = False) -> None:
    if header:
        print(f"{'model':22s} {'mode':5s} {'per call/eager':>13s} {'ours/':>6s} {'':>5s} {'cold compile s':>15s} "
              f"{'graphs/breaks/eager':>19s}  numerics: ours vs eager; ours vs torch's inductor")
        print(f"{'':28s} {'ours':>6s} {'torch':>6s} {'torch':>6s} {'min':>5s} {'ours':>7s} {'torch':>7s} {'ours':>9s} "
              f"{'torch':>9s}")
    o, t, p = r.get("ours", {}), r.get("torch", {}), r.get("paired", {})
    pc = p.get("per_call", {})
    rel = pc["ours"] / pc["torch"] if pc.get("ours") and pc.get("torch") else None
    print(f"{r['model']:22s} {r['mode']:5s} {_fmt(pc.get('ours'), '6.2f'):>6s} {_fmt(pc.get('torch'), '6.2f'):>6s} "
          f"{_fmt(rel, '6.2f'):>6s} {_fmt(p.get('fastest_ours_over_torch'), '5.2f'):>5s} {_fmt(o.get('compile_s'), '7.1f'):>7s} {_fmt(t.get('compile_s'), '7.1f'):>7s} "
          f"{o.get('graphs', o.get('error', '-')):>9s} {t.get('graphs', t.get('error', '-')):>9s}  "
          f"{p.get('ours_vs_eager', p.get('error', '-'))}; {p.get('ours_vs_torch', '-')}", flush=True)
    if len(p.get("per_call_samples", [])) > 1:
        print(f"    per call ours/torch, one paired process each: {', '.join(f'{x:.2f}' for x in p['per_call_samples'])}"
              f"; ours vs torch's inductor in each: {', '.join(p['numerics_in_every_process'])}", flush=True)
    for system, got in (("ours", o), ("torch", t)):
        if len(got.get("compile_samples", [])) > 1:
            print(f"    cold compile samples, {system}: {', '.join(f'{x:.1f}' for x in got['compile_samples'])}",
                  flush=True)
    for w in o.get("warnings", []):
        print(f"    ours: {w}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minidynamo.bench.inductor_models",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="NAMES", help=f"comma-separated, of {','.join(MODELS)}")
    parser.add_argument("--modes", default="infer,train", help="comma-separated, of infer,train")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", metavar="PATH", help="append each row, as one JSON line")
    parser.add_argument("--cold-repeats", type=int, default=1, metavar="N",
                        help="cold-compile samples per system, in alternating order; the median is printed")
    parser.add_argument("--paired-repeats", type=int, default=1, metavar="N",
                        help="paired processes per row; the row shows the one with the median ours/torch per call")
    parser.add_argument("--cold", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--paired", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold:
        cold_worker(*args.cold)
        return 0
    if args.paired:
        name, mode, path, rounds = args.paired
        paired_worker(name, mode, path, int(rounds))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    for i, name in enumerate(names):
        for j, mode in enumerate(args.modes.split(",")):
            row = measure(name, mode, args.rounds, args.cold_repeats, args.paired_repeats)
            print_row(row, header=(i == 0 and j == 0))
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Command line: /usr/bin/python3 -m tools.export --model SPEC --out model.onnx [options]

SPEC forms
  pkg.module:Name        import a module, take Name (nn.Module class or factory function)
  path/to/file.py:Name   the same from a file
  bert_small, bert, ...  a model of tools/models/export_zoo.py (its registry() names; the short
                         names bert, distilbert, gpt2, llama, whisper, vit, resnet pick the
                         small configurations)
A class is instantiated, a function called, both with --arg KEY=VALUE keyword arguments.  The
result is a model with `example_inputs` (a tuple, or a method returning one), a tuple
(model, args[, export options dict]), or a dict {model, args, input_names, output_names,
dynamic_axes}.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

from .core import DEFAULT_OPSET, DEFAULT_STRATEGY, STRATEGIES, export, plain_export
from .hierarchy import DEFAULT_KEEP

REPO = Path(__file__).resolve().parents[2]
ZOO = REPO / "tools" / "models" / "export_zoo.py"
ZOO_ALIASES = {"bert": "bert_small", "distilbert": "distilbert_small", "gpt2": "gpt2_small_cfg",
               "llama": "llama_small", "whisper": "whisper_small_enc", "vit": "vit_small",
               "resnet": "resnet_small"}


class UsageError(Exception):
    pass


def _import_file(path: str):
    p = Path(path).resolve()
    if not p.is_file():
        raise UsageError(f"model file '{path}' not found")
    spec = importlib.util.spec_from_file_location(f"onnxforge_user_{p.stem}", p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and pickling look the module up
    sys.path.insert(0, str(p.parent))
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return mod


def _normalize(obj, source: str) -> dict:
    if isinstance(obj, dict):
        spec = dict(obj)
    elif isinstance(obj, tuple) and obj and isinstance(obj[0], torch.nn.Module):
        spec = {"model": obj[0], "args": obj[1] if len(obj) > 1 else None}
        if len(obj) > 2:
            spec.update(obj[2])
    elif isinstance(obj, torch.nn.Module):
        spec = {"model": obj, "args": None}
    else:
        raise UsageError(f"{source} returned {type(obj).__name__}; expected an nn.Module, "
                         f"(model, args[, options]) or a dict with 'model' and 'args'")
    if spec.get("args") is None:
        ex = getattr(spec["model"], "example_inputs", None)
        spec["args"] = ex() if callable(ex) else ex
    if spec.get("args") is None:
        raise UsageError(f"{source}: no example inputs; return (model, args) or give the model an "
                         f"`example_inputs` attribute")
    if not isinstance(spec["args"], tuple):
        spec["args"] = (spec["args"],)
    return spec


def load_zoo(name: str) -> dict:
    if not ZOO.is_file():
        raise UsageError(f"'{name}' is not MODULE:NAME and the zoo script {ZOO} does not exist")
    zoo = _import_file(str(ZOO))
    specs = {s.name: s for s in zoo.registry()}
    key = name if name in specs else ZOO_ALIASES.get(name, name)
    if key not in specs:
        raise UsageError(f"unknown zoo model '{name}'; known: {', '.join(sorted(specs))} "
                         f"(aliases: {', '.join(sorted(ZOO_ALIASES))})")
    spec = specs[key]
    b = zoo.build(spec)
    training = "preserve" if getattr(spec, "bn_preserve", False) else "eval"
    # the zoo's own export settings, so both exports of a zoo model have the same graph
    return {"model": b.model, "args": tuple(b.args), "input_names": b.input_names,
            "output_names": b.output_names, "dynamic_axes": b.dynamic_axes, "name": key,
            "constant_folding": False, "training": training}


def load_model(spec: str, kwargs: dict) -> dict:
    if ":" not in spec:
        if kwargs:
            raise UsageError("--arg does not apply to zoo models")
        return load_zoo(spec)
    src, _, attr = spec.rpartition(":")
    mod = _import_file(src) if src.endswith(".py") or os.sep in src else importlib.import_module(src)
    if not hasattr(mod, attr):
        raise UsageError(f"'{src}' has no attribute '{attr}'")
    obj = getattr(mod, attr)
    out = _normalize(obj(**kwargs) if callable(obj) else obj, spec)
    out.setdefault("name", attr)
    return out


def default_dynamic_axes(args, input_names, output_names) -> dict:
    """--dynamic without axes from the model: axis 0 'batch' of every input and output, and
    axis 1 'sequence' of integer inputs of rank >= 2 (token ids, masks)."""
    axes = {}
    for name, a in zip(input_names, args):
        if isinstance(a, torch.Tensor) and a.dim() >= 1:
            axes[name] = {0: "batch"}
            if a.dim() >= 2 and not a.is_floating_point():
                axes[name][1] = "sequence"
    for name in output_names:
        axes[name] = {0: "batch"}
    return axes


def _parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m tools.export", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="MODULE:NAME, FILE.py:NAME or a zoo name")
    ap.add_argument("--out", required=True, help="output .onnx path (sidecar: <out>.hierarchy.json)")
    ap.add_argument("--strategy", choices=STRATEGIES, default=DEFAULT_STRATEGY,
                    help="htp (default): tracer scopes, exact for any exportable model; fx: "
                         "torch.fx graph, fails on data-dependent control flow; auto: fx, else htp")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--dynamic", action="store_true",
                    help="dynamic axes: the model's own (zoo/factory), else batch (+ sequence for "
                         "integer inputs)")
    ap.add_argument("--keep-torch-modules", default=",".join(DEFAULT_KEEP),
                    help="torch.nn classes kept in tags (comma list, '' for none; default %(default)s)")
    ap.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                    help="keyword argument for the class/factory (Python literal or string)")
    ap.add_argument("--constant-folding", choices=("on", "off"),
                    help="exporter constant folding (default: off for zoo models, as the zoo "
                         "exports them, else on)")
    ap.add_argument("--training", choices=("eval", "preserve"),
                    help="torch.onnx.TrainingMode; preserve keeps BatchNormalization (default: "
                         "preserve for the zoo's *_bn models, else eval)")
    ap.add_argument("--sidecar", help="sidecar JSON path (default <out minus .onnx>.hierarchy.json)")
    ap.add_argument("--no-sidecar", action="store_true")
    ap.add_argument("--check-r7", action="store_true",
                    help="also export plainly and fail unless identical but for metadata")
    ap.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return ap.parse_args(argv)


def _literal(v: str):
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError):
        return v


def main(argv=None) -> int:
    a = _parse_args(argv)
    log = None if a.quiet else sys.stderr
    t0 = time.time()
    try:
        kwargs = {}
        for kv in a.arg:
            if "=" not in kv:
                raise UsageError(f"--arg '{kv}' is not KEY=VALUE")
            k, v = kv.split("=", 1)
            kwargs[k] = _literal(v)
        spec = load_model(a.model, kwargs)
        model = spec["model"].eval()
        args = spec["args"]
        n_out = spec.get("output_names")
        in_names = spec.get("input_names") or [f"input_{i}" for i in range(len(args))]
        if a.dynamic:
            if not n_out:
                with torch.no_grad():
                    res = model(*args)
                n_res = len(res) if isinstance(res, (tuple, list)) else 1
                n_out = [f"output_{i}" for i in range(n_res)]
            axes = spec.get("dynamic_axes") or default_dynamic_axes(args, in_names, n_out)
        else:
            axes = None
        folding = (a.constant_folding or ("on" if spec.get("constant_folding", True) else "off")) == "on"
        training = {"eval": torch.onnx.TrainingMode.EVAL, "preserve": torch.onnx.TrainingMode.PRESERVE}[
            a.training or spec.get("training", "eval")]
        opts = dict(opset=a.opset, input_names=in_names, output_names=n_out, dynamic_axes=axes,
                    do_constant_folding=folding, training=training,
                    keep_torch_modules=a.keep_torch_modules)
        sidecar = None if a.no_sidecar else (a.sidecar or "")
        result = export(model, args, a.out, strategy=a.strategy, sidecar=sidecar, log=log, **opts)
        r7 = None
        if a.check_r7:
            from .compare import diff_models
            plain = a.out + ".plain.onnx"
            try:
                opts.pop("keep_torch_modules")
                plain_export(model, args, plain, **opts)
                r7 = diff_models(a.out, plain)
            finally:
                if os.path.exists(plain):
                    os.remove(plain)
            if log:
                print("onnxforge-export: R7 " + ("identical to plain export" if not r7 else
                      "DIFFERS from plain export:\n  " + "\n  ".join(r7)), file=log)
    except (UsageError, FileNotFoundError, ImportError) as e:
        print(f"onnxforge-export: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({
            "onnx": result.path, "sidecar": result.sidecar_path, "strategy": result.strategy,
            "strategy_requested": result.requested, "fallback_reason": result.fallback_reason,
            "nodes": len(result.node_modules), "derived": len(result.derived),
            "unattributed": len(result.unscoped), "compute_ops": result.compute_total,
            "compute_coverage": result.compute_coverage, "r7_identical": None if r7 is None else not r7,
            "seconds": round(time.time() - t0, 3)}, indent=1))
    return 1 if r7 else 0

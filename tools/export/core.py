"""export(): torch.onnx.export + hierarchy tags in node metadata + sidecar JSON."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import onnx
import torch

from . import metadata as md
from .hierarchy import ModuleTable, build_sidecar, write_json
from .htp import ScopeCapture, align

STRATEGIES = ("htp", "fx", "auto")
DEFAULT_STRATEGY = "htp"
DEFAULT_OPSET = 14
COMPUTE_OPS = frozenset(
    "MatMul Gemm Add Sub Mul Div Softmax LogSoftmax Conv ConvTranspose Relu Erf Tanh Sigmoid Gelu "
    "Pow Sqrt Exp Log Neg ReduceMean ReduceSum LayerNormalization BatchNormalization "
    "InstanceNormalization MaxPool AveragePool GlobalAveragePool Einsum Where".split())


def torch_export_kwargs(opset: int = DEFAULT_OPSET, input_names=None, output_names=None,
                        dynamic_axes=None, do_constant_folding: bool = True, training=None,
                        **extra) -> dict:
    """The torch.onnx.export options; the plain export (R7) must use exactly these."""
    kw = dict(opset_version=opset, input_names=input_names, output_names=output_names,
              dynamic_axes=dynamic_axes, do_constant_folding=do_constant_folding)
    if training is not None:
        kw["training"] = training
    kw.update(extra)
    return kw


def plain_export(model, args, path, **kw) -> None:
    """torch.onnx.export with the same option handling as export() (for R7 comparisons)."""
    torch.onnx.export(model, _as_tuple(args), path, **torch_export_kwargs(**kw))


def _as_tuple(args):
    return args if isinstance(args, tuple) else (args,)


@dataclass
class ExportResult:
    path: str
    sidecar_path: Optional[str]
    strategy: str
    requested: str
    fallback_reason: Optional[str]
    node_modules: Dict[str, str]  # node name -> dotted module path ('' = root)
    node_tags: Dict[str, str]
    unscoped: List[str]  # nodes with no module scope (tagged as root)
    table: ModuleTable
    derived: Dict[str, str] = field(default_factory=dict)  # node -> rule (parameter/consumers)
    compute_total: int = 0
    compute_scoped: int = 0
    warnings: List[str] = field(default_factory=list)
    sidecar: dict = field(default_factory=dict)  # the sidecar JSON content

    @property
    def compute_coverage(self) -> float:
        return self.compute_scoped / self.compute_total if self.compute_total else 1.0


def _say(log, msg):
    if log is not None:
        print(f"onnxforge-export: {msg}", file=log)


def export(model: torch.nn.Module, args, out: str, *, strategy: str = DEFAULT_STRATEGY,
           opset: int = DEFAULT_OPSET, input_names=None, output_names=None, dynamic_axes=None,
           keep_torch_modules=None, do_constant_folding: bool = True, training=None,
           sidecar: Optional[str] = "", log=sys.stderr, **extra) -> ExportResult:
    """Export `model` to `out` like torch.onnx.export and tag every node with its module.

    sidecar: path of the JSON, "" = `<out minus .onnx>.hierarchy.json`, None = none.
    Raises on failure and never leaves a partly written `out`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy '{strategy}', use one of {', '.join(STRATEGIES)}")
    args = _as_tuple(args)
    kw = torch_export_kwargs(opset, input_names, output_names, dynamic_axes, do_constant_folding,
                             training, **extra)
    table = ModuleTable(model, keep_torch_modules)
    out = os.fspath(out)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    partial = out + ".partial"
    used, reason, gm = strategy, None, None
    if strategy in ("fx", "auto"):
        from .fx import fx_trace
        try:
            gm = fx_trace(model, args)
            used = "fx"
        except Exception as e:  # noqa: BLE001 - any trace failure means "FX cannot do this model"
            if strategy == "fx":
                raise RuntimeError(f"FX strategy failed: symbolic_trace: {e}") from e
            reason = f"symbolic_trace failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            used = "htp"
            _say(log, f"FX strategy not usable ({reason}); falling back to HTP")
    warnings: List[str] = []
    try:
        if used == "fx":
            from .fx import fx_modules
            try:
                torch.onnx.export(model, args, partial, **kw)
                proto = onnx.load(partial, load_external_data=False)
                modules = fx_modules(model, args, proto,
                                     lambda m, p: torch.onnx.export(m, args, p, **kw), gm)
                table.calls.clear()
                table.calls.update(gm.onnxforge_calls)
            except Exception as e:  # noqa: BLE001
                if strategy == "fx":
                    raise
                reason = f"FX-to-ONNX mapping failed: {type(e).__name__}: {e}"
                used = "htp"
                _say(log, f"FX strategy not usable ({reason}); falling back to HTP")
        if used == "htp":
            with ScopeCapture(table) as cap:
                torch.onnx.export(model, args, partial, **kw)
            proto = onnx.load(partial, load_external_data=False)
            modules = [m for _, m in align(proto.graph, cap.entries or [], cap.module_of_scope)]
            warnings = _check_calls(table, modules)
        result = _annotate(proto, modules, table, out, used, strategy, reason, opset, sidecar)
        result.warnings = warnings
        for w in warnings:
            _say(log, "warning: " + w)
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            f.write(proto.SerializeToString())
        os.replace(tmp, out)
    finally:
        for p in (partial, out + ".tmp"):
            if os.path.exists(p):
                os.remove(p)
    if result.sidecar_path:
        write_json(result.sidecar, result.sidecar_path)
    _say(log, f"{os.path.basename(out)}: strategy {used}, {len(result.node_modules)} nodes tagged, "
              f"{len(result.derived)} attributed by rule, {len(result.unscoped)} unattributed (root tag), "
              f"compute-op coverage "
              f"{100 * result.compute_coverage:.1f}% ({result.compute_scoped}/{result.compute_total})")
    return result


def _check_calls(table: ModuleTable, modules) -> List[str]:
    """Every module a node names must have run under the tracer (hooks count the calls)."""
    seen = {m for m in modules if m is not None}
    missing = sorted(m for m in seen if table.calls.get(m, 0) == 0)
    return [f"nodes name module '{m}' but the hooks saw no call of it" for m in missing]


def _common_module(table: ModuleTable, paths) -> str:
    """Lowest common ancestor of dotted module paths (a path that is a registered module)."""
    common = None
    for p in paths:
        comp = p.split(".") if p else []
        if common is None:
            common = comp
            continue
        k = 0
        while k < min(len(common), len(comp)) and common[k] == comp[k]:
            k += 1
        common = common[:k]
    while common and ".".join(common) not in table.modules:
        common = common[:-1]
    return ".".join(common or [])


def _derive_unscoped(nodes, modules, table: ModuleTable, graph_outputs) -> List[str]:
    """Attribute nodes without a module scope (exporter-made: constant folding results, the
    Identity nodes of initializer de-duplication) by two fixed rules; returns each node's source.
      parameter: an Identity whose output carries a state_dict name -> the module owning it;
      consumers: else the lowest common module of all consumers (a graph output counts as root),
                 resolved consumers-first so chains of such nodes resolve too.
    """
    sources = ["scope" if m is not None else None for m in modules]
    state = dict(table.model.state_dict(keep_vars=True))
    consumers: Dict[str, List[int]] = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            consumers.setdefault(x, []).append(i)
    for i in reversed(range(len(nodes))):
        if modules[i] is not None:
            continue
        n = nodes[i]
        if n.op_type == "Identity" and len(n.output) == 1 and n.output[0] in state:
            owner = n.output[0].rpartition(".")[0]
            try:
                owner = table.path_of.get(id(table.model.get_submodule(owner)), owner)
            except AttributeError:
                owner = None
            if owner is not None and owner in table.modules:
                modules[i], sources[i] = owner, "parameter"
                continue
        uses = [modules[j] for o in n.output for j in consumers.get(o, [])]
        if any(o in graph_outputs for o in n.output) or not uses or any(u is None for u in uses):
            continue
        modules[i], sources[i] = _common_module(table, uses), "consumers"
    return [s or "none" for s in sources]


def _annotate(proto, modules, table, out, used, requested, reason, opset, sidecar) -> ExportResult:
    node_modules, node_ops, unscoped, node_sources = {}, {}, [], {}
    total = scoped = 0
    nodes = list(md.iter_graph_nodes(proto.graph))
    assert len(nodes) == len(modules), (len(nodes), len(modules))
    modules = list(modules)
    sources = _derive_unscoped(nodes, modules, table, {o.name for o in proto.graph.output})
    if used == "fx":
        sources = ["fx" if s == "scope" else s for s in sources]
    for node, mod, src in zip(nodes, modules, sources):
        if mod is None:
            unscoped.append(node.name)
        if src not in ("scope", "fx"):
            node_sources[node.name] = src
        path = mod if mod is not None else ""
        md.set_node_metadata(node, {md.KEY_TAG: table.tag[path], md.KEY_MODULE: path,
                                    md.KEY_DEPTH: str(table.depth(path)), md.KEY_SOURCE: src})
        node_modules[node.name] = path
        node_ops[node.name] = node.op_type
        if node.op_type in COMPUTE_OPS:
            total += 1
            scoped += src in ("scope", "fx")
    if sidecar == "":
        base = out[:-5] if out.endswith(".onnx") else out
        sidecar = base + ".hierarchy.json"
    for k, v in (("onnxforge.hierarchy.strategy", used),
                 ("onnxforge.hierarchy.sidecar", os.path.basename(sidecar) if sidecar else "")):
        e = next((p for p in proto.metadata_props if p.key == k), None) or proto.metadata_props.add()
        e.key, e.value = k, v
    result = ExportResult(out, sidecar, used, requested, reason, node_modules,
                          {n: table.tag[m] for n, m in node_modules.items()}, unscoped, table,
                          {k: v for k, v in node_sources.items() if v != "none"}, total, scoped)
    result.sidecar = build_sidecar(table, node_modules, onnx_file=os.path.basename(out),
                                   strategy=used, requested=requested, fallback_reason=reason,
                                   opset=opset, node_ops=node_ops, node_sources=node_sources)
    return result

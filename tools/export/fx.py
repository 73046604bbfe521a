"""FX strategy: module of every ONNX node from torch.fx.symbolic_trace.

1. A Tracer subclass keeps a module stack while symbolic_trace runs, so every FX node
   (call_module / call_function / call_method / get_attr) records the dotted path of the module
   whose forward created it (call_module: the called leaf itself).
2. Mapping FX nodes to ONNX nodes: we export the GraphModule a second time through a
   torch.fx.Interpreter that, while torch.onnx.export traces it, pushes one tracer scope per FX
   node (`onnxforge.fx#<i>::<fx name>`).  Every ONNX node of that instrumented export therefore
   names the FX node it came from, exactly.
3. The instrumented graph has other node/value/initializer names than the plain export (its
   modules sit under a wrapper), so we align the two structurally: node by node in order, same
   op/domain/attributes and the same wiring (producer node and output index, graph input index,
   or initializer content).  Any difference is an error (in `auto`, HTP takes over).
Limits: symbolic_trace fails on data-dependent control flow (HF models) and on non-tensor inputs
it cannot make concrete; the second export doubles the export time; initializers stored as
external data (>2 GB models) cannot be compared by content, so alignment fails for them.
"""
from __future__ import annotations

import hashlib
import inspect
from typing import Dict, List, Optional

import onnx
import torch
import torch.fx

from .htp import GraphCapture, _FX_RE, align

META_KEY = "onnxforge_module"


class HierarchyTracer(torch.fx.Tracer):
    """symbolic_trace that stamps every created node with the current module path."""

    proxy_buffer_attributes = True  # buffers become get_attr nodes (HF-style `pos_ids[:, :T]`)

    def __init__(self):
        super().__init__()
        self.module_stack: List[str] = [""]
        self.calls: Dict[str, int] = {"": 1}

    def call_module(self, m, forward, args, kwargs):
        path = self.path_of_module(m)
        self.calls[path] = self.calls.get(path, 0) + 1
        self.module_stack.append(path)
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.module_stack.pop()

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta[META_KEY] = "" if kind in ("placeholder", "output") else self.module_stack[-1]
        return node


def fx_trace(model: torch.nn.Module, args: tuple) -> torch.fx.GraphModule:
    """symbolic_trace with forward parameters not given in `args` fixed to their defaults."""
    concrete = {}
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for p in params[len(args):]:
        if p.default is p.empty:
            raise TypeError(f"forward parameter '{p.name}' has no example input and no default")
        concrete[p.name] = p.default
    tracer = HierarchyTracer()
    graph = tracer.trace(model, concrete_args=concrete or None)
    gm = torch.fx.GraphModule(tracer.root, graph)
    gm.onnxforge_calls = tracer.calls
    return gm


class _ScopedInterpreter(torch.fx.Interpreter):
    def __init__(self, gm, ids):
        super().__init__(gm)
        self.ids = ids

    def run_node(self, n):
        state = torch._C._get_tracing_state()
        if state is None:
            return super().run_node(n)
        state.push_scope(f"onnxforge.fx#{self.ids[n.name]}::{n.name}")
        try:
            return super().run_node(n)
        finally:
            state.pop_scope()


class _FxRunner(torch.nn.Module):
    def __init__(self, gm):
        super().__init__()
        self.gm = gm
        self.ids = {n.name: i for i, n in enumerate(gm.graph.nodes)}

    def forward(self, *args):
        return _ScopedInterpreter(self.gm, self.ids).run(*args)


def _tensor_key(t: onnx.TensorProto):
    c = onnx.TensorProto()
    c.CopyFrom(t)
    c.name = ""
    return ("init", t.data_type, tuple(t.dims), hashlib.sha1(c.SerializeToString()).hexdigest())


def structure(graph: onnx.GraphProto, env: Optional[dict] = None, out: Optional[list] = None,
              depth: int = 0) -> list:
    """Name-free description of `graph` (nodes in iter_graph_nodes order + graph outputs)."""
    env = dict(env or {})
    out = [] if out is None else out
    for t in graph.initializer:
        env[t.name] = _tensor_key(t)
    inits = {t.name for t in graph.initializer}
    for i, v in enumerate(x for x in graph.input if x.name not in inits):
        env[v.name] = ("in", depth, i)
    for node in graph.node:
        idx = len(out)
        attrs, subs = [], []
        for a in sorted(node.attribute, key=lambda a: a.name):
            if a.type == onnx.AttributeProto.GRAPH:
                subs.append(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                subs.extend(a.graphs)
            else:
                attrs.append(a.SerializeToString())
        ins = tuple(env.get(x, ("free", x)) if x else ("",) for x in node.input)
        out.append((node.domain, node.op_type, ins, len(node.output), tuple(attrs)))
        for g in subs:
            structure(g, env, out, depth + 1)
        for k, o in enumerate(node.output):
            env[o] = ("n", idx, k)
    out.append(("outputs", depth, tuple(env.get(o.name, ("free", o.name)) for o in graph.output)))
    return out


def fx_modules(model: torch.nn.Module, args: tuple, final: onnx.ModelProto, export_fn,
               gm: Optional[torch.fx.GraphModule] = None) -> List[Optional[str]]:
    """Module path per node of `final` (iter_graph_nodes order) via the FX graph.

    `export_fn(module, path)` must run torch.onnx.export with the same options as `final`."""
    import os
    import tempfile

    gm = gm if gm is not None else fx_trace(model, args)
    fx_nodes = list(gm.graph.nodes)
    runner = _FxRunner(gm)
    with tempfile.TemporaryDirectory(prefix="onnxforge-fx-") as tmp:
        path = os.path.join(tmp, "fx.onnx")
        with GraphCapture() as cap:
            export_fn(runner, path)
        inst = onnx.load(path, load_external_data=False)

    def resolve(scope: str):
        found = _FX_RE.findall(scope)
        return fx_nodes[int(found[-1])].meta.get(META_KEY, "") if found else None

    pairs = align(inst.graph, cap.entries or [], resolve)
    a, b = structure(inst.graph), structure(final.graph)
    if a != b:
        i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        raise RuntimeError(
            f"FX re-export differs from the plain export at node {i} "
            f"({a[i][:2] if i < len(a) else 'end'} vs {b[i][:2] if i < len(b) else 'end'})")
    return [m for _, m in pairs]

"""HTP strategy: exact module of every ONNX node from the TorchScript tracer's scopes.

How it works (torch 1.13, TorchScript-based torch.onnx.export):
  * `torch.onnx.utils._setup_trace_module_map` maps every module to a scope name
    `"<typename>::<unqualified attribute name>"`; `Module._slow_forward` pushes that scope while the
    module runs under the tracer, and every node traced (and every ONNX node a symbolic function
    later makes from it) inherits the scope.  The unqualified names are ambiguous (`self`, `0`), so
    we rewrite only the class half to `"<typename>#ofx<i>"` where i indexes the module table.  The
    exporter derives node and value names from the name half only, so the ONNX file is unchanged
    (R7; tests/test_export.py compares it byte for byte with a plain export).
  * We wrap `torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value` to keep the final
    ONNX-level torch graph.  Its nodes carry `onnx_name` (== NodeProto.name) and their scope, and are
    serialized in order (None constants skipped), so they align with the NodeProtos one to one.
  * Forward pre/post hooks keep a module stack during tracing: they count calls per module and
    record the call tree (parent call -> child call), which the sidecar reports and which we use
    to check that every scope names a module that really ran.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

import onnx
import torch
import torch.onnx.utils as onnx_utils

from .hierarchy import ModuleTable

_SCOPE_RE = re.compile(r"#ofx(\d+)::")
_FX_RE = re.compile(r"onnxforge\.fx#(\d+)::")

# (onnx_name or None, op kind, scope name, [blocks -> entries])
Entry = Tuple[Optional[str], str, str, list]


def _entries(block) -> List[Entry]:
    out = []
    for n in block.nodes():
        if n.mustBeNone():  # export.cpp skips None constants (optional inputs)
            continue
        name = n.s("onnx_name") if n.hasAttribute("onnx_name") else None
        out.append((name, n.kind(), n.scopeName(), [_entries(b) for b in n.blocks()]))
    return out


class GraphCapture:
    """Keeps the torch graph that torch.onnx.export serializes (see module doc)."""

    def __init__(self):
        self.entries: Optional[List[Entry]] = None

    def __enter__(self):
        self._orig = torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value

        def wrapped(graph):
            self._orig(graph)
            self.entries = _entries(graph)

        torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value = wrapped
        return self

    def __exit__(self, *exc):
        torch._C._jit_pass_onnx_assign_scoped_names_for_node_and_value = self._orig
        return False


class ScopeCapture(GraphCapture):
    """GraphCapture + unambiguous scope names + call-recording hooks for `table.model`."""

    def __init__(self, table: ModuleTable):
        super().__init__()
        self.table = table
        self.index = {p: i for i, p in enumerate(table.paths)}
        self.call_edges: Dict[Tuple[str, str], int] = {}
        self._stack: List[str] = []
        self._hooks = []

    def __enter__(self):
        super().__enter__()
        self._orig_setup = onnx_utils._setup_trace_module_map
        path_of, index = self.table.path_of, self.index

        def setup(model, export_modules_as_functions):
            result = self._orig_setup(model, export_modules_as_functions)
            tmap = torch.jit._trace._trace_module_map
            if model is self.table.model and tmap:
                for mod, scope in list(tmap.items()):
                    path = path_of.get(id(mod))
                    if path is None:
                        continue
                    cls, var = scope.split("::", 1)
                    tmap[mod] = torch._C._jit_onnx_create_full_scope_name(f"{cls}#ofx{index[path]}", var)
            return result

        onnx_utils._setup_trace_module_map = setup
        calls = self.table.calls
        calls.clear()

        def pre(path):
            def hook(mod, inputs):
                if torch._C._get_tracing_state() is None:
                    return
                calls[path] = calls.get(path, 0) + 1
                if self._stack:
                    key = (self._stack[-1], path)
                    self.call_edges[key] = self.call_edges.get(key, 0) + 1
                self._stack.append(path)
            return hook

        def post(path):
            def hook(mod, inputs, output):
                if torch._C._get_tracing_state() is not None and self._stack and self._stack[-1] == path:
                    self._stack.pop()
            return hook

        for path in self.table.paths:
            m = self.table.modules[path]
            self._hooks.append(m.register_forward_pre_hook(pre(path)))
            self._hooks.append(m.register_forward_hook(post(path)))
        return self

    def __exit__(self, *exc):
        onnx_utils._setup_trace_module_map = self._orig_setup
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        return super().__exit__(*exc)

    def module_of_scope(self, scope: str) -> Optional[str]:
        found = _SCOPE_RE.findall(scope)
        return self.table.paths[int(found[-1])] if found else None


def _kind_matches(kind: str, node: onnx.NodeProto) -> bool:
    dom, _, op = kind.rpartition("::")
    return op == node.op_type and (dom == "onnx" or dom == node.domain or not node.domain)


def align(graph: onnx.GraphProto, entries: List[Entry], resolve, parent: Optional[str] = None
          ) -> List[Tuple[onnx.NodeProto, Optional[str]]]:
    """Pair every NodeProto (iter_graph_nodes order) with resolve(scope) of its torch node.

    Positional when the lists agree (same length, same op kinds, same names where torch named
    the node); otherwise by onnx_name only.  Unmatched nodes get `parent` (None at top level)."""
    nodes = list(graph.node)
    positional = len(nodes) == len(entries) and all(
        _kind_matches(e[1], n) and (e[0] is None or e[0] == n.name) for e, n in zip(entries, nodes))
    if positional:
        pairs = list(zip(nodes, entries))
    else:
        by_name = {e[0]: e for e in entries if e[0] is not None}
        pairs = [(n, by_name.get(n.name)) for n in nodes]
    out = []
    for node, entry in pairs:
        mod = resolve(entry[2]) if entry is not None else None
        if mod is None:
            mod = parent
        out.append((node, mod))
        subgraphs = []
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                subgraphs.append(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                subgraphs.extend(a.graphs)
        blocks = entry[3] if entry is not None else []
        inner_parent = mod if mod is not None else parent
        for i, g in enumerate(subgraphs):
            out.extend(align(g, blocks[i] if len(blocks) == len(subgraphs) else [], resolve, inner_parent))
    return out

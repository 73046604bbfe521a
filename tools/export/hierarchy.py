"""Module table: class paths (tags), per-module facts, and the sidecar JSON.

Tag rule (README.md "Tags"): a module is *visible* unless it is a torch.nn built-in whose class
name is not in the keep set (the root is always visible).  A module's tag is its nearest visible
ancestor's tag plus, if the module is visible, one segment: the class name, plus `.k` when
  * the module sits in a container (a component of its path below that ancestor is an integer,
    e.g. `encoder.layer.0`), or
  * that ancestor has more than one visible descendant of exactly this class whose nearest
    visible ancestor it is ("effective siblings": direct children, or children reached through
    hidden modules such as ModuleList/Sequential),
with k = the module's 0-based rank among those effective siblings in named_modules() order.
So `encoder.layer.0` -> `BertLayer.0`; query/key/value -> `Linear.0/1/2`; ResNet `layer2.0` ->
`Bottleneck.k` with k counted over layer1..layer4.  Visible modules never share a tag; hidden
ones share their visible ancestor's.
"""
from __future__ import annotations

import inspect
import json
import math
from typing import Dict, List, Optional

import torch

DEFAULT_KEEP = ("LayerNorm", "Embedding", "Linear", "Conv1d", "Conv2d", "Conv3d")
FORMAT = "onnxforge.hierarchy/1"


def is_torch_builtin(cls: type) -> bool:
    mod = getattr(cls, "__module__", "") or ""
    return mod == "torch.nn" or mod.startswith(("torch.nn.", "torch.ao.nn."))


def parse_keep(spec) -> frozenset:
    if spec is None:
        return frozenset(DEFAULT_KEEP)
    if isinstance(spec, str):
        spec = [s for s in (p.strip() for p in spec.split(",")) if s]
    return frozenset(spec)


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else repr(v)
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)


def _forward_signature(module: torch.nn.Module):
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):
        return [], {}
    args, defaults = [], {}
    for p in sig.parameters.values():
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        args.append(prefix + p.name)
        if p.default is not p.empty:
            defaults[p.name] = _jsonable(p.default)
    return args, defaults


class ModuleTable:
    """Every module of `model` (named_modules order, shared instances once) with its tag."""

    def __init__(self, model: torch.nn.Module, keep_torch_modules=None):
        self.model = model
        self.keep = parse_keep(keep_torch_modules)
        self.paths: List[str] = []
        self.modules: Dict[str, torch.nn.Module] = {}
        self.path_of: Dict[int, str] = {}  # id(module) -> canonical dotted path
        for path, m in model.named_modules():
            self.paths.append(path)
            self.modules[path] = m
            self.path_of[id(m)] = path
        self.visible = {p: (not p) or not (is_torch_builtin(type(m)) and type(m).__name__ not in self.keep)
                        for p, m in self.modules.items()}
        self.visible_parent: Dict[str, Optional[str]] = {"": None}
        siblings: Dict[tuple, List[str]] = {}
        for path in self.paths[1:]:
            anc = self._ancestry(path)[-2::-1]  # parent first, root last
            vp = next(a for a in anc if self.visible.get(a, False))
            self.visible_parent[path] = vp
            if self.visible[path]:
                siblings.setdefault((vp, type(self.modules[path])), []).append(path)
        self.segment: Dict[str, Optional[str]] = {"": type(model).__name__}
        self.tag: Dict[str, str] = {"": "/" + type(model).__name__}
        for path in self.paths[1:]:
            vp = self.visible_parent[path]
            if not self.visible[path]:
                self.segment[path] = None
                self.tag[path] = self.tag[vp]
                continue
            group = siblings[(vp, type(self.modules[path]))]
            below = path[len(vp) + 1:] if vp else path
            indexed = len(group) > 1 or any(c.isdigit() for c in below.split("."))
            name = type(self.modules[path]).__name__
            self.segment[path] = f"{name}.{group.index(path)}" if indexed else name
            self.tag[path] = f"{self.tag[vp]}/{self.segment[path]}"
        self.calls: Dict[str, int] = {}

    @staticmethod
    def _ancestry(path: str) -> List[str]:
        if not path:
            return [""]
        parts = path.split(".")
        return [""] + [".".join(parts[:i + 1]) for i in range(len(parts))]

    def depth(self, path: str) -> int:
        return self.tag[path].count("/")

    def module_entry(self, path: str) -> dict:
        m = self.modules[path]
        cls = type(m)
        args, defaults = _forward_signature(m)
        prefix = path + "." if path else ""
        return {
            "class": cls.__name__,
            "qualified_class": f"{cls.__module__}.{cls.__qualname__}",
            "module": path,
            "tag": self.tag[path],
            "depth": self.depth(path),
            "in_tag": self.visible[path],
            "forward_args": args,
            "forward_defaults": defaults,
            "parameters": [prefix + n for n, _ in m.named_parameters()],
            "direct_parameters": [prefix + n for n, _ in m.named_parameters(recurse=False)],
            "children": [self.path_of.get(id(c), prefix + n) for n, c in m.named_children()],
            "calls": self.calls.get(path, 0),
        }

    def hierarchy_map(self) -> Dict[str, List[str]]:
        """tag -> module paths carrying it (built-ins left out of tags share their parent's)."""
        out: Dict[str, List[str]] = {}
        for p in self.paths:
            out.setdefault(self.tag[p], []).append(p)
        return out


def build_sidecar(table: ModuleTable, node_modules: Dict[str, str], *, onnx_file: str,
                  strategy: str, requested: str, fallback_reason: Optional[str], opset: int,
                  node_ops: Dict[str, str], node_sources: Dict[str, str]) -> dict:
    return {
        "format": FORMAT,
        "producer": {"name": "onnxforge tools/export", "torch": torch.__version__},
        "onnx_file": onnx_file,
        "opset": opset,
        "strategy": strategy,
        "strategy_requested": requested,
        "fallback_reason": fallback_reason,
        "keep_torch_modules": sorted(table.keep),
        "root": {"class": type(table.model).__name__, "tag": table.tag[""]},
        "modules": {p: table.module_entry(p) for p in table.paths},
        "hierarchy": table.hierarchy_map(),
        "node_tags": {n: table.tag[m] for n, m in node_modules.items()},
        "node_modules": dict(node_modules),
        "node_op_types": dict(node_ops),
        "node_sources": dict(node_sources),
    }


def write_json(obj: dict, path: str) -> None:
    import os
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)

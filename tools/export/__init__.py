"""onnxforge hierarchy-preserving exporter: torch.onnx.export + module tags per ONNX node.

    from tools.export import export, read_hierarchy
    result = export(model, (input_ids,), "bert.onnx", strategy="htp")
    read_hierarchy("bert.onnx")["/encoder/layer.0/attention/self/query/MatMul"]

See README.md for the tag rule and the sidecar format.
"""
from .core import DEFAULT_OPSET, DEFAULT_STRATEGY, STRATEGIES, ExportResult, export, plain_export
from .hierarchy import DEFAULT_KEEP, ModuleTable
from .metadata import (KEY_DEPTH, KEY_MODULE, KEY_SOURCE, KEY_TAG, get_node_metadata, iter_graph_nodes,
                       read_hierarchy, set_node_metadata)

__all__ = ["export", "plain_export", "ExportResult", "ModuleTable", "read_hierarchy",
           "get_node_metadata", "set_node_metadata", "iter_graph_nodes", "KEY_TAG", "KEY_MODULE",
           "KEY_DEPTH", "KEY_SOURCE", "DEFAULT_KEEP", "DEFAULT_OPSET", "DEFAULT_STRATEGY", "STRATEGIES"]

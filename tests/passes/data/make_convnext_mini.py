#!/usr/bin/python3
"""convnext_mini.onnx: torchvision's ConvNeXt (LayerNorm2d = Permute -> LayerNorm -> Permute, and
the block's Permute -> LayerNorm -> Linear -> GELU -> Linear -> Permute) at two tiny stages,
exported by torch.onnx at opset 14 (the decomposed LayerNorm). Weights seeded, plus noise.

  /usr/bin/python3 tests/passes/data/make_convnext_mini.py
"""
import os
import sys

import torch
from torchvision.models.convnext import CNBlockConfig, ConvNeXt

torch.manual_seed(0)
model = ConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 1)], num_classes=4).eval()
with torch.no_grad():
    for p in model.parameters():
        p.add_(torch.randn_like(p) * 0.01)
out = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "convnext_mini.onnx")
torch.onnx.export(model, torch.randn(1, 3, 32, 32), out, opset_version=14, do_constant_folding=False,
                  input_names=["x"], output_names=["y"])

"""Small CNNs written in torch with the structure tf2onnx gives TensorFlow/Keras models (random
weights; used by export_zoo.py, family "tf2onnx"):

- NHWC input, a Transpose to NCHW at the start (and back to NHWC before the outputs);
- explicit Pad nodes taking their pads as an input (Keras ZeroPadding2D before every stride-2
  depthwise conv, TF "SAME" padding of strided convs), written through TfPad's symbolic;
- ReLU6 as Clip(0, 6), BatchNormalization folded into the convs (eval export);
- every constant an initializer (postprocess: the TorchScript exporter writes Constant nodes).

linedet: a MobileNetV2-style line-segment detector (M-LSD-tiny's layout: RGBA input, backbone to
stride 16 with three ZeroPadding2D Pads, a decoder that upsamples with Resize and concatenates the
skip features, a 16-channel map at half resolution). blazeface: a BlazeFace-style face detector
(128x128 RGB, 5x5 stem with TF "SAME" padding as a Pad, BlazeBlocks whose stride-2 residual is a
MaxPool and a Pad of the channels, 896 anchors' scores and boxes).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class TfPad(torch.autograd.Function):
    """F.pad, exported as Pad(x, pads, value) with pads in ONNX order as a constant input."""

    @staticmethod
    def forward(ctx, x, pads):  # pads: ONNX order, begins of every axis then ends
        r = x.dim()
        torch_pads = []
        for a in reversed(range(r)):
            torch_pads += [pads[a], pads[a + r]]
        return F.pad(x, torch_pads)

    @staticmethod
    def symbolic(g, x, pads):
        p = g.op("Constant", value_t=torch.tensor(list(pads), dtype=torch.int64))
        v = g.op("Constant", value_t=torch.tensor(0.0, dtype=torch.float32))
        return g.op("Pad", x, p, v, mode_s="constant")


def tf_pad(x, pads):
    return TfPad.apply(x, tuple(int(p) for p in pads))


class TfRelu6(torch.autograd.Function):
    """ReLU6 exported as tf2onnx writes it: one Clip(x, 0, 6) (torch: Relu, Clip and two Casts)."""

    @staticmethod
    def forward(ctx, x):
        return F.relu6(x)

    @staticmethod
    def symbolic(g, x):
        lo = g.op("Constant", value_t=torch.tensor(0.0, dtype=torch.float32))
        hi = g.op("Constant", value_t=torch.tensor(6.0, dtype=torch.float32))
        return g.op("Clip", x, lo, hi)


def same_pads(size: int, k: int, s: int):
    """TF "SAME" padding of one spatial axis: (begin, end), the extra pixel at the end."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class ConvBN(nn.Module):
    """Conv + BatchNorm (+ ReLU6). Stride 2 pads explicitly with a Pad (ZeroPadding2D), as Keras
    MobileNetV2 does before its strided depthwise convs; stride 1 uses the conv's pads."""

    def __init__(self, cin, cout, k, s=1, groups=1, act=True, explicit_pad=None):
        super().__init__()
        self.k, self.s = k, s
        self.explicit = (s == 2) if explicit_pad is None else explicit_pad
        self.conv = nn.Conv2d(cin, cout, k, s, 0 if self.explicit else k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act

    def forward(self, x):
        if self.explicit:
            h0, h1 = same_pads(x.shape[2], self.k, self.s)
            w0, w1 = same_pads(x.shape[3], self.k, self.s)
            x = tf_pad(x, [0, 0, h0, w0, 0, 0, h1, w1])
        x = self.bn(self.conv(x))
        return TfRelu6.apply(x) if self.act else x


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, s, t):
        super().__init__()
        hid = cin * t
        layers = [] if t == 1 else [ConvBN(cin, hid, 1)]
        layers += [ConvBN(hid, hid, 3, s, groups=hid), ConvBN(hid, cout, 1, act=False)]
        self.body = nn.Sequential(*layers)
        self.residual = s == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class LineDetector(nn.Module):
    """MobileNetV2 backbone to stride 16 (three explicit Pads) and an upsampling decoder."""

    def __init__(self, width: float = 1.0):
        super().__init__()
        c = lambda n: max(8, int(n * width + 4) // 8 * 8)  # noqa: E731
        self.stem = ConvBN(4, c(32), 3, 2, explicit_pad=False)  # "SAME" stride 2: tf2onnx writes conv pads
        cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2)]
        blocks, cin, self.taps = [], c(32), []
        for t, co, n, s in cfg:
            for i in range(n):
                blocks.append(InvertedResidual(cin, c(co), s if i == 0 else 1, t))
                cin = c(co)
            self.taps.append(len(blocks) - 1)
        self.blocks = nn.ModuleList(blocks)
        self.up1 = ConvBN(c(64) + c(32), 64, 3)
        self.up2 = ConvBN(64 + c(24), 64, 3)
        self.head = nn.Conv2d(64, 16, 1)

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)
        x = self.stem(x)
        feats = []
        for i, b in enumerate(self.blocks):
            x = b(x)
            if i in self.taps:
                feats.append(x)
        f4, f8, f16 = feats[1], feats[2], feats[3]
        y = F.interpolate(f16, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.up1(torch.cat([y, f8], 1))
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.up2(torch.cat([y, f4], 1))
        y = F.interpolate(self.head(y), scale_factor=2.0, mode="bilinear", align_corners=False)
        return y.permute(0, 2, 3, 1)


class BlazeBlock(nn.Module):
    def __init__(self, cin, cout, s=1):
        super().__init__()
        self.s, self.cin, self.cout = s, cin, cout
        self.dw = nn.Conv2d(cin, cin, 3, s, 0 if s == 2 else 1, groups=cin)
        self.pw = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        h = tf_pad(x, [0, 0, 0, 0, 0, 0, 1, 1]) if self.s == 2 else x  # "SAME", stride 2, even map
        h = self.pw(self.dw(h))
        r = F.max_pool2d(x, 2) if self.s == 2 else x
        if self.cout > self.cin:  # the residual's extra channels are zeros: a Pad of axis 1
            r = tf_pad(r, [0, 0, 0, 0, 0, self.cout - self.cin, 0, 0])
        return F.relu(h + r)


class BlazeFace(nn.Module):
    """BlazeFace front model layout: 128x128 input, anchors 2 per cell at 16x16 and 6 at 8x8."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 24, 5, 2, 0)
        chans = [(24, 24, 1), (24, 28, 1), (28, 32, 2), (32, 36, 1), (36, 42, 1), (42, 48, 2), (48, 56, 1),
                 (56, 64, 1), (64, 72, 1), (72, 80, 1), (80, 88, 1)]
        self.b1 = nn.Sequential(*[BlazeBlock(a, b, s) for a, b, s in chans])
        self.b2 = nn.Sequential(BlazeBlock(88, 96, 2), *[BlazeBlock(96, 96) for _ in range(4)])
        self.cls16, self.reg16 = nn.Conv2d(88, 2, 1), nn.Conv2d(88, 32, 1)
        self.cls8, self.reg8 = nn.Conv2d(96, 6, 1), nn.Conv2d(96, 96, 1)

    def forward(self, x):
        x = x.permute(0, 3, 1, 2)
        h0, h1 = same_pads(x.shape[2], 5, 2)
        x = F.relu(self.stem(tf_pad(x, [0, 0, h0, h0, 0, 0, h1, h1])))
        a = self.b1(x)
        b = self.b2(a)
        scores = torch.cat([self.cls16(a).permute(0, 2, 3, 1).reshape(1, -1, 1),
                            self.cls8(b).permute(0, 2, 3, 1).reshape(1, -1, 1)], 1)
        boxes = torch.cat([self.reg16(a).permute(0, 2, 3, 1).reshape(1, -1, 16),
                           self.reg8(b).permute(0, 2, 3, 1).reshape(1, -1, 16)], 1)
        return boxes, scores


def build(cfg: dict, g: torch.Generator):
    """(model, example input, input names, output names) for a tf2onnx-family spec."""
    if cfg["arch"] == "linedet":
        model = LineDetector(cfg.get("width", 1.0))
        x = torch.rand(1, cfg["image"], cfg["image"], 4, generator=g)
        return model, x, ["input_image_with_alpha"], ["lines"]
    model = BlazeFace()
    x = torch.rand(1, cfg["image"], cfg["image"], 3, generator=g) * 2 - 1
    return model, x, ["input"], ["regressors", "classificators"]


def calibrate_bn(model, x: torch.Tensor, seed: int) -> None:
    """BatchNorm statistics of one train-mode pass over 4 random inputs shaped like x (NHWC),
    as export_zoo's _calibrate_bn does for the NCHW CNNs."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    g = torch.Generator().manual_seed(seed ^ 0xCA1B)
    model.train()
    with torch.no_grad():
        model(torch.rand((4,) + tuple(x.shape[1:]), generator=g))
    model.eval()


def postprocess(path) -> None:
    """Constant nodes become initializers, as tf2onnx writes every constant (in place; the
    exporter's temporary file)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(path))
    keep = []
    for n in m.graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = numpy_helper.from_array(numpy_helper.to_array(n.attribute[0].t), n.output[0])
            m.graph.initializer.append(t)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    onnx.save(m, str(path))

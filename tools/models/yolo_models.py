"""PyTorch re-implementation of Ultralytics YOLOv8 detection models for the onnxforge test zoo.

Module names, class names and forward math mirror ultralytics 8.0/8.1 (`nn/modules/conv.py`
Conv, `block.py` Bottleneck/C2f/SPPF/DFL, `head.py` Detect, `nn/tasks.py` DetectionModel and
parse_model over `cfg/models/v8/yolov8.yaml`), so the TorchScript exporter writes the node names
of a real `yolo export format=onnx`: `/model.0/conv/Conv`, `/model.2/m.0/cv1/act/Mul`,
`/model.22/dfl/conv/Conv`. What matters for the optimizer is kept as ultralytics has it:

- every Conv's SiLU is one shared module object (`Conv.default_act`), so `named_modules()`
  lists it once while the exporter names each call by its own attribute path;
- the Detect head in export mode: per scale, the box branch (cv2: Conv, Conv, Conv2d to
  4 x reg_max) and the class branch (cv3: Conv, Conv, Conv2d to nc) are concatenated, the three
  scales flattened and concatenated along anchors, split into box distributions and class
  scores; DFL = Reshape (b, 4, 16, a) -> Transpose -> Softmax over the 16 bins -> a fixed 1x1
  Conv with weights 0..15 (the expected distance) -> Reshape; dist2bbox against the anchor grid
  and the stride per anchor, Sigmoid on the classes, Concat -> (batch, 4 + nc, anchors);
- anchors and strides are computed by a dry run at the export shape (the exporter's own
  warm-up), so they enter the graph as constants, as in a static-shape export.

Random weights (ultralytics' initialize_weights: BatchNorm eps 1e-3, momentum 0.03; Detect's
bias_init). No NMS: that is post-processing outside the exported graph.
"""
from __future__ import annotations

import math

import torch
from torch import nn

# cfg/models/v8/yolov8.yaml: [from, repeats, module, args]
YOLOV8_BACKBONE = [
    [-1, 1, "Conv", [64, 3, 2]],  # 0-P1/2
    [-1, 1, "Conv", [128, 3, 2]],  # 1-P2/4
    [-1, 3, "C2f", [128, True]],
    [-1, 1, "Conv", [256, 3, 2]],  # 3-P3/8
    [-1, 6, "C2f", [256, True]],
    [-1, 1, "Conv", [512, 3, 2]],  # 5-P4/16
    [-1, 6, "C2f", [512, True]],
    [-1, 1, "Conv", [1024, 3, 2]],  # 7-P5/32
    [-1, 3, "C2f", [1024, True]],
    [-1, 1, "SPPF", [1024, 5]],  # 9
]
YOLOV8_HEAD = [
    [-1, 1, "Upsample", [None, 2, "nearest"]],
    [[-1, 6], 1, "Concat", [1]],  # cat backbone P4
    [-1, 3, "C2f", [512]],  # 12
    [-1, 1, "Upsample", [None, 2, "nearest"]],
    [[-1, 4], 1, "Concat", [1]],  # cat backbone P3
    [-1, 3, "C2f", [256]],  # 15 (P3/8-small)
    [-1, 1, "Conv", [256, 3, 2]],
    [[-1, 12], 1, "Concat", [1]],  # cat head P4
    [-1, 3, "C2f", [512]],  # 18 (P4/16-medium)
    [-1, 1, "Conv", [512, 3, 2]],
    [[-1, 9], 1, "Concat", [1]],  # cat head P5
    [-1, 3, "C2f", [1024]],  # 21 (P5/32-large)
    [[15, 18, 21], 1, "Detect", ["nc"]],  # Detect(P3, P4, P5)
]
# scales: [depth_multiple, width_multiple, max_channels]
YOLOV8_SCALES = {"n": [0.33, 0.25, 1024], "s": [0.33, 0.50, 1024], "m": [0.67, 0.75, 768],
                 "l": [1.00, 1.00, 512], "x": [1.00, 1.25, 512]}


def autopad(k, p=None, d=1):
    """Pad to 'same' shape outputs."""
    if d > 1:
        k = d * (k - 1) + 1 if isinstance(k, int) else [d * (x - 1) + 1 for x in k]
    if p is None:
        p = k // 2 if isinstance(k, int) else [x // 2 for x in k]
    return p


def make_divisible(x, divisor):
    return math.ceil(x / divisor) * divisor


class Conv(nn.Module):
    """Conv2d (no bias) + BatchNorm2d + SiLU."""
    default_act = nn.SiLU()  # one module object shared by every Conv, as in ultralytics

    def __init__(self, c1, c2, k=1, s=1, p=None, g=1, d=1, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p, d), groups=g, dilation=d, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, g=1, k=(3, 3), e=0.5):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, k[0], 1)
        self.cv2 = Conv(c_, c2, k[1], 1, g=g)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C2f(nn.Module):
    """CSP bottleneck with 2 convolutions: split the 1x1 conv's output in two halves, chain n
    bottlenecks on the second, concatenate every intermediate, 1x1 conv."""

    def __init__(self, c1, c2, n=1, shortcut=False, g=1, e=0.5):
        super().__init__()
        self.c = int(c2 * e)
        self.cv1 = Conv(c1, 2 * self.c, 1, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut, g, k=((3, 3), (3, 3)), e=1.0) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).chunk(2, 1))
        y.extend(m(y[-1]) for m in self.m)
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast: three chained 5x5 max-pools, concatenated."""

    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        y.extend(self.m(y[-1]) for _ in range(3))
        return self.cv2(torch.cat(y, 1))


class Concat(nn.Module):
    def __init__(self, dimension=1):
        super().__init__()
        self.d = dimension

    def forward(self, x):
        return torch.cat(x, self.d)


class DFL(nn.Module):
    """Distribution focal loss integral: softmax over reg_max bins, expectation by a fixed conv."""

    def __init__(self, c1=16):
        super().__init__()
        self.conv = nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
        x = torch.arange(c1, dtype=torch.float)
        self.conv.weight.data[:] = nn.Parameter(x.view(1, c1, 1, 1))
        self.c1 = c1

    def forward(self, x):
        b, _, a = x.shape  # batch, channels, anchors
        return self.conv(x.view(b, 4, self.c1, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, strides, grid_cell_offset=0.5):
    """Anchor points (cell centres) and the stride of each, over all scales."""
    anchor_points, stride_tensor = [], []
    dtype, device = feats[0].dtype, feats[0].device
    for i, stride in enumerate(strides):
        _, _, h, w = feats[i].shape
        sx = torch.arange(end=w, device=device, dtype=dtype) + grid_cell_offset
        sy = torch.arange(end=h, device=device, dtype=dtype) + grid_cell_offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        anchor_points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_tensor.append(torch.full((h * w, 1), stride, dtype=dtype, device=device))
    return torch.cat(anchor_points), torch.cat(stride_tensor)


def dist2bbox(distance, anchor_points, xywh=True, dim=-1):
    """(left, top, right, bottom) distances to boxes (centre x, centre y, w, h)."""
    lt, rb = distance.chunk(2, dim)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    if xywh:
        c_xy = (x1y1 + x2y2) / 2
        wh = x2y2 - x1y1
        return torch.cat((c_xy, wh), dim)
    return torch.cat((x1y1, x2y2), dim)


class Detect(nn.Module):
    """YOLOv8 detect head (decoupled box/class branches, DFL, anchor-free decode)."""
    dynamic = False  # force grid reconstruction
    export = False  # export mode
    shape = None
    anchors = torch.empty(0)
    strides = torch.empty(0)

    def __init__(self, nc=80, ch=()):
        super().__init__()
        self.nc = nc
        self.nl = len(ch)
        self.reg_max = 16
        self.no = nc + self.reg_max * 4
        self.stride = torch.zeros(self.nl)
        c2, c3 = max((16, ch[0] // 4, self.reg_max * 4)), max(ch[0], min(self.nc, 100))
        self.cv2 = nn.ModuleList(
            nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * self.reg_max, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, self.nc, 1)) for x in ch)
        self.dfl = DFL(self.reg_max) if self.reg_max > 1 else nn.Identity()

    def forward(self, x):
        shape = x[0].shape  # BCHW
        for i in range(self.nl):
            x[i] = torch.cat((self.cv2[i](x[i]), self.cv3[i](x[i])), 1)
        if self.training:
            return x
        elif self.dynamic or self.shape != shape:
            self.anchors, self.strides = (t.transpose(0, 1) for t in make_anchors(x, self.stride, 0.5))
            self.shape = shape
        x_cat = torch.cat([xi.view(shape[0], self.no, -1) for xi in x], 2)
        box, cls = x_cat.split((self.reg_max * 4, self.nc), 1)
        dbox = dist2bbox(self.dfl(box), self.anchors.unsqueeze(0), xywh=True, dim=1) * self.strides
        y = torch.cat((dbox, cls.sigmoid()), 1)
        return y if self.export else (y, x)

    def bias_init(self):
        for a, b, s in zip(self.cv2, self.cv3, self.stride):
            a[-1].bias.data[:] = 1.0  # box
            b[-1].bias.data[: self.nc] = math.log(5 / self.nc / (640 / s) ** 2)  # cls (.01 objects, 80 classes, 640 img)


MODULES = {"Conv": Conv, "C2f": C2f, "SPPF": SPPF, "Concat": Concat, "Detect": Detect, "Upsample": nn.Upsample}


def parse_model(scale, nc, ch):
    """nn/tasks.py parse_model for yolov8.yaml at one scale."""
    depth, width, max_channels = YOLOV8_SCALES[scale]
    ch = [ch]
    layers, save, c2 = [], [], ch[-1]
    for i, (f, n, m, args) in enumerate(YOLOV8_BACKBONE + YOLOV8_HEAD):
        m = MODULES[m]
        args = [nc if a == "nc" else a for a in args]
        n = max(round(n * depth), 1) if n > 1 else n
        if m in (Conv, C2f, SPPF):
            c1, c2 = ch[f], args[0]
            if c2 != nc:
                c2 = make_divisible(min(c2, max_channels) * width, 8)
            args = [c1, c2, *args[1:]]
            if m is C2f:
                args.insert(2, n)
                n = 1
        elif m is Concat:
            c2 = sum(ch[x] for x in f)
        elif m is Detect:
            args.append([ch[x] for x in f])
        else:
            c2 = ch[f]
        m_ = nn.Sequential(*(m(*args) for _ in range(n))) if n > 1 else m(*args)
        m_.np = sum(x.numel() for x in m_.parameters())
        m_.i, m_.f, m_.type = i, f, m.__name__
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(m_)
        if i == 0:
            ch = []
        ch.append(c2)
    return nn.Sequential(*layers), sorted(save)


def initialize_weights(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eps = 1e-3
            m.momentum = 0.03
        elif isinstance(m, (nn.Hardswish, nn.LeakyReLU, nn.ReLU, nn.ReLU6, nn.SiLU)):
            m.inplace = True


class DetectionModel(nn.Module):
    """YOLOv8 detection model: `model` is the nn.Sequential of parse_model, run layer by layer
    with each layer's `f` (from) indices (the Sequential itself is never called)."""

    def __init__(self, c):
        super().__init__()
        ch = c.get("channels", 3)
        self.model, self.save = parse_model(c["scale"], c["nc"], ch)
        self.names = {i: f"{i}" for i in range(c["nc"])}
        self.inplace = True
        m = self.model[-1]  # Detect
        s = 256  # 2x min stride: strides from a forward pass, as ultralytics computes them
        with torch.no_grad():
            m.stride = torch.tensor([s / x.shape[-2] for x in self.forward(torch.zeros(1, ch, s, s))])
        self.stride = m.stride
        m.bias_init()
        initialize_weights(self)

    def forward(self, x):
        y = []
        for m in self.model:
            if m.f != -1:  # not from the previous layer
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
        return x

    def restore_dfl(self):
        """The DFL conv holds the bin values 0..reg_max-1 (not trained, not noise)."""
        dfl = self.model[-1].dfl
        with torch.no_grad():
            dfl.conv.weight.copy_(torch.arange(dfl.c1, dtype=torch.float).view(1, dfl.c1, 1, 1))

    def prepare_export(self, example):
        """Exporter set-up: Detect in export mode (one output), and a dry run at the export
        shape so anchors and strides are the constants of that shape."""
        self.eval()
        det = self.model[-1]
        det.export, det.format, det.dynamic = True, "onnx", False
        with torch.no_grad():
            self.forward(example)

"""A small VITS text-to-speech model in PyTorch for the onnxforge test zoo ("small" set).

The structure follows VITS (Kim et al. 2021; jaywalnut310/vits `models.py`, `modules.py`,
`commons.py`, `attentions.py`) at inference, as Piper and Coqui export it to ONNX: inputs
`input` (phoneme ids [batch, phonemes]), `input_lengths` [batch] and `scales` [3] (noise_scale,
length_scale, noise_scale_w); output `output` [batch, 1, time], whose length is set by the
predicted durations, that is by the input values. What makes the model hard to verify is kept:

- TextEncoder: embedding * sqrt(hidden), a relative-position-free transformer encoder (multi-head
  attention and a conv FFN, both masked by sequence_mask(input_lengths)), projection to the prior
  mean and log-scale;
- DurationPredictor (deterministic, with the stochastic predictor's noise input:
  noise_scale_w * randn_like): conv / LayerNorm / ReLU stacks giving log durations;
- duration expansion: w_ceil = ceil(exp(logw) * x_mask * length_scale), y_lengths =
  clamp(sum(w_ceil), 1), the monotonic path of commons.generate_path (CumSum, sequence_mask,
  pad-and-subtract), the frames kept through NonZero of the output mask and written with an
  indexed assignment (ScatterND): the value-dependent output length;
- the prior sample z_p = m_p + randn_like(m_p) * exp(logs_p) * noise_scale (RandomNormalLike);
- a reversed ResidualCouplingBlock (WaveNet coupling layers with flips);
- a HiFi-GAN Generator (ConvTranspose1d upsampling, ResBlock1 with dilations, tanh).

Random weights, small widths (the zoo's CI set); `export(path)` writes the ONNX model at opset 15
with the exporter's tracing, as `torch.onnx.export` does for Piper.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

LRELU_SLOPE = 0.1


def sequence_mask(length: torch.Tensor, max_length: torch.Tensor | None = None) -> torch.Tensor:
    if max_length is None:
        max_length = length.max()
    x = torch.arange(max_length, dtype=length.dtype, device=length.device)
    return x.unsqueeze(0) < length.unsqueeze(1)


def generate_path(duration: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """commons.generate_path: duration [b, 1, t_x], mask [b, 1, t_y, t_x] -> path [b, 1, t_y, t_x]."""
    b, _, t_y, t_x = mask.shape
    cum_duration = torch.cumsum(duration, -1)
    cum_duration_flat = cum_duration.view(b * t_x)
    path = sequence_mask(cum_duration_flat, t_y).to(mask.dtype)
    path = path.view(b, t_x, t_y)
    path = path - F.pad(path, [0, 0, 1, 0, 0, 0])[:, :-1]
    return path.unsqueeze(1).transpose(2, 3) * mask


class LayerNorm(nn.Module):  # modules.LayerNorm: over channels of [b, c, t]
    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))
        self.eps, self.channels = eps, channels

    def forward(self, x):
        x = x.transpose(1, -1)
        x = F.layer_norm(x, (self.channels,), self.gamma, self.beta, self.eps)
        return x.transpose(1, -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, channels: int, heads: int):
        super().__init__()
        self.heads, self.k = heads, channels // heads
        self.conv_q = nn.Conv1d(channels, channels, 1)
        self.conv_k = nn.Conv1d(channels, channels, 1)
        self.conv_v = nn.Conv1d(channels, channels, 1)
        self.conv_o = nn.Conv1d(channels, channels, 1)

    def forward(self, x, attn_mask):
        b, d, t = x.shape
        q = self.conv_q(x).view(b, self.heads, self.k, t).transpose(2, 3)
        k = self.conv_k(x).view(b, self.heads, self.k, t).transpose(2, 3)
        v = self.conv_v(x).view(b, self.heads, self.k, t).transpose(2, 3)
        scores = torch.matmul(q / math.sqrt(self.k), k.transpose(-2, -1))
        scores = scores.masked_fill(attn_mask == 0, -1e4)
        p = F.softmax(scores, dim=-1)
        out = torch.matmul(p, v).transpose(2, 3).contiguous().view(b, d, t)
        return self.conv_o(out)


class FFN(nn.Module):
    def __init__(self, channels: int, filter_channels: int, kernel_size: int):
        super().__init__()
        self.conv_1 = nn.Conv1d(channels, filter_channels, kernel_size, padding=kernel_size // 2)
        self.conv_2 = nn.Conv1d(filter_channels, channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x, x_mask):
        x = torch.relu(self.conv_1(x * x_mask))
        return self.conv_2(x * x_mask) * x_mask


class Encoder(nn.Module):  # attentions.Encoder
    def __init__(self, hidden: int, filter_channels: int, heads: int, layers: int, kernel_size: int):
        super().__init__()
        self.attn_layers = nn.ModuleList(MultiHeadAttention(hidden, heads) for _ in range(layers))
        self.norm_layers_1 = nn.ModuleList(LayerNorm(hidden) for _ in range(layers))
        self.ffn_layers = nn.ModuleList(FFN(hidden, filter_channels, kernel_size) for _ in range(layers))
        self.norm_layers_2 = nn.ModuleList(LayerNorm(hidden) for _ in range(layers))

    def forward(self, x, x_mask):
        attn_mask = x_mask.unsqueeze(2) * x_mask.unsqueeze(-1)
        x = x * x_mask
        for attn, n1, ffn, n2 in zip(self.attn_layers, self.norm_layers_1, self.ffn_layers, self.norm_layers_2):
            x = n1(x + attn(x, attn_mask))
            x = n2(x + ffn(x, x_mask))
        return x * x_mask


class TextEncoder(nn.Module):
    def __init__(self, n_vocab: int, inter: int, hidden: int, filter_channels: int, heads: int, layers: int):
        super().__init__()
        self.hidden = hidden
        self.emb = nn.Embedding(n_vocab, hidden)
        nn.init.normal_(self.emb.weight, 0.0, hidden ** -0.5)
        self.encoder = Encoder(hidden, filter_channels, heads, layers, 3)
        self.proj = nn.Conv1d(hidden, inter * 2, 1)

    def forward(self, x, x_lengths):
        x = self.emb(x) * math.sqrt(self.hidden)
        x = x.transpose(1, -1)
        x_mask = sequence_mask(x_lengths, x.size(2)).unsqueeze(1).to(x.dtype)
        x = self.encoder(x, x_mask)
        m, logs = torch.split(self.proj(x) * x_mask, self.proj.out_channels // 2, dim=1)
        return x, m, logs, x_mask


class DurationPredictor(nn.Module):
    def __init__(self, in_channels: int, filter_channels: int, kernel_size: int):
        super().__init__()
        self.conv_1 = nn.Conv1d(in_channels, filter_channels, kernel_size, padding=kernel_size // 2)
        self.norm_1 = LayerNorm(filter_channels)
        self.conv_2 = nn.Conv1d(filter_channels, filter_channels, kernel_size, padding=kernel_size // 2)
        self.norm_2 = LayerNorm(filter_channels)
        self.proj = nn.Conv1d(filter_channels, 1, 1)
        self.noise = nn.Conv1d(1, in_channels, 1)  # the stochastic predictor's noise enters here

    def forward(self, x, x_mask, noise_scale_w):
        noise = torch.randn_like(x[:, :1]) * noise_scale_w
        x = x + self.noise(noise)
        x = self.norm_1(torch.relu(self.conv_1(x * x_mask)))
        x = self.norm_2(torch.relu(self.conv_2(x * x_mask)))
        return self.proj(x * x_mask) * x_mask


class WN(nn.Module):  # modules.WN, without the speaker condition
    def __init__(self, hidden: int, kernel_size: int, dilation_rate: int, layers: int):
        super().__init__()
        self.hidden = hidden
        self.in_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden, kernel_size, dilation=dilation_rate ** i,
                      padding=(kernel_size * dilation_rate ** i - dilation_rate ** i) // 2) for i in range(layers))
        self.res_skip_layers = nn.ModuleList(
            nn.Conv1d(hidden, 2 * hidden if i < layers - 1 else hidden, 1) for i in range(layers))

    def forward(self, x, x_mask):
        output = torch.zeros_like(x)
        for i, (inl, rs) in enumerate(zip(self.in_layers, self.res_skip_layers)):
            x_in = inl(x)
            acts = torch.tanh(x_in[:, :self.hidden]) * torch.sigmoid(x_in[:, self.hidden:])
            res_skip = rs(acts)
            if i < len(self.in_layers) - 1:
                x = (x + res_skip[:, :self.hidden]) * x_mask
                output = output + res_skip[:, self.hidden:]
            else:
                output = output + res_skip
        return output * x_mask


class ResidualCouplingLayer(nn.Module):
    def __init__(self, channels: int, hidden: int, kernel_size: int, dilation_rate: int, layers: int):
        super().__init__()
        self.half = channels // 2
        self.pre = nn.Conv1d(self.half, hidden, 1)
        self.enc = WN(hidden, kernel_size, dilation_rate, layers)
        self.post = nn.Conv1d(hidden, self.half, 1)
        nn.init.normal_(self.post.weight, 0.0, 0.02)  # VITS zero-inits it; small noise keeps it non-trivial
        nn.init.zeros_(self.post.bias)

    def forward(self, x, x_mask):  # reverse
        x0, x1 = torch.split(x, [self.half] * 2, 1)
        h = self.enc(self.pre(x0) * x_mask, x_mask)
        m = self.post(h) * x_mask
        x1 = (x1 - m) * x_mask
        return torch.cat([x0, x1], 1)


class ResidualCouplingBlock(nn.Module):
    def __init__(self, channels: int, hidden: int, kernel_size: int, dilation_rate: int, layers: int, flows: int):
        super().__init__()
        self.flows = nn.ModuleList(ResidualCouplingLayer(channels, hidden, kernel_size, dilation_rate, layers)
                                   for _ in range(flows))

    def forward(self, x, x_mask):  # reverse: flip, then the coupling, last flow first
        for flow in reversed(self.flows):
            x = torch.flip(x, [1])
            x = flow(x, x_mask)
        return x


class ResBlock1(nn.Module):
    def __init__(self, channels: int, kernel_size: int, dilations=(1, 3, 5)):
        super().__init__()
        self.convs1 = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, dilation=d,
                                              padding=(kernel_size * d - d) // 2) for d in dilations)
        self.convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2)
                                    for _ in dilations)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
            x = xt + x
        return x


class Generator(nn.Module):  # HiFi-GAN
    def __init__(self, inter: int, initial: int, rates, kernels, res_kernels):
        super().__init__()
        self.conv_pre = nn.Conv1d(inter, initial, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(initial // 2 ** i, initial // 2 ** (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(rates, kernels)))
        self.resblocks = nn.ModuleList(ResBlock1(initial // 2 ** (i + 1), k) for i in range(len(rates))
                                       for k in res_kernels)
        self.n_kernels = len(res_kernels)
        self.conv_post = nn.Conv1d(initial // 2 ** len(rates), 1, 7, padding=3, bias=False)

    def forward(self, x):
        x = self.conv_pre(x)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            xs = sum(self.resblocks[i * self.n_kernels + j](x) for j in range(self.n_kernels))
            x = xs / self.n_kernels
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


class SynthesizerTrn(nn.Module):
    """VITS at inference (models.SynthesizerTrn.infer), single speaker, Piper's ONNX signature."""

    def __init__(self, cfg: dict):
        super().__init__()
        c = cfg
        self.enc_p = TextEncoder(c["n_vocab"], c["inter"], c["hidden"], c["filter"], c["heads"], c["layers"])
        self.dp = DurationPredictor(c["hidden"], c["filter"], 3)
        self.flow = ResidualCouplingBlock(c["inter"], c["hidden"], 5, 1, 2, c["flows"])
        self.dec = Generator(c["inter"], c["upsample_initial"], c["upsample_rates"], c["upsample_kernels"],
                             c["resblock_kernels"])

    def forward(self, x, x_lengths, scales):
        noise_scale, length_scale, noise_scale_w = scales[0], scales[1], scales[2]
        x, m_p, logs_p, x_mask = self.enc_p(x, x_lengths)
        logw = self.dp(x, x_mask, noise_scale_w)
        w = torch.exp(logw) * x_mask * length_scale
        w_ceil = torch.ceil(w)
        y_lengths = torch.clamp_min(torch.sum(w_ceil, [1, 2]), 1).long()
        y_mask = sequence_mask(y_lengths, None).unsqueeze(1).to(x_mask.dtype)
        attn_mask = torch.unsqueeze(x_mask, 2) * torch.unsqueeze(y_mask, -1)
        attn = generate_path(w_ceil, attn_mask)
        m_p = torch.matmul(attn.squeeze(1), m_p.transpose(1, 2)).transpose(1, 2)
        logs_p = torch.matmul(attn.squeeze(1), logs_p.transpose(1, 2)).transpose(1, 2)
        # The frames inside the mask, found with NonZero and written with an indexed assignment
        # (ScatterND), as length-regulated exports do.
        # (Indexing the leading axis keeps the export's shapes symbolic.)
        frames = torch.nonzero(y_mask[0, 0] > 0).squeeze(1)
        m_t = m_p.transpose(0, 2)
        prior = torch.zeros_like(m_t)
        prior[frames] = m_t[frames]
        z_p = prior.transpose(0, 2) + torch.randn_like(m_p) * torch.exp(logs_p) * noise_scale
        z = self.flow(z_p, y_mask)
        return self.dec(z * y_mask)


SMALL = dict(n_vocab=40, inter=16, hidden=32, filter=64, heads=2, layers=2, flows=2, upsample_initial=32,
             upsample_rates=[4, 4], upsample_kernels=[8, 8], resblock_kernels=[3])


def build(cfg: dict = SMALL, seed: int = 0) -> SynthesizerTrn:
    torch.manual_seed(seed)
    model = SynthesizerTrn(cfg)
    model.eval()
    return model


def export(path: str, cfg: dict = SMALL, seed: int = 0, opset: int = 15) -> None:
    model = build(cfg, seed)
    phonemes = 16
    x = torch.randint(0, cfg["n_vocab"], (1, phonemes))
    lengths = torch.tensor([phonemes], dtype=torch.long)
    scales = torch.tensor([0.667, 1.0, 0.8])
    with torch.no_grad():
        torch.onnx.export(model, (x, lengths, scales), path, input_names=["input", "input_lengths", "scales"],
                          output_names=["output"], opset_version=opset, do_constant_folding=False,
                          dynamic_axes={"input": {0: "batch", 1: "phonemes"}, "input_lengths": {0: "batch"},
                                        "output": {0: "batch", 2: "time"}})


if __name__ == "__main__":
    import sys
    export(sys.argv[1] if len(sys.argv) > 1 else "vits_small.onnx")

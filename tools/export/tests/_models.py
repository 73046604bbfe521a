"""Small test models (independent of tools/models) and a name-based cross-check."""
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

H, HEADS, VOCAB, MAXPOS = 16, 2, 50, 32


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H)
        self.dropout = nn.Dropout(0.1)

    def split(self, x):
        return x.view(x.shape[0], x.shape[1], HEADS, H // HEADS).transpose(1, 2)

    def forward(self, hidden, mask):
        q, k, v = self.split(self.query(hidden)), self.split(self.key(hidden)), self.split(self.value(hidden))
        scores = q @ k.transpose(-1, -2) / (H // HEADS) ** 0.5 + mask
        ctx = self.dropout(torch.softmax(scores, -1)) @ v
        return ctx.transpose(1, 2).reshape(hidden.shape)


class Output(nn.Module):
    def __init__(self, d_in):
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(d_in, H), nn.LayerNorm(H)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = SelfAttention()
        self.attn_out = Output(H)
        self.intermediate = nn.Linear(H, 2 * H)
        self.output = Output(2 * H)

    def forward(self, x, mask):
        x = self.attn_out(self.attention(x, mask), x)
        return self.output(F.gelu(self.intermediate(x)), x)


class Encoder(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layer = nn.ModuleList(Layer() for _ in range(n))

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, H)
        self.position_embeddings = nn.Embedding(MAXPOS, H)
        self.LayerNorm = nn.LayerNorm(H)
        self.register_buffer("position_ids", torch.arange(MAXPOS).unsqueeze(0))

    def forward(self, ids):
        pos = self.position_ids[:, :ids.shape[1]]
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos))


class TinyBert(nn.Module):
    """BERT-like: ModuleList layers, mask arithmetic at the top level (outside any submodule)."""

    def __init__(self, layers=2):
        super().__init__()
        self.embeddings = Embeddings()
        self.encoder = Encoder(layers)
        self.pooler = nn.Linear(H, H)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        ext = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        seq = self.encoder(self.embeddings(input_ids), ext)
        return seq, torch.tanh(self.pooler(seq[:, 0]))


def tiny_bert_inputs(batch=2, seq=8):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[1, -2:] = 0
    return ids, mask


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)) + x)


class SeqNet(nn.Module):
    """Invoked nn.Sequential (nested), custom blocks inside it, two Conv2d siblings."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.features = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                                      nn.Sequential(Block(4), Block(4)))
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x):
        return self.head(self.features(self.stem(x))).mean((2, 3))


class Mlp(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Shared(nn.Module):
    """One Linear and one custom block called twice; a top-level op between them."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.block = Mlp(8)

    def forward(self, x):
        y = self.proj(x) * 2.0
        y = self.proj(y)
        return self.block(self.block(y))


class DataDependent(nn.Module):
    """Data-dependent control flow: torch.fx.symbolic_trace cannot trace it."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)


def make_tiny_bert(layers=2):
    """CLI factory form: returns (model, args, export options)."""
    m = TinyBert(layers).eval()
    return m, tiny_bert_inputs(), {"input_names": ["input_ids", "attention_mask"],
                                   "output_names": ["last_hidden_state", "pooler_output"]}


def module_from_node_name(name: str):
    """Dotted module path from a TorchScript-exporter node name (REFERENCE.md rules), or None
    for unscoped names.  Test cross-check only: assumes module names without `_<digits>`."""
    parts = name.split("/")
    if len(parts) < 2 or parts[0] != "":
        return None
    path = ""
    for comp in parts[1:-1]:
        comp = re.sub(r"_\d+$", "", comp)  # N-th extra call of a module
        atoms = path.split(".") if path else []
        last = max((i for i, a in enumerate(atoms) if not a.isdigit()), default=None)
        tail = ".".join(atoms[last:]) if last is not None else ""
        if tail and comp.startswith(tail + "."):
            comp = comp[len(tail) + 1:]  # invoked nn.Sequential repeats: /layer1/layer1.0
        path = f"{path}.{comp}" if path else comp
    return path

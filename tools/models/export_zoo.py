#!/usr/bin/python3
"""Export the onnxforge test-model zoo (random weights) with Debian's python3-torch.

  /usr/bin/python3 tools/models/export_zoo.py --small            # CI set, seconds, cached
  /usr/bin/python3 tools/models/export_zoo.py                    # full-size set
  /usr/bin/python3 tools/models/export_zoo.py --tinyllama        # + TinyLlama-1.1B shape (4.4 GB)
  /usr/bin/python3 tools/models/export_zoo.py --tinyllama-past   # + TinyLlama-1.1B with KV cache (4.4 GB)
  /usr/bin/python3 tools/models/export_zoo.py --phi15 --gemma2b  # + Phi-1.5, Gemma-2B shapes (5.7, 10 GB fp32)
  /usr/bin/python3 tools/models/export_zoo.py --only bert_small,resnet_small_bn --out /tmp/zoo
  /usr/bin/python3 tools/models/export_zoo.py --list

Every model is exported by torch.onnx.export (TorchScript exporter) with do_constant_folding=False,
so the graphs keep the raw exporter structure. Weights are random with a per-model seed, plus
small noise (fresh weights are often bit-identical, and the exporter then emits Identity nodes).
CNN batch-norm statistics are calibrated on random images (train-mode forward passes), so the
activations stay in a realistic range. `<cnn>_bn` variants have the same weights as `<cnn>` but
are exported with TrainingMode.PRESERVE (model in eval mode), which keeps BatchNormalization.

Models (`--list` prints them with their sets; CI-size configurations are the `--small` set):

  family           full-size (published configuration)            small (CI)
  cnn              resnet50, mobilenet_v2, mobilenet_v3_small,    resnet_small, mobilenet_v2,
                   efficientnet_b0 (+ `_bn`)                      mobilenet_v3_small, efficientnet_b0 (+ `_bn`)
  vit              vit_b_16                                       vit_small
  bert / roberta   bert_base, roberta_base                        bert_small, roberta_mini
  distilbert       distilbert_base                                distilbert_small
  gpt2 / llama     gpt2, gpt2_lm, gpt2_past, tinyllama_2l,        gpt2_small_cfg, gpt2_small_lm, gpt2_small_past,
                   tinyllama (--tinyllama), tinyllama_past        llama_small, llama_small_past
                   (--tinyllama-past)
  phi / gemma      phi15, gemma2b (+ `_past`; --phi15, --gemma2b) phi_small, gemma_small (+ `_past`)
  whisper_encoder  whisper_tiny_enc, whisper_base_enc             whisper_small_enc
  deit             deit_small (distilled: CLS + distillation      deit_mini
                   token, two heads averaged)
  mobilevit        mobilevit_small (+ `_bn`)                      mobilevit_mini (+ `_bn`)
  yolov8           yolov8n, yolov8s at 640 (+ `_bn`)              yolov8n_mini (YOLOv8n at 128, + `_bn`)
  wav2vec2         wav2vec2_base (16000 samples; `_dynlen`:       wav2vec2_mini (800 samples)
                   dynamic length)
  vits             -                                              vits_small (Piper-style VITS TTS, opset 15)
  tf2onnx          -                                              tf2onnx_linedet (opset 11), tf2onnx_blazeface (12)
`_op17` variants (roberta, deit, mobilevit, wav2vec2: small and full; whisper_base_enc, yolov8n/s:
full) have the same weights exported at opset 17, where LayerNorm is one LayerNormalization node;
mobilenet_v3_small_op13 (small) has mobilenet_v3_small's at opset 13, where h-swish is x * HardSigmoid(x);
every other model uses --opset (default 14). Module code: hf_models.py (Hugging Face transformers'
module names), yolo_models.py (Ultralytics') and vits_models.py (VITS, Piper's signature).

`_past`: decoders with a KV cache in optimum's layout (input_ids, attention_mask [batch,
total_sequence], position_ids, past_key_values.N.key/value -> logits, present.N.key/value; see
_decoder_with_past); `_lm`: GPT-2 with its LM head tied to the embedding. check_decoder.py compares
them with torch through ONNX Runtime.

`_fn` (bert_small_fn, llama_small_fn): the flat twins' weights exported at opset 15 with
export_modules_as_functions; their layer, attention and MLP modules are model-local functions
(FunctionProto) the main graph calls.

Full-size decoders (Phi-1.5, Gemma-2B, TinyLlama with past) are exported the lean way
(attach_parameters: peak RAM ~1.4x the fp32 weights instead of torch's ~2.3x), so their random
values differ from a plain export of the same seed.

Output: `<out>/<name>.onnx` (TinyLlama, Phi-1.5, Gemma-2B: `<out>/<name>/model.onnx` + one file per
tensor) and
`<out>/zoo.json`, a manifest with, per model: file, family, sets, config, opset, inputs/outputs
(dtype and shape; dynamic dims by name; token-id inputs carry their valid `range`), the seed and
exporter settings, node/initializer/op counts, and `modules` (named_modules(): path -> class;
a module object reachable under several paths, like YOLOv8's shared SiLU, under each of them).
A model is skipped when its file exists and its stamp (sha256 of this script, hf_models.py and
yolo_models.py, the model config, opset and torch/torchvision versions) matches the manifest.
Outputs are written to a temporary name and renamed; concurrent runs on the same folder are
serialised by a lock file.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

# Busy-waiting OpenMP threads burn the cores other jobs (a parallel build, ctest -j) need.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(HERE))

DEFAULT_OPSET = 14
TRACE_DIMS = {"batch": 2, "sequence": 16}  # trace sizes: neither is 1, so nothing specialises on them
MANIFEST = "zoo.json"


# ----------------------------------------------------------------------------- registry
@dataclass
class Spec:
    name: str
    family: str          # cnn | vit | bert | roberta | distilbert | gpt2 | llama | whisper_encoder | deit |
    #                      mobilevit | yolov8 | wav2vec2 | vits
    sets: tuple          # "small", "full", "tinyllama"
    config: dict
    bn_preserve: bool = False
    seed_name: str = ""  # models that must share weights share the seed name
    subdir: bool = False  # <out>/<name>/model.onnx (external data)
    notes: str = ""
    extra: dict = field(default_factory=dict)
    opset: int | None = None  # fixed opset (the `_op17` variants); None: --opset

    @property
    def file(self) -> str:
        return f"{self.name}/model.onnx" if self.subdir else f"{self.name}.onnx"


def _cnn(name, sets, cfg, bn_variant=True, family="cnn", notes=""):
    base = Spec(name, family, sets, dict(cfg), seed_name=name, notes=notes)
    out = [base]
    if bn_variant:
        out.append(Spec(name + "_bn", family, sets, dict(cfg, bn_preserved=True), bn_preserve=True, seed_name=name,
                        notes=f"same weights as {name}; BatchNormalization kept (TrainingMode.PRESERVE)"))
    return out


def _op17(spec: Spec, sets=None) -> Spec:
    """The same model and weights exported at opset 17, where torch 1.13 writes LayerNorm as
    one LayerNormalization node instead of the ReduceMean/Sub/Pow/Sqrt/Div chain."""
    return Spec(spec.name + "_op17", spec.family, sets or spec.sets, dict(spec.config),
                seed_name=spec.seed_name or spec.name, opset=17,
                notes=f"same weights as {spec.name}; opset 17")


BERT_BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)
ROBERTA_BASE = dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                    layer_norm_eps=1e-5)
DEIT_SMALL = dict(image_size=224, patch_size=16, num_channels=3, hidden_size=384, num_hidden_layers=12,
                  num_attention_heads=6, intermediate_size=1536, layer_norm_eps=1e-12, qkv_bias=True, num_labels=1000)
MOBILEVIT_SMALL = dict(image_size=256, patch_size=2, num_channels=3, hidden_sizes=[144, 192, 240],
                       neck_hidden_sizes=[16, 32, 64, 96, 128, 160, 640], num_attention_heads=4, mlp_ratio=2.0,
                       expand_ratio=4.0, conv_kernel_size=3, layer_norm_eps=1e-5, qkv_bias=True, num_labels=1000)
WAV2VEC2_BASE = dict(conv_dim=[512] * 7, conv_stride=[5, 2, 2, 2, 2, 2, 2], conv_kernel=[10, 3, 3, 3, 3, 2, 2],
                     conv_bias=False, num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16, hidden_size=768,
                     num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, layer_norm_eps=1e-5)
VITS_SMALL = dict(n_vocab=40, inter=16, hidden=32, filter=64, heads=2, layers=2, flows=2, upsample_initial=32,
                  upsample_rates=[4, 4], upsample_kernels=[8, 8], resblock_kernels=[3])
TINYLLAMA = dict(vocab_size=32000, hidden_size=2048, num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, intermediate_size=5632, rms_norm_eps=1e-5, rope_theta=10000.0)

# transformers' PhiConfig for microsoft/phi-1_5 and GemmaConfig for google/gemma-2b
PHI15 = dict(vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
             num_key_value_heads=32, partial_rotary_factor=0.5, layer_norm_eps=1e-5, rope_theta=10000.0,
             max_position_embeddings=2048)
GEMMA2B = dict(vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=18,
               num_attention_heads=8, num_key_value_heads=1, head_dim=256, rms_norm_eps=1e-6, rope_theta=10000.0,
               max_position_embeddings=8192, pad_token_id=0)


def registry() -> list[Spec]:
    S, F, SF = ("small",), ("full",), ("small", "full")
    specs: list[Spec] = []
    # CNNs. The mobilenets and efficientnet_b0 are small at full width, so the CI set uses them
    # as they are (224x224: the shape they are deployed and benchmarked at; 0.06-0.4 GFLOP).
    specs += _cnn("resnet50", F, dict(arch="resnet50", image=224))
    specs += _cnn("resnet_small", S, dict(arch="resnet_bottleneck", layers=[1, 1, 1, 1], image=96))
    specs += _cnn("mobilenet_v2", SF, dict(arch="mobilenet_v2", image=224))
    specs += _cnn("mobilenet_v3_small", SF, dict(arch="mobilenet_v3_small", image=224))
    specs.append(Spec("mobilenet_v3_small_op13", "cnn", S, dict(arch="mobilenet_v3_small", image=224),
                      seed_name="mobilenet_v3_small", opset=13,
                      notes="same weights as mobilenet_v3_small; opset 13, where torch writes h-swish as "
                            "x * HardSigmoid(x)"))
    specs += _cnn("efficientnet_b0", SF, dict(arch="efficientnet_b0", image=224))
    specs.append(Spec("vit_b_16", "vit", F, dict(image=224, patch=16, layers=12, heads=12, hidden=768, mlp=3072)))
    specs.append(Spec("vit_small", "vit", S, dict(image=64, patch=16, layers=2, heads=4, hidden=64, mlp=128)))
    # Transformers (HF module names, see hf_models.py).
    specs.append(Spec("bert_base", "bert", F, dict(BERT_BASE)))
    specs.append(Spec("bert_small", "bert", S, dict(BERT_BASE, vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                                       num_attention_heads=4, intermediate_size=128,
                                                       max_position_embeddings=128)))
    specs.append(Spec("distilbert_base", "distilbert", F, dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12,
                                                              hidden_dim=3072, max_position_embeddings=512)))
    specs.append(Spec("distilbert_small", "distilbert", S, dict(vocab_size=1000, dim=64, n_layers=2, n_heads=4,
                                                               hidden_dim=128, max_position_embeddings=128)))
    gpt2 = dict(vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024)
    gpt2_small = dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=128)
    llama_small = dict(TINYLLAMA, vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, intermediate_size=176)
    specs.append(Spec("gpt2", "gpt2", F, gpt2))
    specs.append(Spec("gpt2_small_cfg", "gpt2", S, gpt2_small))
    specs.append(Spec("llama_small", "llama", S, llama_small))
    # Decoders with a KV cache in optimum's layout (_decoder_with_past), and GPT-2 with its tied LM
    # head. gpt2_small_past has GPT-2's 1024 positions: its causal mask is a slice of the
    # [n_positions, n_positions] `bias` buffer, so past + sequence must fit in it.
    specs.append(Spec("llama_small_past", "llama", S, dict(llama_small, use_cache=True, mask="prepare_4d"),
                      seed_name="llama_small",
                      notes="same weights as llama_small; KV cache (optimum layout), _prepare_4d_causal_attention_mask"))
    # Model-local functions (FunctionProto): torch's export_modules_as_functions writes each call of
    # these module classes as a call of a function in the module's domain (needs opset >= 15).
    # Same weights as the flat twins; `optimize --inline-functions` expands them.
    specs.append(Spec("bert_small_fn", "bert", S, dict(next(s for s in specs if s.name == "bert_small").config),
                      seed_name="bert_small", opset=15,
                      extra={"functions": ["BertLayer", "BertSelfAttention", "BertIntermediate", "BertOutput"]},
                      notes="same weights as bert_small; opset 15, BertLayer/SelfAttention/Intermediate/Output as "
                            "model-local functions"))
    specs.append(Spec("llama_small_fn", "llama", S, dict(llama_small), seed_name="llama_small", opset=15,
                      extra={"functions": ["LlamaDecoderLayer", "LlamaAttention", "LlamaMLP", "LlamaRMSNorm"]},
                      notes="same weights as llama_small; opset 15, LlamaDecoderLayer/Attention/MLP/RMSNorm as "
                            "model-local functions"))
    specs.append(Spec("gpt2_small_lm", "gpt2", S, dict(gpt2_small, lm_head=True),
                      notes="GPT2LMHeadModel, LM head tied to wte"))
    specs.append(Spec("gpt2_small_past", "gpt2", S, dict(gpt2_small, n_positions=1024, lm_head=True, use_cache=True),
                      notes="GPT2LMHeadModel (tied LM head), KV cache (optimum layout), 1024 positions"))
    specs.append(Spec("gpt2_lm", "gpt2", F, dict(gpt2, lm_head=True), notes="GPT2LMHeadModel, LM head tied to wte"))
    specs.append(Spec("gpt2_past", "gpt2", F, dict(gpt2, lm_head=True, use_cache=True), seed_name="gpt2_lm",
                      notes="same weights as gpt2_lm; KV cache (optimum layout)"))
    # Phi-1.5 and Gemma-2B (the seeds' group D): small CI configurations keep the structural
    # details (Phi: head_dim 64 rotated over its first 32; Gemma: MQA, head_dim 256 != hidden/heads).
    phi_small = dict(PHI15, vocab_size=1000, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048)
    gemma_small = dict(GEMMA2B, vocab_size=1000, hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1)
    specs.append(Spec("phi_small", "phi", S, phi_small))
    specs.append(Spec("phi_small_past", "phi", S, dict(phi_small, use_cache=True), seed_name="phi_small",
                      notes="same weights as phi_small; KV cache (optimum layout)"))
    specs.append(Spec("gemma_small", "gemma", S, gemma_small))
    specs.append(Spec("gemma_small_past", "gemma", S, dict(gemma_small, use_cache=True), seed_name="gemma_small",
                      notes="same weights as gemma_small; KV cache (optimum layout)"))
    # Full size: the lean export (attach_parameters) traces a module whose parameters are not
    # initialised and makes the fp32 weights one tensor at a time into one external file each:
    # peak RAM ~1.4x the weights (Gemma-2B: 14.1 GiB) instead of torch's ~2.3x.
    lean = {"lean": True}
    specs.append(Spec("phi15", "phi", ("phi15",), dict(PHI15), subdir=True, extra=lean,
                      notes="full Phi-1.5 shape (5.7 GB fp32), external data"))
    specs.append(Spec("phi15_past", "phi", ("phi15",), dict(PHI15, use_cache=True), subdir=True, seed_name="phi15",
                      extra=lean, notes="full Phi-1.5 shape with KV cache, external data"))
    specs.append(Spec("gemma2b", "gemma", ("gemma2b",), dict(GEMMA2B), subdir=True, extra=lean,
                      notes="full Gemma-2B shape (10 GB fp32), external data"))
    specs.append(Spec("gemma2b_past", "gemma", ("gemma2b",), dict(GEMMA2B, use_cache=True), subdir=True,
                      seed_name="gemma2b", extra=lean, notes="full Gemma-2B shape with KV cache, external data"))
    specs.append(Spec("tinyllama_2l", "llama", F, dict(TINYLLAMA, num_hidden_layers=2),
                      notes="TinyLlama-1.1B layer shapes, 2 of its 22 layers (fits in one file)"))
    specs.append(Spec("tinyllama", "llama", ("tinyllama",), dict(TINYLLAMA), subdir=True,
                      notes="full TinyLlama-1.1B shape, external data (one file per tensor)"))
    # llama_small_past's mask spelling at full size (5916 nodes); lean, so ~6 GiB RAM instead of ~10
    specs.append(Spec("tinyllama_past", "llama", ("tinyllama_past",),
                      dict(TINYLLAMA, use_cache=True, mask="prepare_4d"), subdir=True, extra=lean,
                      notes="full TinyLlama-1.1B shape with KV cache (optimum layout), external data"))
    specs.append(Spec("whisper_tiny_enc", "whisper_encoder", F,
                      dict(num_mel_bins=80, d_model=384, encoder_layers=4, encoder_attention_heads=6,
                           encoder_ffn_dim=1536, max_source_positions=1500)))
    specs.append(Spec("whisper_small_enc", "whisper_encoder", S,
                      dict(num_mel_bins=80, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                           encoder_ffn_dim=128, max_source_positions=100)))
    specs.append(Spec("whisper_base_enc", "whisper_encoder", F,
                      dict(num_mel_bins=80, d_model=512, encoder_layers=6, encoder_attention_heads=8,
                           encoder_ffn_dim=2048, max_source_positions=1500), notes="Whisper-base encoder"))
    specs.append(_op17(specs[-1]))
    # The M11 list (issue 17). Full: the published configurations. Small (`_mini`, the CI set):
    # the same code at CI size; opset-17 variants where LayerNorm is in the graph.
    specs.append(Spec("roberta_base", "roberta", F, dict(ROBERTA_BASE)))
    specs.append(_op17(specs[-1]))
    specs.append(Spec("roberta_mini", "roberta", S, dict(ROBERTA_BASE, vocab_size=1000, hidden_size=64,
                                                         num_hidden_layers=2, num_attention_heads=4,
                                                         intermediate_size=128, max_position_embeddings=130)))
    specs.append(_op17(specs[-1]))
    specs.append(Spec("deit_small", "deit", F, dict(DEIT_SMALL), notes="DeiT-small, distilled (two heads)"))
    specs.append(_op17(specs[-1]))
    specs.append(Spec("deit_mini", "deit", S, dict(DEIT_SMALL, image_size=64, hidden_size=64, num_hidden_layers=2,
                                                   num_attention_heads=4, intermediate_size=128, num_labels=100)))
    specs.append(_op17(specs[-1]))
    specs += _cnn("mobilevit_small", F, dict(MOBILEVIT_SMALL), family="mobilevit")
    specs.append(_op17(specs[-2]))
    # MobileViT-xx-small's widths at 64x64 (the 2x2 map of the last stage is one 2x2 patch),
    # one transformer layer per MobileViT block instead of 2/4/3 (export: 4.1 -> 1.6 CPU seconds)
    specs += _cnn("mobilevit_mini", S, dict(MOBILEVIT_SMALL, image_size=64, hidden_sizes=[64, 80, 96],
                                            neck_hidden_sizes=[16, 16, 24, 48, 64, 80, 320], expand_ratio=2.0,
                                            transformer_stages=[1, 1, 1], num_labels=100), family="mobilevit")
    specs.append(_op17(specs[-2]))
    for scale in ("n", "s"):
        specs += _cnn(f"yolov8{scale}", F, dict(scale=scale, nc=80, image=640), family="yolov8",
                      notes=f"YOLOv8{scale} at 640x640, export head (anchors for that shape)")
        specs.append(_op17(specs[-2]))
    # YOLOv8n's real widths and depths at 128x128 (336 anchors instead of 8400)
    specs += _cnn("yolov8n_mini", S, dict(scale="n", nc=80, image=128), family="yolov8")
    # VITS text-to-speech with Piper's signature (vits_models.py): random noise ops, duration
    # expansion through CumSum/NonZero/ScatterND, an output length set by the input values.
    specs.append(Spec("vits_small", "vits", S, dict(VITS_SMALL), opset=15,
                      notes="VITS (Piper's inputs): RandomNormalLike, CumSum/NonZero/ScatterND, value-dependent length"))
    # A fixed audio length (1 s of 16 kHz for base): a symbolic one is sized 128 by the runtime's
    # defaults and 7 by the zoo-wide shape tests, both below the feature encoder's receptive field
    # (400 samples for base, 20 for mini). `_dynlen` keeps the length dynamic, as the original
    # allows (run it with --dim sequence=N, N >= 400).
    specs.append(Spec("wav2vec2_base", "wav2vec2", F, dict(WAV2VEC2_BASE, samples=16000, dynamic_length=False),
                      notes="Wav2Vec2-base, 16000 samples"))
    specs.append(_op17(specs[-1]))
    specs.append(Spec("wav2vec2_base_dynlen", "wav2vec2", F, dict(WAV2VEC2_BASE, samples=16000, dynamic_length=True),
                      seed_name="wav2vec2_base",
                      notes="same weights as wav2vec2_base; dynamic length (--dim sequence=N, N >= 400)"))
    specs.append(Spec("wav2vec2_mini", "wav2vec2", S,
                      dict(WAV2VEC2_BASE, conv_dim=[32, 32, 32], conv_stride=[5, 2, 2], conv_kernel=[10, 3, 3],
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, hidden_size=64,
                           num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, samples=800,
                           dynamic_length=False)))
    specs.append(_op17(specs[-1]))
    # tf2onnx's structure (tf2onnx_models.py): NHWC input, Pads with pads as an input, Relu6 as Clip
    specs.append(Spec("tf2onnx_linedet", "tf2onnx", S, dict(arch="linedet", image=256), opset=11,
                      notes="MobileNetV2-style line detector, RGBA NHWC input, Resize decoder"))
    specs.append(Spec("tf2onnx_blazeface", "tf2onnx", S, dict(arch="blazeface", image=128), opset=12,
                      notes="BlazeFace-style face detector, NHWC input"))
    for s in specs:
        s.seed_name = s.seed_name or s.name
    return specs


# ----------------------------------------------------------------------------- builders
@dataclass
class Built:
    model: object
    args: tuple
    input_names: list
    output_names: list
    dynamic_axes: dict
    input_info: dict  # name -> extra manifest fields (range / fill)
    trace_dims: dict | None = None  # dynamic dim -> size traced, when not TRACE_DIMS'


def _seed(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _add_noise(model, seed: int) -> None:
    """Break ties between bit-identical fresh weights: 1-D parameters (biases, norm scales)
    get N(0, 0.02); larger ones get 1% of their own spread."""
    import torch
    g = torch.Generator().manual_seed(seed ^ 0x5EED)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if not p.is_floating_point():
                continue
            n = torch.randn(p.shape, generator=g, dtype=p.dtype)
            if p.dim() <= 1:
                p.add_(n * 0.02)
            else:
                std = float(p.std()) if p.numel() > 1 else 0.0
                p.add_(n * (0.01 * std if std > 0 else 0.02))


def _calibrate_bn(model, image: int, seed: int) -> None:
    """Give BatchNorm layers realistic running statistics: those of one train-mode forward
    pass over 4 random images."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    g = torch.Generator().manual_seed(seed ^ 0xCA1B)
    model.train()
    with torch.no_grad():  # momentum None + one batch: the statistics of that batch
        model(torch.randn(4, 3, image, image, generator=g))
    for m, mom in zip(bns, saved):
        m.momentum = mom
    model.eval()


_last_built: dict = {}


@contextlib.contextmanager
def _untouched_parameters():
    """Modules built inside get their parameters allocated but not initialised (the init and
    normal_ calls are skipped), for the lean export, which makes the weights later (lean_weight),
    one tensor at a time."""
    import torch
    saved = [(torch.Tensor, "normal_"), (torch.Tensor, "zero_"), (torch.Tensor, "fill_")]
    saved += [(c, "reset_parameters") for c in (torch.nn.Linear, torch.nn.Embedding, torch.nn.LayerNorm)]
    originals = [(o, n, getattr(o, n)) for o, n in saved]
    try:
        for o, n in saved:
            setattr(o, n, lambda self, *a, **k: self)
        yield
    finally:
        for o, n, f in originals:
            setattr(o, n, f)


def lean_weight(name: str, shape, seed: int, base: float):
    """The lean export's weights, one tensor at a time: N(0, 0.02) like _init_weights for
    matrices and embeddings; vectors (norm scales, biases) at their initial value (`base`) plus
    N(0, 0.02), as _add_noise leaves them."""
    import torch
    g = torch.Generator().manual_seed(seed ^ zlib.crc32(name.encode()))
    t = torch.randn(tuple(shape), generator=g) * 0.02
    return t + base if len(shape) == 1 else t


def initial_values(model) -> dict:
    """Parameters whose initial value is 1: LayerNorm and Llama-RMSNorm scales (Gemma's (1 + w)
    scales and every bias start at 0)."""
    import hf_models as hf
    import torch
    return {f"{n}.weight": 1.0 for n, m in model.named_modules()
            if isinstance(m, (torch.nn.LayerNorm, hf.LlamaRMSNorm))}


def build(spec: Spec) -> Built:
    """Build a model with its weights, memoised for the next spec of the same seed and config
    (`<cnn>` and `<cnn>_bn` share one build: exporting does not change the module)."""
    key = json.dumps([spec.seed_name, {k: v for k, v in spec.config.items() if k != "bn_preserved"}], sort_keys=True)
    if key not in _last_built:
        _last_built.clear()
        _last_built[key] = _build(spec)
    return _last_built[key]


def _build(spec: Spec) -> Built:
    import torch
    c = spec.config
    seed = _seed(spec.seed_name)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed ^ 0x1A7E)
    B, T = TRACE_DIMS["batch"], TRACE_DIMS["sequence"]
    if spec.family in ("cnn", "vit"):
        import torchvision
        if spec.family == "vit":
            model = torchvision.models.VisionTransformer(
                image_size=c["image"], patch_size=c["patch"], num_layers=c["layers"], num_heads=c["heads"],
                hidden_dim=c["hidden"], mlp_dim=c["mlp"])
        elif c["arch"] == "resnet_bottleneck":
            from torchvision.models.resnet import Bottleneck, ResNet
            model = ResNet(Bottleneck, c["layers"])
        else:
            model = getattr(torchvision.models, c["arch"])(weights=None)
        _add_noise(model, seed)
        if spec.family == "cnn":
            _calibrate_bn(model, c["image"], seed)
        model.eval()
        x = torch.randn(B, 3, c["image"], c["image"], generator=g)
        return Built(model, (x,), ["pixel_values"], ["logits"],
                     {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, {})

    if spec.family == "tf2onnx":
        import tf2onnx_models
        model, x, ins, outs = tf2onnx_models.build(c, g)
        _add_noise(model, seed)
        tf2onnx_models.calibrate_bn(model, x, seed)
        return Built(model, (x,), ins, outs, {}, {})

    if spec.family == "yolov8":
        import yolo_models
        model = yolo_models.DetectionModel(c)
        _add_noise(model, seed)
        model.restore_dfl()
        _calibrate_bn(model, c["image"], seed)
        x = torch.randn(B, 3, c["image"], c["image"], generator=g)
        model.prepare_export(x)
        # ultralytics' names: `yolo export format=onnx` writes images -> output0
        return Built(model, (x,), ["images"], ["output0"], {"images": {0: "batch"}, "output0": {0: "batch"}}, {})

    if spec.family == "vits":
        import vits_models
        model = vits_models.SynthesizerTrn(c)
        _add_noise(model, seed)
        model.eval()
        phonemes = 16
        x = torch.randint(0, c["n_vocab"], (1, phonemes), generator=g)
        args = (x, torch.tensor([phonemes], dtype=torch.int64), torch.tensor([0.667, 1.0, 0.8]))
        axes = {"input": {0: "batch", 1: "phonemes"}, "input_lengths": {0: "batch"}, "output": {0: "batch", 2: "time"}}
        return Built(model, args, ["input", "input_lengths", "scales"], ["output"], axes,
                     {"input": {"range": [0, c["n_vocab"]]}}, trace_dims={"batch": 1, "phonemes": phonemes})

    import hf_models as hf
    cls = {"bert": hf.BertModel, "roberta": hf.RobertaModel, "distilbert": hf.DistilBertModel,
           "gpt2": hf.GPT2LMHeadModel if c.get("lm_head") else hf.GPT2Model, "llama": hf.LlamaForCausalLM,
           "phi": hf.PhiForCausalLM, "gemma": hf.GemmaForCausalLM, "whisper_encoder": hf.WhisperEncoder,
           "deit": hf.DeiTForImageClassificationWithTeacher, "mobilevit": hf.MobileViTForImageClassification,
           "wav2vec2": hf.Wav2Vec2Model}[spec.family]
    if spec.extra.get("lean"):
        with _untouched_parameters():
            model = cls(c)
        # The exporter merges parameters of equal values (as _add_noise says): one distinct
        # element each keeps them apart and touches one page per tensor.
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.view(-1)[0] = float(i + 1)
    else:
        model = cls(c)
        _add_noise(model, seed)
    if spec.family == "mobilevit":
        _calibrate_bn(model, c["image_size"], seed)
    model.eval()
    if spec.family in ("deit", "mobilevit"):
        x = torch.randn(B, 3, c["image_size"], c["image_size"], generator=g)
        return Built(model, (x,), ["pixel_values"], ["logits"],
                     {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, {})
    if spec.family == "wav2vec2":
        outputs = ["last_hidden_state", "extract_features"]
        x = torch.randn(B, c["samples"], generator=g)
        if not c["dynamic_length"]:
            return Built(model, (x,), ["input_values"], outputs, {n: {0: "batch"} for n in ["input_values"] + outputs},
                         {})
        axes = {"input_values": {0: "batch", 1: "sequence"}}
        axes.update({n: {0: "batch", 1: "frames"} for n in outputs})
        return Built(model, (x,), ["input_values"], outputs, axes, {},
                     trace_dims={"batch": B, "sequence": c["samples"]})
    if spec.family == "whisper_encoder":
        frames = 2 * c["max_source_positions"]
        x = torch.randn(B, c["num_mel_bins"], frames, generator=g)
        return Built(model, (x,), ["input_features"], ["last_hidden_state"],
                     {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}}, {})
    if c.get("use_cache"):
        return _decoder_with_past(model, spec.family, c, g)
    ids = torch.randint(0, c["vocab_size"], (B, T), generator=g, dtype=torch.int64)
    mask = torch.ones(B, T, dtype=torch.int64)
    mask[1, T - 3:] = 0  # one padded row, so the trace does not see an all-ones mask
    bs = {0: "batch", 1: "sequence"}
    outputs = {"bert": ["last_hidden_state", "pooler_output"], "roberta": ["last_hidden_state", "pooler_output"],
               "llama": ["logits"], "phi": ["logits"], "gemma": ["logits"],
               "gpt2": ["logits"] if c.get("lm_head") else ["last_hidden_state"]}.get(spec.family,
                                                                                       ["last_hidden_state"])
    axes = {"input_ids": bs, "attention_mask": bs}
    for o in outputs:
        axes[o] = {0: "batch"} if o == "pooler_output" else bs
    info = {"input_ids": {"range": [0, c["vocab_size"]]}, "attention_mask": {"fill": "ones", "range": [0, 2]}}
    return Built(model, (ids, mask), ["input_ids", "attention_mask"], outputs, axes, info)


PAST_TRACE = 5  # past_sequence traced: not 0 (no Concat would be traced), not sequence, not 1


def kv_layout(family: str, c: dict) -> tuple[int, int, int]:
    """(layers, kv_heads, head_dim) of a decoder's cache tensors."""
    if family == "gpt2":
        return c["n_layer"], c["n_head"], c["n_embd"] // c["n_head"]
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return c["num_hidden_layers"], c.get("num_key_value_heads", c["num_attention_heads"]), head_dim


def _decoder_with_past(model, family: str, c: dict, g) -> Built:
    """optimum's decoder-with-past layout (`optimum-cli export onnx --task text-generation-with-past`):
    input_ids [batch, sequence], attention_mask [batch, total_sequence], position_ids [batch, sequence],
    past_key_values.N.key/value [batch, kv_heads, past_sequence, head_dim] -> logits [batch, sequence,
    vocab], present.N.key/value [batch, kv_heads, total_sequence, head_dim]; every length dynamic.
    Traced with a past of PAST_TRACE tokens and one left-padded row, as batched generation pads."""
    import torch
    B, T, P = TRACE_DIMS["batch"], TRACE_DIMS["sequence"], PAST_TRACE
    layers, kv_heads, head_dim = kv_layout(family, c)
    ids = torch.randint(0, c["vocab_size"], (B, T), generator=g, dtype=torch.int64)
    mask = torch.ones(B, P + T, dtype=torch.int64)
    mask[1, :3] = 0
    positions = torch.arange(P, P + T, dtype=torch.int64).unsqueeze(0).repeat(B, 1)
    past, names, outputs = [], [], ["logits"]
    for i in range(layers):
        for kv in ("key", "value"):
            past.append(torch.randn(B, kv_heads, P, head_dim, generator=g))
            names.append(f"past_key_values.{i}.{kv}")
            outputs.append(f"present.{i}.{kv}")
    bs = {0: "batch", 1: "sequence"}
    axes = {"input_ids": bs, "attention_mask": {0: "batch", 1: "total_sequence"}, "position_ids": bs, "logits": bs}
    axes.update({n: {0: "batch", 2: "past_sequence"} for n in names})
    axes.update({o: {0: "batch", 2: "total_sequence"} for o in outputs[1:]})
    max_pos = c.get("n_positions") or c.get("max_position_embeddings")
    info = {"input_ids": {"range": [0, c["vocab_size"]]}, "attention_mask": {"fill": "ones", "range": [0, 2]},
            "position_ids": {"range": [0, max_pos]} if max_pos else {}}
    return Built(model, (ids, mask, positions, *past), ["input_ids", "attention_mask", "position_ids"] + names,
                 outputs, axes, info, trace_dims={"batch": B, "sequence": T, "past_sequence": P,
                                                  "total_sequence": P + T})


# ----------------------------------------------------------------------------- export
ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
               10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def _io(vis, extra=None):
    out = []
    for vi in vis:
        t = vi.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else None)
                for d in t.shape.dim]
        e = {"name": vi.name, "dtype": ONNX_DTYPES.get(t.elem_type, str(t.elem_type)), "shape": dims}
        e.update((extra or {}).get(vi.name, {}))
        out.append(e)
    return out


@contextlib.contextmanager
def _captured_fds(enabled: bool):
    """Silence the exporter (it prints diagnostics to fd 1/2 from C++); replay on failure."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        except BaseException:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            tmp.seek(0)
            sys.stderr.write(tmp.read().decode(errors="replace")[-20000:])
            raise
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def attach_parameters(path: Path, model, n_inputs: int, seed: int) -> None:
    """The lean full-size export: the module is built with untouched parameters
    (_untouched_parameters) and torch.onnx.export(export_params=False) writes the graph alone, the
    parameters as graph inputs after the model's own; here each becomes an initializer whose
    random values (lean_weight) are made and written to its own external file one at a time.
    torch's exporter holds every weight and copies it into the proto (peak ~2.3x the fp32
    weights: 12.2 GiB for Phi-1.5; the export added 2.4x the weights on a 2-layer Gemma-2B); this
    way Gemma-2B peaked at 14.1 GiB for 10 GB of weights (the untouched parameters still become
    resident while tracing). Same graph as the plain export (checked on phi_small_past,
    gemma_small, gpt2_small_lm, llama_small_past: identical nodes, inputs, initializer names and
    shapes); other random values."""
    import onnx
    from onnx import TensorProto
    params = dict(model.named_parameters())  # tied weights: one name, as the exporter dedups them
    base = initial_values(model)
    proto = onnx.load(str(path), load_external_data=False)
    g = proto.graph
    keep, inits = list(g.input[:n_inputs]), []
    for vi in g.input[n_inputs:]:
        p = params.get(vi.name)
        if p is None:
            raise RuntimeError(f"graph input {vi.name} is not a parameter of the module")
        a = lean_weight(vi.name, p.shape, seed, base.get(vi.name, 0.0)).to(p.dtype).numpy()
        t = TensorProto(name=vi.name, dims=list(a.shape), data_type=onnx.helper.np_dtype_to_tensor_dtype(a.dtype)
                        if hasattr(onnx.helper, "np_dtype_to_tensor_dtype")
                        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype])
        location = re.sub(r"[^A-Za-z0-9._-]", "_", vi.name)
        with open(path.parent / location, "wb") as f:
            a.tofile(f)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", "0"), ("length", str(a.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
    del g.input[:]
    g.input.extend(keep)
    g.initializer.extend(inits)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def _function_modules(spec: Spec, model) -> dict:
    """export_modules_as_functions for a spec that names module classes (extra["functions"])."""
    names = spec.extra.get("functions")
    if not names:
        return {}
    classes = {type(m) for m in model.modules() if type(m).__name__ in names}
    missing = set(names) - {c.__name__ for c in classes}
    if missing:
        raise RuntimeError(f"{spec.name}: no module of class {', '.join(sorted(missing))} in the model")
    return {"export_modules_as_functions": classes}


def _restore_output_names(path: Path, names: list) -> None:
    """torch 1.13 keeps a function call's own output name for a graph output that a call computes
    (bert_small_fn's last_hidden_state came out as "365"): the names asked for, as the flat twin has."""
    import onnx
    proto = onnx.load(str(path))
    g = proto.graph
    rename = {o.name: n for o, n in zip(g.output, names) if o.name != n}
    if not rename:
        return
    for node in g.node:
        for i, v in enumerate(node.output):
            node.output[i] = rename.get(v, v)
        for i, v in enumerate(node.input):
            node.input[i] = rename.get(v, v)
    for o in g.output:
        o.name = rename.get(o.name, o.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def load_checked(path: Path):
    """Load a model without its external data and run onnx.checker on the proto (the path form
    with full_check rewrites the file in onnx 1.12). The checker resolves external-data
    locations against the working directory when given a proto, hence the chdir."""
    import onnx
    proto = onnx.load(str(path), load_external_data=False)
    cwd = os.getcwd()
    os.chdir(path.parent)
    try:
        onnx.checker.check_model(proto)
    finally:
        os.chdir(cwd)
    return proto


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file()) if p.is_dir() else p.stat().st_size


def export_one(spec: Spec, out: Path, opset: int, stamp: str, quiet: bool) -> dict:
    import torch
    t0 = time.time()
    final = out / spec.file
    if spec.subdir:
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", suffix=".part", dir=out))
        tmp_dir.chmod(0o755)  # mkdtemp makes it private
        tmp = tmp_dir / "model.onnx"
    else:
        tmp_dir = None
        tmp = out / f".{spec.name}.{os.getpid()}.part"
    try:
        b = build(spec)
        # every path, also those of a shared module object (YOLOv8's one SiLU serves all its
        # Conv blocks; the exporter names each call by the path it was called through)
        modules = {n: type(m).__name__ for n, m in b.model.named_modules(remove_duplicate=False)}
        n_params = sum(p.numel() for p in b.model.parameters())
        mode = torch.onnx.TrainingMode.PRESERVE if spec.bn_preserve else torch.onnx.TrainingMode.EVAL
        lean = bool(spec.extra.get("lean"))
        with _captured_fds(quiet), torch.enable_grad():  # grad on: vit's no-grad fast path is not exportable
            torch.onnx.export(b.model, b.args, str(tmp), input_names=b.input_names, output_names=b.output_names,
                              dynamic_axes=b.dynamic_axes, opset_version=opset, do_constant_folding=False,
                              training=mode, verbose=False, export_params=not lean,
                              **_function_modules(spec, b.model))
        if lean:
            attach_parameters(tmp, b.model, len(b.input_names), _seed(spec.seed_name))
        if spec.extra.get("functions"):
            _restore_output_names(tmp, b.output_names)
        if spec.family == "tf2onnx":
            import tf2onnx_models
            tf2onnx_models.postprocess(tmp)
        proto = load_checked(tmp)
        ops: dict = {}
        for n in proto.graph.node:
            k = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            ops[k] = ops.get(k, 0) + 1
        entry = {
            "file": spec.file,
            "family": spec.family,
            "sets": list(spec.sets),
            "config": spec.config,
            "opset": opset,
            "inputs": _io(proto.graph.input, b.input_info),
            "outputs": _io(proto.graph.output),
            "trace_dims": {k: v for k, v in (b.trace_dims or TRACE_DIMS).items()
                           if any(k in ax.values() for ax in b.dynamic_axes.values())},
            "export": {"exporter": "torch.onnx.export", "torch": torch.__version__, "do_constant_folding": False,
                       "training": "PRESERVE" if spec.bn_preserve else "EVAL", "seed": _seed(spec.seed_name),
                       "seconds": None},
            "stats": {"nodes": len(proto.graph.node), "initializers": len(proto.graph.initializer),
                      "functions": len(proto.functions),
                      "parameters": n_params, "bytes": None, "ops": dict(sorted(ops.items()))},
            "notes": spec.notes,
            "same_weights_as": spec.seed_name if spec.seed_name != spec.name else None,
            "stamp": stamp,
            "modules": modules,
        }
        del proto
        if spec.subdir:
            entry["stats"]["bytes"] = _dir_bytes(tmp_dir)
            if final.parent.exists():
                shutil.rmtree(final.parent)
            os.replace(tmp_dir, final.parent)
        else:
            entry["stats"]["bytes"] = tmp.stat().st_size
            os.replace(tmp, final)
        entry["export"]["seconds"] = round(time.time() - t0, 2)
        return entry
    finally:
        if tmp_dir is not None and tmp_dir.exists():
            shutil.rmtree(tmp_dir, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def package_version(pkg: str) -> str:
    """`pkg.__version__` read from pkg/version.py without importing pkg (a cached run then
    skips the 2 s torch import)."""
    import importlib.util
    import re
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"export_zoo: python package {pkg} is missing (Debian: apt-get install python3-{pkg})")
    for loc in spec.submodule_search_locations:
        f = Path(loc) / "version.py"
        if f.exists():
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", f.read_text(), re.M)
            if m:
                return m.group(1)
    return __import__(pkg).__version__


def stamp_of(spec: Spec, opset: int) -> str:
    h = hashlib.sha256()
    for f in (Path(__file__).resolve(), HERE / "hf_models.py", HERE / "yolo_models.py", HERE / "vits_models.py",
              HERE / "tf2onnx_models.py"):
        h.update(f.read_bytes())
    h.update(json.dumps({"name": spec.name, "family": spec.family, "config": spec.config, "opset": opset,
                         "bn": spec.bn_preserve, "seed": spec.seed_name, "torch": package_version("torch"),
                         "torchvision": package_version("torchvision")}, sort_keys=True).encode())
    return h.hexdigest()


def write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def check_resources(out: Path, need_ram_gb: float, need_disk_gb: float) -> str | None:
    avail_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                avail_kb = int(line.split()[1])
    ram = avail_kb / 2 ** 20
    disk = shutil.disk_usage(out).free / 2 ** 30
    if ram < need_ram_gb or disk < need_disk_gb:
        return (f"needs {need_ram_gb:.0f} GiB available RAM and {need_disk_gb:.0f} GiB free disk, "
                f"have {ram:.1f} GiB and {disk:.1f} GiB")
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="the small CI configurations (default: full-size set)")
    ap.add_argument("--tinyllama", action="store_true", help="also export the full TinyLlama-1.1B shape (4.4 GB)")
    ap.add_argument("--tinyllama-past", action="store_true", help="also export the full TinyLlama-1.1B shape "
                    "with KV cache in optimum's layout (4.4 GB, ~7 GiB RAM)")
    ap.add_argument("--phi15", action="store_true", help="also export the full Phi-1.5 shape, with and without "
                    "KV cache (5.7 GB each, ~8 GiB RAM)")
    ap.add_argument("--gemma2b", action="store_true", help="also export the full Gemma-2B shape, with and without "
                    "KV cache (10 GB each, ~14 GiB RAM)")
    ap.add_argument("--only", help="comma-separated model names (any set)")
    ap.add_argument("--out", type=Path, default=REPO / ".cache" / "models", help="output folder (default: %(default)s)")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--force", action="store_true", help="ignore the cache")
    ap.add_argument("-v", "--verbose", action="store_true", help="per-model progress and exporter output")
    a = ap.parse_args()

    specs = registry()
    by_name = {s.name: s for s in specs}
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in by_name]
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; --list shows the names")
        todo = [by_name[n] for n in names]
    else:
        wanted = {"small"} if a.small else {"full"}
        for flag in ("tinyllama", "tinyllama_past", "phi15", "gemma2b"):
            if getattr(a, flag):
                wanted.add(flag)
        todo = [s for s in specs if wanted & set(s.sets)]

    out = a.out.resolve()
    if a.list:
        manifest = {}
        if (out / MANIFEST).exists():
            manifest = json.loads((out / MANIFEST).read_text()).get("models", {})
        for s in specs:
            have = "exported" if s.name in manifest and (out / s.file).exists() else "-"
            print(f"{s.name:22} {s.family:16} {','.join(s.sets):12} {have:9} {s.notes}")
        return 0

    out.mkdir(parents=True, exist_ok=True)
    lock = open(out / ".zoo.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # one exporter per folder at a time
    for stale in out.glob(".*.part"):  # leftovers of a killed run (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink()

    mpath = out / MANIFEST
    manifest = {"format": 1, "generator": "tools/models/export_zoo.py", "models": {}}
    if mpath.exists():
        try:
            manifest["models"] = json.loads(mpath.read_text()).get("models", {})
        except (ValueError, OSError):
            pass
    # keep entries of other known models whose files are still there
    manifest["models"] = {k: v for k, v in manifest["models"].items() if k in by_name and (out / v["file"]).exists()}

    t_all = time.time()
    done, cached, failed = [], [], []
    for spec in todo:
        opset = spec.opset or a.opset
        stamp = stamp_of(spec, opset)
        old = manifest["models"].get(spec.name)
        if not a.force and old and old.get("stamp") == stamp and (out / spec.file).exists():
            cached.append(spec.name)
            continue
        need = {"tinyllama": (14, 10), "tinyllama_past": (7, 5), "phi15": (8, 7), "phi15_past": (8, 7), "gemma2b": (15, 11),
                "gemma2b_past": (15, 11)}.get(spec.name)
        if need:
            problem = check_resources(out, need_ram_gb=need[0], need_disk_gb=need[1])
            if problem:
                print(f"export_zoo: skipping {spec.name}: {problem}", file=sys.stderr)
                failed.append(spec.name)
                continue
        if a.verbose:
            print(f"export_zoo: {spec.name} ...", file=sys.stderr, flush=True)
        import torch
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        try:
            entry = export_one(spec, out, opset, stamp, quiet=not a.verbose)
        except Exception as e:  # report, go on with the others, fail at the end
            print(f"export_zoo: {spec.name} failed: {type(e).__name__}: {e}", file=sys.stderr)
            manifest["models"].pop(spec.name, None)
            failed.append(spec.name)
            continue
        manifest["models"][spec.name] = entry
        manifest["models"] = dict(sorted(manifest["models"].items()))
        write_json_atomic(mpath, manifest)
        done.append(spec.name)
        if a.verbose:
            st = entry["stats"]
            print(f"export_zoo: {spec.name}: {st['nodes']} nodes, {st['initializers']} initializers, "
                  f"{st['bytes'] / 1e6:.1f} MB, {entry['export']['seconds']} s", file=sys.stderr, flush=True)
    if not done:
        write_json_atomic(mpath, manifest)  # refresh pruned entries
    print(f"export_zoo: {len(done)} exported, {len(cached)} cached, {len(failed)} failed "
          f"({time.time() - t_all:.1f} s) -> {out}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Measured max_diff of each class-1 pass over the transformer zoo (docs/accuracy.md).

  /usr/bin/python3 perf/accuracy_zoo.py [--bin build/onnxforge] [--zoo .cache/models] [--seeds 20] [--target 24]

For pass P: `optimize --target-opset T --passes BASE,P --verify-seeds S`, BASE being the class-0
clean-ups plus fold_constants (the fusions need folded shape chains to match at all), and BASE
alone as fold_constants' own row. A cell is the max |a-b| over the S seeds of our runtime,
original vs optimized; '-' when the pass found nothing in that model.
"""
import argparse
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = ["fold_constants", "simplify_shape_chains", "eliminate_identity_ops", "eliminate_redundant_transposes",
        "fuse_consecutive_reshapes", "eliminate_duplicate_constants", "eliminate_dead_nodes",
        "eliminate_unused_initializers"]
PASSES = ["fold_constants", "fuse_layer_norm", "fuse_gelu", "fuse_rms_norm", "fuse_swish", "fuse_rotary_embedding",
          "fuse_attention", "fuse_qkv_projections", "fuse_matmul_add", "sink_transposes", "unflatten_gemm"]
MODELS = ["bert_base", "gpt2", "distilbert_base", "whisper_tiny_enc", "vit_b_16", "llama_small"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "build" / "onnxforge"))
    ap.add_argument("--zoo", default=str(REPO / ".cache" / "models"))
    ap.add_argument("--seeds", default="20")
    ap.add_argument("--target", default="24")
    ap.add_argument("--out", default="/tmp/onnxforge_accuracy_zoo.onnx")
    a = ap.parse_args()
    rows = {}
    for m in MODELS:
        # Which passes find something (the whole pipeline, unverified): only those are measured.
        r = subprocess.run([a.bin, "optimize", f"{a.zoo}/{m}.onnx", "-o", a.out, "--force", "--target-opset", a.target,
                            "--no-verify"], capture_output=True, text=True)
        found = set(re.findall(r"^\s*(\w+): .*\([1-9]\d* matches", r.stdout + r.stderr, re.M))
        for p in PASSES:
            if p not in found:
                rows.setdefault(p, {})[m] = "-"
                continue
            passes = BASE if p == "fold_constants" else BASE + [p]
            r = subprocess.run([a.bin, "optimize", f"{a.zoo}/{m}.onnx", "-o", a.out, "--force", "--target-opset", a.target,
                                "--passes", ",".join(passes), "--verify-seeds", a.seeds], capture_output=True, text=True)
            text = r.stdout + r.stderr
            hit = re.search(rf"^\s*{p}: .*\((\d+) matches", text, re.M)
            diff = re.search(r"max_diff ([0-9.e+-]+)", text)
            if not hit or hit.group(1) == "0":
                cell = "-"
            elif r.returncode != 0 or not diff:
                cell = "FAIL " + text.strip().splitlines()[-1][:60]
            else:
                cell = "0" if float(diff.group(1)) == 0 else "%.1e" % float(diff.group(1))
            rows.setdefault(p, {})[m] = cell
            print(m, p, cell, flush=True)
    print("\n| pass | " + " | ".join(MODELS) + " |")
    print("|---|" + "---|" * len(MODELS))
    for p in PASSES:
        print(f"| {p} | " + " | ".join(rows[p][m] for m in MODELS) + " |")


if __name__ == "__main__":
    main()

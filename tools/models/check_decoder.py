#!/usr/bin/python3
"""Check an exported zoo decoder against its PyTorch module through ONNX Runtime (the peer).

  /usr/bin/python3 tools/models/check_decoder.py llama_small_past gpt2_small_past [--dir DIR]
      [--shape SEQUENCE:PAST ...] [--batch N] [--tol T]

Rebuilds the module with the zoo's weights (export_zoo.build: same seed, same config), runs it in
torch and the exported file in ONNX Runtime 1.30 (tools/peers/ort.js) on the same inputs, and
compares every output. Default shapes: decode (sequence 1, past 127) and prefill (sequence 16,
past 0) for cache exports (optimum's layout), prefill only for the others. Inputs as generation
feeds them: batch rows left-padded by 0, 3, 6, ... tokens (attention_mask over past + sequence),
position_ids counting on from the past. Exit 0 when every output agrees, 1 otherwise, 2 on bad
usage.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE))

import export_zoo  # noqa: E402


def npy_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"  # tools/peers' escaping rule


def make_inputs(spec, batch: int, seq: int, past: int):
    import torch
    c = spec.config
    g = torch.Generator().manual_seed(1234 + 7 * seq + past)
    total = past + seq
    ids = torch.randint(0, c["vocab_size"], (batch, seq), generator=g, dtype=torch.int64)
    mask = torch.ones(batch, total, dtype=torch.int64)
    for b in range(batch):
        mask[b, : min(3 * b, total - 1)] = 0  # left padding, never the whole row
    feeds = {"input_ids": ids, "attention_mask": mask}
    if not c.get("use_cache"):
        return feeds, (ids, mask)
    positions = torch.arange(past, total, dtype=torch.int64).unsqueeze(0).repeat(batch, 1)
    feeds["position_ids"] = positions
    layers, kv_heads, head_dim = export_zoo.kv_layout(spec.family, c)
    past_t = []
    for i in range(layers):
        for kv in ("key", "value"):
            t = torch.randn(batch, kv_heads, past, head_dim, generator=g)
            feeds[f"past_key_values.{i}.{kv}"] = t
            past_t.append(t)
    return feeds, (ids, mask, positions, *past_t)


def check(spec, model_path: Path, batch: int, seq: int, past: int, tol: float) -> tuple[bool, str]:
    import numpy as np
    import torch
    built = export_zoo.build(spec)
    feeds, args = make_inputs(spec, batch, seq, past)
    with torch.no_grad():
        want = built.model(*args)
    names = built.output_names
    with tempfile.TemporaryDirectory(prefix="check_decoder.") as tmp:
        inp, out = Path(tmp) / "in", Path(tmp) / "out"
        inp.mkdir()
        for k, v in feeds.items():
            np.save(inp / npy_name(k), v.numpy())
        r = subprocess.run(["node", str(export_zoo.REPO / "tools/peers/ort.js"), "run", str(model_path),
                            "--inputs", str(inp), "--out", str(out), "--threads", "1"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return False, f"ONNX Runtime failed: {(r.stdout + r.stderr).strip()[-2000:]}"
        worst, where = 0.0, ""
        for name, t in zip(names, want):
            got = np.load(out / npy_name(name))
            ref = t.numpy()
            if got.shape != ref.shape:
                return False, f"{name}: shape {list(got.shape)}, torch {list(ref.shape)}"
            scale = max(1.0, float(np.abs(ref).max()))
            err = float(np.abs(got.astype(np.float64) - ref).max()) / scale
            if not np.isfinite(err):
                return False, f"{name}: non-finite difference"
            if err > worst:
                worst, where = err, name
    return worst <= tol, f"max |ORT - torch| / max(1, |torch|) = {worst:.2e} ({where or 'all equal'})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="zoo model names (export_zoo.py --list)")
    ap.add_argument("--dir", type=Path, default=export_zoo.REPO / ".cache" / "models")
    ap.add_argument("--shape", action="append", help="SEQUENCE:PAST (repeatable)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    by_name = {s.name: s for s in export_zoo.registry()}
    ok = True
    for name in a.models:
        spec = by_name.get(name)
        if spec is None:
            ap.error(f"unknown model {name}")
        path = a.dir / spec.file
        if not path.exists():
            print(f"{name}: {path} is missing (export it with export_zoo.py --only {name})", file=sys.stderr)
            return 2
        shapes = a.shape or (["1:127", "16:0"] if spec.config.get("use_cache") else ["16:0"])
        for sh in shapes:
            try:
                seq, past = (int(x) for x in sh.split(":"))
            except ValueError:
                ap.error(f"--shape {sh}: want SEQUENCE:PAST")
            if past and not spec.config.get("use_cache"):
                ap.error(f"{name} has no KV cache: past must be 0")
            good, msg = check(spec, path, a.batch, seq, past, a.tol)
            ok &= good
            print(json.dumps({"model": name, "sequence": seq, "past": past, "batch": a.batch, "ok": good,
                              "detail": msg}))
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    sys.exit(main())

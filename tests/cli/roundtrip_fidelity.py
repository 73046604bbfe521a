#!/usr/bin/python3
"""`onnxforge convert` of every ONNX backend-suite model (Debian's libonnx-testdata) and every zoo
model must be identical in every field python-onnx can see, node order included.

  roundtrip_fidelity.py BINARY [--zoo DIR] [--backend DIR] [--limit N]

Compares the parsed ModelProtos of input and output (protobuf equality: every known field, every
repeated field in order). External data is loaded on both sides first, so a model whose
weights move between the .onnx file and an external file still compares by content. Exits 1
listing the models that differ (with the first differing path) or that convert refused.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx


def first_difference(a, b, path="model"):
    """The first field path at which two messages differ (for the report)."""
    if type(a) != type(b):
        return path
    fa = {f.name: v for f, v in a.ListFields()}
    fb = {f.name: v for f, v in b.ListFields()}
    for name in sorted(set(fa) | set(fb)):
        if name not in fa or name not in fb:
            return f"{path}.{name} (present on one side only)"
        va, vb = fa[name], fb[name]
        if hasattr(va, "ListFields"):
            d = first_difference(va, vb, f"{path}.{name}")
            if d:
                return d
        elif isinstance(va, (list, tuple)) or hasattr(va, "__len__") and not isinstance(va, (str, bytes)):
            if len(va) != len(vb):
                return f"{path}.{name} (length {len(va)} vs {len(vb)})"
            for i, (x, y) in enumerate(zip(va, vb)):
                if hasattr(x, "ListFields"):
                    d = first_difference(x, y, f"{path}.{name}[{i}]")
                    if d:
                        return d
                elif x != y:
                    return f"{path}.{name}[{i}]"
        elif va != vb:
            return f"{path}.{name}"
    if a != b:
        return f"{path} (unknown fields)"
    return None


def models(zoo, backend):
    if backend and backend.is_dir():
        yield from sorted(backend.rglob("model.onnx"))
    if zoo and zoo.is_dir():
        yield from sorted(zoo.glob("*.onnx"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--zoo", type=Path)
    ap.add_argument("--backend", type=Path, default=Path("/usr/share/libonnx-testdata/data"))
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    same, bad = 0, []
    with tempfile.TemporaryDirectory(prefix="onnxforge_fidelity_") as tmp:
        for i, src in enumerate(models(a.zoo, a.backend)):
            if a.limit and i >= a.limit:
                break
            out = Path(tmp) / f"{i}.onnx"
            r = subprocess.run([a.binary, "convert", str(src), str(out)], capture_output=True, text=True)
            if r.returncode != 0:
                bad.append((src, f"convert exited {r.returncode}: {r.stderr.strip()[:300]}"))
                continue
            ma = onnx.load(str(src), load_external_data=True)
            mb = onnx.load(str(out), load_external_data=True)
            if ma == mb:
                same += 1
            else:
                bad.append((src, first_difference(ma, mb) or "differs"))
            for f in Path(tmp).iterdir():
                f.unlink()
    for src, why in bad:
        print(f"DIFFERS {src}: {why}")
    print(f"{same} identical, {len(bad)} different or refused")
    return 1 if bad or same == 0 else 0


if __name__ == "__main__":
    sys.exit(main())

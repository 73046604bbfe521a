#!/usr/bin/python3
"""Write deterministic random inputs for an ONNX model as .npy files (one per graph input).

  /usr/bin/python3 tools/peers/make_inputs.py MODEL --out DIR [--seed S] [--dim name=N ...] [--vocab N]

Values per input, chosen from its type and name:
  float*          normal(0, 1)
  int, name contains "mask"           ones (attention masks)
  int, name contains "token_type"     zeros
  int, name contains "position"       past_sequence + 0..n-1 along the last axis (past_sequence
                                      from --dim, else 0: a decoder's positions follow its cache)
  other int       uniform in [0, vocab): token ids. vocab comes from --vocab, else from the
                  input's "range" in a zoo.json next to the model (tools/models/export_zoo.py),
                  else 100
  bool            all true
Symbolic dims take --dim values, else defaults batch=1, sequence=16, else 1 (reported).
Every input has its own generator seeded from (--seed, input name), so adding or reordering
inputs does not change the others. File names: every character outside [A-Za-z0-9._-] of the
input name becomes "_" (same rule as ort.js); two inputs that collide are an error.
Prints a JSON summary on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx

DEFAULT_DIMS = {"batch": 1, "sequence": 16}
NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64, 9: np.bool_,
      10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def file_stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def zoo_ranges(model: Path) -> dict:
    """Input value ranges recorded by export_zoo.py for this model file, if any."""
    manifest = model.parent / "zoo.json"
    if not manifest.exists() and model.name == "model.onnx":
        manifest = model.parent.parent / "zoo.json"
    try:
        models = json.loads(manifest.read_text())["models"]
    except (OSError, ValueError, KeyError):
        return {}
    for e in models.values():
        if (manifest.parent / e["file"]).resolve() == model.resolve():
            return {i["name"]: i["range"] for i in e.get("inputs", []) if "range" in i}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="value of a symbolic dim")
    ap.add_argument("--vocab", type=int, help="token ids are drawn from [0, VOCAB)")
    a = ap.parse_args()

    dims = dict(DEFAULT_DIMS)
    for d in a.dim:
        k, _, v = d.partition("=")
        if not k or not v.isdigit():
            ap.error(f"--dim expects NAME=N, got {d!r}")
        dims[k] = int(v)

    model = onnx.load(str(a.model), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    stems: dict = {}
    for i in inputs:
        f = file_stem(i.name) + ".npy"
        if f in stems:
            sys.exit(f"make_inputs: inputs {stems[f]!r} and {i.name!r} both map to {f}")
        stems[f] = i.name
    ranges = zoo_ranges(a.model)
    a.out.mkdir(parents=True, exist_ok=True)

    report, defaulted = [], set()
    for i in inputs:
        t = i.type.tensor_type
        if t.elem_type not in NP:
            sys.exit(f"make_inputs: input {i.name!r} has unsupported element type {t.elem_type}")
        dtype = np.dtype(NP[t.elem_type])
        shape = []
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                sym = d.dim_param if d.HasField("dim_param") else "?"
                if sym not in dims:
                    defaulted.add(sym)
                shape.append(dims.get(sym, 1))
        rng = np.random.default_rng([a.seed, zlib.crc32(i.name.encode())])
        lname = i.name.lower()
        kind = ""
        if dtype.kind == "f":
            x, kind = rng.standard_normal(shape).astype(dtype), "normal(0,1)"
        elif dtype.kind == "b":
            x, kind = np.ones(shape, dtype), "true"
        elif "mask" in lname:
            x, kind = np.ones(shape, dtype), "ones"
        elif "token_type" in lname:
            x, kind = np.zeros(shape, dtype), "zeros"
        elif "position" in lname and shape:
            # a decoder's positions continue after its cache (optimum's past_sequence)
            off = dims.get("past_sequence", 0)
            x = np.broadcast_to(off + np.arange(shape[-1], dtype=dtype), shape).copy()
            kind = f"positions from {off}"
        else:
            lo, hi = (0, a.vocab) if a.vocab else tuple(ranges.get(i.name, (0, 100)))
            hi = min(hi, np.iinfo(dtype).max + 1)
            lo = max(lo, np.iinfo(dtype).min)
            x, kind = rng.integers(lo, hi, size=shape, dtype=dtype), f"uniform[{lo},{hi})"
        path = a.out / (file_stem(i.name) + ".npy")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(x))
        os.replace(tmp, path)
        report.append({"name": i.name, "file": str(path), "dtype": str(dtype), "shape": shape, "values": kind})
    print(json.dumps({"ok": True, "model": str(a.model), "seed": a.seed, "dims": dims,
                      "defaulted_dims": sorted(defaulted), "inputs": report}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

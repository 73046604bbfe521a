#!/usr/bin/python3
"""Self-test of the ORT peer: .npy round trips for every supported dtype, name escaping,
collisions, error JSON, optimize/info/bench. Exit 0 on success.

  /usr/bin/python3 tools/peers/selftest.py      (needs tools/peers/install.sh to have run)
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
ORT = ["node", str(HERE / "ort.js")]
DTYPES = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "float64": TensorProto.DOUBLE,
          "int64": TensorProto.INT64, "int32": TensorProto.INT32, "int8": TensorProto.INT8,
          "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL}


def ort(*args, ok=True):
    p = subprocess.run(ORT + [str(a) for a in args], capture_output=True, text=True)
    res = json.loads(p.stdout)
    if ok and (p.returncode != 0 or not res.get("ok")):
        raise AssertionError(f"ort.js {args[0]} failed: {p.stdout} {p.stderr}")
    if not ok and (p.returncode == 0 or res.get("ok")):
        raise AssertionError(f"ort.js {args[0]} should have failed: {p.stdout}")
    return res


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="ortpeer_selftest_"))
    # 1. identity model over all dtypes, names needing escaping; a scalar and a 0-size tensor too
    nodes, ins, outs, feeds = [], [], [], {}
    rng = np.random.default_rng(1)
    for i, (dt, et) in enumerate(DTYPES.items()):
        name = f"in/{dt}:0"
        shape = [[2, 3, 4], [], [0, 5], [7], [1, 1, 3], [5, 2], [3], [2, 2]][i]
        x = (rng.standard_normal(shape) * 50).astype(dt) if dt != "bool" else rng.random(shape) > 0.5
        feeds[name] = x
        ins.append(helper.make_tensor_value_info(name, et, shape))
        outs.append(helper.make_tensor_value_info(f"out/{dt}", et, shape))
        nodes.append(helper.make_node("Identity", [name], [f"out/{dt}"]))
    g = helper.make_graph(nodes, "io", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, tmp / "io.onnx")
    (tmp / "in").mkdir()
    for name, x in feeds.items():
        np.save(tmp / "in" / (name.replace("/", "_").replace(":", "_") + ".npy"), x)
    res = ort("run", tmp / "io.onnx", "--inputs", tmp / "in", "--out", tmp / "out", "--threads", 1)
    for dt in DTYPES:
        y = np.load(tmp / "out" / f"out_{dt}.npy")
        x = feeds[f"in/{dt}:0"]
        assert y.dtype == x.dtype and y.shape == x.shape and np.array_equal(y, x), (dt, y, x)
    assert len(res["outputs"]) == len(DTYPES)

    # 2. errors: missing input file, collision, Fortran order, usage
    (tmp / "in" / "in_int8_0.npy").unlink()
    assert "in_int8_0.npy" in ort("run", tmp / "io.onnx", "--inputs", tmp / "in", "--out", tmp / "o2", ok=False)["error"]
    np.save(tmp / "in" / "in_int8_0.npy", feeds["in/int8:0"])
    ort("run", tmp / "io.onnx", "--inputs", tmp / "in", "--out", tmp / "o2")
    np.save(tmp / "in" / "in_float32_0.npy", np.asfortranarray(feeds["in/float32:0"]))
    assert "Fortran" in ort("run", tmp / "io.onnx", "--inputs", tmp / "in", "--out", tmp / "o2", ok=False)["error"]
    g2 = helper.make_graph([helper.make_node("Add", ["a/b", "a:b"], ["y"])], "c",
                           [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("a/b", "a:b")],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m2 = helper.make_model(g2, opset_imports=[helper.make_opsetid("", 14)])
    m2.ir_version = 8
    onnx.save(m2, tmp / "collide.onnx")
    assert "both map to" in ort("run", tmp / "collide.onnx", "--inputs", tmp / "in", "--out", tmp / "o3", ok=False)["error"]
    p = subprocess.run(ORT + ["frobnicate"], capture_output=True, text=True)
    assert p.returncode == 2 and json.loads(p.stdout)["ok"] is False

    # 3. make_inputs + info + optimize + bench on a small float model
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], rng.standard_normal(16).astype(np.float32))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    nodes = [helper.make_node("Identity", ["x"], ["x1"]), helper.make_node("MatMul", ["x1", "w"], ["y"]),
             helper.make_node("Cast", ["input_ids"], ["idf"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["idf", "ax"], ["idu"]), helper.make_node("Add", ["y", "idu"], ["z"])]
    ax = helper.make_tensor("ax", TensorProto.INT64, [1], [2])
    g3 = helper.make_graph(nodes, "f", [x, ids], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                           initializer=[w, ax])
    m3 = helper.make_model(g3, opset_imports=[helper.make_opsetid("", 14)])
    m3.ir_version = 8
    onnx.save(m3, tmp / "f.onnx")
    mk = subprocess.run([sys.executable, str(HERE / "make_inputs.py"), tmp / "f.onnx", "--out", tmp / "fin",
                         "--dim", "sequence=5", "--vocab", "7"], capture_output=True, text=True, check=True)
    info = json.loads(mk.stdout)
    assert [i["shape"] for i in info["inputs"]] == [[1, 5, 4], [1, 5]]
    t = np.load(tmp / "fin" / "input_ids.npy")
    assert t.dtype == np.int64 and t.min() >= 0 and t.max() < 7
    res = ort("run", tmp / "f.onnx", "--inputs", tmp / "fin", "--out", tmp / "fout")
    xx = np.load(tmp / "fin" / "x.npy")
    ref = xx @ numpy_helper.to_array(w) + t[..., None].astype(np.float32)
    assert np.allclose(np.load(tmp / "fout" / "z.npy"), ref, atol=1e-5)
    inf = ort("info", tmp / "f.onnx")
    assert inf["graph"]["nodes"] == 5 and inf["inputs"][0]["shape"] == ["batch", "sequence", 4]
    opt = ort("optimize", tmp / "f.onnx", "-o", tmp / "f_basic.onnx", "--level", "basic")
    assert opt["after"]["nodes"] == len(onnx.load(tmp / "f_basic.onnx").graph.node) < 5
    b = ort("bench", tmp / "f.onnx", "--inputs", tmp / "fin", "--iters", 20, "--warmup", 2, "--threads", 1)
    assert b["iters"] == 20 and b["min_ms"] <= b["median_ms"]
    shutil.rmtree(tmp)  # kept on failure, for a look
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Hostile-input campaign (issue 26): paths, FIFOs, devices, symlinks, side files, recursive
functions, data-sized kernels, declared types, and the Python module's arguments and signals.

Every run must end by itself (no signal, no hang) with the expected exit code, and must change
nothing in the work folder but its declared outputs: the folder's entries (kind, inode, size,
SHA-256 or link target) are snapshotted before and after every run, as is /dev/null.

    tools/hostile/campaign.py --bin build/onnxforge [--python-path build/python] [--time-limit 300]

Exit 0 when every run held; 1 with a list of the runs that did not. Run by ctest (label cli).
"""
import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper


# ---- models -------------------------------------------------------------------------------------

def add_model():
    w = numpy_helper.from_array(np.full((64, 64), 0.5, np.float32), "w")
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"], name="add0")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [64, 64])], [h.make_tensor_value_info("y", T.FLOAT, [64, 64])], [w])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def one_node(op, inits, inputs=(), attrs=None, out_type=T.FLOAT, opset=13, **extra):
    node = h.make_node(op, [n for n, _ in inputs] + list(extra.get("node_inputs", [])), ["y"], name=op.lower() + "0",
                       **(attrs or {}))
    g = h.make_graph([node], "g", [h.make_tensor_value_info(n, t, s) for n, (t, s) in inputs],
                     [h.make_tensor_value_info("y", out_type, None)], [numpy_helper.from_array(v, k) for k, v in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def data_sized_models():
    i64 = lambda *v: np.array(v, np.int64)
    big = 1 << 40
    x4 = [("x", (T.FLOAT, [1, 1, 2, 2]))]
    return {
        "resize_sizes": one_node("Resize", [("sizes", i64(1, 1, big, 2))], x4, node_inputs=["", "", "sizes"]),
        "resize_scales": one_node("Resize", [("scales", np.array([1, 1, 1e9, 1e9], np.float32))], x4,
                                  node_inputs=["", "scales"]),
        "tile": one_node("Tile", [("r", i64(big))], [("x", (T.FLOAT, [2]))], node_inputs=["r"]),
        "expand": one_node("Expand", [("s", i64(1 << 20, 1 << 20))], [("x", (T.FLOAT, [1]))], node_inputs=["s"]),
        "constant_of_shape": one_node("ConstantOfShape", [("s", i64(1 << 20, 1 << 20))], node_inputs=["s"]),
        "range": one_node("Range", [("a", np.array(0, np.int64)), ("b", np.array(big, np.int64)), ("d", np.array(1, np.int64))],
                          node_inputs=["a", "b", "d"], out_type=T.INT64),
        "one_hot": one_node("OneHot", [("d", i64(big)), ("v", np.array([0, 1], np.float32))],
                            [("i", (T.INT64, [4]))], node_inputs=["d", "v"]),
    }


def recursive_model(pair):
    def fn(name, calls):
        return h.make_function("local", name, ["a"], ["b"], [h.make_node(calls, ["a"], ["b"], domain="local")],
                               [h.make_opsetid("", 17)])
    g = h.make_graph([h.make_node("F", ["x"], ["y"], domain="local")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2])], [h.make_tensor_value_info("y", T.FLOAT, [2])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
                        functions=[fn("F", "G"), fn("G", "F")] if pair else [fn("F", "F")])


def declared_models():
    """Models whose declarations are bad input: element types 0 and 99, opsets out of range or
    imported twice, an initializer shadowing an input with another type."""
    out = {}
    for et in (0, 99):
        m = add_model()
        m.graph.input[0].type.tensor_type.elem_type = et
        out[f"input_elem_type_{et}"] = m
        m = add_model()
        m.graph.output[0].type.tensor_type.elem_type = et
        out[f"output_elem_type_{et}"] = m
    for v in (0, -5, 10000):
        m = add_model()
        m.opset_import[0].version = v
        out[f"opset_{v}"] = m
    m = add_model()
    m.opset_import.append(h.make_opsetid("", 13))
    out["opset_twice"] = m
    m = add_model()
    m.graph.input.append(h.make_tensor_value_info("w", T.INT64, [3]))
    out["shadowed_input"] = m
    return out


# ---- the harness --------------------------------------------------------------------------------

def snapshot(root):
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            v = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_size)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    v += (hashlib.sha256(f.read()).hexdigest(),)
            elif stat.S_ISLNK(st.st_mode):
                v += (os.readlink(p),)
            snap[os.path.relpath(p, root)] = v
    st = os.stat("/dev/null")
    snap["/dev/null"] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev)
    return snap


class Campaign:
    def __init__(self, args, work):
        self.bin, self.work, self.args = args.bin, work, args
        self.deadline = time.monotonic() + args.time_limit
        self.runs = 0
        self.problems = []
        self.skipped = 0

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def check(self, name, cmd, codes, outputs=(), env=None, stdin=None):
        """Runs `cmd`; it must exit with one of `codes` and change only `outputs` (paths)."""
        if time.monotonic() > self.deadline:
            self.skipped += 1
            return None
        before = snapshot(self.work)
        self.runs += 1
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.args.run_timeout, env=env, stdin=stdin,
                               errors="replace")
        except subprocess.TimeoutExpired:
            self.problems.append(f"{name}: hang (killed after {self.args.run_timeout} s): {cmd}")
            return None
        after = snapshot(self.work)
        allowed = {os.path.relpath(o, self.work) for o in outputs}
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k) and k not in allowed)
        if p.returncode < 0:
            self.problems.append(f"{name}: signal {-p.returncode}: {cmd}\n{p.stderr[-400:]}")
        elif p.returncode not in codes:
            self.problems.append(f"{name}: exit {p.returncode}, expected {sorted(codes)}: {cmd}\n{p.stderr[-400:]}")
        if changed:
            self.problems.append(f"{name}: changed outside its outputs: {changed}: {cmd}")
        return p

    def cli(self, name, args, codes, outputs=()):
        return self.check(name, [self.bin, *args], codes, outputs)


def paths_and_devices(c, model):
    """Outputs onto devices, FIFOs, directories, links and inputs; side files that are not files."""
    fifo, d = c.path("fifo"), c.path("dir")
    os.mkfifo(fifo)
    os.mkdir(d)
    with open(c.path("target.onnx"), "wb") as f:
        f.write(b"keep me")
    os.symlink("target.onnx", c.path("link.onnx"))
    os.symlink("nowhere.onnx", c.path("dangling.onnx"))
    os.symlink("dir", c.path("dirlink"))
    os.link(model, c.path("hard.onnx"))
    with open(c.path("notes.txt"), "w") as f:
        f.write("notes")
    with open(c.path("list.json"), "w") as f:
        f.write("[1, 2, 3]")
    bad_outputs = ["/dev/null", fifo, d, c.path("link.onnx"), c.path("dangling.onnx"), c.path("dirlink"),
                   c.path("hard.onnx"), model, c.path("missing", "o.onnx"), c.path("x" * 300)]
    for cmd in ("optimize", "convert"):
        for out in bad_outputs:
            for extra in ([], ["--overwrite"]):
                c.cli(f"{cmd} -> {os.path.basename(out)} {extra}", [cmd, model, out, *extra], {2})
        c.cli(f"{cmd} -> an existing file", [cmd, model, c.path("notes.txt")], {2})
    out = c.path("o.onnx")
    for report in ["/dev/null", model, c.path("hard.onnx"), fifo, d, c.path("link.onnx"), out]:
        c.cli(f"--report {os.path.basename(report)}", ["optimize", model, out, "--report", report, "--overwrite"], {2})
    c.cli("--report onto an existing file", ["optimize", model, out, "--report", c.path("notes.txt")], {2})
    for ext in ["notes.txt", "hard.onnx", "target.onnx", "link.onnx", "fifo", "../x.data", "/tmp/x.data"]:
        c.cli(f"--external-file {ext}", ["convert", model, c.path("e.onnx"), "--external-data", "--external-file", ext], {2})
    # Inputs and side files that are not regular files: a clear error, never a hang.
    for side in [fifo, "/dev/zero", "/dev/urandom", d, c.path("nosuch")]:
        c.cli(f"model {side}", ["inspect", side], {2})
        c.cli(f"run --input {side}", ["run", model, "--input", f"x={side}"], {2})
        c.cli(f"hierarchy {side}", ["hierarchy", model, "--hierarchy", side], {2})
        c.cli(f"extract --hierarchy {side}", ["extract", model, c.path("cut.onnx"), "--module", "m", "--hierarchy", side], {2})
    c.cli("sidecar list", ["hierarchy", model, "--hierarchy", c.path("list.json")], {2})
    # What must work: a link as the input, run --out with colliding names, the declared outputs.
    c.cli("input through a link", ["optimize", c.path("link_in.onnx"), c.path("ok.onnx")], {0}, [c.path("ok.onnx")]) \
        if os.path.exists(c.path("link_in.onnx")) else None
    c.cli("optimize ok", ["optimize", model, out, "--report", c.path("r.json")], {0}, [out, c.path("r.json")])
    c.cli("optimize again", ["optimize", model, out], {2})
    c.cli("optimize --overwrite", ["optimize", model, out, "--overwrite"], {0}, [out])
    c.cli("convert external", ["convert", model, c.path("e.onnx"), "--external-data"], {0},
          [c.path("e.onnx"), c.path("e.onnx.data")])
    c.cli("convert external again", ["convert", model, c.path("e.onnx"), "--external-data"], {2})
    os.mkdir(c.path("out"))
    outs = [c.path("out", "y.npy")]
    c.cli("run --out", ["run", model, "--out", c.path("out")], {0}, outs)
    c.cli("run --out again", ["run", model, "--out", c.path("out")], {2})
    c.cli("run --out onto a FIFO", ["run", model, "--out", c.path("out2")], {0}, [c.path("out2"), c.path("out2", "y.npy")])
    os.remove(c.path("out2", "y.npy"))
    os.mkfifo(c.path("out2", "y.npy"))
    c.cli("run --out FIFO", ["run", model, "--out", c.path("out2"), "--overwrite"], {2})


def models_that_must_be_refused(c):
    for pair in (False, True):
        p = c.path(f"recursive{int(pair)}.onnx")
        onnx.save(recursive_model(pair), p)
        for args in (["optimize", p, c.path("r.onnx"), "--no-verify"], ["audit", p], ["attribute", p],
                     ["convert", p, c.path("r.onnx"), "--target-opset", "18"], ["inspect", p], ["run", p]):
            c.cli(f"recursive function {args[0]}", args, {2})
    for name, m in declared_models().items():
        p = c.path(f"{name}.onnx")
        onnx.save(m, p)
        c.cli(f"declared {name}", ["run", p], {2})
    for name, m in data_sized_models().items():
        p = c.path(f"{name}.onnx")
        onnx.save(m, p)
        r = c.cli(f"data-sized {name}", ["run", p, "--max-memory", "1G", "--json"], {2})
        if r is not None and r.returncode == 2:
            try:
                kind = json.loads(r.stdout)["error"]["kind"]
                if kind != "memory":
                    c.problems.append(f"data-sized {name}: error kind {kind}, expected memory")
            except (ValueError, KeyError):
                c.problems.append(f"data-sized {name}: no JSON error object on stdout: {r.stdout[:200]!r}")
    p = c.path("maxpool.onnx")
    onnx.save(one_node("MaxPool", [], [("x", (T.FLOAT, [1, 1, 2, 2]))], attrs={"kernel_shape": [5, 5]}), p)
    c.cli("MaxPool kernel larger than its input", ["run", p], {2})
    c.cli("--target-opset 5", ["convert", c.path("maxpool.onnx"), c.path("t.onnx"), "--target-opset", "5"], {2})


PYTHON_CHECKS = r'''
import math, os, signal, sys, threading, time
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper
import onnxforge

model = sys.argv[1]
bad = {
    "seeds=2**40": lambda: onnxforge.optimize(model, seeds=2**40),
    "fold_size=-1": lambda: onnxforge.optimize(model, fold_size=-1),
    "target_opset='17'": lambda: onnxforge.optimize(model, target_opset="17"),
    "threads=2**63": lambda: onnxforge.run(model, threads=2**63),
    "NUL path": lambda: onnxforge.inspect(model + "\x00junk"),
    "NUL output": lambda: onnxforge.optimize(model, model + "\x00.onnx"),
    "dims 1.5": lambda: onnxforge.run(model, dims={"batch": 1.5}),
    "dims str": lambda: onnxforge.run(model, dims={"batch": "1"}),
    "dims 2**70": lambda: onnxforge.run(model, dims={"batch": 2**70}),
    "seed -1": lambda: onnxforge.run(model, seed=-1),
    "min_time inf": lambda: onnxforge.bench(model, min_time=math.inf),
    "min_time nan": lambda: onnxforge.bench(model, min_time=math.nan),
    "iters 2**40": lambda: onnxforge.bench(model, iters=2**40),
    "atol nan": lambda: onnxforge.verify(model, model, atol=math.nan),
    "max_time -1": lambda: onnxforge.run(model, max_time=-1),
    "max_memory junk": lambda: onnxforge.run(model, max_memory="lots"),
    "max_loop 0": lambda: onnxforge.run(model, max_loop_iterations=0),
    "sidecar NUL": lambda: onnxforge.hierarchy(model, sidecar="a\x00b"),
    "output /dev/null": lambda: onnxforge.optimize(model, "/dev/null", overwrite=True),
}
failures = []
for name, call in bad.items():
    try:
        call()
        failures.append(f"{name}: accepted")
    except onnxforge.Error as e:
        if "\n" in str(e):
            failures.append(f"{name}: message of several lines")
    except Exception as e:  # noqa: BLE001 - the point is that nothing else escapes
        failures.append(f"{name}: {type(e).__name__}: {e}"[:300])
if onnxforge.main(["inspect", model + "\x00junk"]) != 2:
    failures.append("main with a NUL argument did not exit 2")

body = h.make_graph([h.make_node("Identity", ["c"], ["c2"]), h.make_node("Add", ["a", "one"], ["a2"])], "body",
                    [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                     h.make_tensor_value_info("a", T.FLOAT, [1])],
                    [h.make_tensor_value_info("c2", T.BOOL, []), h.make_tensor_value_info("a2", T.FLOAT, [1])],
                    [numpy_helper.from_array(np.ones(1, np.float32), "one")])
loop = h.make_model(h.make_graph([h.make_node("Loop", ["M", "cond", "a0"], ["acc"], body=body)], "loop",
                                 [h.make_tensor_value_info("a0", T.FLOAT, [1])], [h.make_tensor_value_info("acc", T.FLOAT, [1])],
                                 [numpy_helper.from_array(np.array(2**40, np.int64), "M"),
                                  numpy_helper.from_array(np.array(True), "cond")]),
                    opset_imports=[h.make_opsetid("", 13)])
for what, call in (("run", lambda: onnxforge.run(loop, max_loop_iterations=2**62)),
                   ("bench", lambda: onnxforge.bench(model, min_time=600))):
    sent = []
    timer = threading.Timer(0.3, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
    timer.start()
    try:
        call()
        failures.append(f"SIGINT during {what}: the call returned")
    except KeyboardInterrupt:
        latency = time.monotonic() - sent[0]
        print(f"SIGINT during {what}: KeyboardInterrupt after {latency * 1000:.0f} ms")
        if latency > 0.5:
            failures.append(f"SIGINT during {what}: KeyboardInterrupt after {latency:.2f} s")
    timer.join()
try:
    onnxforge.run(loop, max_time=0.2, max_loop_iterations=2**62)
    failures.append("max_time did not stop the Loop")
except onnxforge.Error:
    pass
for f in failures:
    print(f)
print("python checks:", len(bad) + 4, "failures:", len(failures))
sys.exit(1 if failures else 0)
'''


def python_module(c, model, python_path):
    script = c.path("py_checks.py")
    with open(script, "w") as f:
        f.write(PYTHON_CHECKS)
    env = dict(os.environ, PYTHONPATH=python_path + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = c.check("python arguments and signals", [sys.executable, script, model], {0}, env=env)
    if r is not None:
        print(r.stdout, end="")
    for pair in (False, True):
        code = (f"import onnxforge, sys\nfor f in (lambda: onnxforge.audit(sys.argv[1]),"
                f" lambda: onnxforge.optimize(sys.argv[1], verify=False)):\n"
                f"    try: f()\n    except onnxforge.Error: pass\n")
        c.check(f"python recursive function {pair}", [sys.executable, "-c", code, c.path(f"recursive{int(pair)}.onnx")], {0},
                env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True, help="the onnxforge executable")
    ap.add_argument("--python-path", help="folder holding the onnxforge Python package (build/python)")
    ap.add_argument("--time-limit", type=float, default=300, help="seconds for the whole campaign")
    ap.add_argument("--run-timeout", type=float, default=60, help="seconds after which one run is a hang")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    work = tempfile.mkdtemp(prefix="onnxforge_campaign_")
    c = Campaign(args, work)
    t0 = time.monotonic()
    try:
        model = c.path("m.onnx")
        onnx.save(add_model(), model)
        os.symlink("m.onnx", c.path("link_in.onnx"))
        paths_and_devices(c, model)
        models_that_must_be_refused(c)
        if args.python_path:
            python_module(c, model, os.path.abspath(args.python_path))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"hostile campaign: {c.runs} runs in {time.monotonic() - t0:.0f} s, {len(c.problems)} problems"
          + (f", {c.skipped} skipped over --time-limit" if c.skipped else ""))
    for p in c.problems:
        print("  " + p)
    return 1 if c.problems or c.skipped else 0


if __name__ == "__main__":
    sys.exit(main())

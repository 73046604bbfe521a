"""onnxforge: make ONNX models smaller and faster, and prove that it did no harm.

The engine is C++ (the same one as the ``onnxforge`` command); this package is a thin layer over
it. Every function takes a model as a path (``str`` or ``os.PathLike``), as ``bytes`` (a serialized
ModelProto) or as an ``onnx.ModelProto``, and releases the GIL while the engine works, so threads
can optimize or run models in parallel.

    import onnxforge
    model, report = onnxforge.optimize(onnx_model)          # ModelProto in, ModelProto out
    print(report.nodes_before, "->", report.nodes_after, report.verdict, report.max_diff)
    onnxforge.optimize("model.onnx", "model.opt.onnx")       # file to file
    outputs = onnxforge.run(model, {"input_ids": ids})       # dict of NumPy arrays
    onnxforge.verify("model.onnx", "model.opt.onnx").passed

Bad input (an unreadable file, a malformed model, an unknown pass) raises :class:`Error`, a
``ValueError``, with the command line's message. Nothing is printed unless ``progress=True``.
``python3 -m onnxforge ARGS`` runs the command line.
"""
from __future__ import annotations

import copy
import json
import math
import numbers
import os
import re
import tempfile
import sys
from collections.abc import Mapping

from . import _onnxforge as _engine
from ._onnxforge import Error

__version__ = _engine.__version__
Error.__module__ = __name__
Error.__doc__ = ("Bad input: a model that cannot be read or run, an unknown pass, inputs that do not fit. "
                 "The message is the command line's (file, node, what to do).")

__all__ = [
    "Error", "VerificationError", "Report", "OptimizeReport", "VerifyReport", "BenchReport",
    "optimize", "inspect", "run", "verify", "bench", "hierarchy", "extract", "audit", "list_passes", "main",
]


class VerificationError(Error):
    """The optimized model does not compute what the original computes, so nothing was written.

    ``str(error)`` is what the command line prints (max_diff, the failing outputs, the first pass
    that breaks the model on its own); ``error.report`` is the :class:`OptimizeReport`.
    Rerun with ``skip=[error.report.breaking_pass]``, or with ``force=True`` to get the model anyway.
    """

    def __init__(self, message: str, report: "OptimizeReport"):
        super().__init__(message)
        self.report = report


class Report(Mapping):
    """A read-only report: a mapping with the command line's ``--json`` content (``dict(report)``
    or :meth:`to_dict` give a plain dict), plus attributes for the usual fields."""

    def __init__(self, data: dict):
        self._data = data

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def to_dict(self) -> dict:
        """A deep copy of the report as plain dicts and lists (JSON-serialisable)."""
        return copy.deepcopy(self._data)

    def __repr__(self):
        return f"{type(self).__name__}({json.dumps(self._data, indent=1)[:2000]})"


def _field(*path, doc=None):
    """A read-only property for the report's value at ``path`` (a missing key raises KeyError)."""

    def get(self):
        value = self._data
        for key in path:
            value = value[key]
        return value

    return property(get, doc=doc)


class OptimizeReport(Report):
    """What :func:`optimize` did: sizes before and after, per-pass statistics, verification.

    The mapping is ``onnxforge optimize --json``'s report: ``before``/``after`` (nodes,
    initializers, initializer_bytes), ``passes`` (per pass: nodes_removed, initializers_removed,
    bytes_removed, matches_applied, rounds, seconds...), ``verification`` (ok, max_diff, outputs,
    seeds), ``breaking_pass`` when verification failed, ``seconds``, ``input``, ``output``.
    """

    nodes_before = _field("before", "nodes")
    nodes_after = _field("after", "nodes")
    initializers_before = _field("before", "initializers")
    initializers_after = _field("after", "initializers")
    bytes_before = _field("before", "initializer_bytes", doc="Initializer bytes before.")
    bytes_after = _field("after", "initializer_bytes", doc="Initializer bytes after.")

    @property
    def passes(self) -> list:
        """Per-pass statistics (dicts), in pipeline order."""
        return self._data.get("passes") or []

    @property
    def verified(self) -> bool:
        return "verification" in self._data

    @property
    def max_diff(self) -> float | None:
        """Largest absolute difference between original and optimized outputs (None: not verified)."""
        v = self._data.get("verification")
        return None if v is None else v["max_diff"]

    @property
    def verdict(self) -> str:
        """``"pass"``, ``"fail"`` or ``"not verified"``."""
        v = self._data.get("verification")
        return "not verified" if v is None else ("pass" if v["ok"] else "fail")

    @property
    def breaking_pass(self) -> str | None:
        return self._data.get("breaking_pass")


class VerifyReport(Report):
    """:func:`verify`'s result: ``onnxforge verify --json``'s content (``pass``, ``seeds``, per-output
    statistics in ``outputs``), :attr:`passed`, :attr:`max_diff` and the printed :attr:`text`."""

    def __init__(self, data: dict, text: str):
        super().__init__(data)
        self.text = text

    @property
    def passed(self) -> bool:
        return bool(self._data["pass"])

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    @property
    def max_diff(self) -> float:
        """Largest per-seed max abs diff over all outputs."""
        return max((float(o["max_abs"]["max"]) for o in self._data.get("outputs", [])), default=0.0)

    @property
    def outputs(self) -> list:
        return self._data.get("outputs", [])

    def __bool__(self):
        return self.passed


class BenchReport(Report):
    """:func:`bench`'s result: ``onnxforge bench --json``'s content (``median_ms``, ``min_ms``,
    ``iters``, ``steps``; with ``vs``: ``vs`` and ``ratio``; with ``profile``: ``profile``)."""

    median_ms = _field("median_ms")
    min_ms = _field("min_ms")
    iters = _field("iters")

    @property
    def ratio(self) -> float | None:
        """Median of ``vs`` over median of ``model`` (None without ``vs``)."""
        return self._data.get("ratio")


# ---- model arguments ----------------------------------------------------------------------------

def _model_arg(model, what="model"):
    """(path or bytes for the engine, display name, kind)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>", "bytes"
    if isinstance(model, (str, os.PathLike)):
        path = _path(model, what)
        return path, path, "path"
    if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
        try:
            data = model.SerializeToString()
        except Exception as e:  # protobuf refuses messages over 2 GiB
            raise Error(f"{what}: the ModelProto cannot be serialized ({e}); save it with external data "
                        "and pass its path instead") from None
        return data, "<ModelProto>", "proto"
    raise TypeError(f"{what} must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def _model_out(data: bytes, kind: str):
    if kind == "bytes":
        return data
    try:
        import onnx
    except ImportError:
        raise Error("returning an onnx.ModelProto needs the onnx package (Debian: python3-onnx); "
                    "pass output=PATH, or the model as bytes to get bytes back") from None
    return onnx.load_from_string(data)


def _progress(progress):
    if progress is None or progress is False:
        return None
    if progress is True:
        def show(line):
            print(f"onnxforge: {line}", file=sys.stderr, flush=True)
        return show
    if callable(progress):
        return progress
    raise TypeError("progress must be a bool or a callable taking one str")


# Argument checks: every bad argument is an Error with a one-line message naming it (pybind11's
# own TypeError listed every overload; a path with a NUL byte was cut at the NUL; 1.5 became 1).

def _int(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Error(f"{what} must be a whole number, not {type(value).__name__} {value!r}")
    value = int(value)
    if not lo <= value <= hi:
        raise Error(f"{what} must be between {lo} and {hi}, got {value}")
    return value


def _float(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Error(f"{what} must be a number, not {type(value).__name__} {value!r}")
    value = float(value)
    if not lo <= value <= hi:  # NaN fails too
        raise Error(f"{what} must be between {lo} and {hi}, got {value}")
    return value


def _path(path, what):
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise Error(f"{what} must be a path (str or os.PathLike), not {type(path).__name__}")
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if "\x00" in path:
        raise Error(f"{what} {path.split(chr(0))[0]!r}...: a path cannot contain a NUL byte")
    if not path:
        raise Error(f"{what}: empty path")
    return path


def _opt_path(path, what):
    return None if path is None else _path(path, what)


_INT64_MAX = 2**63 - 1


def _dims(dims):
    if dims is None:
        return None
    if not isinstance(dims, Mapping):
        raise Error(f"dims must be a mapping of dimension names to sizes, not {type(dims).__name__}")
    return {str(k): _int(v, f"dims[{str(k)!r}]", 0, 2**62) for k, v in dims.items()}


def _names(names, what):
    if names is None:
        return []
    if isinstance(names, str):
        names = names.split(",")
    names = [str(n).strip() for n in names]
    if any(not n for n in names):
        raise Error(f"{what}: empty pass name")
    return names


def _threads(threads):
    if threads is None:
        return 0
    if isinstance(threads, numbers.Integral) and not isinstance(threads, bool) and threads < 1:
        raise Error(f"threads must be at least 1 (got {threads}); None uses all cores")
    return _int(threads, "threads", 1, 4096)


_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", re.IGNORECASE)


def _limits(max_time=None, max_memory=None, max_loop_iterations=None):
    """The engine's limits for one call (None: the process's setting, as the command line's
    --max-time, --max-memory and --max-loop-iterations)."""
    t = 0.0 if max_time is None else _float(max_time, "max_time", 1e-3, 9e9)
    mem = 0
    if max_memory is not None:
        if isinstance(max_memory, str):
            m = _SIZE.fullmatch(max_memory)
            if not m:
                raise Error(f"max_memory must be a size in bytes or a string such as '512M' or '2G', got {max_memory!r}")
            mem = int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " "))
            if not 1 <= mem <= _INT64_MAX:
                raise Error(f"max_memory {max_memory!r} is out of range")
        else:
            mem = _int(max_memory, "max_memory", 1, _INT64_MAX)
    loops = 0 if max_loop_iterations is None else _int(max_loop_iterations, "max_loop_iterations", 1, _INT64_MAX)
    return _engine.Limits(t, mem, loops)


def _user_inputs(inputs, input_values, tmp, arrays_ok):
    """The engine's form of the user's inputs (``--inputs`` / ``--input-value``): ``(arrays, specs,
    values)``. ``inputs``: ``{name: array or path}`` (each feeds every seed), a path (an ``.npz`` or a
    backend test-data folder: input sets), or a list of those (a dict in a list is one input set).
    Arrays go to the engine in memory where it takes them (``arrays_ok``), else as .npy/.npz files
    under ``tmp``."""
    import numpy as np
    arrays, specs = {}, []

    def is_path(v):
        return isinstance(v, (str, bytes, os.PathLike))

    def one(item, as_set):
        if item is None:
            return
        if is_path(item):
            specs.append(os.fsdecode(item))
        elif isinstance(item, dict) and as_set and any(not is_path(v) for v in item.values()):
            path = os.path.join(tmp, f"set{len(specs)}.npz")
            np.savez(path, **{str(k): np.asarray(v, order="C") for k, v in item.items() if not is_path(v)})
            specs.append(path)
            specs.extend(f"{k}={os.fsdecode(v)}" for k, v in item.items() if is_path(v))
        elif isinstance(item, dict):
            for k, v in item.items():
                if is_path(v):
                    specs.append(f"{k}={os.fsdecode(v)}")
                elif arrays_ok:
                    arrays[str(k)] = np.asarray(v, order="C")
                else:
                    path = os.path.join(tmp, f"{len(specs)}.npy")
                    np.save(path, np.asarray(v, order="C"))
                    specs.append(f"{k}={path}")
        else:
            raise Error(f"inputs: expected a dict, a path or a list of them, got {type(item).__name__}")

    if isinstance(inputs, (list, tuple)):
        for item in inputs:
            one(item, True)
    else:
        one(inputs, False)
    values = [f"{k}={v!r}" for k, v in dict(input_values or {}).items()]
    return (arrays or None), specs, values


# ---- the functions ------------------------------------------------------------------------------

def optimize(model, output=None, *, passes=None, skip=None, target_opset=None, verify=True, seeds=3, dims=None,
             fold_size=None, strip_hierarchy=False, force=False, overwrite=False, threads=None, progress=False,
             target="generic", max_time=None, max_memory=None, max_loop_iterations=None, inputs=None,
             input_values=None, verify_dims=None, verify_decode=0, inline_functions=False):
    """Optimize a model with onnxforge's passes and verify the result; ``onnxforge optimize``.

    Args:
      model: a path, ``bytes`` (serialized ModelProto) or an ``onnx.ModelProto``.
      output: where to write the optimized model (atomically; external data as the input has it).
        None returns it in memory: as ``bytes`` for bytes, else as an ``onnx.ModelProto``.
      passes: run only these passes (list or comma-separated str; :func:`list_passes` names them).
      skip: never run these passes.
      target_opset: upgrade the default-domain opset to this version first (never a downgrade; ops whose
        signature changes are adapted, bit-identical in the runtime).
      target: "generic" (default: every op, the model's opset), "ort", "tensorrt" or "tflite": fusions
        into ops the target lacks do not run, such ops already in the model are decomposed, and a
        ``target_opset`` above the target's maximum is an Error. ``report["hint"]`` says what an
        upgrade would unlock.
      verify: run the original and the optimized model on ``seeds`` seeded inputs with the built-in
        runtime and compare every output within the tolerance of the worst accuracy class used.
      dims: values for symbolic dimensions, e.g. ``{"batch": 1, "sequence": 128}``; the optimized
        model is specialised to them.
      fold_size: largest constant (bytes) a fold may create beyond its inputs' size (default 1 MiB).
      strip_hierarchy: drop the module-hierarchy tags from the output.
      force: return (and write) the model even if verification fails.
      overwrite: replace an existing ``output`` (checked before any work; without it an existing file is an Error).
      threads: worker threads for this call (None: all cores).
      progress: True prints status lines to stderr; a callable receives them.
      max_time, max_memory, max_loop_iterations: the runtime's limits for this call (seconds; bytes
        or '2G'; node steps per Loop), as the command line's --max-time, --max-memory and
        --max-loop-iterations; over one, an Error names the node. Ctrl-C raises KeyboardInterrupt.
      inputs, input_values: the verification's inputs, as :func:`verify` takes them.
      verify_dims: sizes of symbolic dims for verification only (``--verify-dim``); the output keeps
        them symbolic, where ``dims`` fixes them.
      verify_decode: also verify generation on a decoder with a KV cache (``--verify-decode N``): a
        prefill and this many one-token steps, each model feeding its own cache back.
      inline_functions: expand every call of a model-local function (FunctionProto, what
        ``export_modules_as_functions`` writes) into its caller and drop the functions
        (``--inline-functions``); without it the passes work inside each function body.

    Returns:
      ``(model, report)``: the optimized model (``output`` itself when given) and an
      :class:`OptimizeReport`.

    Raises:
      Error: bad input (unreadable model, unknown pass, bad dims...).
      VerificationError: the optimized model does not match the original (unless ``force``).
    """
    arg, name, kind = _model_arg(model)
    out = _opt_path(output, "output")
    fold_size = None if fold_size is None else _int(fold_size, "fold_size", 0, _INT64_MAX)
    target_opset = None if target_opset is None else _int(target_opset, "target_opset", 1, 2**31 - 1)
    with tempfile.TemporaryDirectory(prefix="onnxforge_inputs.") as tmp:
        _, specs, values = _user_inputs(inputs, input_values, tmp, False)
        data, report_json, ok, failure = _engine.optimize(
            arg, name, out, _names(passes, "passes"), _names(skip, "skip"), _dims(dims), fold_size, bool(verify),
            _int(seeds, "seeds", 0, 1_000_000), target_opset, bool(strip_hierarchy), bool(force), bool(overwrite),
            _threads(threads), _progress(progress), str(target), _limits(max_time, max_memory, max_loop_iterations),
            specs, values, _dims(verify_dims), _int(verify_decode, "verify_decode", 0, 1_000_000),
            bool(inline_functions))
    report = OptimizeReport(json.loads(report_json))
    if not ok and not force:
        raise VerificationError(
            f"{failure}\nnothing was written; rerun with skip=['{report.breaking_pass}'] (and please report "
            "the model), or force=True to get it anyway", report)
    return (output if output is not None else _model_out(data, kind)), report


def inspect(model) -> dict:
    """Counts, bytes, external files, operator inventory and what the passes can do:
    ``onnxforge inspect --json``'s content as a dict."""
    arg, name, _ = _model_arg(model)
    return json.loads(_engine.inspect(arg, name))


def run(model, inputs=None, *, seed=0, dims=None, threads=None, input_values=None, max_time=None, max_memory=None,
        max_loop_iterations=None) -> dict:
    """Run a model with onnxforge's runtime; ``onnxforge run``.

    Args:
      inputs: ``{name: array}`` (anything ``numpy.asarray`` takes); inputs not given are generated
        for ``seed`` from their name, dtype and shape (token ids, masks, positions, normal floats),
        exactly as ``onnxforge run --seed`` and verification generate them. Values may also be
        paths (.npy, .pb), and ``inputs`` an .npz, a test-data folder or a list of sets, as for
        :func:`verify`; with sets, ``seed`` S runs set S.
      input_values: ``{name: number}``: the input filled with that number (``--input-value``).
      dims: values for symbolic dimensions of generated inputs (default batch 1, sequence 128).
      threads: worker threads for this call (None: all cores).
      max_time, max_memory, max_loop_iterations: limits for this call, as for :func:`optimize`.

    Returns:
      ``{output name: numpy.ndarray}`` in the model's output order.
    """
    arg, name, _ = _model_arg(model)
    with tempfile.TemporaryDirectory(prefix="onnxforge_inputs.") as tmp:
        arrays, specs, values = _user_inputs(inputs, input_values, tmp, True)
        return _engine.run(arg, name, arrays, _int(seed, "seed", 0, 2**64 - 1), _dims(dims), _threads(threads),
                           _limits(max_time, max_memory, max_loop_iterations), specs, values)


def verify(reference, candidate, *, seeds=20, atol=1e-4, rtol=1e-3, dims=None, first_seed=0, threads=None, inputs=None,
           input_values=None, max_time=None, max_memory=None, max_loop_iterations=None):
    """Check that two models compute the same outputs on ``seeds`` seeded inputs; ``onnxforge verify``.

    An output passes when ``|a - b| <= atol + rtol * max(|a|, |A|/16)`` element by element (a: ``reference``,
    |A|: the largest |reference| of that output).
    Returns a :class:`VerifyReport` (truthy when every output passes); a mismatch is not an
    exception, models that cannot be compared (different inputs, a model that fails to run) are.
    ``report["degenerate"]`` says when the outputs prove little (empty or constant on every seed).

    ``inputs`` (``onnxforge verify --inputs``): ``{name: array or .npy/.pb path}`` feeds every seed;
    a path to an ``.npz`` or a backend test-data folder, or a list whose items are such paths or
    dicts, gives input sets, which are the first seeds. ``input_values``: ``{name: number}``
    (``--input-value``), e.g. ``{"sr": 16000}``.
    """
    a, a_name, _ = _model_arg(reference, "reference")
    b, b_name, _ = _model_arg(candidate, "candidate")
    with tempfile.TemporaryDirectory(prefix="onnxforge_inputs.") as tmp:
        _, specs, values = _user_inputs(inputs, input_values, tmp, False)
        data, text = _engine.verify(a, a_name, b, b_name, _int(seeds, "seeds", 1, 1_000_000),
                                    _int(first_seed, "first_seed", 0, 2**64 - 1), _float(atol, "atol", 0, math.inf),
                                    _float(rtol, "rtol", 0, math.inf), _dims(dims), 0, _threads(threads),
                                    _limits(max_time, max_memory, max_loop_iterations), specs, values)
    return VerifyReport(json.loads(data), text)


def bench(model, *, vs=None, iters=None, min_time=3.0, warmup=3, dims=None, inputs=None, threads=None, profile=False,
          nchw=False, vs_nchw=False, input_values=None, max_time=None, max_memory=None, max_loop_iterations=None):
    """Measure a model's latency with onnxforge's runtime; ``onnxforge bench``.

    Runs ``warmup`` untimed runs, then ``iters`` timed runs (or as many as ``min_time`` seconds
    take, at least 3). With ``vs``, a second model runs alternately with the first and the report
    has its times and the ratio of medians. Returns a :class:`BenchReport`.
    """
    arg, name, _ = _model_arg(model)
    vs_arg, vs_name = None, ""
    if vs is not None:
        vs_arg, vs_name, _ = _model_arg(vs, "vs")
    with tempfile.TemporaryDirectory(prefix="onnxforge_inputs.") as tmp:
        arrays, specs, values = _user_inputs(inputs, input_values, tmp, True)
        data = _engine.bench(arg, name, vs_arg, vs_name, 0 if iters is None else _int(iters, "iters", 1, 2**31 - 1),
                             _float(min_time, "min_time", 0, 86400), _int(warmup, "warmup", 0, 2**31 - 1), _dims(dims),
                             arrays, bool(profile), bool(nchw), bool(vs_nchw), _threads(threads),
                             _limits(max_time, max_memory, max_loop_iterations), specs, values)
    return BenchReport(json.loads(data))


def hierarchy(model, *, sidecar=None, use_names=True, consumers=False) -> dict:
    """The model's module tree, tagging coverage by operator category and untagged nodes by why:
    ``onnxforge hierarchy --json``'s content. ``sidecar``: a JSON file with node -> module maps."""
    arg, name, _ = _model_arg(model)
    return json.loads(_engine.hierarchy(arg, name, _opt_path(sidecar, "sidecar"), bool(use_names), bool(consumers)))


def extract(model, module, output=None, *, sidecar=None, expose_cuts=None, verify=False, seeds=3, dims=None,
            external_data=False, overwrite=False):
    """Cut one module out as a runnable model of its own; ``onnxforge extract``.

    ``module`` is a module path (``encoder.layer.0``) or a class path
    (``/BertModel/BertEncoder/BertLayer.0``), as :func:`hierarchy` lists them. The sub-model is
    written to ``output``, or returned like :func:`optimize` returns models when ``output`` is None.
    With ``verify``, the source and the sub-model run on the same values and the report's
    ``verify`` says whether every output matched exactly. An existing ``output`` (or ``expose_cuts``)
    is replaced only with ``overwrite``.

    Returns ``(sub-model or output, report dict)``.
    """
    arg, name, kind = _model_arg(model)
    data, report = _engine.extract(arg, name, str(module), _opt_path(output, "output"), _opt_path(sidecar, "sidecar"),
                                   _opt_path(expose_cuts, "expose_cuts"), bool(verify), _int(seeds, "seeds", 1, 1_000_000),
                                   _dims(dims), bool(external_data), bool(overwrite))
    return (output if output is not None else _model_out(data, kind)), json.loads(report)


def audit(models):
    """What an export wastes, which fusions into standard ops a model has room for, and what kind of
    model it is; ``onnxforge audit --json``.

    ``models`` is one model or a list of them (paths, bytes, ModelProtos). Returns one dict per
    model (``forensics``, ``census``, ``fingerprint``...), a list for a list.
    """
    single = not isinstance(models, (list, tuple))
    args = [_model_arg(m) for m in ([models] if single else models)]
    out = json.loads(_engine.audit([a for a, _, _ in args], [n for _, n, _ in args]))
    return out[0] if single else out


def list_passes() -> list:
    """Every pass in pipeline order: ``{"name", "accuracy_class", "summary"}`` (0 lossless,
    1 float-bounded, 2 empirically safe)."""
    return json.loads(_engine.list_passes())


def main(argv=None) -> int:
    """Run the ``onnxforge`` command line in this process with ``argv`` (default ``sys.argv[1:]``);
    returns its exit code."""
    args = sys.argv[1:] if argv is None else [os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv]
    args = [os.fsdecode(a) if isinstance(a, bytes) else a for a in args]
    for a in args:
        if not isinstance(a, str) or "\x00" in a:
            # A real command line cannot hold a NUL; the engine would have cut the argument there.
            print(f"onnxforge: error: argument {a!r} is not a string without NUL bytes", file=sys.stderr, flush=True)
            return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # `zoo run` starts its steps as child processes of the onnxforge program; in this process
    # that is the interpreter, so name the real one (see _program).
    if args[:1] == ["zoo"] and not os.environ.get("ONNXFORGE_EXE"):
        exe = _program()
        if exe:
            os.environ["ONNXFORGE_EXE"] = exe
            try:
                return _engine.cli(args)
            finally:
                del os.environ["ONNXFORGE_EXE"]
    return _engine.cli(args)


def _program():
    """The onnxforge executable for child processes: the one shipped beside this module (a wheel's
    onnxforge/bin/, the build tree's build/onnxforge), else the first on PATH. Only absolute
    places: the current folder never supplies a program. None: not found (the command says so)."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.path.join(here, "bin", "onnxforge"), os.path.join(os.path.dirname(os.path.dirname(here)), "onnxforge")]
    places += [os.path.join(d, "onnxforge") for d in os.environ.get("PATH", "").split(os.pathsep) if os.path.isabs(d)]
    for p in places:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None

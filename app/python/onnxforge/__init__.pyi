# Type stubs for onnxforge (the implementation is __init__.py over the C++ module _onnxforge).
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar, overload

import numpy as np
import numpy.typing as npt

__version__: str

StrPath = str | os.PathLike[str]
ModelProto = Any  # onnx.ModelProto (the onnx package is optional)
ModelArg = StrPath | bytes | bytearray | memoryview | ModelProto
Progress = bool | Callable[[str], object]
_P = TypeVar("_P", bound=StrPath)

class Error(ValueError):
    """Bad input: the command line's message (file, node, what to do)."""

class VerificationError(Error):
    report: OptimizeReport
    def __init__(self, message: str, report: OptimizeReport) -> None: ...

class Report(Mapping[str, Any]):
    def __init__(self, data: dict[str, Any]) -> None: ...
    def __getitem__(self, key: str) -> Any: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def to_dict(self) -> dict[str, Any]: ...

class OptimizeReport(Report):
    @property
    def nodes_before(self) -> int: ...
    @property
    def nodes_after(self) -> int: ...
    @property
    def initializers_before(self) -> int: ...
    @property
    def initializers_after(self) -> int: ...
    @property
    def bytes_before(self) -> int: ...
    @property
    def bytes_after(self) -> int: ...
    @property
    def passes(self) -> list[dict[str, Any]]: ...
    @property
    def verified(self) -> bool: ...
    @property
    def max_diff(self) -> float | None: ...
    @property
    def verdict(self) -> Literal["pass", "fail", "not verified"]: ...
    @property
    def breaking_pass(self) -> str | None: ...

class VerifyReport(Report):
    text: str
    def __init__(self, data: dict[str, Any], text: str) -> None: ...
    @property
    def passed(self) -> bool: ...
    @property
    def verdict(self) -> Literal["pass", "fail"]: ...
    @property
    def max_diff(self) -> float: ...
    @property
    def outputs(self) -> list[dict[str, Any]]: ...
    def __bool__(self) -> bool: ...

class BenchReport(Report):
    @property
    def median_ms(self) -> float: ...
    @property
    def min_ms(self) -> float: ...
    @property
    def iters(self) -> int: ...
    @property
    def ratio(self) -> float | None: ...

# The user's inputs: {name: array or path} (every seed), a path (.npz, test-data folder: input sets),
# or a list of those (a dict in a list is one set).
UserInputs = Mapping[str, npt.ArrayLike | StrPath] | StrPath | Sequence[Mapping[str, npt.ArrayLike | StrPath] | StrPath] | None

@overload
def optimize(model: bytes | bytearray | memoryview, output: None = None, *, passes: Sequence[str] | str | None = None,
             skip: Sequence[str] | str | None = None, target_opset: int | None = None, verify: bool = True, seeds: int = 3,
             dims: Mapping[str, int] | None = None, fold_size: int | None = None, strip_hierarchy: bool = False,
             force: bool = False, overwrite: bool = False, threads: int | None = None, progress: Progress = False, target: str = "generic",
             inputs: UserInputs = None, input_values: Mapping[str, float] | None = None,
             max_time: float | None = None, max_memory: int | str | None = None,
             max_loop_iterations: int | None = None, verify_dims: Mapping[str, int] | None = None,
             verify_decode: int = 0, inline_functions: bool = False) -> tuple[bytes, OptimizeReport]: ...
@overload
def optimize(model: ModelArg, output: None = None, *, passes: Sequence[str] | str | None = None,
             skip: Sequence[str] | str | None = None, target_opset: int | None = None, verify: bool = True, seeds: int = 3,
             dims: Mapping[str, int] | None = None, fold_size: int | None = None, strip_hierarchy: bool = False,
             force: bool = False, overwrite: bool = False, threads: int | None = None, progress: Progress = False, target: str = "generic",
             inputs: UserInputs = None, input_values: Mapping[str, float] | None = None,
             max_time: float | None = None, max_memory: int | str | None = None,
             max_loop_iterations: int | None = None, verify_dims: Mapping[str, int] | None = None,
             verify_decode: int = 0, inline_functions: bool = False) -> tuple[ModelProto, OptimizeReport]: ...
@overload
def optimize(model: ModelArg, output: _P, *, passes: Sequence[str] | str | None = None,
             skip: Sequence[str] | str | None = None, target_opset: int | None = None, verify: bool = True, seeds: int = 3,
             dims: Mapping[str, int] | None = None, fold_size: int | None = None, strip_hierarchy: bool = False,
             force: bool = False, overwrite: bool = False, threads: int | None = None, progress: Progress = False, target: str = "generic",
             inputs: UserInputs = None, input_values: Mapping[str, float] | None = None,
             max_time: float | None = None, max_memory: int | str | None = None,
             max_loop_iterations: int | None = None, verify_dims: Mapping[str, int] | None = None,
             verify_decode: int = 0, inline_functions: bool = False) -> tuple[_P, OptimizeReport]: ...
def inspect(model: ModelArg) -> dict[str, Any]: ...
def run(model: ModelArg, inputs: UserInputs = None, *, seed: int = 0,
        dims: Mapping[str, int] | None = None, threads: int | None = None,
        input_values: Mapping[str, float] | None = None, max_time: float | None = None,
        max_memory: int | str | None = None, max_loop_iterations: int | None = None) -> dict[str, np.ndarray]: ...
def verify(reference: ModelArg, candidate: ModelArg, *, seeds: int = 20, atol: float = 1e-4, rtol: float = 1e-3,
           dims: Mapping[str, int] | None = None, first_seed: int = 0, threads: int | None = None,
           inputs: UserInputs = None, input_values: Mapping[str, float] | None = None, max_time: float | None = None,
           max_memory: int | str | None = None, max_loop_iterations: int | None = None) -> VerifyReport: ...
def bench(model: ModelArg, *, vs: ModelArg | None = None, iters: int | None = None, min_time: float = 3.0, warmup: int = 3,
          dims: Mapping[str, int] | None = None, inputs: UserInputs = None,
          threads: int | None = None, profile: bool = False, nchw: bool = False, vs_nchw: bool = False,
          input_values: Mapping[str, float] | None = None, max_time: float | None = None,
          max_memory: int | str | None = None, max_loop_iterations: int | None = None) -> BenchReport: ...
def hierarchy(model: ModelArg, *, sidecar: StrPath | None = None, use_names: bool = True,
              consumers: bool = False) -> dict[str, Any]: ...
@overload
def extract(model: ModelArg, module: str, output: None = None, *, sidecar: StrPath | None = None,
            expose_cuts: StrPath | None = None, verify: bool = False, seeds: int = 3, dims: Mapping[str, int] | None = None,
            external_data: bool = False, overwrite: bool = False) -> tuple[ModelProto | bytes, dict[str, Any]]: ...
@overload
def extract(model: ModelArg, module: str, output: _P, *, sidecar: StrPath | None = None,
            expose_cuts: StrPath | None = None, verify: bool = False, seeds: int = 3, dims: Mapping[str, int] | None = None,
            external_data: bool = False, overwrite: bool = False) -> tuple[_P, dict[str, Any]]: ...
@overload
def audit(models: Sequence[ModelArg]) -> list[dict[str, Any]]: ...
@overload
def audit(models: ModelArg) -> dict[str, Any]: ...
def list_passes() -> list[dict[str, Any]]: ...
def main(argv: Sequence[StrPath] | None = None) -> int: ...

"""The ONNX backend test suite's cases, read from the installed `onnx` package.

Node cases come from `onnx.backend.test.case.node.collect_testcases()` (a one-node model,
its inputs, and outputs computed by ONNX's reference implementation); model cases from
the model directories the wheel ships (`onnx/backend/test/data/<kind>/<test>/model.onnx`
with `test_data_set_0/{input,output}_<i>.pb`), and the `light` CNNs (`light_<name>.onnx`
and `light_<name>_output_0.pb`; inputs made as ONNX's own runner makes them). Nothing
is written to disk. A case that cannot be expressed as tensors in and tensors out gets
the reason it is skipped.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator", "light")

# Why a case is not run. Counted by `python -m e2e.onnx_backend --report`.
NON_TENSOR = "sequence, map, optional or sparse value (no tensor equivalent)"
TRAINING = "training op (ai.onnx.preview.training domain)"
STRING = "string tensors (no torch dtype)"
NO_TORCH_DTYPE = "element type {} has no torch dtype"
NOT_FLOAT_LIGHT = "light model with a non-float input (ONNX's runner makes float inputs only)"
NO_DATA = "no test data set"
BAD_DATA = "test data does not match the graph's inputs or outputs"

TRAINING_DOMAIN = "ai.onnx.preview.training"
_TORCH_OF_NUMPY_NAME = {  # ml_dtypes' names: the bit pattern goes over as this torch dtype
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
}


@dataclass
class OnnxCase:
    """One ONNX backend test: `<kind>/<name>`, its model, inputs and expected outputs."""

    name: str
    kind: str  # node, simple, pytorch-converted, pytorch-operator, light
    model: bytes = b""
    inputs: list[torch.Tensor] = field(default_factory=list)
    outputs: list[torch.Tensor] = field(default_factory=list)
    skip_reason: str | None = None


class NotExpressible(Exception):
    """Why a case is skipped (its message is the reason)."""


def to_torch(value: Any) -> torch.Tensor:
    """An array of the ONNX test data as a torch tensor, or NotExpressible."""
    import onnx

    if isinstance(value, onnx.TensorProto):
        if value.data_type == onnx.TensorProto.STRING:
            raise NotExpressible(STRING)
        value = onnx.numpy_helper.to_array(value)
    if value is None or isinstance(value, (list, dict)):
        raise NotExpressible(NON_TENSOR)
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        raise NotExpressible(STRING)
    array = np.array(array, order="C")  # a copy; 0-d stays 0-d (np.ascontiguousarray makes it 1-d)
    if array.dtype.name in _TORCH_OF_NUMPY_NAME:
        storage = np.int16 if array.dtype.itemsize == 2 else np.uint8
        return torch.from_numpy(array.view(storage)).view(_TORCH_OF_NUMPY_NAME[array.dtype.name])
    try:
        return torch.from_numpy(array)
    except TypeError:
        raise NotExpressible(NO_TORCH_DTYPE.format(array.dtype.name)) from None


def _non_tensor_values(model) -> bool:
    graph_values = list(model.graph.input) + list(model.graph.output)
    return any(value.type.WhichOneof("value") != "tensor_type" for value in graph_values)


def _classify_model(model) -> str | None:
    if any(node.domain == TRAINING_DOMAIN for node in model.graph.node):
        return TRAINING
    if _non_tensor_values(model):
        return NON_TENSOR
    return None


def make_case(name: str, kind: str, model, inputs: list[Any], outputs: list[Any]) -> OnnxCase:
    """A case from a ModelProto and its data; skipped with the reason when not expressible."""
    case = OnnxCase(name, kind)
    reason = _classify_model(model)
    if reason is None:
        initialized = {tensor.name for tensor in model.graph.initializer}
        graph_inputs = [value for value in model.graph.input if value.name not in initialized]
        if len(inputs) != len(graph_inputs) or len(outputs) != len(model.graph.output):
            reason = BAD_DATA
    if reason is None:
        try:
            case.inputs = [to_torch(value) for value in inputs]
            case.outputs = [to_torch(value) for value in outputs]
        except NotExpressible as error:
            reason = str(error)
    if reason is not None:
        return OnnxCase(name, kind, skip_reason=reason)
    case.model = model.SerializeToString()
    return case


def node_cases() -> list[OnnxCase]:
    """Every node case of the installed onnx (about 1,900; 5-20 s: ONNX computes their outputs)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    made = []
    for case in cases:
        if not case.data_sets:
            made.append(OnnxCase(f"node/{case.name}", "node", skip_reason=NO_DATA))
            continue
        inputs, outputs = case.data_sets[0]
        made.append(make_case(f"node/{case.name}", "node", case.model, list(inputs), list(outputs)))
    return made


def data_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def model_cases(kinds: tuple[str, ...] = MODEL_KINDS) -> list[OnnxCase]:
    """The model tests the onnx wheel ships, by kind."""
    made = []
    for kind in kinds:
        directory = data_dir() / kind
        if kind == "light":
            made.extend(_light_case(path) for path in sorted(directory.glob("light_*.onnx")))
            continue
        for case_dir in sorted(p for p in directory.iterdir() if (p / "model.onnx").exists()):
            made.append(_directory_case(kind, case_dir))
    return made


def _read_tensor(path: Path, value_info) -> Any:
    import onnx

    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        return [] if kind == "sequence_type" else None  # any non-tensor: classified as NON_TENSOR
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return tensor


def _directory_case(kind: str, case_dir: Path) -> OnnxCase:
    import onnx

    name = f"{kind}/{case_dir.name}"
    model = onnx.load(str(case_dir / "model.onnx"))
    data_sets = sorted(case_dir.glob("test_data_set_*"))
    if not data_sets:
        return OnnxCase(name, kind, skip_reason=NO_DATA)
    initialized = {tensor.name for tensor in model.graph.initializer}
    graph_inputs = [value for value in model.graph.input if value.name not in initialized]
    data = data_sets[0]
    input_files = sorted(data.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    output_files = sorted(data.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    if len(input_files) != len(graph_inputs) or len(output_files) != len(model.graph.output):
        return OnnxCase(name, kind, skip_reason=BAD_DATA)
    inputs = [_read_tensor(path, info) for path, info in zip(input_files, graph_inputs)]
    outputs = [_read_tensor(path, info) for path, info in zip(output_files, model.graph.output)]
    return make_case(name, kind, model, inputs, outputs)


def _light_case(path: Path) -> OnnxCase:
    """A `light` CNN: inputs as ONNX's runner makes them (arange / n, unknown dims 1)."""
    import onnx

    name = f"light/{path.stem}"
    model = onnx.load(str(path))
    initialized = {tensor.name for tensor in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initialized:
            continue
        tensor_type = value.type.tensor_type
        if tensor_type.elem_type != onnx.TensorProto.FLOAT:
            return OnnxCase(name, "light", skip_reason=NOT_FLOAT_LIGHT)
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim)
        count = int(np.prod(shape))
        inputs.append((np.arange(count).reshape(shape) / count).astype(np.float32))
    outputs = []
    for index, value in enumerate(model.graph.output):
        expected = path.with_name(f"{path.stem}_output_{index}.pb")
        if not expected.exists():
            return OnnxCase(name, "light", skip_reason=NO_DATA)
        outputs.append(_read_tensor(expected, value))
    return make_case(name, "light", model, inputs, outputs)


def all_cases() -> list[OnnxCase]:
    return node_cases() + model_cases()

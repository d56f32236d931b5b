"""The ONNX path's stages: export (`capture`) -> ONNX importer (`import`) -> torch backend.

    model = onnx_export(module, inputs, dynamic_dims, snapshots=s)   # or an ONNX model's bytes
    raw = onnx_import(model, snapshots=s)
    torch_ir = onnx_torch_backend_ir(raw.raw_ir, snapshots=s)
    program = compile_torch_backend_ir(torch_ir, "linalg", snapshots=s)

The model is written to the snapshots' directory (`model.onnx`) before the importer
runs, so a failing or crashing import leaves the model it was given beside the IR.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import torch

from compiler.backend_compile import torch_backend_ir
from compiler.frontends import onnx as onnx_frontend
from compiler.stages import Snapshots, StageError, module_text
from compiler.toolchain import TO_TORCH_BACKEND

MODEL_FILE = "model.onnx"


@dataclass
class OnnxImport:
    """An ONNX model imported as raw torch dialect (`torch.operator "onnx.*"` ops in `@main`)."""

    raw_ir: str
    input_names: list[str]  # the graph's inputs, in the order @main takes them
    output_names: list[str]
    opset: int | None
    notes: list[str] = field(default_factory=list)


def onnx_export(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
    notes: list[str] | None = None,
) -> bytes:
    """Stage capture: `module.<method>` exported with `torch.onnx.export` (serialized ModelProto)."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    snapshots.enter("capture")
    return onnx_frontend.export(module, example_inputs, dynamic_dims, method, notes)


def onnx_import(model: bytes, *, snapshots: Snapshots | None = None) -> OnnxImport:
    """Stage import: an ONNX model (bytes) -> raw torch dialect."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    snapshots.enter("import")
    if snapshots.directory is not None:
        snapshots.directory.mkdir(parents=True, exist_ok=True)
        (snapshots.directory / MODEL_FILE).write_bytes(model)
    module = onnx_frontend.import_model(model)
    proto = onnx_frontend.load(model)
    initialized = {tensor.name for tensor in proto.graph.initializer}
    return OnnxImport(
        module_text(module),
        [value.name for value in proto.graph.input if value.name not in initialized],
        [value.name for value in proto.graph.output],
        onnx_frontend.opset_of(proto),
    )


def onnx_torch_backend_ir(raw_ir: str, *, snapshots: Snapshots | None = None) -> str:
    """Stage torch-backend: `convert-torch-onnx-to-torch` and the torch simplifications.

    The conversion leaves an ONNX op it has no pattern for as it is (the backend stage
    would then fail on an anonymous `torch.operator`): such ops fail this stage by name.
    """
    lowered = torch_backend_ir(raw_ir, snapshots=snapshots, pipeline=TO_TORCH_BACKEND["onnx"])
    left = sorted(set(_UNCONVERTED.findall(lowered)))
    if left:
        raise StageError(
            "torch-backend",
            f"no conversion of {left[0]} to the torch dialect"
            + (f" (and {len(left) - 1} more)" if len(left) > 1 else ""),
            failing_pass=CONVERT_PASS,
            diagnostics=[f"ops left unconverted: {', '.join(left)}"],
            input_ir=raw_ir,
        )
    return lowered


CONVERT_PASS = "func.func(convert-torch-onnx-to-torch)"
_UNCONVERTED = re.compile(r'torch\.operator "([^"]+)"')

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
import torch.utils._pytree as pytree

from compiler import pipelines
from compiler.backend_compile import torch_backend_ir
from compiler.frontends import ReducerFacts
from compiler.frontends import onnx as onnx_frontend
from compiler.stages import Snapshots, StageError, module_text

MODEL_FILE = "model.onnx"


@dataclass
class OnnxCapture:
    """Stage `capture` of a torch module: its ONNX model, and the exporter's notes."""

    model: bytes
    notes: list[str] = field(default_factory=list)
    static_fallback: bool = False  # the dynamic export failed: the model takes the example shapes alone


@dataclass
class OnnxImport:
    """An ONNX model imported as raw torch dialect (`torch.operator "onnx.*"` ops in `@main`)."""

    raw_ir: str
    input_names: list[str]  # the graph's inputs, in the order @main takes them
    output_names: list[str]
    opset: int | None
    notes: list[str] = field(default_factory=list)
    model: bytes = b""
    given: bool = True  # the model was given (an ONNX test), not exported here
    static_fallback: bool = False
    out_spec: None = None  # the golden outputs' structure

    @property
    def result_notes(self) -> list[str]:
        return self.notes

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        """The call's tensors, which the model must take one for one."""
        tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
        if len(self.input_names) != len(tensors):
            raise StageError(
                "import" if self.given else "capture",
                f"the ONNX model takes {len(self.input_names)} inputs, the call passes {len(tensors)} tensors",
            )
        return tensors


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
        model=model,
    )


def onnx_torch_backend_ir(raw_ir: str, *, snapshots: Snapshots | None = None) -> str:
    """Stage torch-backend: `convert-torch-onnx-to-torch` and the torch simplifications.

    The conversion leaves an ONNX op it has no pattern for as it is (the backend stage
    would then fail on an anonymous `torch.operator`): such ops fail this stage by name.
    """
    lowered = torch_backend_ir(raw_ir, snapshots=snapshots, pipeline=pipelines.ONNX_TO_TORCH_BACKEND)
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


class _Warm(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x @ x.t()).sum(0) + 1


@dataclass(frozen=True)
class OnnxFrontend:
    """torch.onnx.export (dynamo), then torch-mlir's ONNX importer."""

    name = "onnx"
    imported_ir = "onnx"  # torch-onnx IR: `torch.operator "onnx.*"` ops
    keeps = None  # the export is shared within a run only
    reducer = ReducerFacts(repro_step="onnx", fx_graph_search=False, onnx_graph_search=True)

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        return pipelines.ONNX_TO_TORCH_BACKEND

    def missing(self) -> str | None:
        if missing := onnx_frontend.missing_packages():
            return f"{', '.join(missing)}: {onnx_frontend.INSTALL_LINE}"
        return None

    def given(self, module) -> bytes | None:
        """The ONNX model a test carries (`onnx_model`: the ONNX backend suite), compiled as it is."""
        return getattr(module, "onnx_model", None)

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> OnnxCapture:
        snapshots.enter("capture")
        notes: list[str] = []
        model, fell_back = onnx_frontend.export_static_fallback(module, inputs, dynamic_dims, method, notes)
        return OnnxCapture(model, notes, fell_back)

    def import_capture(self, captured: OnnxCapture | bytes, snapshots: Snapshots) -> OnnxImport:
        if isinstance(captured, bytes):  # a given model
            return onnx_import(captured, snapshots=snapshots)
        imported = onnx_import(captured.model, snapshots=snapshots)
        imported.notes, imported.given, imported.static_fallback = list(captured.notes), False, captured.static_fallback
        return imported

    def torch_backend_ir(self, imported: OnnxImport, pipeline: pipelines.Pipeline, snapshots: Snapshots) -> str:
        return onnx_torch_backend_ir(imported.raw_ir, snapshots=snapshots)

    def producer(self, ir_name: str) -> str:
        return "the ONNX export and importer"

    def warm_up(self) -> None:
        """The exporter's and importer's first call in a process (seconds)."""
        if not onnx_frontend.missing_packages():
            model = onnx_export(_Warm(), [torch.rand(3, 4)], [[-1, 4]])
            onnx_torch_backend_ir(onnx_import(model).raw_ir)

    def warm_up_capture(self) -> None:
        """Nothing: only the FX capture's initialization is paid while a collection probes."""

    def check(self, module, inputs, dynamic_dims) -> None:
        onnx_frontend.import_model(onnx_frontend.export(module, inputs, dynamic_dims))

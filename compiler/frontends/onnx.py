"""ONNX frontend (`OnnxFrontend`): `torch.onnx.export` (stage `capture`) and torch-mlir's ONNX
importer (stage `import`), then `convert-torch-onnx-to-torch` (stage `torch-backend`).

    model = onnx_export(module, inputs, dynamic_dims, snapshots=s)   # or an ONNX model's bytes
    raw = onnx_import(model, snapshots=s)
    torch_ir = onnx_torch_backend_ir(raw.raw_ir, snapshots=s)
    program = compile_torch_backend_ir(torch_ir, "linalg", snapshots=s)

The model is written to the snapshots' directory (`model.onnx`) before the importer
runs, so a failing or crashing import leaves the model it was given beside the IR.

`capture` runs torch 2.13's recommended exporter (`dynamo=True`: torch.export, then
onnxscript's translation) with the test's `-1` dims as `Dim.AUTO` dynamic shapes, and
returns the serialized `ModelProto`. `import` runs ONNX shape inference and
`torch_mlir.extras.onnx_importer` on a model (exported here or given, as the ONNX
backend test cases are), naming its graph `@main` as the reference backend expects.
The `onnx` packages are optional (`pip install -e ".[onnx]"`): importing this module
needs none of them; `require_onnx` says what is missing.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.utils._pytree as pytree
from torch_mlir import ir

from compiler import pipelines
from compiler.backend_compile import torch_backend_ir
from compiler.frontends import ReducerFacts
from compiler.frontends.base import BaseFrontend
from compiler.frontends.fx import WarmUpModule, _MethodAsForward, dynamic_shapes_for
from compiler.replay_runtime.frontend_step import exporter_message
from compiler.stages import Snapshots, StageError, first_line, module_text, new_context

INSTALL_LINE = 'pip install -e ".[onnx]"  (onnx==1.23.2 onnxscript==0.7.2 onnxruntime==1.31.1)'
REQUIRED = ("onnx", "onnxscript")  # onnxruntime is optional: the third oracle


class OnnxUnavailable(ImportError):
    """The onnx packages this frontend needs are not installed."""


def missing_packages(names: Sequence[str] = REQUIRED) -> list[str]:
    return [name for name in names if importlib.util.find_spec(name) is None]


def require_onnx() -> None:
    if missing := missing_packages():
        raise OnnxUnavailable(f"needs {', '.join(missing)}: {INSTALL_LINE}")


def export(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    method: str = "forward",
    notes: list[str] | None = None,
) -> bytes:
    """Stage `capture`: `module.<method>` as a serialized ONNX model (`export_static_fallback`'s)."""
    return export_static_fallback(module, example_inputs, dynamic_dims, method, notes)[0]


def export_static_fallback(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    method: str = "forward",
    notes: list[str] | None = None,
) -> tuple[bytes, bool]:
    """Stage `capture`: `module.<method>` as a serialized ONNX model, and whether it fell
    back to static shapes.

    With dynamic dims the exporter is asked for them; if it cannot take them, the
    example inputs' shapes are exported (the model then takes those alone) and `notes`
    says so.
    """
    require_onnx()
    _reuse_torchlib_table()
    if method != "forward":
        module = _MethodAsForward(module, method)
    dynamic_shapes = dynamic_shapes_for(module.forward, example_inputs, dynamic_dims)
    attempts = [(dynamic_shapes, None)]
    if dynamic_shapes is not None:
        attempts.append((None, "static shapes (the example inputs' sizes; annotated -1 dims ignored)"))
    first_error: Exception | None = None
    for shapes, fallback in attempts:
        try:
            program = torch.onnx.export(
                module, tuple(example_inputs), dynamic_shapes=shapes, dynamo=True, verbose=False
            )
            model = program.model_proto
        except Exception as error:  # the exporter raises many kinds
            first_error = first_error or error
            continue
        if notes is not None:
            notes.append(f"exported with torch.onnx.export (dynamo), ONNX opset {opset_of(model)}")
            if fallback is not None:
                notes.append(
                    f"capture fallback: exported with {fallback}; the dynamic export failed with "
                    f"{type(first_error).__name__}: {first_line(first_error)[:200]}"
                )
        return model.SerializeToString(), fallback is not None
    raise StageError(
        "capture", f"torch.onnx.export: {type(first_error).__name__}: {exporter_message(first_error)}"
    ) from first_error


def _reuse_torchlib_table() -> None:
    """torch.onnx.export rebuilds its op registry on every call: it parses the source of
    ~500 onnxscript functions and derives ~540 op signatures (2.3 s of a 3.5 s export
    measured here). The registry only depends on the opset, and an export without a
    `custom_translation_table` (never passed here) only reads it: one per opset and process."""
    try:
        from torch.onnx._internal.exporter import _registration
    except ImportError:  # another torch: export as it is
        return
    registry = _registration.ONNXRegistry
    build = getattr(registry.from_torchlib, "__func__", None)
    if build is None or getattr(build, "_e2e_cached", False):
        return
    built: dict = {}

    def from_torchlib(cls, *args, **kwargs):
        key = (cls, args, tuple(sorted(kwargs.items())))
        if key not in built:
            built[key] = build(cls, *args, **kwargs)
        return built[key]

    from_torchlib._e2e_cached = True
    from_torchlib._e2e_original = build
    registry.from_torchlib = classmethod(from_torchlib)


def opset_of(model) -> int | None:
    """The default-domain opset a ModelProto (or its bytes) imports."""
    model = load(model) if isinstance(model, bytes) else model
    return next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)


def load(model_bytes: bytes):
    import onnx

    return onnx.load_from_string(model_bytes)


def import_model(model_bytes: bytes, context: ir.Context | None = None, entry: str = "main") -> ir.Module:
    """Stage `import`: shape inference, then the ONNX importer; the graph becomes `@<entry>`."""
    require_onnx()
    import onnx
    from torch_mlir.extras import onnx_importer

    try:
        model = onnx.load_from_string(model_bytes)
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as error:
        raise StageError("import", f"ONNX shape inference: {type(error).__name__}: {first_line(error)}") from error
    model.graph.name = entry
    context = context or new_context()
    try:
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=context)
        onnx_importer.NodeImporter.define_function(info.main_graph, module.operation).import_all()
    except Exception as error:
        raise StageError("import", f"onnx_importer: {type(error).__name__}: {first_line(error)}") from error
    return module


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
    return export(module, example_inputs, dynamic_dims, method, notes)


def onnx_import(model: bytes, *, snapshots: Snapshots | None = None) -> OnnxImport:
    """Stage import: an ONNX model (bytes) -> raw torch dialect."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    snapshots.enter("import")
    if snapshots.directory is not None:
        snapshots.directory.mkdir(parents=True, exist_ok=True)
        (snapshots.directory / MODEL_FILE).write_bytes(model)
    module = import_model(model)
    proto = load(model)
    initialized = {tensor.name for tensor in proto.graph.initializer}
    return OnnxImport(
        module_text(module),
        [value.name for value in proto.graph.input if value.name not in initialized],
        [value.name for value in proto.graph.output],
        opset_of(proto),
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


_UNCONVERTED = re.compile(r'torch\.operator "([^"]+)"')


@dataclass(frozen=True)
class OnnxFrontend(BaseFrontend):
    """torch.onnx.export (dynamo), then torch-mlir's ONNX importer."""

    name = "onnx"
    imported_ir = "onnx"  # torch-onnx IR: `torch.operator "onnx.*"` ops
    imported_ir_words = "raw torch-onnx"
    raw_conversion = "convert-torch-onnx-to-torch"
    keeps = None  # the export is shared within a run only
    reducer = ReducerFacts(
        repro_step="onnx",
        fx_graph_search=False,
        onnx_graph_search=True,
        repro_step_words="`torch.onnx.export` (dynamo) + torch-mlir's ONNX importer",
    )

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        return pipelines.ONNX_TO_TORCH_BACKEND

    def missing(self) -> str | None:
        if missing := missing_packages():
            return f"{', '.join(missing)}: {INSTALL_LINE}"
        return None

    def given(self, module) -> bytes | None:
        """The ONNX model a test carries (`onnx_model`: the ONNX backend suite), compiled as it is."""
        return getattr(module, "onnx_model", None)

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> OnnxCapture:
        snapshots.enter("capture")
        notes: list[str] = []
        model, fell_back = export_static_fallback(module, inputs, dynamic_dims, method, notes)
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
        if not missing_packages():
            model = onnx_export(WarmUpModule(), [torch.rand(3, 4)], [[-1, 4]])
            onnx_torch_backend_ir(onnx_import(model).raw_ir)

    def check(self, module, inputs, dynamic_dims) -> None:
        import_model(export(module, inputs, dynamic_dims))


CONVERT_PASS = f"func.func({OnnxFrontend.raw_conversion})"

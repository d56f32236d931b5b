"""ONNX frontend: `torch.onnx.export` (stage `capture`) and torch-mlir's ONNX importer
(stage `import`).

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
from typing import Sequence

import torch
from torch_mlir import ir

from compiler.frontends.fx import _MethodAsForward, dynamic_shapes_for
from compiler.replay_runtime.frontend_step import exporter_message
from compiler.stages import StageError, first_line, new_context

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

"""The FX path: torch.export -> FxImporter (stages `capture`, `import`), then the stages every
frontend shares (`compiler.backend_compile`).

`fx_capture` and `fx_import_captured` are the two stages apart (`fx_import` runs both): a
capture depends on torch and the test, not on torch-mlir, so the suite keeps it across a
torch-mlir rebuild (`FxCapture` pickles as `torch.export.save` bytes) and imports it again.

    compiled = compile_module(model, (x,), backend="tosa")
    compiled(x)                           # runs on MLIR's ExecutionEngine
    compiled.snapshots.texts["backend"]   # the IR each stage was given
"""

from __future__ import annotations

import functools
import io
import pickle
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from compiler import pipelines
from compiler.backend_compile import compile_torch_backend_ir, torch_backend_ir
from compiler.frontends import KEEPS_CAPTURE, ReducerFacts, fx
from compiler.refbackend import RefBackendProgram
from compiler.stages import Snapshots, StageError, first_line, module_text


class FxCapture:
    """Stage `capture` of `module.<method>`: the decomposed ExportedProgram and the capture's notes.

    Pickled (the frontend cache, a test host handing over), the program travels as
    `torch.export.save` bytes, taken at the first pickling: the importer freezes the program
    in place, and a frozen program no longer validates, so the suite pickles a capture into
    its cache before importing it. Unpickled, the program is loaded when first asked for. A
    program that does not save or load is `None`, with `lost` saying why: the caller
    captures again.
    """

    def __init__(self, program: ExportedProgram | None, notes: list[str]):
        self._program = program
        self.notes = notes
        self.lost: str | None = None
        self._saved: bytes | None = None

    @property
    def program(self) -> ExportedProgram | None:
        if self._program is None and self._saved is not None:
            _name_return_types()
            try:
                self._program = _as_captured(torch.export.load(io.BytesIO(self._saved)))
            except Exception as error:  # torch's deserializer: a program it cannot read is captured again
                self.lost = f"torch.export.load: {type(error).__name__}: {first_line(error)[:200]}"
                self._saved = None
        return self._program

    def lost_on_the_way(self) -> str | None:
        """None when the program is here (loaded, if it was kept); else why it was lost."""
        return self.lost if self.program is None else None

    def __getstate__(self) -> dict:
        if self._saved is None and self.lost is None and self._program is not None:
            if specialized := specialized_values(self._program):
                # torch.export.save writes such a dim as the number it became; the importer
                # would type the loaded program more precisely than the captured one.
                self.lost = f"torch.export specialized a dynamic dim of {', '.join(specialized[:3])}"
                return {"saved": None, "notes": self.notes, "lost": self.lost}
            try:
                self._saved = _saved_without_inputs(self._program)
            except Exception as error:  # torch's serializer: a program it cannot write is captured again
                self.lost = f"torch.export.save: {type(error).__name__}: {first_line(error)[:200]}"
        return {"saved": self._saved, "notes": self.notes, "lost": self.lost}

    def __setstate__(self, state: dict) -> None:
        self.__init__(None, state["notes"])
        self.lost, self._saved = state["lost"], state["saved"]


def _as_captured(program: ExportedProgram) -> ExportedProgram:
    """A loaded `program` with the node metadata torch.export gave it when captured, where
    torch-mlir's FX importer reads it and `torch.export.load` does not restore it:

    - the value of an op that returns one `Tensor[]` (`split`, `unbind`, an LSTM's parts) is a
      list when captured, a tuple once loaded, and the importer types only the list;
    - a tensor value's `tensor_meta` is not saved, and the importer reads it (`.item()`'s
      `_local_scalar_dense` takes its operand's dtype from it).
    """
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    for node in program.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and "tensor_meta" not in node.meta:
            node.meta["tensor_meta"] = _extract_tensor_metadata(value)
        if node.op != "call_function" or not isinstance(value, tuple):
            continue
        returns = getattr(getattr(node.target, "_schema", None), "returns", ())
        if len(returns) == 1 and isinstance(returns[0].type, torch.ListType):
            node.meta["val"] = list(value)
    return program


@functools.cache
def _name_return_types() -> int:
    """Give torch's own structured results (`torch.return_types.max`, `sort`, `topk`, ...) the
    serialized name `torch.export.save` asks of a pytree node: torch registers them without
    one, so a program returning one did not save (51 of the suite's captures were made again
    after every torch-mlir rebuild). The name is the class's own, given before a capture is
    saved and before one is loaded, in whichever process. How many were named (0 when torch's
    registry has changed shape: such programs are then captured again)."""
    try:
        from torch.return_types import all_return_types
        from torch.utils import _pytree
    except ImportError:
        return 0
    named = 0
    for cls in all_return_types:
        entry = _pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
        if entry is None or entry.serialized_type_name != _pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
            continue
        name = f"{cls.__module__}.{cls.__name__}"
        if name in _pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE:
            continue
        _pytree.SUPPORTED_SERIALIZED_TYPES[cls] = entry._replace(serialized_type_name=name)
        _pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls
        named += 1
    return named


def _saved_without_inputs(program: ExportedProgram) -> bytes:
    """`torch.export.save` bytes of `program` without the example inputs it was exported
    with: torch.export.save writes them too, and nothing reads them back here (the test
    makes its own), so a capture of a 512 MiB input was 512 MiB on disk and on the pipe."""
    _name_return_types()
    inputs, program._example_inputs = program._example_inputs, None
    try:
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        return buffer.getvalue()
    finally:
        program._example_inputs = inputs


def specialized_values(program: ExportedProgram) -> list[str]:
    """The graph values with a symbolic dim torch.export later found to be a constant (a
    dynamic dim the program forces static): the importer types it `?` in the captured
    program and as the constant in a saved and loaded one."""
    found = []
    for node in program.graph.nodes:
        for value in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and any(
                isinstance(dim, torch.SymInt) and dim.node.maybe_as_int() is not None for dim in value.shape
            ):
                found.append(node.name)
                break
    return found


@dataclass
class FxImport:
    """`module.<method>` captured by torch.export and imported (raw torch dialect)."""

    raw_ir: str
    out_spec: Any  # pytree spec of the user outputs
    notes: list[str] = field(default_factory=list)  # capture fallbacks, dropped mutations
    # The captured (decomposed) ExportedProgram, to run natively; not sent between processes.
    exported: Any = None
    # Not set by the FX frontend: its program stays keyed by the dynamic dims asked for even
    # when torch.export fell back to static shapes (then other shapes fail at execute).
    static_fallback: bool = False

    def __getstate__(self) -> dict:
        return {**self.__dict__, "exported": None}

    @property
    def result_notes(self) -> list[str]:
        return self.notes

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        """@main takes the call's tensors, in order."""
        return [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]


def fx_import(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
) -> FxImport:
    """Stages capture -> import of `module.<method>`."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    captured = fx_capture(module, example_inputs, dynamic_dims, method=method, snapshots=snapshots)
    return fx_import_captured(captured, snapshots=snapshots)


def fx_capture(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
) -> FxCapture:
    """Stage capture of `module.<method>`: torch.export and torch-mlir's decompositions."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    notes: list[str] = []
    snapshots.enter("capture")
    return FxCapture(fx.capture(module, example_inputs, dynamic_dims, method, notes), notes)


class _Warm(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x @ x.t()).sum(0) + 1


@functools.cache
def warm_up_capture_imports() -> None:
    """What the first FX capture imports and builds before it traces anything (torch.export's
    tracer, which imports torch._dynamo; torch-mlir's decomposition table): two thirds of
    `warm_up_capture`, none of it work on the warm-up's own module."""
    import torch.export._trace  # noqa: F401 - imports torch._dynamo
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    get_decomposition_table()


@functools.cache
def warm_up_capture() -> None:
    """The first FX capture's one-time initialization alone (importing torch.export's
    tracer and torch._dynamo, the first export, the FX importer: ~1.5 s, most of a
    one-pair run's pair), what a spare host pays before its test is known; and the first
    `torch.export.save` (~35 ms of lazy initialization), which each host forked after would
    pay again for its first capture the frontend cache keeps."""
    captured = fx_capture(_Warm(), [torch.rand(3, 3)], [[-1, 3]])
    pickle.dumps(captured)  # before the import, as the cache does: the importer freezes the program
    fx_import_captured(captured)


@functools.cache
def warm_up() -> None:
    """Pay once per process, before any fork, for what every child would pay again.

    The first torch.export, decomposition table, FX import and pass pipelines of a
    process take ~1-3 s of lazy initialization; a child's warm-up dies with it. Run
    here, the children inherit it. With the second capture below, `decompose` has recorded
    torch's decomposition override, and a host forked after this replays it on its first
    capture (recording it took ~50 ms of a first capture, measured in one process).
    """
    warm_up_capture()
    torch_ir, _ = fx_to_torch_backend_ir(_Warm(), [torch.rand(3, 3)], [[-1, 3]])
    for backend in pipelines.BACKENDS:
        try:
            compile_torch_backend_ir(torch_ir, backend).close()
        except StageError:
            pass  # a backend that cannot lower the warm-up still warmed its passes


@dataclass(frozen=True)
class FxFrontend:
    """torch.export (with torch-mlir's decompositions), then torch-mlir's FxImporter."""

    name = "fx"
    imported_ir = "torch"
    keeps = KEEPS_CAPTURE
    # The modules a capture runs beyond the framework's: torch.export and the decompositions,
    # with torch-mlir's decomposition table (which a torch-mlir upgrade may change and a
    # rebuild of its native libraries does not). Not the importer: an edit to it keeps captures.
    capture_sources = (
        "compiler.frontends.fx",
        "compiler.frontends.decompose",
        "compiler.fx_compile",
        "torch_mlir.extras.fx_decomp_util",
    )
    reducer = ReducerFacts(repro_step="fx", torch_only_decompositions=True)

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        """Keeping `backend`'s legal ops whole, as upstream's FX configs do."""
        return pipelines.fx_to_torch_backend(pipelines.BACKEND_LEGAL_OPS.get(backend, ()))

    def missing(self) -> str | None:
        return None

    def given(self, module) -> None:
        return None

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> FxCapture:
        return fx_capture(module, inputs, dynamic_dims, method=method, snapshots=snapshots)

    def import_capture(self, captured: FxCapture, snapshots: Snapshots) -> FxImport:
        return fx_import_captured(captured, snapshots=snapshots)

    def torch_backend_ir(self, imported: FxImport, pipeline: pipelines.Pipeline, snapshots: Snapshots) -> str:
        return torch_backend_ir(imported.raw_ir, snapshots=snapshots, pipeline=pipeline)

    def producer(self, ir_name: str) -> str:
        """What made the IR an executor is given, for a verdict's words."""
        return f"torch -> {ir_name}"

    def warm_up(self) -> None:
        warm_up()

    def warm_up_capture(self) -> None:
        """The capture's one-time initialization alone (what a collection pays while it probes)."""
        warm_up_capture()

    def check(self, module, inputs, dynamic_dims) -> None:
        fx.import_program(fx.capture(module, inputs, dynamic_dims))


@dataclass(frozen=True)
class EagerFrontend(FxFrontend):
    """The eager config's: each op is imported alone with the FX importer, at its call's shapes."""

    name = "eager"
    reducer = ReducerFacts(repro_step="fx", dynamic_graph_search=False, torch_only_decompositions=True)

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        """Single ops: no legal ops kept whole."""
        return pipelines.FX_TO_TORCH_BACKEND


def fx_import_captured(captured: FxCapture, *, snapshots: Snapshots | None = None) -> FxImport:
    """Stage import of a capture (FxImporter; it freezes `captured.program` in place)."""
    snapshots = snapshots if snapshots is not None else Snapshots()
    program, notes = captured.program, list(captured.notes)
    snapshots.enter("import")
    raw = fx.import_program(program)
    if mutated := fx.mutated_inputs(program):
        notes.append(f"updated in place and not compared (as upstream): {', '.join(mutated)}")
    return FxImport(module_text(raw), program.call_spec.out_spec, notes, program)


def fx_to_torch_backend_ir(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    *,
    method: str = "forward",
    snapshots: Snapshots | None = None,
    backend_legal_ops: Sequence[str] = (),
) -> tuple[str, Any]:
    """capture -> import -> torch-backend of `module.<method>`.

    Returns (torch backend IR text, output pytree spec).
    """
    imported = fx_import(module, example_inputs, dynamic_dims, method=method, snapshots=snapshots)
    return torch_backend_ir(imported.raw_ir, backend_legal_ops, snapshots=snapshots), imported.out_spec


@dataclass
class CompiledModule:
    """A module compiled for one backend: callable like the module, with every stage's IR."""

    backend: str
    program: RefBackendProgram
    out_spec: Any
    snapshots: Snapshots = field(default_factory=Snapshots)

    def __call__(self, *inputs: Any) -> Any:
        tensors = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]
        flat = self.program(*tensors)
        return pytree.tree_unflatten(flat, self.out_spec) if self.out_spec is not None else flat

    def close(self) -> None:
        self.program.close()


def compile_module(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    backend: str = "linalg",
    *,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    opt_level: int | None = None,
) -> CompiledModule:
    """Compile `module.forward` for `backend` ("linalg", "tosa" or "stablehlo")."""
    snapshots = Snapshots()
    torch_ir, out_spec = fx_to_torch_backend_ir(
        module,
        example_inputs,
        dynamic_dims,
        snapshots=snapshots,
        backend_legal_ops=pipelines.BACKEND_LEGAL_OPS.get(backend, ()),
    )
    program = compile_torch_backend_ir(torch_ir, backend, snapshots=snapshots, opt_level=opt_level)
    return CompiledModule(backend, program, out_spec, snapshots)

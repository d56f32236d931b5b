"""Frontends: ways to capture a PyTorch program and import it into the torch dialect.

    frontend = load_frontend("fx")
    frontend.to_torch_backend("linalg")     # imported IR -> the torch backend contract
    frontend.imported_ir                    # "torch" (raw torch IR) or "onnx" (torch-onnx IR)

A frontend is an object that owns what differs between frontends, so no caller branches
on its name (as `compiler.executors` does for executors):

- `to_torch_backend(backend)`: the pipeline from its imported IR to the torch backend
  contract (the FX frontend keeps the backend's legal ops whole);
- `imported_ir`: what its import gives, which an executor that takes raw input is handed
  as it is (`torch@iree`: raw torch IR; `onnx@iree`: torch-onnx IR);
- `capture(...)` and `import_capture(...)`: stages `capture` and `import` of one call,
  the import an `Imported` (its IR, how to call it, its notes and typed facts);
  `keeps`: what the suite's frontend cache keeps of it across runs;
- `producer(ir_name)`: what made its IR, in a runtime verdict's words;
- `warm_up()`: its first capture and import in a process, paid before test hosts fork;
- `reducer` (`ReducerFacts`) and `check(...)`: what the reducer needs of it.

Each frontend is one module of this package, its capture's: fx.py (`FxFrontend`), eager.py
(`EagerFrontend`), lazy.py (`LtcFrontend`), torchscript.py (`TorchScriptFrontend`), onnx.py
(`OnnxFrontend`), dynamo.py (`DynamoFrontend`); `base.BaseFrontend` holds what they share. They are
registered by name in `FRONTENDS` (module:attribute, imported when used) or by an installed
package's `e2e_conformance.frontends` entry point: a new frontend is its module and its line
there (and its config's registration, `e2e.configs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence, runtime_checkable

from compiler.registered import registered_class

# frontend name -> module:attribute of its class (imported only when used)
FRONTENDS: dict[str, str] = {
    "fx": "compiler.frontends.fx:FxFrontend",
    "eager": "compiler.frontends.eager:EagerFrontend",
    "ltc": "compiler.frontends.lazy:LtcFrontend",
    "torchscript": "compiler.frontends.torchscript:TorchScriptFrontend",
    "onnx": "compiler.frontends.onnx:OnnxFrontend",
    "dynamo": "compiler.frontends.dynamo:DynamoFrontend",
}
ENTRY_POINTS = "e2e_conformance.frontends"

# `Frontend.keeps`: what the frontend cache keeps of a capture across runs.
# A frontend that keeps its capture names `capture_sources`: the modules its capture runs
# beyond the framework's (the frontend cache's key covers their files).
KEEPS_CAPTURE = "capture"  # the capture (it pickles): a torch-mlir rebuild imports it again
KEEPS_IMPORT = "import"  # the imported IR (the capture is a graph of live objects)


@dataclass(frozen=True)
class ReducerFacts:
    """What the reducer needs to know of a frontend (`e2e.reducer`)."""

    # How a reproducer runs its capture and import (`replay_runtime.frontend_step`: "fx",
    # "ltc", "onnx"); None: its capture and import failures are not reduced.
    repro_step: str | None = None
    device: str | None = None  # the device a candidate graph is moved to before `check` ("lazy")
    fx_graph_search: bool = True  # wrong results: searched over the module's FX graph
    dynamic_graph_search: bool = True  # ... with the test's dynamic dims first (else the example shapes only)
    onnx_graph_search: bool = False  # wrong results: searched over the exported ONNX model
    jit_graph_search: bool = False  # wrong results the FX search missed: searched over the TorchScript graph
    torch_only_decompositions: bool = False  # a decompositions failure: searched for torch's own table
    # What the reproducer's frontend step runs, in its README's words (with `repro_step`).
    repro_step_words: str = ""


class StaticShapesOnly(ValueError):
    """Dynamic dims were asked for, but the capture records static shapes (LTC, torch.jit.trace)."""


class NotCapturable(ValueError):
    """The test, as written, is outside what the frontend captures (not a failure): the
    message says why, and the pair is reported not applicable."""


@runtime_checkable
class Imported(Protocol):
    """One call's program as a frontend imported it."""

    raw_ir: str  # the imported module (`@main`)
    out_spec: Any  # pytree spec of the outputs; None: the golden outputs' structure
    result_notes: list[str]  # for the pair's Result
    # The program takes only the call's shapes although dynamic dims were asked for (a
    # capture that fell back to static shapes, or traced them).
    static_fallback: bool

    def arguments(self, inputs: Sequence[object]) -> list[Any]:
        """The tensors @main takes, from a call's inputs (a `StageError` where it takes others)."""


@runtime_checkable
class Frontend(Protocol):
    name: str
    imported_ir: str  # "torch" or "onnx"
    imported_ir_words: str  # that IR in a verdict's words ("raw torch", "raw torch-onnx")
    # The pass that converts its imported IR to the torch dialect, where that IR is its own
    # (a runtime taking it runs its own copy of the conversion); None: it imports torch IR.
    raw_conversion: str | None
    keeps: str | None  # KEEPS_CAPTURE (naming `capture_sources`), KEEPS_IMPORT, or None: shared within a run only
    reducer: ReducerFacts

    def to_torch_backend(self, backend: str) -> tuple[str, ...]:
        """Imported IR -> the torch backend contract, for `backend`."""

    def missing(self) -> str | None:
        """None when usable; else what to run to install what it needs."""

    def given(self, module: Any) -> Any:
        """A capture the test carries (an ONNX model), compiled as it is; else None."""

    def capture(self, module: Any, inputs: Sequence[object], dynamic_dims: Any, method: str, snapshots: Any) -> Any:
        """Stage `capture` of `module.<method>` called with `inputs` (raises `StageError`)."""

    def import_capture(self, captured: Any, snapshots: Any) -> Imported:
        """Stage `import` of a capture (raises `StageError`)."""

    def torch_backend_ir(self, imported: Imported, pipeline: tuple[str, ...], snapshots: Any) -> str:
        """Stage `torch-backend` of an import, by `pipeline` (`to_torch_backend`)."""

    def producer(self, ir_name: str) -> str:
        """What made the IR `ir_name` an executor is given (a runtime verdict's words)."""

    def warm_up(self) -> None:
        """Its first capture and import in this process (seconds), before test hosts fork."""

    def warm_up_capture(self) -> None:
        """Its capture's one-time initialization alone, paid while a collection probes (the
        FX capture's; nothing for the other frontends)."""

    def check(self, module: Any, inputs: Sequence[object], dynamic_dims: Any) -> None:
        """Capture and import a reducer's candidate module (raises what the frontend raises)."""


def frontend_class(name: str) -> type:
    """The class registered as frontend `name` (built in, or an installed entry point)."""
    return registered_class("frontend", FRONTENDS, ENTRY_POINTS, name)


def load_frontend(name: str) -> Frontend:
    """Frontend `name`."""
    return frontend_class(name)()

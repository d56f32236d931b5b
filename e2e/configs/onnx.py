"""The `onnx` config: torch.onnx.export -> torch-mlir's ONNX importer ->
convert-torch-onnx-to-torch + torch backend -> linalg -> RefBackend.

Stages: `capture` (the ONNX export; the result notes its opset), `import` (the ONNX
importer; the model is kept as `model.onnx` beside the saved IR), `torch-backend`,
`backend`, `lower`, `execute`, `compare`; with backend TORCH_INPUT (`onnx@iree`) the
imported torch-onnx IR goes to the executor as it is, so `lower` follows `import`. A test's `-1` dims are exported as dynamic
dims (`Dim.AUTO`); one program per method then takes every call, else one per call shape.

A test whose module carries an ONNX model (`onnx_model`, bytes: the ONNX backend suite,
`e2e/onnx_backend/`) is compiled from that model as it is. Where onnxruntime is
installed, a pair that fails to run or compares wrong gets the third oracle's note
(`onnx_oracle.py`). Without the onnx packages every pair is skipped with the install line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from compiler.backend_compile import compile_backend_ir
from compiler.frontends.onnx import INSTALL_LINE, missing_packages
from compiler.onnx_compile import onnx_export, onnx_import, onnx_torch_backend_ir
from compiler.stages import Snapshots, StageError
from compiler.toolchain import TORCH_INPUT, Toolchain, toolchain
from e2e.configs import onnx_oracle
from e2e.configs.fx import Compiled, installed_executor, run_programs, tensor_leaves
from e2e.framework.judge import Explainer, Explanation, Outcome
from e2e.framework.registry import Tolerance
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace, TraceItem, call_key


@dataclass
class OnnxCompiled(Compiled):
    models: dict[tuple[str, Any], bytes] = field(default_factory=dict)  # the ONNX model of each program
    tolerance: Tolerance | None = None

    def model_for(self, item: TraceItem) -> tuple[bytes, Any]:
        key = (item.method, None) if (item.method, None) in self.models else (item.method, call_key(item.inputs))
        return self.models[key], self.programs[key][1]


@dataclass(frozen=True)
class OnnxConfig:
    name: str = "onnx"
    backend: str = "linalg"  # or TORCH_INPUT: the executor is handed the imported torch-onnx IR
    executor: str = "refbackend"  # a key of compiler.executors.EXECUTORS
    # What this config compiles: torch modules (exported) and ONNX models (the ONNX backend suite).
    model_formats: tuple[str, ...] = ("torch", "onnx")

    def toolchain(self) -> Toolchain:
        """Frontend and per-stage pipelines, for replaying this config's failures."""
        return toolchain("onnx", self.backend, self.executor)

    def warm_up(self) -> None:
        """The exporter's and importer's first call in a process (seconds), before hosts fork."""
        if not missing_packages():
            model = onnx_export(_Warm(), [torch.rand(3, 4)], [[-1, 4]])
            onnx_torch_backend_ir(onnx_import(model).raw_ir)

    def host_paid_warm_up(self, result) -> bool:
        """A capture the frontend cache did not have ran the exporter in the host."""
        return "capture" in (result.stage_seconds or {})

    def compile(self, prepared, snapshots: Snapshots) -> OnnxCompiled:
        if missing := missing_packages():
            raise NotApplicable(f"the {self.name} config needs {', '.join(missing)}: {INSTALL_LINE}")
        chain = self.toolchain()
        installed_executor(chain)
        given = getattr(prepared.module, "onnx_model", None)
        compiled = OnnxCompiled({}, tolerance=prepared.test.tolerance)
        for item in prepared.golden:
            shapes = None if given is not None else prepared.arg_shapes(item.method)
            dynamic = given is not None or (bool(shapes) and any(s and -1 in s for s in shapes))
            key = (item.method, None if dynamic else call_key(item.inputs))
            if key in compiled.programs:
                continue
            model, notes = given, []
            if model is None:  # one export per test, whichever ONNX config asks first
                model, notes = prepared.share(("onnx-export", *key), lambda: _export(prepared, item, shapes, snapshots))
                if any(note.startswith("capture fallback") for note in notes):  # exported static: this shape only
                    key = (item.method, call_key(item.inputs))
            compiled.notes.extend(note for note in notes if note not in compiled.notes)
            imported = onnx_import(model, snapshots=snapshots)
            arguments = len(tensor_leaves(item.inputs))
            if len(imported.input_names) != arguments:
                raise StageError(
                    "capture" if given is None else "import",
                    f"the ONNX model takes {len(imported.input_names)} inputs, the call passes {arguments} tensors",
                )
            if chain.backend == TORCH_INPUT:
                torch_ir = imported.raw_ir
            else:
                torch_ir = onnx_torch_backend_ir(imported.raw_ir, snapshots=snapshots)
            program = compile_backend_ir(torch_ir, chain, snapshots=snapshots)
            compiled.programs[key] = (program, pytree.tree_flatten(item.outputs)[1])
            compiled.models[key] = model
        return compiled

    def run(self, compiled: OnnxCompiled, golden: Trace) -> Trace:
        return run_programs(compiled, golden)

    def explainers(self) -> tuple[Explainer, ...]:
        return (OnnxOracle(),)


class OnnxOracle:
    """The explainer (`e2e.framework.judge`) of a program that failed to run or compared
    wrong: what onnxruntime computes on the same model."""

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        ran_wrong = outcome.mismatch is not None
        if not (ran_wrong or outcome.stage == "execute") or outcome.artifact is None:
            return None
        tensors = lambda item: tensor_leaves(item.inputs)  # noqa: E731
        notes = onnx_oracle.oracle_notes(
            outcome.artifact.model_for, tensors, prepared.golden, outcome.trace, prepared.test.tolerance
        )
        return Explanation(notes)


def _export(prepared, item: TraceItem, shapes, snapshots: Snapshots) -> tuple[bytes, list[str]]:
    notes: list[str] = []
    model = onnx_export(prepared.module, item.inputs, shapes, method=item.method, snapshots=snapshots, notes=notes)
    return model, notes


class _Warm(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x @ x.t()).sum(0) + 1


CONFIG = OnnxConfig()

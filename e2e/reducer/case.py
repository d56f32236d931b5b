"""A failure case: what a reproducer replays, and how to tell whether the bug is there.

A case is data (`case.json` in a bundle): the kind of failure, the stage, the pipeline
to run on the module, and the signature to expect. Pipeline entries are MLIR pass
entries (`func.func(canonicalize)`) or Python passes, `python:<module>:<function>`, a
function taking an `ir.Module` (how tests emulate broken compilers, and how the
reference backend's bf16 boundary rewrite is named). `observe` replays a case on one
module text and returns the signature it shows, or None when the module compiles
(and, for mismatches, computes the expected values).
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from compiler.pipelines import as_text
from compiler.stages import StageError, expand_pipeline, format_diagnostics, new_context, parse_module
from e2e.framework import isolation
from e2e.framework.signature import Signature, crash_signature, ended_signature, mismatch_signature, stage_signature

ERROR, CRASH, MISMATCH = "error", "crash", "mismatch"
PYTHON_PASS = "python:"
RUNTIME_PASS = "python:compiler.executors.replay:"  # a runtime's replay entry ends the pipeline
# module name -> namespace of a Python pass module that a standalone repro.py carries inline
INLINED: dict[str, dict] = {}


@dataclass
class Case:
    kind: str  # error | crash | mismatch
    stage: str
    pipeline: list[str]  # what runs on the module (the failing pass alone, once localized)
    signature: str
    guilty_op: str | None = None
    # mismatch cases: how results are compared (inputs.npz / expected.npz hold the values)
    result_dtypes: list[str] = field(default_factory=list)
    tolerance: tuple[float, float] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Case":
        data = json.loads(text)
        if data.get("tolerance") is not None:
            data["tolerance"] = tuple(data["tolerance"])
        return cls(**data)


def python_pass(entry: str) -> Callable:
    module_name, _, function = entry[len(PYTHON_PASS) :].partition(":")
    if module_name in INLINED:
        return INLINED[module_name][function]
    return getattr(importlib.import_module(module_name), function)


def expand(pipeline: Sequence[str], context) -> list[str]:
    """One entry per pass: MLIR pipelines expanded by the pass manager, Python passes kept."""
    passes: list[str] = []
    run: list[str] = []
    for entry in list(pipeline) + [None]:
        if entry is None or entry.startswith(PYTHON_PASS):
            if run:
                passes.extend(expand_pipeline(run, context))
                run = []
            if entry is not None:
                passes.append(entry)
        else:
            run.append(entry)
    return passes


def run_entries(module, pipeline: Sequence[str]) -> None:
    """Run a pipeline with Python passes in place; raises ir.MLIRError (or anything) on failure."""
    from torch_mlir import passmanager

    run: list[str] = []
    for entry in list(pipeline) + [None]:
        if entry is None or entry.startswith(PYTHON_PASS):
            if run:
                with module.context:
                    passmanager.PassManager.parse(as_text(run)).run(module.operation)
                run = []
            if entry is not None:
                with module.context:
                    python_pass(entry)(module)
        else:
            run.append(entry)


def compile_signature(
    text: str, stage: str, pipeline: Sequence[str], blame: str | None
) -> tuple[str | None, list[str]]:
    """Run `pipeline` on `text` in this process: (signature, diagnostics), signature None when it passes."""
    from torch_mlir import ir

    try:
        module = parse_module(text, new_context())
        module.operation.verify()
    except Exception as error:  # not a valid candidate: a different "bug"
        return Signature("invalid", type(error).__name__).format(), []
    try:
        if len(pipeline) > 1:  # the passes before the blamed one must not fail
            try:
                run_entries(module, pipeline[:-1])
            except Exception as error:
                return Signature(stage, f"before {blame}", type(error).__name__).format(), []
        run_entries(module, pipeline[-1:])
    except ir.MLIRError as error:
        diagnostics = format_diagnostics(error)
        return stage_signature(stage, diagnostics[0], blame), diagnostics
    except StageError as error:  # a runtime's replay pass (compiler.executors.replay), as the pair reported it
        return stage_signature(stage, error.message, blame), [error.message, *error.diagnostics]
    except Exception as error:  # a Python pass refusing the module
        message = f"{type(error).__name__}: {error}"
        return stage_signature(stage, message, blame), [message]
    return None, []


def observe(
    case: Case,
    text: str,
    bundle_dir: Path | None = None,
    *,
    isolate: bool | None = None,
    report: Callable[[str], None] | None = None,
    timeout: float = 60,
) -> str | None:
    """The signature `case`'s pipeline shows on `text` (None: no failure); `report` gets the details.

    Crash cases run in a forked child, killed after `timeout` seconds.
    """
    blame = case.pipeline[-1]
    if case.kind == MISMATCH:
        return _observe_mismatch(case, text, bundle_dir, report)
    isolate = case.kind == CRASH if isolate is None else isolate
    if not isolate:
        signature, diagnostics = compile_signature(text, case.stage, case.pipeline, blame)
        if report and diagnostics:
            report("\n".join(diagnostics[:8]))
        return signature

    def child():
        single_threaded()
        return compile_signature(text, case.stage, case.pipeline, blame)[0]

    outcome = isolation.run_forked(child, timeout=timeout)
    if isinstance(outcome, isolation.Crashed):
        return crash_signature(case.stage, outcome.stderr_tail, outcome.reason)
    if isinstance(outcome, isolation.TimedOut):
        return ended_signature("timeout", case.stage)
    if isinstance(outcome, isolation.Raised):
        return ended_signature("framework", case.stage)
    return outcome


def single_threaded() -> None:
    """Call first thing in a forked child: one thread for torch and OpenMP.

    A child forked from a process whose OpenMP pool ran hangs in a barrier at its first
    parallel region; with one thread no region is parallel. The environment is for the
    processes the child starts (repro.py re-verification).
    """
    import torch

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"
    torch.set_num_threads(1)


def load_arrays(path: Path) -> list:
    import numpy as np

    with np.load(path) as data:
        return [data[f"arg{i}"] for i in range(len(data.files))]


def arity(text: str) -> int:
    """How many arguments @main takes (a mismatch candidate must keep its inputs)."""
    from torch_mlir import ir

    module = parse_module(text, new_context())
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return len(op.regions[0].blocks[0].arguments)
    return -1


def _observe_mismatch(case: Case, text: str, bundle_dir: Path | None, report=None) -> str | None:
    """Compile and run the module on inputs.npz; compare with expected.npz."""
    import torch

    from compiler.refbackend import RefBackendProgram
    from e2e.framework.compare import compare_tensors
    from e2e.framework.registry import Tolerance

    assert bundle_dir is not None, "a mismatch case needs its inputs.npz and expected.npz"
    signature, _ = compile_signature(text, "lower", [], None)
    if signature is not None:
        return signature
    module = parse_module(text, new_context())
    dtypes = [getattr(torch, name) for name in case.result_dtypes]
    runtime = case.pipeline[-1] if case.pipeline[-1].startswith(RUNTIME_PASS) else None
    try:
        run_entries(module, case.pipeline[:-1] if runtime else case.pipeline)
        if runtime:  # a runtime config's case: compiled and run on that runtime (needs this project installed)
            program = importlib.import_module("compiler.executors.replay").compile_for(runtime, module, dtypes)
    except Exception as error:
        return stage_signature("lower", f"{type(error).__name__}: {error}")
    if not runtime:
        program = RefBackendProgram(module, dtypes)
    inputs = [torch.from_numpy(a) for a in load_arrays(bundle_dir / "inputs.npz")]
    expected = [torch.from_numpy(a) for a in load_arrays(bundle_dir / "expected.npz")]
    if arity(text) != len(inputs):
        return Signature("invalid", f"@main does not take the {len(inputs)} inputs").format()
    actual = program(*inputs)
    program.close()
    tolerance = Tolerance(*case.tolerance) if case.tolerance else None
    for i, (g, a) in enumerate(zip(expected, actual)):
        mismatch = compare_tensors(g, a, f"output {i}", tolerance)
        if mismatch is not None:
            if report:
                report(str(mismatch))
            return mismatch_signature(mismatch.kind)
    return None

"""A failure case, and replaying it: what a bundle's `repro.py` runs.

A case is data (`case.json` in a bundle): the kind of failure, the stage, the pipeline
to run on the module, and the signature to expect. `observe` replays a case on one
module text in this process and returns the signature it shows, or None when the
module compiles (and, for mismatches, computes the expected values). `main` replays a
bundle's `repro.mlir` and says whether the bug is still there.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

# The MLIR bindings (and torch) are imported by the functions that replay: a crash case's
# first process only starts the child that replays it (`_main_crash`) and reads its death,
# so it leaves them out (~0.3 s of a bundle's verification).
from .signature import Signature, crash_signature, mismatch_signature, process_ending, stage_signature

ERROR, CRASH, MISMATCH, HANG = "error", "crash", "mismatch", "hang"
RUNTIME_PASS = "python:compiler.executors.replay:"  # a runtime's replay entry ends the pipeline
# Set for the child process a crash case is replayed in (`main`), which replays it in itself.
CRASH_CHILD = "E2E_REPLAY_CRASH_CHILD"


@dataclass
class Case:
    kind: str  # error | crash | mismatch | hang
    stage: str
    pipeline: list[str]  # what runs on the module (the failing pass alone, once localized)
    signature: Signature
    guilty_op: str | None = None
    # mismatch cases: how results are compared (inputs.npz / expected.npz hold the values)
    result_dtypes: list[str] = field(default_factory=list)
    tolerance: tuple[float, float] | None = None
    # hang cases: a replay that gives no result in this many seconds shows the bug
    hang_seconds: float | None = None

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "signature": self.signature.format()}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Case":
        data = json.loads(text)
        data["signature"] = Signature.parse(data["signature"])
        if data.get("tolerance") is not None:
            data["tolerance"] = tuple(data["tolerance"])
        return cls(**data)


def compile_signature(
    text: str, stage: str, pipeline: Sequence[str], blame: str | None
) -> tuple[Signature | None, list[str]]:
    """Run `pipeline` on `text` in this process: (signature, diagnostics), signature None when it passes."""
    from torch_mlir import ir

    from .mlir import StageError, format_diagnostics, new_context, parse_module
    from .pipeline import run_entries

    try:
        module = parse_module(text, new_context())
        module.operation.verify()
    except Exception as error:  # not a valid candidate: a different "bug"
        return Signature("invalid", type(error).__name__), []
    try:
        if len(pipeline) > 1:  # the passes before the blamed one must not fail
            try:
                run_entries(module, pipeline[:-1])
            except Exception as error:
                return Signature(stage, f"before {blame}", type(error).__name__), []
        run_entries(module, pipeline[-1:])
    except ir.MLIRError as error:
        diagnostics = format_diagnostics(error)
        return stage_signature(stage, diagnostics[0], blame), diagnostics
    except Exception as error:
        # A runtime's replay pass (compiler.executors.replay) fails as the pair reported it, with
        # the installed project's StageError: another class than this copy's in a bundle.
        if isinstance(error, StageError) or type(error).__name__ == StageError.__name__:
            return stage_signature(stage, error.message, blame), [error.message, *error.diagnostics]
        message = f"{type(error).__name__}: {error}"  # a Python pass refusing the module
        return stage_signature(stage, message, blame), [message]
    return None, []


def observe(
    case: Case, text: str, bundle_dir: Path | None = None, report: Callable[[str], None] | None = None
) -> Signature | None:
    """The signature `case`'s pipeline shows on `text` in this process (None: no failure).

    `report` gets the details. A crash takes this process down.
    """
    if case.kind == MISMATCH:
        return _observe_mismatch(case, text, bundle_dir, report)
    signature, diagnostics = compile_signature(text, case.stage, case.pipeline, case.pipeline[-1])
    if report and diagnostics:
        report("\n".join(diagnostics[:8]))
    return signature


def load_arrays(path: Path) -> list:
    import numpy as np

    with np.load(path) as data:
        return [data[f"arg{i}"] for i in range(len(data.files))]


def argument_elements(module) -> list[str]:
    """The element type of each @main argument (`bf16` of `tensor<3xbf16>` and of
    `!torch.vtensor<[3],bf16>`; "" for a non-tensor)."""
    from torch_mlir import ir

    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            types = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).inputs
            return [
                str(t.element_type) if isinstance(t, ir.ShapedType) else str(t).rpartition(",")[2].rstrip(">")
                for t in types
            ]
    return []


def arity(text: str) -> int:
    """How many arguments @main takes (a mismatch candidate must keep its inputs)."""
    from torch_mlir import ir

    from .mlir import new_context, parse_module

    module = parse_module(text, new_context())
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return len(op.regions[0].blocks[0].arguments)
    return -1


def _observe_mismatch(case: Case, text: str, bundle_dir: Path | None, report=None) -> Signature | None:
    """Compile and run the module on inputs.npz; compare with expected.npz."""
    import torch

    from .compare import Tolerance, compare_tensors
    from .engine import ELEMENT_DTYPES, RefBackendProgram, from_storage_array
    from .mlir import new_context, parse_module
    from .pipeline import run_entries

    assert bundle_dir is not None, "a mismatch case needs its inputs.npz and expected.npz"
    signature, _ = compile_signature(text, "lower", [], None)
    if signature is not None:
        return signature
    module = parse_module(text, new_context())
    elements = argument_elements(module)
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
    # numpy has no bfloat16 or float8: the arrays hold their bits (`to_storage_array`).
    arrays = load_arrays(bundle_dir / "inputs.npz")
    inputs = [
        from_storage_array(a, ELEMENT_DTYPES.get(elements[i]) if i < len(elements) else None)
        for i, a in enumerate(arrays)
    ]
    arrays = load_arrays(bundle_dir / "expected.npz")
    expected = [from_storage_array(a, dtypes[i] if i < len(dtypes) else None) for i, a in enumerate(arrays)]
    if arity(text) != len(inputs):
        return Signature("invalid", f"@main does not take the {len(inputs)} inputs")
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


def strip_reproducer_resource(text: str) -> str:
    return re.sub(r"  external_resources: \{\n    mlir_reproducer: \{.*?\n    \}\n  \},?\n", "", text, flags=re.S)


def replay(bundle_dir: Path, case: Case, *, report=None) -> Signature | None:
    """The signature the bundle's repro.mlir shows now under `case`."""
    from .pipeline import load_pass_modules

    load_pass_modules(bundle_dir, case.pipeline)
    text = strip_reproducer_resource((bundle_dir / "repro.mlir").read_text())
    return observe(case, text, bundle_dir, report=report)


# What a replay prints when the bug is there (and exits 1): an exception in the replay
# exits 1 too, without it.
REPRODUCED = "REPRODUCED"  # also what the torch-only scripts of frontend failures print
HANG_ARMED = "a hang: REPRODUCED if this process ends by SIGALRM"  # then the alarm is the verdict


def main(bundle_dir: Path) -> int:
    """Exit status: 1 the bug is there, 0 it is gone, 2 a different failure.

    A crash is replayed in a child process, whose death is compared with the case's
    signature as the suite words it. A hang shows as this process ending by SIGALRM after
    the case's `hang_seconds`."""
    case = Case.from_json((bundle_dir / "case.json").read_text())
    if case.kind == CRASH and not os.environ.get(CRASH_CHILD):
        return _main_crash(bundle_dir, case)
    if case.kind == CRASH:
        from .crash import report_native_crashes

        report_native_crashes(frames=case.stage != "execute")  # as the reducer signed it
    if case.kind == HANG and case.hang_seconds:
        import math
        import signal

        print(f"{HANG_ARMED} in {case.hang_seconds:.0f} s", flush=True)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(math.ceil(case.hang_seconds))
    observed = replay(bundle_dir, case, report=print)
    if case.signature.shows(observed):
        print(f"{REPRODUCED}: {observed}")
        return 1
    if observed is None:
        print(f"not reproduced: the module compiles (and computes the expected values); was: {case.signature}")
        return 0
    print(f"different failure: {observed}\nexpected: {case.signature}")
    return 2


def _main_crash(bundle_dir: Path, case: Case) -> int:
    """repro.py again in a child (faulthandler on, as in the suite's processes, so a fatal
    signal is worded the same): 1 when it dies with the case's signature."""
    done = subprocess.run(
        [sys.executable, "-I", "-X", "faulthandler", str(bundle_dir / "repro.py")],
        env={**os.environ, CRASH_CHILD: "1"},
        capture_output=True,
        text=True,
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode in (0, 2):  # no crash: the module runs, or fails another way
        return done.returncode
    ending = process_ending(done.returncode)
    observed = crash_signature(case.stage, done.stderr, ending)
    if case.signature.shows(observed):
        print(f"{REPRODUCED}: {observed} (the replay's process was {ending})")
        return 1
    print(f"different failure: {observed} (the replay's process was {ending})\nexpected: {case.signature}")
    return 2

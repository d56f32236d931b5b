"""Run one test on one config: golden trace, isolated compile and run, compare, Result.

The parent process computes each test's golden trace once (`PreparedTest`) and keeps
what configs share (the torch-backend IR of the FX frontend) in `PreparedTest.shared`.
Compiling and running happen in a forked child (`isolation.run_forked`): a crash or a
hang ends as that pair's `crash` / `timeout` Result, and the child's exit frees its
ExecutionEngines. The IR of every stage is written to a scratch directory as the child
goes, and kept under `reports/ir/<test>/<config>/` when the pair fails.
"""

from __future__ import annotations

import functools
import shutil
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from compiler.stages import Snapshots, StageError, write_atomic
from e2e.framework import isolation
from e2e.framework.compare import compare_traces
from e2e.framework.registry import Test
from e2e.framework.result import CRASH, ERROR, FAIL, PASS, SKIP, TIMEOUT, NotApplicable, Result
from e2e.framework.trace import Trace, golden_trace
from e2e.reducer.signature import mismatch_signature, normalize, stage_signature


@dataclass
class PreparedTest:
    """What every config of one test starts from, computed once per process."""

    test: Test
    module: torch.nn.Module | None = None  # pristine instance the configs compile
    golden: Trace = field(default_factory=list)
    golden_error: str | None = None
    shared: dict[Any, Any] = field(default_factory=dict)  # config-shared frontend results
    new_shared: dict[Any, Any] = field(default_factory=dict)  # filled in a child, sent back
    shape_mode: str = "annotated"  # one of result.SHAPE_MODES

    def share(self, key: Any, compute: Callable[[], Any]) -> Any:
        """`compute()` once per test and process; StageErrors are shared too."""
        if key not in self.shared:
            try:
                self.shared[key] = compute()
            except StageError as error:
                self.shared[key] = error
            self.new_shared[key] = self.shared[key]
        value = self.shared[key]
        if isinstance(value, StageError):
            raise value
        return value

    def first_call(self, method: str) -> list[Any]:
        return next(item.inputs for item in self.golden if item.method == method)

    def methods(self) -> list[str]:
        return list(dict.fromkeys(item.method for item in self.golden))

    def arg_shapes(self, method: str) -> list[list[int] | None] | None:
        """The argument shapes to compile for (-1 = dynamic); None: the example inputs' shapes."""
        if self.shape_mode == "static":
            return None
        return self.test.arg_shapes(self.module, method)


def prepare(test: Test) -> PreparedTest:
    prepared = PreparedTest(test)
    try:
        prepared.module = test.module_factory()
        prepared.golden = golden_trace(test, prepared.module)
        if not prepared.golden:
            prepared.golden_error = "the invoker made no call on the module"
    except Exception:
        prepared.golden_error = "the test failed on native torch:\n" + traceback.format_exc(limit=-4)
    return prepared


class PreparedCache:
    """A few recently prepared tests (configs of one test run next to each other)."""

    def __init__(self, size: int = 4):
        self.size = size
        self._entries: OrderedDict[str, PreparedTest] = OrderedDict()

    def get(self, test: Test) -> PreparedTest:
        if test.name not in self._entries:
            self._entries[test.name] = prepare(test)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        self._entries.move_to_end(test.name)
        return self._entries[test.name]


@functools.cache
def warm_up() -> None:
    """Pay once per process, before any fork, for what every child would pay again.

    The first torch.export, decomposition table, FX import and pass pipelines of a
    process take ~1-3 s of lazy initialization; a child's warm-up dies with it. Run
    here, the children inherit it.
    """
    from compiler import compile_torch_backend_ir, fx_to_torch_backend_ir
    from compiler.pipelines import BACKENDS

    class Warm(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x @ x.t()).sum(0) + 1

    torch_ir, _ = fx_to_torch_backend_ir(Warm(), [torch.rand(3, 3)], [[-1, 3]])
    for backend in BACKENDS:
        try:
            compile_torch_backend_ir(torch_ir, backend).close()
        except StageError:
            pass  # a backend that cannot lower the warm-up still warmed its passes


def _compile_and_run(config, prepared: PreparedTest, snapshots: Snapshots) -> tuple[Result, dict]:
    """In the child: compile, run, compare. Returns the Result and newly shared values."""
    test = prepared.test
    notes: list[str] = []
    try:
        artifact = config.compile(prepared, snapshots)
        notes.extend(getattr(artifact, "notes", ()))
        snapshots.enter("execute")
        trace = config.run(artifact, prepared.golden)
    except NotApplicable as error:
        stage = snapshots.current or "capture"
        return Result(test.name, config.name, SKIP, stage=stage, error=str(error), notes=notes), prepared.new_shared
    except StageError as error:
        result = Result(
            test.name,
            config.name,
            FAIL,
            stage=error.stage,
            signature=stage_signature(error.stage, error.message, error.failing_pass),
            error=_stage_error_text(error),
            failing_pass=error.failing_pass,
            notes=notes,
        )
        if error.input_ir and snapshots.directory is not None:
            name = "failing-pass-input.mlir" if error.failing_pass else f"{error.stage}-input.mlir"
            write_atomic(snapshots.directory / name, error.input_ir)
            result.ir_path = str(snapshots.directory / name)
        return result, prepared.new_shared
    except Exception as error:
        stage = snapshots.current or "capture"
        result = Result(
            test.name,
            config.name,
            FAIL,
            stage=stage,
            signature=stage_signature(stage, f"{type(error).__name__}: {error}"),
            error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-6)}",
            notes=notes,
        )
        return result, prepared.new_shared
    snapshots.enter("compare")
    mismatch = compare_traces(prepared.golden, trace, test.tolerance)
    if mismatch is None:
        return Result(test.name, config.name, PASS, notes=notes), prepared.new_shared
    return (
        Result(
            test.name,
            config.name,
            FAIL,
            stage="compare",
            signature=mismatch_signature(mismatch.kind),
            error=str(mismatch),
            notes=notes,
        ),
        prepared.new_shared,
    )


def _stage_error_text(error: StageError) -> str:
    lines = [error.message]
    if error.failing_pass:
        lines.append(f"failing pass: {error.failing_pass}")
    lines.extend(error.diagnostics[1:8])
    return "\n".join(lines)


def run_pair(
    prepared: PreparedTest,
    config,
    *,
    reports_dir: Path,
    timeout: float,
    isolate: bool = True,
) -> Result:
    """One (test, config) pair, end to end, never raising for a compiler failure."""
    test = prepared.test
    start = time.monotonic()
    if prepared.golden_error is not None:
        return Result(
            test.name,
            config.name,
            ERROR,
            stage="golden",
            signature="golden | broken test",
            error=f"{prepared.golden_error}\n(defined at {test.source})",
        )
    ir_dir = reports_dir / "ir" / test.name / config.name
    shutil.rmtree(ir_dir, ignore_errors=True)
    snapshots = Snapshots(ir_dir)

    def child() -> tuple[Result, dict]:
        torch.set_num_threads(1)
        return _compile_and_run(config, prepared, snapshots)

    if isolate:
        warm_up()
    outcome = isolation.run_forked(child, timeout) if isolate else child()
    if isinstance(outcome, tuple):
        result, new_shared = outcome
        prepared.shared.update(new_shared)
    else:
        result = _ended_abnormally(test, config, outcome, ir_dir)
    result.duration = time.monotonic() - start
    if result.passed:
        shutil.rmtree(ir_dir, ignore_errors=True)
    elif result.ir_path is None and result.stage is not None:
        saved = sorted(ir_dir.glob(f"*-{result.stage}.mlir"))
        result.ir_path = str(saved[0]) if saved else None
    return result


def _ended_abnormally(test: Test, config, outcome, ir_dir: Path) -> Result:
    """The Result of a child that timed out, crashed, or raised past its own handling."""
    marker = ir_dir / "current-stage"
    stage = marker.read_text().strip() if marker.exists() else "capture"
    if isinstance(outcome, isolation.TimedOut):
        kind, signature = TIMEOUT, f"timeout | {stage}"
        error = f"timeout in stage {stage}: no result after {outcome.seconds:.0f} s (killed)\n"
        error += outcome.stderr_tail[-2000:]
    elif isinstance(outcome, isolation.Crashed):
        first = _first_native_error(outcome.stderr_tail) or outcome.reason
        kind, signature = CRASH, f"crash | {stage} | {normalize(first)}"
        error = f"crash in stage {stage}: the process was {outcome.reason}\n{outcome.stderr_tail[-3000:]}"
    else:  # Raised: a framework bug
        kind, signature = ERROR, f"framework | {stage}"
        error = f"internal error in stage {stage}:\n{outcome.traceback}"
    return Result(test.name, config.name, kind, stage=stage, signature=signature, error=error.strip())


def _first_native_error(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if any(word in line for word in ("Assertion", "error:", "LLVM ERROR", "Segmentation", "Aborted")):
            return line.strip()
    return None

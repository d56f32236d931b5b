"""Run pass pipelines as named stages, keeping the IR each stage was given.

A stage is one arrow of the flow (`import`, `torch-backend`, `backend`, `lower`,
`execute`, ...). Before a stage runs, its input IR is recorded in `Snapshots`, and,
when the snapshots have a directory, written to disk at once: if the next stage takes
the process down, the IR that crashed it is already saved.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

from torch_mlir import ir, passmanager

from compiler.pipelines import as_text
from compiler.replay_runtime.mlir import (  # noqa: F401 - re-exported: the flow's stages use them from here
    StageError,
    first_line,
    format_diagnostics,
    module_text,
    new_context,
    parse_module,
)
from compiler.replay_runtime.pipeline import PYTHON_PASS, run_entries

# The stages of the flow, in order. `crash` and `timeout` name how a stage ended.
STAGES = ("capture", "import", "torch-backend", "backend", "lower", "execute", "compare")


class StageMemo(Protocol):
    """Stage outputs kept by key across processes and runs (`e2e.framework.cache.ProgramCache`,
    whose keys also cover the compiler's sources, torch-mlir and the JIT target)."""

    def get(self, key: str) -> object | None: ...

    def put(self, key: str, value: object) -> None: ...


@dataclass
class Snapshots:
    """The IR each stage was given, in memory and optionally on disk; and, with a `memo`,
    the stages whose output was taken from it instead of running (`run_stage`)."""

    directory: Path | None = None
    texts: dict[str, str] = field(default_factory=dict)
    memo: StageMemo | None = None
    memo_hits: list[str] = field(default_factory=list)

    current: str | None = None
    # Wall seconds spent in each stage, in the order entered (a re-entered stage adds up).
    seconds: dict[str, float] = field(default_factory=dict)
    _entered_at: float = 0.0

    def enter(self, stage: str) -> None:
        """Mark `stage` as running (on disk too), so a crash can be blamed on it."""
        self._close_current()
        self.current = stage
        self._entered_at = time.perf_counter()
        if self.directory is not None:
            write_atomic(self.directory / "current-stage", stage)

    def _close_current(self) -> None:
        if self.current is not None:
            spent = time.perf_counter() - self._entered_at
            self.seconds[self.current] = self.seconds.get(self.current, 0.0) + spent

    def stage_seconds(self) -> dict[str, float]:
        """`seconds`, with the running stage counted up to now."""
        self._close_current()
        self._entered_at = time.perf_counter()
        return {stage: round(spent, 4) for stage, spent in self.seconds.items()}

    def record(self, stage: str, module: ir.Module | str) -> str:
        """Keep the IR `stage` is given, and enter it."""
        text = module if isinstance(module, str) else module_text(module)
        self.texts[stage] = text
        if self.directory is not None:
            write_atomic(self.path_of(stage), text)
        self.enter(stage)
        return text

    def path_of(self, stage: str) -> Path:
        assert self.directory is not None
        return snapshot_path(self.directory, stage)

    def last_stage(self) -> str | None:
        return next(reversed(self.texts), None)


def snapshot_path(directory: Path, stage: str) -> Path:
    """Where `Snapshots` keeps the IR `stage` was given: `<n>-<stage>.mlir`, n its place in
    `STAGES` (so a glob `*-backend.mlir` would also find `1-torch-backend.mlir`)."""
    index = STAGES.index(stage) if stage in STAGES else len(STAGES)
    return Path(directory) / f"{index}-{stage}.mlir"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def expand_pipeline(pipeline: Sequence[str], context: ir.Context) -> list[str]:
    """The flat list of passes a pipeline runs, one module-level entry per pass.

    Registered pipelines (e.g. `torch-backend-to-tosa-backend-pipeline`) are expanded
    by the pass manager itself; nested `func.func(a, b)` becomes `func.func(a)`,
    `func.func(b)` so each pass can be run, and blamed, alone.
    """
    with context:
        expanded = str(passmanager.PassManager.parse(as_text(pipeline)))
    inner = expanded[len("builtin.module(") : -1]
    passes: list[str] = []
    for entry in split_top_level(inner):
        match = re.fullmatch(r"(func\.func)\((.*)\)", entry, re.S)
        if match:
            passes.extend(f"{match[1]}({p})" for p in split_top_level(match[2]))
        else:
            passes.append(entry)
    return passes


def split_top_level(text: str, opening: str = "({[", closing: str = ")}]") -> list[str]:
    """Split on the commas not nested in brackets (by default those of a pass list)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def run_pipeline(module: ir.Module, pipeline: Sequence[str]) -> None:
    """Run a pipeline in place, Python passes (`python:<module>:<function>`) in their
    place; raises ir.MLIRError when an MLIR pass fails."""
    run_entries(module, pipeline)


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


def localize(ir_text: str, pipeline: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """Run `pipeline` pass by pass on `ir_text`; find the first pass that fails.

    Returns (failing pass, IR just before it, its diagnostics). When no single pass
    fails (the whole pipeline failed only in combination), the pass is None and the
    IR is the input.
    """
    context = new_context()
    module = parse_module(ir_text, context)
    failing_pass, before, diagnostics = run_pass_by_pass(module, expand(pipeline, context))
    if failing_pass is None:
        return None, ir_text, []
    return failing_pass, before, diagnostics


def run_pass_by_pass(module: ir.Module, passes: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """Run `passes` (expanded: one pass per entry) in place, each with a pass manager of its
    own; stop at the first that fails: (that pass, the IR just before it, its diagnostics).
    (None, "", []) when every pass ran. The IR before a pass is kept as a copy and printed
    only when the pass fails."""
    for pass_entry in passes:
        before = module.operation.clone()
        try:
            run_pass(module, pass_entry)
        except ir.MLIRError as error:
            return pass_entry, before.get_asm(enable_debug_info=False), format_diagnostics(error)
    return None, "", []


CONTRACT_PASS = "torch-lower-to-backend-contract"
_MAX_ITERATIONS = re.compile(r"(?<=[{ ])max-iterations=(\d+)")
# What torch-mlir's contract check says of the first value or op it refuses: nothing else
# in torch-mlir says it, so a failure that starts with one of them is the check's.
_CONTRACT_UNMET = ("unsupported by backend contract", "found an op that was marked as backend illegal")


def run_pass(module: ir.Module, pass_entry: str) -> None:
    """Run one expanded pass in place; raises ir.MLIRError when it fails.

    `torch-lower-to-backend-contract{max-iterations=N}` runs torch-mlir's simplification
    pipeline until the module meets the backend contract, and fails only after the Nth
    run, reporting the contract check on that last module. A module the pipeline no longer
    changes is the same after every later run, so the pass is run here one iteration at a
    time (`max-iterations=1`) and stops at such a fixed point with the failure the whole
    pass would end with: the same module, the same check, the same diagnostics. A module
    that meets the contract stops at the same iteration as the whole pass, with its output;
    a failure of the pipeline itself is raised where it happens, as the whole pass raises it.
    """
    match = _MAX_ITERATIONS.search(pass_entry) if pass_entry.startswith(CONTRACT_PASS + "{") else None
    limit = int(match[1]) if match else 0
    if limit < 2:
        run_pipeline(module, [pass_entry])
        return
    once = f"{pass_entry[: match.start(1)]}1{pass_entry[match.end(1) :]}"
    # The module before the first iteration, printed only if that iteration fails: a module
    # that meets the contract (most of them) is never printed here.
    start = module.operation.clone()
    previous: str | None = None
    for iteration in range(1, limit + 1):
        try:
            run_pipeline(module, [once])
            return
        except ir.MLIRError as error:
            if iteration == limit or not _contract_unmet(error):
                raise
            previous = previous if previous is not None else start.get_asm(enable_debug_info=True)
            now = _asm_with_locations(module)
            if now == previous:
                raise
            previous = now


_CONTRACT_OPTION = re.compile(r"([\w-]+)=(\{[^}]*\}|[^ }]*)")


def contract_steps(pass_entry: str, context) -> tuple[list[str], int] | None:
    """What `torch-lower-to-backend-contract{...}` runs: the passes of one iteration of its
    simplification pipeline (expanded, one pass an entry, with the options the contract pass
    gives it) and its `max-iterations`. None for another pass, or options that do not expand.
    The contract pass runs these passes in turn, iteration after iteration, until the module
    meets the backend contract; replaying them one at a time names the one a failure is in."""
    if not pass_entry.startswith(CONTRACT_PASS):
        return None
    options = dict(_CONTRACT_OPTION.findall(pass_entry[pass_entry.find("{") :])) if "{" in pass_entry else {}
    simplification = (
        f"torch-simplification-pipeline{{decompose-complex-ops={options.get('decompose', 'true')} "
        f"shape-dtype-refine={options.get('shape-dtype-refine', 'true')} "
        f"backend-legal-ops={options.get('backend-legal-ops', '').strip('{}')} "
        f"extra-library={options.get('extra-library', '')}}}"
    )
    try:
        return expand([simplification], context), int(options.get("max-iterations", "10"))
    except ir.MLIRError:
        return None


def _contract_unmet(error: ir.MLIRError) -> bool:
    diagnostics = error.error_diagnostics
    return len(diagnostics) == 1 and diagnostics[0].message.startswith(_CONTRACT_UNMET)


def run_stage(
    module: ir.Module,
    stage: str,
    pipeline: Sequence[str],
    snapshots: Snapshots | None = None,
    *,
    pass_by_pass: bool = False,
) -> ir.Module:
    """Run one named stage, recording its input first; returns the module to go on with:
    `module` itself, changed in place, or, when `snapshots.memo` kept this pipeline's
    output for this very input (locations included), that output parsed in its context.
    Only a stage that succeeded is kept: a failing one runs, and fails, every time.

    On failure raises StageError with the failing pass and the IR just before it, as
    `localize` finds them: the pipeline run again from the stage's input, pass by pass.

    By default the stage runs as one pass manager, and a failure is localized by
    running it again. With `pass_by_pass` the stage's own run is pass by pass, so a
    failing pass is known without running it twice: the same pass and IR before it as
    localization finds (for pipelines of module-level passes, whose schedule is the
    same either way), its diagnostics located in `module` (the frontend's locations,
    not lines of the recorded input; signatures drop both). For a pipeline whose
    failing pass is costly (the JIT frontends' `torch-lower-to-backend-contract`
    parses torch-mlir's shape and dtype library twice per iteration and fails only
    after its last one).
    """
    snapshots = snapshots if snapshots is not None else Snapshots()
    input_ir = snapshots.record(stage, module)
    if not pipeline:
        return module
    memo_key = _memo_key(module, pipeline) if snapshots.memo is not None else None
    if memo_key is not None:
        kept = snapshots.memo.get(memo_key)
        if isinstance(kept, bytes):
            try:
                output = parse_module(zlib.decompress(kept).decode(), module.context)
            except (ir.MLIRError, zlib.error, UnicodeDecodeError):
                output = None  # a damaged entry: the stage runs, and its output replaces it
            if output is not None:
                snapshots.memo_hits.append(stage)
                return output
    if pass_by_pass:
        failing_pass, before, diagnostics = run_pass_by_pass(module, expand(pipeline, module.context))
        if failing_pass is not None:
            raise StageError(
                stage, diagnostics[0], failing_pass=failing_pass, diagnostics=diagnostics, input_ir=before
            ) from None
    else:
        try:
            run_pipeline(module, pipeline)
        except ir.MLIRError as error:
            diagnostics = format_diagnostics(error)
            failing_pass, before, pass_diagnostics = localize(input_ir, pipeline)
            raise StageError(
                stage,
                (pass_diagnostics or diagnostics)[0],
                failing_pass=failing_pass,
                diagnostics=pass_diagnostics or diagnostics,
                input_ir=before,
            ) from None
    if memo_key is not None:
        snapshots.memo.put(memo_key, zlib.compress(_asm_with_locations(module).encode(), 1))
    return module


def _asm_with_locations(module: ir.Module) -> str:
    return module.operation.get_asm(enable_debug_info=True)


def _memo_key(module: ir.Module, pipeline: Sequence[str]) -> str:
    """A stage's key in a memo: its passes and its input, locations included (they reach
    the diagnostics of later stages)."""
    digest = hashlib.sha256("\n".join(pipeline).encode())
    digest.update(b"\0")
    digest.update(_asm_with_locations(module).encode())
    return f"stage-{digest.hexdigest()}"

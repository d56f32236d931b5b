"""A bundle's one upstream command: the plain tool invocation of the step that goes wrong.

A bundle's pipeline may hold this project's own Python passes (`python:<module>:<function>`),
which no upstream tool runs. A maintainer needs the step alone: the passes that fail, as
the pipeline has them (anchors included), given to the tool that registers them
(`torch-mlir-opt` from the torch-mlir wheel, else `mlir-opt`; `iree-compile` for an IREE
runtime's step), on the IR that step is given (`upstream.mlir`: repro.mlir's module, after
the Python passes before the step, without the project's `e2e.*` attributes and the
`mlir_reproducer` resource). The command is run where the bundle is verified, and what it
did is kept as fields (`UpstreamRun`, in `bundle.json`).

Which step: for an error, crash or hang, the last entry that is not one of the project's
checks (`CHECKS`), with the passes before it that the same tool runs; for a wrong result or
an execute-stage crash (a miscompile no tool fails on), the first run of passes one tool
runs, the lowering of the torch ops, or the runtime's compile; then the check is repro.py's.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from compiler.pipelines import as_text
from compiler.replay_runtime.replay import CRASH, HANG, MISMATCH, RUNTIME_PASS, Case
from compiler.type_check import TYPES_AGREE
from e2e.framework import isolation
from e2e.framework.signature import normalize, pass_name
from e2e.reducer.upstream_tools import TOOLS, crash_frames, opt_tool, signal_name, stderr_lines

UPSTREAM_IR = "upstream.mlir"
PYTHON_PASS = "python:"
# The project's checks: Python passes that judge the module and change nothing (a failing
# check blames the step before it, which upstream tools run without the check).
CHECKS = {TYPES_AGREE: "the bundle's type check (`types_agree`, in repro.py)"}
# A project attribute namespace upstream tools carry along unread (the RefBackend's
# `e2e.main_signature`, `e2e.pinned_inputs`): left out of what a maintainer pastes.
PROJECT_ATTRIBUTES = "e2e."
TOOL_SECONDS = 60.0  # the upstream command's run, at most (and not past the verification's limit)
OUTPUT_LINES, LINE_CHARS = 8, 300  # the first lines of the tool's stderr kept, each cut to this


@dataclass(frozen=True)
class Component:
    """Who fixes it: a title's `[tag]` and the words a report gives."""

    name: str
    tag: str


TORCH_MLIR = Component("torch-mlir pass", "torch-mlir")
MLIR_UPSTREAM = Component("MLIR upstream dialect conversion", "mlir")
STABLEHLO = Component("StableHLO", "stablehlo")
IREE = Component("IREE", "iree")
PROJECT = Component("this project's own Python pass (no upstream component)", "e2e")

# A pass's component by its name's prefix, the first that matches; any other pass is
# upstream MLIR's, except the generic ones, which are given by the op they fail on.
PASS_COMPONENTS: tuple[tuple[str, Component], ...] = (
    ("torch-", TORCH_MLIR),
    ("convert-torch-", TORCH_MLIR),
    ("torchscript-", TORCH_MLIR),
    ("torchdynamo-", TORCH_MLIR),
    ("refback-", TORCH_MLIR),
    ("tm-tensor-", TORCH_MLIR),
    ("stablehlo-", STABLEHLO),
    ("chlo-", STABLEHLO),
    ("shape-legalize-to-stablehlo", STABLEHLO),
)
GENERIC_PASSES = ("canonicalize", "cse", "inline", "symbol-dce", "sccp")
OP_COMPONENTS: tuple[tuple[str, Component], ...] = (
    ("torch.", TORCH_MLIR),
    ("torch_c.", TORCH_MLIR),
    ("aten.", TORCH_MLIR),
    ("tm_tensor.", TORCH_MLIR),
    ("stablehlo.", STABLEHLO),
    ("chlo.", STABLEHLO),
)
# A runtime's replay entry (`compiler.executors.replay`): its component, and the tool that
# runs its compile step (None: only its own reproducer, `native/`, runs it).
RUNTIME_COMPONENTS: dict[str, tuple[Component, str | None]] = {
    "iree": (IREE, "iree-compile"),
    "iree_vmvx": (IREE, "iree-compile"),
    "interp": (STABLEHLO, None),
    "xla": (Component("XLA", "xla"), None),
    "tosa_ref": (Component("the TOSA reference model", "tosa"), None),
}


def component_of(entry: str, guilty_op: str | None = None) -> Component:
    """The component a failing pipeline entry belongs to (`guilty_op` decides for a generic pass)."""
    if entry.startswith(RUNTIME_PASS):
        runtime = _runtime(entry)
        return RUNTIME_COMPONENTS[runtime[0]][0] if runtime and runtime[0] in RUNTIME_COMPONENTS else PROJECT
    if entry.startswith(PYTHON_PASS):
        return PROJECT
    name = pass_name(entry)
    if name in GENERIC_PASSES:
        op = (guilty_op or "").split(",")[0].strip()
        return next((c for prefix, c in OP_COMPONENTS if op.startswith(prefix)), MLIR_UPSTREAM)
    return next((c for prefix, c in PASS_COMPONENTS if name.startswith(prefix)), MLIR_UPSTREAM)


def _runtime(entry: str) -> tuple[str, str, bool] | None:
    from compiler.executors import replay

    return replay.parse(entry)


# --- the step -------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamStep:
    """The step that goes wrong, as one upstream tool runs it."""

    tool: str  # a key of TOOLS
    entries: tuple[str, ...]  # the pipeline entries it runs (a runtime: its replay entry)
    failing_entry: str  # the entry the failure is in (a miscompile: the step's first)
    component: Component
    input_ir: str  # what the tool reads (UPSTREAM_IR)
    before: tuple[str, ...] = ()  # the bundle's entries that made `input_ir` from repro.mlir's module
    judged_by: str | None = None  # None: the tool shows the failure; else what shows it
    flags: tuple[str, ...] = ()  # a compiler's flags (iree-compile)

    @property
    def failing_pass(self) -> str:
        return pass_name(self.failing_entry) if not self.failing_entry.startswith(PYTHON_PASS) else self.tool

    @property
    def arguments(self) -> list[str]:
        if not TOOLS[self.tool].runs_passes:
            return [*self.flags, UPSTREAM_IR, "-o", os.devnull]
        return [f"--pass-pipeline={as_text(self.entries)}", UPSTREAM_IR]

    @property
    def command(self) -> str:
        """As a person types it: the pipeline quoted once."""
        return " ".join([self.tool, *(_quoted(a) for a in self.arguments)])

    @property
    def needs(self) -> str:
        """Which tool, from where: `needs mlir-opt from an LLVM build at torch-mlir's LLVM commit`."""
        return f"needs {self.tool} from {TOOLS[self.tool].source}"

    @property
    def installed(self) -> bool:
        return TOOLS[self.tool].find() is not None


def _quoted(argument: str) -> str:
    option, equals, value = argument.partition("=")
    return f"{option}={shlex.quote(value)}" if equals and option.startswith("--") else shlex.quote(argument)


@dataclass(frozen=True)
class NoStep:
    """Why a bundle has no upstream command (its failing step is the project's own pass)."""

    why: str
    component: Component = PROJECT


def miscompiles(case: Case) -> bool:
    """A wrong result or an execute-stage crash: no compiler tool fails on the step."""
    return case.kind == MISMATCH or case.stage == "execute"


def step_of(case: Case, repro_ir: str, bundle_dir: Path | None = None, timeout: float = TOOL_SECONDS):
    """The upstream step of `case` on `repro_ir` (repro.mlir's module): an `UpstreamStep`,
    or a `NoStep` that says why there is none."""
    pipeline = list(case.pipeline)
    if not pipeline:
        return NoStep("the case has no pipeline")
    if miscompiles(case):
        judged = (
            "repro.py (it runs the compiled program on inputs.npz and compares with expected.npz)"
            if case.kind == MISMATCH
            else "repro.py (it runs the compiled program, which dies)"
        )
        start = len(pipeline) - 1 if pipeline[-1].startswith(RUNTIME_PASS) else _first_mlir(pipeline)
        if start is None:
            return NoStep("every entry of the pipeline is this project's own Python pass")
        end = start + 1 if pipeline[start].startswith(PYTHON_PASS) else _same_tool_end(pipeline, start)
        failing = start
    else:
        failing = max(i for i, entry in enumerate(pipeline) if entry not in CHECKS or i == 0)
        judged = CHECKS[pipeline[-1]] if failing < len(pipeline) - 1 else None
        start, end = (failing, failing + 1)
        if not pipeline[failing].startswith(PYTHON_PASS):
            start = _same_tool_start(pipeline, failing)
    entry = pipeline[failing]
    component = component_of(entry, case.guilty_op)
    if entry.startswith(PYTHON_PASS) and not entry.startswith(RUNTIME_PASS):
        return NoStep(f"the failing step is this project's own Python pass `{entry}`: no upstream tool runs it")
    flags: tuple[str, ...] = ()
    if entry.startswith(RUNTIME_PASS):
        runtime = _runtime(entry)
        tool = RUNTIME_COMPONENTS.get(runtime[0], (component, None))[1] if runtime else None
        if tool is None:
            return NoStep(
                f"{component.name}'s step runs in this project's replay entry `{entry}`: "
                "its own reproducer is native/run.sh where the bundle has one",
                component,
            )
        flags = tuple(_compile_flags(runtime))
    else:
        tool = opt_tool(pipeline[start])
    before = tuple(e for e in pipeline[:start] if e not in CHECKS)
    input_ir = step_input(repro_ir, before, bundle_dir, timeout)
    return UpstreamStep(tool, tuple(pipeline[start:end]), entry, component, input_ir, before, judged, flags)


def _compile_flags(runtime: tuple[str, str, bool]) -> list[str]:
    from compiler.executors import load_executor

    return list(load_executor(runtime[0], input=runtime[1]).compile_flags())


def _first_mlir(pipeline: Sequence[str]) -> int | None:
    return next((i for i, entry in enumerate(pipeline) if not entry.startswith(PYTHON_PASS)), None)


def _same_tool_end(pipeline: Sequence[str], start: int) -> int:
    """The end of the run of MLIR entries from `start` that one tool takes."""
    tool, end = opt_tool(pipeline[start]), start + 1
    while end < len(pipeline) and not pipeline[end].startswith(PYTHON_PASS) and opt_tool(pipeline[end]) == tool:
        end += 1
    return end


def _same_tool_start(pipeline: Sequence[str], last: int) -> int:
    """The start of the run of MLIR entries ending at `last` that one tool takes."""
    tool, start = opt_tool(pipeline[last]), last
    while start > 0 and not pipeline[start - 1].startswith(PYTHON_PASS) and opt_tool(pipeline[start - 1]) == tool:
        start -= 1
    return start


class NoInput(Exception):
    """The entries before the step did not give the step's input."""


def step_input(text: str, before: Sequence[str], bundle_dir: Path | None, timeout: float = TOOL_SECONDS) -> str:
    """`text` after the entries `before` (in a forked child: they may crash), without the
    project's attributes (printed by this torch-mlir's bindings: what the tool parses)."""
    if not before:
        return _printed(text, ())
    outcome = isolation.run_forked(lambda: _printed(text, before, bundle_dir), timeout)
    if not isinstance(outcome, str):
        raise NoInput(f"{', '.join(before)} on repro.mlir: {type(outcome).__name__} {getattr(outcome, 'reason', '')}")
    return outcome


def _printed(text: str, before: Sequence[str], bundle_dir: Path | None = None) -> str:
    from compiler.replay_runtime.mlir import module_text, new_context, parse_module
    from compiler.replay_runtime.pipeline import load_pass_modules, run_entries
    from compiler.replay_runtime.replay import strip_reproducer_resource

    module = parse_module(strip_reproducer_resource(text), new_context())
    if before:
        import torch

        torch.set_num_threads(1)  # a forked child: no OpenMP pool
        if bundle_dir is not None:
            load_pass_modules(bundle_dir, before)
        run_entries(module, before)
    for op in [module.operation, *(o.operation for o in module.body.operations)]:
        names = [getattr(a, "name", a) for a in op.attributes]  # names, or NamedAttributes (older bindings)
        for name in [n for n in names if n.startswith(PROJECT_ATTRIBUTES)]:
            del op.attributes[name]
    return module_text(module).rstrip() + "\n"


# --- running it -----------------------------------------------------------------------------


@dataclass(frozen=True)
class UpstreamRun:
    """What the upstream command did on this machine."""

    exit: int | None  # its status (negative: killed by that signal); None: no answer, or not run
    fails: bool | None  # it shows the bundle's failure; None: not known (a miscompile, a check's, not run)
    output: str  # the first lines of its stderr; a crash's signal and innermost frames
    frames: tuple[str, ...] = field(default_factory=tuple)  # a crash's innermost frames, function names


def run_step(step: UpstreamStep, case: Case, bundle_dir: Path, timeout: float = TOOL_SECONDS) -> UpstreamRun:
    """Run the command from the bundle's directory (it reads UPSTREAM_IR there)."""
    binary = TOOLS[step.tool].find()
    if binary is None:
        return UpstreamRun(None, None, f"not run: it {step.needs}, not installed here")
    limit = min(timeout, TOOL_SECONDS, case.hang_seconds or TOOL_SECONDS)
    try:
        done = isolation.run_command([binary, *step.arguments], timeout=limit, cwd=bundle_dir)
    except subprocess.TimeoutExpired:
        hang = case.kind == HANG and step.judged_by is None
        return UpstreamRun(None, True if hang else None, f"no answer in {limit:.0f} s")
    stderr = done.stderr.replace(binary, step.tool)
    killed = signal_name(done.returncode)
    frames = crash_frames(stderr) if killed else ()
    lines = stderr_lines(stderr)
    if killed:
        lines = [f"killed by {killed}", *lines[:4], *(f"  in {frame}" for frame in frames)]
    output = "\n".join(line[:LINE_CHARS] for line in lines[:OUTPUT_LINES])
    if step.judged_by is not None:
        fails = None
    elif case.kind == CRASH:
        fails = killed is not None and _same_crash(stderr, killed, case)
    elif case.kind == HANG:
        fails = False
    else:
        fails = done.returncode != 0 and killed is None and _same_error(stderr, case)
    return UpstreamRun(done.returncode, fails, output, frames)


def _same_error(stderr: str, case: Case) -> bool:
    """The tool's first error is the case's (not an unknown pass, option or file)."""
    first = next((line for line in stderr.splitlines() if "error:" in line), "")
    message = normalize(first.partition("error:")[2])
    return bool(message) and message in (case.signature.message or "")


# How a crash signature (Python's faulthandler) words the signal a tool dies of.
SIGNAL_WORDS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
CRASH_MESSAGES = ("Assertion", "LLVM ERROR")  # a crash that says why: the same words, or another crash


def _same_crash(stderr: str, killed: str, case: Case) -> bool:
    """The tool died the case's death: its assertion or fatal error's words where the case has
    them (two aborts for two reasons are two bugs), else the signal the case names."""
    message = case.signature.message or ""
    for marker in CRASH_MESSAGES:
        if marker in message:
            told = normalize(next((line for line in stderr.splitlines() if marker in line), ""))
            return message[message.index(marker) :][:100] in told
    named = next((name for words, name in SIGNAL_WORDS.items() if words in message), None)
    return named is None or named == killed


# --- together -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    """A bundle's upstream command and what it did: the README's and bundle.json's input."""

    step: UpstreamStep | NoStep
    run: UpstreamRun | None = None  # None: not run (the bundle was not verified)

    @property
    def component(self) -> Component:
        return self.step.component

    def record(self) -> dict:
        """bundle.json's fields."""
        step = self.step if isinstance(self.step, UpstreamStep) else None
        return {
            "upstream_command": step.command if step else None,
            "upstream_tool": step.tool if step else None,
            "upstream_exit": self.run.exit if self.run else None,
            "upstream_fails": self.run.fails if self.run else None,
            "upstream_output": self.run.output if self.run else (None if step else self.step.why),
            "upstream_frames": list(self.run.frames) if self.run else [],
            "upstream_component": self.component.name,
        }


def upstream(case: Case, repro_ir: str, bundle_dir: Path, *, run: bool, timeout: float = TOOL_SECONDS) -> Upstream:
    """The bundle's upstream step, its input written as UPSTREAM_IR, run when `run`."""
    try:
        step = step_of(case, repro_ir, bundle_dir, timeout)
    except NoInput as error:
        return Upstream(NoStep(f"the step's input could not be made: {error}", component_of(case.pipeline[-1])))
    if isinstance(step, NoStep):
        return Upstream(step)
    from compiler.stages import write_atomic

    write_atomic(bundle_dir / UPSTREAM_IR, step.input_ir)
    return Upstream(step, run_step(step, case, bundle_dir, timeout) if run else None)

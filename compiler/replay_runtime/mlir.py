"""MLIR from Python: a context with the project's dialects, parsing, printing, diagnostics.

`StageError` is how every stage of the flow fails (and how a runtime's replay pass
reports), so it lives here, with the few functions a replay needs to run a pipeline.
"""

from __future__ import annotations

import re
import sys
import traceback
from typing import Sequence

import torch_mlir.dialects.torch as torch_dialect  # registers torch and refback passes
from torch_mlir import ir, passmanager
from torch_mlir._mlir_libs import _stablehlo

from .signature import (
    first_line,  # noqa: F401  (re-exported: compiler.stages and the frontends quote errors with it)
    naming_op,
)

_stablehlo.register_stablehlo_passes()


class StageError(Exception):
    """A stage failed. Carries what a person needs to see and a reducer to replay."""

    def __init__(
        self,
        stage: str,
        message: str,
        *,
        failing_pass: str | None = None,
        diagnostics: Sequence[str] = (),
        input_ir: str | None = None,
    ):
        super().__init__(f"[{stage}] {message}")
        self.stage = stage
        self.message = message
        self.failing_pass = failing_pass
        # A stage that fails on a Python exception (raised while handling it, as the
        # frontends do: `raise StageError(...) from error`) keeps where that exception was
        # raised, as its traceback's last frames: the cause is lost when the error crosses
        # the fork boundary, and the xfail updater reads from them whose code failed.
        self.diagnostics = list(diagnostics) or python_diagnostics(message)
        # IR just before the failing pass (or the stage input when not localized).
        self.input_ir = input_ir

    def __reduce__(self):  # picklable across the fork boundary
        return (
            _rebuild_stage_error,
            (self.stage, self.message, self.failing_pass, self.diagnostics, self.input_ir),
        )


def python_diagnostics(message: str, handled: BaseException | None = None) -> list[str]:
    """[message, the last frames of `handled` (default: the Python exception being
    handled)] or []: for a StageError raised from an exception no longer being handled."""
    handled = handled if handled is not None else sys.exc_info()[1]
    if handled is None or isinstance(handled, StageError):
        return []
    frames = traceback.format_exception(handled, limit=-3)
    return [message, *(line.rstrip() for chunk in frames for line in chunk.splitlines())]


def _rebuild_stage_error(stage, message, failing_pass, diagnostics, input_ir) -> StageError:
    return StageError(stage, message, failing_pass=failing_pass, diagnostics=diagnostics, input_ir=input_ir)


def new_context() -> ir.Context:
    """A context with the torch dialect, single-threaded.

    Single-threaded keeps pass order deterministic and makes forking a worker safe
    (no MLIR thread pool holding locks at fork time).
    """
    # No dialect loaded up front (the site default loads every registered one: 5 ms of a
    # context's 7, paid by every parse): the parser and the pass manager load the ones the
    # IR and the passes use, on demand.
    context = ir.Context(load_on_create_dialects=[])
    torch_dialect.register_dialect(context)
    _stablehlo.register_dialect(context)
    context.enable_multithreading(False)
    # The dialects of what the importers and rewrites build from Python: an op is only
    # registered if its dialect is loaded when it is built (the parser loads the others).
    for dialect in ("func", "arith"):
        context.dialects[dialect]
    return context


# `torch_c` (the torch <-> builtin tensor casts between backend passes) and `tm_tensor`
# (sort, scatter, ... in linalg-on-tensors) have no Python registration: the parser cannot
# load them, the passes that depend on them do. Text saved mid-way through a backend
# pipeline that holds them is parsed after those passes have loaded them (`parse_module`);
# other text, most of what a pair parses, skips their 0.6 ms.
_UNREGISTERED_DIALECT = re.compile(r"\b(?:torch_c|tm_tensor)\.")


def load_unregistered_dialects(context: ir.Context) -> None:
    """Load `torch_c` and `tm_tensor` (and what they depend on) into `context`, unless loaded."""
    if context.is_registered_operation("torch_c.to_builtin_tensor") and context.is_registered_operation(
        "tm_tensor.scatter"
    ):
        return
    with context:
        module = ir.Module.parse("func.func @load_dependent_dialects() { return }")
        passmanager.PassManager.parse(
            "builtin.module(func.func(convert-torch-to-linalg, convert-torch-to-tmtensor))"
        ).run(module.operation)


def module_text(module: ir.Module) -> str:
    # Never elide constants: an elided reproducer lies about what it contains.
    return module.operation.get_asm(enable_debug_info=False)


def parse_module(text: str, context: ir.Context | None = None) -> ir.Module:
    context = context or new_context()
    if _UNREGISTERED_DIALECT.search(text):
        load_unregistered_dialects(context)
    with context:
        return ir.Module.parse(text)


def format_diagnostics(error: ir.MLIRError) -> list[str]:
    """One line per diagnostic and per note. A diagnostic whose text names no op (one-shot-
    bufferize's "op was not bufferized") is led by the op its note prints, so the stage's
    message, hence its signature, says which op failed."""
    lines = []
    for diagnostic in error.error_diagnostics:
        message = naming_op(diagnostic.message, [note.message for note in diagnostic.notes])
        lines.append(f"{diagnostic.location}: {message}")
        lines.extend(f"  note: {note.location}: {note.message}" for note in diagnostic.notes)
    return lines or [str(error)]

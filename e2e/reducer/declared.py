"""A wrong result that the IR already declares: the bundle starts before the step that broke it.

A fold that replaces a value by one of another shape (`where(c, x, x)` folded to `x`
without broadcasting it to `c`'s shape) leaves IR that verifies: the program the backend
gets returns `[6,1]` and says so, and a bundle reduced from there is `return %arg1`, which
compiles and "mismatches" torch's `[6,2]` whatever the backend does, fixed or not. When the
backend's input already declares a result of another shape or dtype than torch returns,
the bug is in the torch-backend stage: the bundle starts from that stage's input (the
imported IR) and runs the pipeline entry after which @main first declares it, then checks
@main's declared results against torch's (`type_check.results_as_torch`). It exits 0 once
that step is fixed, and its IR holds the op the step folds.
"""

from __future__ import annotations

import time
from typing import Sequence

import torch
from torch_mlir import ir

from compiler.replay_runtime.mlir import module_text, new_context, parse_module
from compiler.replay_runtime.pipeline import PYTHON_PASS, run_entries
from compiler.replay_runtime.type_check import (
    declared_results,
    results_disagree,
    torch_type,
)
from compiler.toolchain import TORCH_INPUT
from e2e.reducer.case import ERROR, Case, compile_signature
from e2e.reducer.failure import reduce_localized
from e2e.reducer.guilty import vanished_op
from e2e.reducer.localize import Localized
from e2e.reducer.outcome import NO_LOCALIZATION, ReduceOutcome
from e2e.reducer.pair import FailingPair

RECORD_RESULTS = "python:compiler.replay_runtime.type_check:record_torch_results"
RESULTS_CHECK = "python:compiler.replay_runtime.type_check:results_as_torch"
# The mismatch kinds a declared type can show.
_KINDS = ("shape", "dtype")


def torch_results(pair: FailingPair) -> list[str] | None:
    """torch's result types for the call that mismatched, one per tensor output; None when
    the outputs are not a flat run of tensors."""
    prepared = pair.prepared
    if prepared is None or not prepared.golden:
        return None
    index = pair.result.failing_call
    item = prepared.golden[index] if index is not None and index < len(prepared.golden) else prepared.golden[0]
    outputs = item.outputs if isinstance(item.outputs, (list, tuple)) else [item.outputs]
    if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
        return None
    return [torch_type(o) for o in outputs]


def _declares_otherwise(text: str, expected: Sequence[str]) -> bool:
    try:
        declared = declared_results(parse_module(text, new_context()))
    except (ir.MLIRError, StopIteration):
        return False
    return len(declared) == len(expected) and any(map(results_disagree, declared, expected))


class DeclaredTooEarly:
    """A shape or dtype mismatch whose backend input already declares the wrong type."""

    name, follows = "before the step that declared it", False
    gives_way = True  # when it finds no such step, the pair goes to the other searches

    def applies(self, pair: FailingPair) -> bool:
        signature = getattr(pair.result, "signature", None)
        if pair.result.stage != "compare" or signature is None or signature.where not in _KINDS:
            return False
        if pair.config.toolchain().backend == TORCH_INPUT or pair.saved_input("torch-backend") is None:
            return False
        expected, backend_input = torch_results(pair), pair.saved_input("backend")
        return expected is not None and backend_input is not None and _declares_otherwise(backend_input, expected)

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        start = time.monotonic()
        expected = torch_results(pair) or []
        module = parse_module(pair.saved_input("torch-backend") or "", new_context())
        before = module_text(module)
        for entry in pair.config.toolchain().to_torch_backend:
            if entry.startswith(PYTHON_PASS):
                continue
            try:
                run_entries(module, [entry])
            except Exception as error:  # noqa: BLE001 - the stage failed on replay: nothing to find here
                return ReduceOutcome(note=f"{entry} fails on replay: {error}"[:300], stopped=NO_LOCALIZATION)
            after = module_text(module)
            if _declares_otherwise(after, expected):
                return self._bundle(pair, before, entry, start, time_box)
            before = after
        return ReduceOutcome(note="no torch-backend step declares the mismatching type", stopped=NO_LOCALIZATION)

    def _bundle(self, pair: FailingPair, text: str, entry: str, start: float, time_box: float) -> ReduceOutcome:
        pipeline = [RECORD_RESULTS, entry, RESULTS_CHECK]
        signature, diagnostics = compile_signature(text, "torch-backend", pipeline, pipeline[-1])
        if signature is None:
            return ReduceOutcome(note=f"{entry} alone declares torch's types", stopped=NO_LOCALIZATION)
        localized = Localized(Case(ERROR, "torch-backend", pipeline, signature), text, diagnostics)
        remaining = max(time_box - (time.monotonic() - start), 10.0)
        outcome = reduce_localized(
            localized,
            original_ir=text,
            name_guilty=lambda reduced: vanished_op(reduced, entry),
            **pair.where(remaining),
        )
        outcome.note = f"{pair.result.signature} is declared by {entry}: the bundle starts before it. {outcome.note}"
        return outcome

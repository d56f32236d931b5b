"""Compile a test's programs once up to each mutation boundary, then finish them with or
without a mutation.

`survey` runs an FX config's flow (the `linalg`, `tosa` or `stablehlo` config) and keeps
each program's IR at every boundary: the torch backend IR, the backend's IR, and
linalg-on-tensors. The capture, import and torch-backend lowering are shared through the
test's `PreparedTest` (`imported`, `share`) exactly as the FX configs share them. `finish` starts from one
boundary's IR, applies a mutation there, and runs the rest of the compiler, so a
mutation costs only the stages after its boundary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from compiler import pipelines
from compiler.backend_compile import torch_backend_ir
from compiler.frontends import load_frontend
from compiler.refbackend import (
    LOWER_PIPELINE,
    RefBackendProgram,
    argument_types,
    boundary_as_bits,
    opt_level_for,
    result_dtypes,
)
from compiler.stages import Snapshots, StageError, module_text, new_context, parse_module, run_stage
from e2e.configs.pipeline import Compiled
from e2e.framework.trace import call_key
from e2e.mutation.catalogue import BOUNDARIES, Mutation
from e2e.mutation.undefined import Fill

FRONTEND = "fx"  # mutation testing mutates what the FX frontend imports (its capture's IR)


class MutationFailed(Exception):
    """The mutation's own rewrite raised: a bug of the mutation, not a catch by the test."""


@dataclass
class ProgramIR:
    """One program of a test (a method, at a call shape or with dynamic dims) at each boundary."""

    texts: dict[str, str]  # boundary -> IR text
    result_dtypes: list[Any]
    argument_types: Any  # what the program is compiled for (refbackend.argument_types)
    opt_level: int
    out_spec: Any


def survey(prepared, backend: str) -> dict[tuple, ProgramIR]:
    """Every program of the test compiled to linalg-on-tensors for `backend`; raises StageError."""
    to_backend, to_linalg = pipelines.BACKENDS[backend]
    legal_ops = pipelines.BACKEND_LEGAL_OPS.get(backend, ())
    snapshots = Snapshots()
    programs: dict[tuple, ProgramIR] = {}
    for item in prepared.golden:
        shapes = prepared.arg_shapes(item.method)
        dynamic = bool(shapes) and any(s and -1 in s for s in shapes)
        key = (item.method, None if dynamic else call_key(item.inputs))
        if key in programs:
            continue
        imported = prepared.imported(load_frontend(FRONTEND), item, key, shapes, snapshots)
        torch_ir = prepared.share(
            ("fx", *key, legal_ops), lambda: torch_backend_ir(imported.raw_ir, legal_ops, snapshots=snapshots)
        )
        module = parse_module(torch_ir, new_context())
        run_stage(module, "backend", to_backend, snapshots)
        backend_ir = module_text(module)
        compiled_for = argument_types(module)
        boundary_as_bits(module)
        run_stage(module, "lower", to_linalg, snapshots)
        texts = {"torch-backend": torch_ir, "backend": backend_ir, "linalg": module_text(module)}
        programs[key] = ProgramIR(
            texts, result_dtypes(torch_ir), compiled_for, opt_level_for(torch_ir), imported.out_spec
        )
    return programs


@functools.cache
def _context() -> ir.Context:
    """One context per process for parsing boundary IR (a new one costs ~30 ms; a forked
    mutant inherits its parent's)."""
    return new_context()


def sites(programs: dict[tuple, ProgramIR], catalogue: list[Mutation]) -> dict[str, int]:
    """How many ops each mutation would change in the test's programs (nothing is run)."""
    counts = {m.name: 0 for m in catalogue}
    for program in programs.values():
        for boundary in BOUNDARIES:
            here = [m for m in catalogue if m.boundary == boundary]
            if here:
                module = parse_module(program.texts[boundary], _context())
                for mutation in here:
                    counts[mutation.name] += mutation.rewrite(module, False)
    return counts


def finish(program: ProgramIR, backend: str, mutation: Mutation | None, fill: Fill | None = None) -> RefBackendProgram:
    """The program compiled from `mutation`'s boundary on, the mutation applied there
    (None: from linalg-on-tensors, unmutated); with a `fill`, its ops that can be undefined
    are guarded on linalg-on-tensors (`e2e.mutation.undefined`)."""
    to_backend, to_linalg = pipelines.BACKENDS[backend]
    boundary = mutation.boundary if mutation else "linalg"
    module = parse_module(program.texts[boundary], _context())
    if mutation is not None:
        try:
            mutation.rewrite(module, True)
        except Exception as error:
            raise MutationFailed(f"{mutation.name}: the rewrite raised {type(error).__name__}: {error}") from error
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            raise StageError(boundary, f"the mutated IR does not verify: {str(error).splitlines()[0]}") from None
    snapshots = Snapshots()
    after = BOUNDARIES.index(boundary)
    if after < 1:
        run_stage(module, "backend", to_backend, snapshots)
    if after < 2:
        boundary_as_bits(module)
        run_stage(module, "lower", to_linalg, snapshots)
    if fill is not None:
        fill.apply(module)
    run_stage(module, "lower", LOWER_PIPELINE, snapshots)
    try:
        return RefBackendProgram(
            module, program.result_dtypes, opt_level=program.opt_level, argument_types=program.argument_types
        )
    except Exception as error:
        raise StageError("lower", f"ExecutionEngine: {type(error).__name__}: {error}") from error


def compiled(
    programs: dict[tuple, ProgramIR], backend: str, mutation: Mutation | None, fill: Fill | None = None
) -> Compiled:
    """Every program of the test finished under `mutation` (guarded with `fill`, if any), as
    the FX configs' `Compiled`."""
    result = Compiled({})
    for key, program in programs.items():
        result.programs[key] = (finish(program, backend, mutation, fill), program.out_spec)
    return result

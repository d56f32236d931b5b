"""Capture and import failures: the smallest FX graph that still fails, as a torch script.

A frontend failure has no MLIR to reduce (the module never got there, or the importer
refused it). The module is exported as written (no decompositions: the ops it calls),
and delta debugging over its nodes (`graph.ddmin`, groups built as in
`e2e.reducer.graph`) keeps the smallest group whose module still fails the config's
frontend with the same signature. The bundle's `repro.py` is that group as an
`nn.Module` (the FX graph's own Python code), its golden inputs in `inputs.npz`, and
the frontend step that fails, written against torch and torch-mlir alone.

Frontends: `ltc` (the lazy trace: an op LTC cannot lower, or a trace error), the FX
import (`fx`, `eager`: `torch.export` + torch-mlir's decompositions + `FxImporter`) and
`onnx` (`torch.onnx.export`, then torch-mlir's ONNX importer).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import torch

from compiler.replay_runtime.engine import to_storage_array
from compiler.replay_runtime.frontend_step import DECOMPOSITIONS_STEP
from compiler.stages import StageError, first_line
from e2e.framework.signature import Signature, normalize, stage_signature
from e2e.reducer.bundle import (
    Verification,
    add_test,
    child_seconds,
    claim,
    index_root,
    save_arrays,
    signature_key,
    verify,
    versions,
)
from e2e.reducer.case import Case
from e2e.reducer.finish import bundle_dir_for
from e2e.reducer.graph import ONE_MINIMAL, TIME_BOX, GraphSearch, GroupModule, ddmin
from e2e.reducer.outcome import NO_LOCALIZATION, SHARED, ReduceOutcome
from e2e.reducer.pair import FailingPair
from e2e.reducer.standalone import LOADER, RUNTIME_COPY, write_runtime

FRONTEND = "frontend"  # Case.kind of these bundles


def on_device(built: GroupModule, device: str) -> GroupModule:
    """Every device the graph names becomes `device` (exported graphs spell `device='cpu'`)."""
    import torch
    import torch.utils._pytree as pytree

    def move(value):
        return torch.device(device) if isinstance(value, torch.device) else value

    for node in built.module.graph.nodes:
        node.args = pytree.tree_map(move, node.args)
        node.kwargs = pytree.tree_map(move, node.kwargs)
    built.module.recompile()
    return built


def frontend_check(frontend, stage: str) -> Callable[[GroupModule], Signature | None]:
    """In this process, with the suite's own frontend (`compiler.frontends.Frontend.check`):
    the signature a group module shows."""

    def check(built: GroupModule) -> Signature | None:
        try:
            frontend.check(built.module, built.inputs, built.dynamic_dims)
        except StageError as error:
            return stage_signature(error.stage, error.message, error.failing_pass)
        except Exception as error:
            return stage_signature(stage, f"{type(error).__name__}: {first_line(error)}")
        return None

    return check


def _dynamic_shapes(built: GroupModule) -> str:
    """torch.export's `dynamic_shapes` for the group module, as Python source."""
    import inspect

    names = list(inspect.signature(built.module.forward).parameters)
    spec = {}
    for name, dims in zip(names, built.dynamic_dims):
        dynamic = [i for i, d in enumerate(dims or []) if d == -1]
        spec[name] = "{" + ", ".join(f"{i}: Dim.AUTO" for i in dynamic) + "}" if dynamic else "None"
    if all(v == "None" for v in spec.values()):
        return "None"
    return "{" + ", ".join(f"{k!r}: {v}" for k, v in spec.items()) + "}"


TABLE_BOX = 60.0  # seconds for the search of the decompositions a failure needs


def torch_only_decompositions(built: GroupModule, expected: str, deadline: float) -> list[tuple[str, str]] | None:
    """The fewest of torch-mlir's decompositions that still fail the group as `expected`
    (normalized), each one torch's own (`frontend.torch_decompositions` entries): the
    reproducer then replays with torch alone. None when the failure needs a decomposition
    torch-mlir writes itself."""
    import functools

    from torch._decomp import decomposition_table
    from torch.export import Dim
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    from compiler.replay_runtime.frontend_step import CIA, REGISTERED, run_fx

    entries = []
    for op, decomposition in get_decomposition_table().items():
        if decomposition_table.get(op) is decomposition:
            entries.append((str(op), REGISTERED))
        elif isinstance(decomposition, functools.partial) and decomposition.keywords.get("kernel") is op:
            entries.append((str(op), CIA))
    shapes = eval(_dynamic_shapes(built), {"Dim": Dim})  # noqa: S307 - our own source text

    def fails(subset) -> bool:
        return normalize(run_fx(built.module, built.inputs, shapes, subset) or "") == expected

    if not fails(entries):
        return None
    kept, _ = ddmin(entries, fails, deadline)
    return kept


def repro_script(
    built: GroupModule, frontend: str, signature: Signature, decompositions: list[tuple[str, str]] | None = None
) -> str:
    """A standalone script: the group as an nn.Module, its inputs, and the runtime's frontend
    step (with `decompositions`, torch's own, in place of torch-mlir's table)."""
    code = built.module.code.strip("\n")
    forward = "\n".join("    " + line if line.strip() else "" for line in code.splitlines())
    expected = signature.message
    needs = "torch, torch-mlir and numpy only"
    table = ""
    bf16 = [i for i, x in enumerate(built.inputs) if x.dtype == torch.bfloat16]
    if decompositions is not None:
        needs = "torch and numpy only: DECOMPOSITIONS are torch's own, the fewest of torch-mlir's table that still fail"
        table = f"\nDECOMPOSITIONS = {decompositions!r}  # (op, registered decomposition or the op's own CIA kernel)\n"
    return f'''#!/usr/bin/env python3
"""Reproducer: {signature.format().replace(chr(92), "/")}

Needs {needs} (the frontend step is in {RUNTIME_COPY}/ next to
this file). The module below is the smallest part of the test's FX graph that still
fails this frontend; inputs.npz holds its inputs. Exits 1 while the failure is there,
0 once it is gone, 2 on a different failure.
"""

from __future__ import annotations

from math import inf, nan  # noqa: F401  (the generated code may spell them so)

import numpy as np
import torch
from torch import device  # noqa: F401  (generated code spells devices so)
from torch.export import Dim  # noqa: F401  (dynamic shapes)
{LOADER}

EXPECTED = {expected!r}  # the failure, normalized (sizes, paths and SSA names stripped)
{table}

class Repro(torch.nn.Module):
{forward}


def inputs():
    # numpy has no bfloat16: a bf16 input is stored as its int16 bit pattern.
    bf16 = {bf16!r}
    with np.load(Path(__file__).resolve().parent / "inputs.npz") as data:
        arrays = [torch.from_numpy(data[f"arg{{i}}"]) for i in range(len(data.files))]
    return [a.view(torch.bfloat16) if i in bf16 else a for i, a in enumerate(arrays)]


if __name__ == "__main__":
    sys.exit(runtime("frontend_step").main(Repro(), inputs(), {frontend!r}, {_dynamic_shapes(built)}, EXPECTED{", DECOMPOSITIONS" if table else ""}))
'''


def reduce_frontend(result, prepared, config, reports_dir: Path, time_box: float, bundle_dir: Path):
    """The smallest FX group that fails the config's frontend like `result`; its bundle."""
    start = time.monotonic()
    frontend = config.toolchain().frontend
    repro_step = frontend.reducer.repro_step
    if repro_step is None:
        return ReduceOutcome(
            note=f"{result.stage} failures of the {frontend.name} frontend are not reduced",
            stopped=NO_LOCALIZATION,
        )
    method = prepared.methods()[0]
    try:
        search = GraphSearch(
            prepared.module,
            prepared.first_call(method),
            [],
            arg_shapes=prepared.arg_shapes(method),
            method=method,
            decompose=False,
            blame_unreproducible=True,
        )
    except Exception as error:  # torch.export itself fails: no graph to reduce
        return ReduceOutcome(
            note=f"no FX graph to reduce: torch.export fails: {type(error).__name__}: {first_line(error)}"[:300],
            stopped=NO_LOCALIZATION,
        )
    check = frontend_check(frontend, result.stage)
    queries = 0

    def build(group):
        built = search.build(group)
        device = frontend.reducer.device
        return on_device(built, device) if device is not None else built

    def fails(group) -> bool:
        nonlocal queries
        queries += 1
        try:
            return check(build(group)) == result.signature
        except Exception:  # a group torch cannot even build: not this failure
            return False

    if not search.units or not fails(search.units):
        return ReduceOutcome(
            note="the failure does not recur on the exported graph's nodes "
            f"({len(search.units)} nodes) run through the frontend",
            stopped=NO_LOCALIZATION,
        )
    group, completed = ddmin(search.units, fails, start + time_box)
    built = build(group)
    message = result.signature.message or ""
    decompositions = None
    if frontend.reducer.torch_only_decompositions and message.startswith(DECOMPOSITIONS_STEP + ":"):
        decompositions = torch_only_decompositions(built, message, time.monotonic() + TABLE_BOX)
    targets = ", ".join(dict.fromkeys(str(search.by_name[n].target) for n in group))
    case = Case(FRONTEND, result.stage, [repro_step], result.signature, guilty_op=targets)
    owner = claim(index_root(reports_dir), signature_key(config.name, case), bundle_dir)
    if owner is not None:
        add_test(owner, result.test, config.name)
        return ReduceOutcome(owner, True, True, guilty_op=targets, note=f"shares the bundle of {owner}", stopped=SHARED)
    bundle_dir.mkdir(parents=True, exist_ok=True)
    write_runtime(bundle_dir)
    (bundle_dir / "repro.py").write_text(repro_script(built, repro_step, result.signature, decompositions))
    (bundle_dir / "case.json").write_text(case.to_json())
    (bundle_dir / "graph.txt").write_text(str(built.module.graph))
    save_arrays(bundle_dir / "inputs.npz", [to_storage_array(x) for x in built.inputs])
    reduced = time.monotonic()
    verification = verify(bundle_dir, case, child_seconds(time_box))
    tests = add_test(bundle_dir, result.test, config.name)
    stopped = ONE_MINIMAL if completed else TIME_BOX
    (bundle_dir / "README.md").write_text(
        readme(
            result,
            config.name,
            case,
            built,
            tests,
            verification,
            len(search.units),
            queries,
            reduced - start,
            stopped,
            decompositions,
            step=frontend.reducer.repro_step_words,
        )
    )
    return ReduceOutcome(
        bundle_dir,
        verification.ok,
        False,
        len(search.units),
        len(group),
        queries,
        time.monotonic() - start,
        targets,
        verification.detail,
        stopped=stopped,
        verify_seconds=time.monotonic() - reduced,
    )


def readme(
    result,
    config: str,
    case: Case,
    built: GroupModule,
    tests: list[str],
    verification: Verification,
    nodes_before: int,
    queries: int,
    seconds: float,
    stopped: str,
    decompositions: list[tuple[str, str]] | None = None,
    *,
    step: str,
) -> str:
    """The bundle's README; `step`: what its frontend step runs, in words (`ReducerFacts.repro_step_words`)."""
    v = versions()
    lines = [
        f"# {case.guilty_op}: {case.signature}",
        "",
        f"With torch {v['torch']} and torch-mlir {v['torch-mlir']} (Python {sys_version()}), {step} fails on "
        f"this module (stage `{case.stage}`):",
        "",
        "```python",
        built.module.code.strip(),
        "```",
        "",
        "with inputs of shapes "
        + ", ".join(str(list(x.shape)) + f" {str(x.dtype).removeprefix('torch.')}" for x in built.inputs)
        + " (`inputs.npz`).",
        "",
        "## Reproduce",
        "",
        (
            f"Needs only `torch`, `torch-mlir` and `numpy` (`repro.py` runs the frontend step in `{RUNTIME_COPY}/`):"
            if decompositions is None
            else "Needs only `torch` and `numpy`: of torch-mlir's decomposition table, these of torch's own still "
            f"fail ({len(decompositions)}, `DECOMPOSITIONS` in `repro.py`): "
            + ", ".join(f"`{op}` ({kind})" for op, kind in decompositions)
        ),
        "",
        "```sh",
        "python repro.py          # exits 1 while the failure is there, 0 once fixed",
        "```",
        "",
        "## Expected",
        "",
        "The frontend accepts the module (it lowers every op, or imports it).",
        "",
        "## Actual",
        "",
        "```",
        verification.output or "(no output)",
        "```",
        "",
        "## How it was found",
        "",
        f"- test: `{result.test}` on config `{config}`; signature `{case.signature}`",
        f"- FX nodes: {nodes_before} in the exported graph, {len(built.nodes)} in repro.py "
        f"({queries} queries, {seconds:.1f} s, {stopped})",
        f"- re-verified with `python -I repro.py` in a fresh process: {('yes, ' if verification.ok else 'NO, ') + verification.detail}",
        "",
        "## Tests that hit it",
        "",
    ] + [f"- {t}" for t in tests]
    return "\n".join(lines) + "\n"


def sys_version() -> str:
    import sys

    return sys.version.split()[0]


class FrontendFailure:
    """A capture or import failure (not a crash) of a torch module: the smallest FX group that
    fails the config's frontend the same way."""

    name, follows = "in the frontend", False

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.stage in ("capture", "import") and pair.result.outcome != "crash"

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        target = bundle_dir_for(pair.reports_dir, pair.result.test, pair.config.name)
        return reduce_frontend(pair.result, pair.prepared, pair.config, pair.reports_dir, time_box, target)

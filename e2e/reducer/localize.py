"""Localize a failure: the smallest piece of the program that still shows it.

- compile failure: the pass that fails, and the IR just before it (the compiler's
  stage runner already did this; the saved IR is re-checked here);
- crash: the same, pass by pass in a forked child, so the crash is survived;
- numerical mismatch: run the exported FX graph node by node on native torch (golden
  intermediate values), compile each node alone with golden inputs through the same
  toolchain, and find the first node whose compiled result disagrees.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from compiler import pipelines
from compiler.refbackend import LOWER_PIPELINE
from compiler.stages import new_context
from e2e.framework import isolation
from e2e.reducer.case import CRASH, ERROR, MISMATCH, Case, compile_signature, expand
from e2e.reducer.signature import crash_signature, guilty_op, mismatch_signature

BF16_BOUNDARY = "python:compiler.refbackend:bf16_boundary_as_i16"


def toolchain_for(config) -> dict[str, list[str]]:
    """Stage -> pipeline from that stage's input IR to LLVM, for a config.

    A config may carry its own `toolchain` (a dict like this one); FX configs are
    read from `compiler.pipelines.BACKENDS`.
    """
    if hasattr(config, "toolchain"):
        return {stage: list(p) for stage, p in config.toolchain.items()}
    to_backend, to_linalg = pipelines.BACKENDS[config.backend]
    lower = [BF16_BOUNDARY, *LOWER_PIPELINE]
    return {
        "torch-backend": [*pipelines.FX_TO_TORCH_BACKEND, *to_backend, *to_linalg, *lower],
        "backend": [*to_backend, *to_linalg, *lower],
        "lower": [*to_linalg, *lower],
    }


def stage_pipeline(config, stage: str, stage_input: str) -> list[str]:
    """The rest of the compile from `stage`'s saved input (its snapshot)."""
    return toolchain_for(config)[stage]


@dataclass
class Localized:
    case: Case
    ir: str  # the IR just before the failing pass (or of the failing node)
    diagnostics: list[str]


def parses(text: str) -> bool:
    try:
        from compiler.stages import parse_module

        parse_module(text, new_context())
        return True
    except Exception:
        return False


def localize_error(text: str, pipeline: Sequence[str], stage: str, signature: str | None = None) -> Localized | None:
    """Run `pipeline` pass by pass in this process; the first failing pass and its input."""
    from compiler.stages import module_text, parse_module

    from e2e.reducer.case import run_entries

    context = new_context()
    module = parse_module(text, context)
    passes = expand(pipeline, context)
    for i, entry in enumerate(passes):
        before = module_text(module)
        try:
            run_entries(module, [entry])
        except Exception:
            observed, diagnostics = compile_signature(before, stage, [entry], entry)
            if not parses(before):  # e.g. torch_c ops, unparsable outside a pipeline
                observed, diagnostics = compile_signature(text, stage, passes[: i + 1], entry)
                case = Case(ERROR, stage, passes[: i + 1], observed or "", guilty_op(diagnostics))
                return Localized(case, text, diagnostics)
            case = Case(ERROR, stage, [entry], observed or "", guilty_op(diagnostics))
            return Localized(case, before, diagnostics)
    return None


def localize_crash(text: str, pipeline: Sequence[str], stage: str, timeout: float = 120) -> Localized | None:
    """Run `pipeline` pass by pass in a forked child; the pass it died in and that pass's input."""
    scratch = Path(tempfile.mkdtemp(prefix="e2e-localize-"))
    try:

        def child() -> None:
            from compiler.stages import module_text, parse_module, write_atomic

            from e2e.reducer.case import run_entries

            context = new_context()
            module = parse_module(text, context)
            for i, entry in enumerate(expand(pipeline, context)):
                write_atomic(scratch / "before.mlir", module_text(module))
                write_atomic(scratch / "pass", f"{i}\n{entry}")
                run_entries(module, [entry])

        outcome = isolation.run_forked(child, timeout)
        if not isinstance(outcome, isolation.Crashed) or not (scratch / "pass").exists():
            return None
        _, entry = (scratch / "pass").read_text().split("\n", 1)
        before = (scratch / "before.mlir").read_text()
        signature = crash_signature(stage, outcome.stderr_tail, outcome.reason)
        return Localized(Case(CRASH, stage, [entry], signature), before, [outcome.stderr_tail])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --- numerical mismatches -----------------------------------------------------------


@dataclass
class NodeMismatch:
    """The first FX node whose compiled result disagrees with its golden value."""

    node: str  # "mul = aten.mul.Tensor(x, y)"
    target: str  # "aten.mul.Tensor"
    torch_backend_ir: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    result_dtypes: list[str]
    signature: str
    nodes_checked: int


class _Recorder(torch.fx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.values: dict[str, Any] = {}

    def run_node(self, node):
        value = super().run_node(node)
        self.values[node.name] = value
        return value


def _single_node_module(node: torch.fx.Node, values: dict[str, Any]) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    graph = torch.fx.Graph()
    inputs: list[torch.Tensor] = []
    mapping: dict[str, Any] = {}

    def argument(arg: torch.fx.Node):
        if arg.name not in mapping:
            value = values[arg.name]
            if isinstance(value, torch.Tensor):
                mapping[arg.name] = graph.placeholder(arg.name)
                inputs.append(value.clone())
            else:
                mapping[arg.name] = value
        return mapping[arg.name]

    args = torch.fx.node.map_arg(node.args, argument)
    kwargs = torch.fx.node.map_arg(node.kwargs, argument)
    graph.output(graph.call_function(node.target, args, kwargs))
    return torch.fx.GraphModule(torch.nn.Module(), graph), inputs


def _flat_tensors(value: Any) -> list[torch.Tensor]:
    import torch.utils._pytree as pytree

    return [x for x in pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]


def localize_mismatch(
    module: torch.nn.Module,
    inputs: Sequence[Any],
    toolchain: Sequence[str],
    *,
    tolerance=None,
    deadline: float | None = None,
    method: str = "forward",
) -> NodeMismatch | None:
    """Node by node: the first FX node that, given golden inputs, compiles to a wrong result.

    `toolchain` is the pipeline from torch backend IR to LLVM (see `toolchain_for`).
    """
    import time

    from compiler import fx_to_torch_backend_ir, result_dtypes
    from compiler.frontends import fx
    from compiler.refbackend import RefBackendProgram
    from compiler.stages import parse_module

    from e2e.framework.compare import compare_tensors
    from e2e.reducer.case import run_entries

    program = fx.capture(module, list(inputs), None, method)
    graph_module = program.module()
    recorder = _Recorder(graph_module)
    with torch.no_grad():
        recorder.run(*[x for x in inputs if isinstance(x, torch.Tensor)])
    checked = 0
    for node in graph_module.graph.nodes:
        if deadline is not None and time.monotonic() > deadline:
            return None
        if node.op != "call_function" or not callable(node.target):
            continue
        golden = _flat_tensors(recorder.values[node.name])
        if not golden or str(node.target) == "<built-in function getitem>":
            continue
        checked += 1
        single, node_inputs = _single_node_module(node, recorder.values)
        try:
            torch_ir, _ = fx_to_torch_backend_ir(single, node_inputs)
            compiled = parse_module(torch_ir, new_context())
            dtypes = result_dtypes(torch_ir)
            run_entries(compiled, toolchain)
            runnable = RefBackendProgram(compiled, dtypes)
            actual = runnable(*node_inputs)
            runnable.close()
        except Exception:
            continue  # a node that does not compile alone says nothing about values
        for g, a in zip(golden, actual):
            mismatch = compare_tensors(g, a, node.name, tolerance)
            if mismatch is not None:
                return NodeMismatch(
                    node=node.format_node(),
                    target=str(node.target),
                    torch_backend_ir=torch_ir,
                    inputs=[x.numpy() for x in node_inputs],
                    expected=[x.numpy() for x in golden],
                    result_dtypes=[str(d).removeprefix("torch.") for d in dtypes],
                    signature=mismatch_signature(mismatch.kind),
                    nodes_checked=checked,
                )
    return None


def mismatch_case(found: NodeMismatch, toolchain: Sequence[str], tolerance=None) -> Case:
    return Case(
        MISMATCH,
        "compare",
        list(toolchain),
        found.signature,
        guilty_op=found.target,
        result_dtypes=found.result_dtypes,
        tolerance=(tolerance.rtol, tolerance.atol) if tolerance else None,
    )

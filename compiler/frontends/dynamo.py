"""The `dynamo` frontend: `torch.compile`'s capture, imported by torch-mlir's FX importer.

A custom dynamo backend receives the FX graph dynamo traced and, through AOTAutograd
(functionalized ATen ops, torch-mlir's decomposition table), hands it to the FX importer's
stateless import, as upstream torch-mlir's old `torchdynamo` config did with its
`make_simple_dynamo_backend`. The graph takes the module's parameters and buffers as
arguments: they travel with the import as constants (`DynamoImport.arguments`).

Graph breaks fail stage `capture`, naming dynamo's reason (`torch.compile(fullgraph=True)`),
rather than compiling several graphs: the suite compiles one program per call and compares
its outputs with torch; between several graphs dynamo would run Python of its own, eagerly,
and what is compared would no longer be the compiler's alone. Shapes are static
(`dynamic=False`): one program per call shape (`static_only`).

Stages `capture` and `import` run together (the graph is a live object; the suite keeps
the import, `KEEPS_IMPORT`). Capture runs the module once, on a copy and on copies of the
inputs, so the test's module and golden inputs stay untouched.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from compiler.frontends import KEEPS_IMPORT, ReducerFacts
from compiler.frontends.base import BaseFrontend
from compiler.frontends.fx import WarmUpModule
from compiler.stages import Snapshots, StageError, first_line, module_text, new_context


@dataclass
class DynamoImport:
    """The graph dynamo traced for one call, imported (raw torch dialect, `@main`)."""

    raw_ir: str
    # Per argument of @main: its index among the call's tensors, or a constant (a parameter
    # or buffer of the module, as it was when captured).
    sources: list[int | torch.Tensor]
    out_spec: Any
    result_notes: list[str] = field(default_factory=list)
    static_fallback: bool = False  # its shapes are static by design (`static_only`), never a fallback

    def arguments(self, inputs: Sequence[object]) -> list[torch.Tensor]:
        tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
        return [tensors[s] if isinstance(s, int) else s for s in self.sources]


def capture_graph(module: torch.nn.Module, inputs: Sequence[object], method: str = "forward"):
    """`module.<method>(*inputs)` under `torch.compile(fullgraph=True, dynamic=False)`: the
    ATen graph AOTAutograd gave the backend, where each of its arguments comes from, the
    metadata of its outputs, and the output structure."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._guards import TracingContext
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    module = copy.deepcopy(module)
    inputs = pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, list(inputs))
    tensors = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]
    captured: list[tuple] = []

    def backend(graph: torch.fx.GraphModule, example_inputs: list):
        by_id = {id(t): i for i, t in enumerate(tensors)}
        sources = [by_id.get(id(x), x.detach().clone() if isinstance(x, torch.Tensor) else x) for x in example_inputs]

        def forward_compiler(aten_graph: torch.fx.GraphModule, aten_inputs: list):
            context = TracingContext.try_get()
            captured.append((aten_graph, sources, len(aten_inputs), getattr(context, "fw_metadata", None)))
            return aten_graph

        return aot_autograd(fw_compiler=forward_compiler, decompositions=get_decomposition_table())(
            graph, example_inputs
        )

    torch._dynamo.reset()  # no guards or recompile counts from an earlier capture
    compiled = torch.compile(getattr(module, method), backend=backend, fullgraph=True, dynamic=False)
    try:
        with torch.no_grad():
            outputs = compiled(*inputs)
    except torch._dynamo.exc.Unsupported as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = ": ".join(line.removeprefix("Explanation: ") for line in lines[:2])
        raise StageError("capture", f"graph break (torch.compile fullgraph=True): {reason}") from error
    except Exception as error:  # dynamo and AOTAutograd raise many kinds
        raise StageError("capture", f"torch.compile: {type(error).__name__}: {first_line(error)}") from error
    finally:
        torch._dynamo.reset()
    if not captured:
        raise StageError("capture", "torch.compile traced no graph (the call computes no tensor op)")
    return (*captured[0], pytree.tree_flatten(outputs))


def _user_outputs(graph: torch.fx.GraphModule, metadata: Any, results: int, notes: list[str]) -> None:
    """Keep the graph's user outputs alone: AOTAutograd returns the inputs it updated in place
    first (and bases of aliased outputs last)."""
    output = next(node for node in graph.graph.nodes if node.op == "output")
    values = list(output.args[0])
    mutated = getattr(metadata, "num_mutated_inp_runtime_indices", 0) if metadata is not None else 0
    kept = values[mutated : mutated + results]
    if len(kept) != results:
        raise StageError(
            "capture", f"the traced graph returns {len(values)} values; the call returns {results} tensors"
        )
    if mutated:
        notes.append(f"updated in place and not compared (as upstream): {mutated} input(s)")
    output.args = (tuple(kept),)
    graph.recompile()


def dynamo_import(module: torch.nn.Module, inputs: Sequence[object], method: str, snapshots: Snapshots):
    """Stages `capture` (torch.compile's trace) and `import` (the FX importer) of one call."""
    from torch_mlir.extras.fx_importer import FxImporter

    snapshots.enter("capture")
    graph, sources, aten_arguments, metadata, (flat, out_spec) = capture_graph(module, inputs, method)
    if aten_arguments != len(sources):
        raise StageError(
            "capture", f"AOTAutograd's graph takes {aten_arguments} arguments; dynamo's took {len(sources)}"
        )
    if any(not isinstance(s, (int, torch.Tensor)) for s in sources):
        raise StageError("capture", "the traced graph takes a non-tensor argument (a symbolic size)")
    results = sum(isinstance(x, torch.Tensor) for x in flat)
    if results != len(flat):
        raise StageError("capture", "the call returns values that are not tensors (not computed by the graph)")
    notes: list[str] = []
    _user_outputs(graph, metadata, results, notes)
    snapshots.enter("import")
    importer = FxImporter(context=new_context())
    try:
        importer.import_stateless_graph(graph.graph, func_name="main")
    except Exception as error:
        raise StageError("import", f"FxImporter: {type(error).__name__}: {first_line(error)}") from error
    return DynamoImport(module_text(importer.module), sources, out_spec, notes)


@dataclass(frozen=True)
class DynamoFrontend(BaseFrontend):
    """torch.compile with a backend that hands dynamo's graph to torch-mlir's FX importer."""

    name = "dynamo"
    keeps = KEEPS_IMPORT
    static_only = True
    # Capture failures are not reduced (the reproducer's frontend step is torch.export's);
    # wrong results are searched over the module's FX graph at the call's shapes.
    reducer = ReducerFacts(dynamic_graph_search=False)

    def capture(self, module, inputs, dynamic_dims, method: str, snapshots: Snapshots) -> DynamoImport:
        return dynamo_import(module, inputs, method, snapshots)

    def import_capture(self, captured: DynamoImport, snapshots: Snapshots) -> DynamoImport:
        return captured

    def warm_up(self) -> None:
        """Dynamo's and AOTAutograd's first trace in a process (seconds)."""
        dynamo_import(WarmUpModule(), [torch.rand(3, 3)], "forward", Snapshots())

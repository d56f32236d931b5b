"""Wrong results on the torchscript config, localized in the TorchScript graph itself.

The FX search (`graph.py`) re-exports the module, so it cannot see a miscompile that
only the JIT path produces: the JIT graph hands torch-mlir other ops (for example
`aten::scaled_dot_product_attention` whole, which torch.export decomposes first).
Here TorchScript's interpreter runs a prefix of the captured graph natively, the
config compiles the same prefix, and a binary search finds the first node whose
value differs. That node alone, given the native values of its inputs, is the bundle.

    found = localize_jit(module, inputs, to_executor, frontend, tolerance=..., deadline=...)
    # JitMismatch(node="aten::scaled_dot_product_attention ...", torch_backend_ir=...)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils import _pytree as pytree

from compiler.replay_runtime.engine import to_storage_array
from e2e.framework.signature import Signature
from e2e.reducer.graph import ONE_MINIMAL
from e2e.reducer.localize import stage_pipelines
from e2e.reducer.outcome import NO_LOCALIZATION, ReduceOutcome
from e2e.reducer.pair import DEFAULT_TIME_BOX, BundleTarget, FailingPair, LocalizedMismatch

TENSOR = "TensorType"


@dataclass
class JitMismatch:
    node: str  # the differing node, as TorchScript prints it
    kind: str  # its op, e.g. aten::scaled_dot_product_attention
    torch_backend_ir: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    result_dtypes: list[str]
    signature: Signature
    detail: str
    queries: int
    nodes_searched: int


def _tensor_outputs(node: torch._C.Node) -> list[torch._C.Value]:
    return [o for o in node.outputs() if o.type().kind() == TENSOR]


def _returning(graph: torch._C.Graph, picks: Sequence[tuple[int, int]]) -> torch._C.Graph:
    """A copy of `graph` that returns, as one tuple, output `j` of top-level node `i` for each pick."""
    copy = graph.copy()
    nodes = list(copy.nodes())
    values = [list(nodes[i].outputs())[j] for i, j in picks]
    while list(copy.outputs()):
        copy.eraseOutput(0)
    pack = copy.create("prim::TupleConstruct", values)
    pack.output().setType(torch._C.TupleType([v.type() for v in values]))
    copy.appendNode(pack)
    copy.registerOutput(pack.output())
    torch._C._jit_pass_dce(copy)
    return copy


def _run_native(graph: torch._C.Graph, arguments: Sequence[Any]) -> list[Any]:
    function = torch._C._create_function_from_graph("e2e_jit_probe", graph)
    with torch.no_grad():
        out = function(*arguments)
    return list(out) if isinstance(out, tuple) else [out]


class JitSearch:
    """The captured graph of a module, run natively and compiled prefix by prefix, by its
    JIT frontend (`compiler.frontends.jit_frontend.JitFrontend`: its graph and torch-backend step)."""

    def __init__(
        self, module: torch.nn.Module, inputs: Sequence[Any], to_executor: Sequence[str], frontend, tolerance=None
    ):
        self.frontend = frontend
        self.capture = frontend.capture_graph(module, inputs, None, "forward", False, {})
        self.graph = self.capture.graph
        self.to_executor, self.tolerance = list(to_executor), tolerance
        self.tensors = [x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)]
        owner = self.capture.graph_inputs[0].value
        self.native_arguments = [getattr(owner, "_c", owner), *self.tensors]
        self.nodes = list(self.graph.nodes())
        self.producer_of = {o.unique(): (i, j) for i, n in enumerate(self.nodes) for j, o in enumerate(n.outputs())}
        # (node index, output index) of every tensor a top-level node produces, in order.
        self.candidates = [i for i, n in enumerate(self.nodes) if _tensor_outputs(n)]
        self.queries = 0

    def picks_upto(self, k: int) -> list[tuple[int, int]]:
        picks = []
        for i in self.candidates[: k + 1]:
            outputs = list(self.nodes[i].outputs())
            picks += [(i, j) for j, o in enumerate(outputs) if o.type().kind() == TENSOR]
        return picks

    def compile_and_run(self, graph: torch._C.Graph, graph_inputs, arguments) -> tuple[str, list, list] | None:
        """(torch backend IR, compiled outputs, result dtypes); None when it does not compile or run."""
        from compiler.frontends import jit
        from compiler.frontends.jit_frontend import run_torch_backend
        from compiler.stages import module_text
        from e2e.reducer.graph import run_torch_backend_ir

        try:
            imported = jit.import_graph(graph, graph_inputs)
            torch_ir = module_text(run_torch_backend(imported.module, self.frontend))
            actual, dtypes = run_torch_backend_ir(torch_ir, self.to_executor, arguments)
        except Exception:  # a prefix that does not compile says nothing about values
            return None
        return torch_ir, actual, dtypes

    def differs(self, expected: Sequence[Any], actual: Sequence[Any]) -> tuple[str, str] | None:
        from e2e.framework.compare import compare_tensors
        from e2e.framework.signature import mismatch_signature

        for i, (g, a) in enumerate(zip(expected, actual)):
            g, a = torch.as_tensor(g), torch.as_tensor(a)
            # The trace types some scalars as 0-d double tensors that TorchScript itself runs
            # as float: a dtype alone changes nothing downstream, values do.
            mismatch = compare_tensors(g, a.to(g.dtype), f"output {i}", self.tolerance)
            if mismatch is not None:
                return mismatch_signature(mismatch.kind), str(mismatch)
        return None

    def prefix_differs(self, k: int) -> bool | None:
        """Whether any tensor of the first `k + 1` candidate nodes differs; None if it does not compile."""
        self.queries += 1
        probe = _returning(self.graph, self.picks_upto(k))
        expected = _run_native(probe, self.native_arguments)
        compiled = self.compile_and_run(
            probe, self.capture.graph_inputs, [self.tensors[i] for i in self.capture.argument_indices]
        )
        if compiled is None:
            return None
        return self.differs(expected, compiled[1]) is not None

    def single_node(self, index: int) -> tuple[torch._C.Graph, list[torch.Tensor]]:
        """Node `index` alone: its tensor inputs become arguments (with their native values),
        its other computed inputs literals."""
        node = self.nodes[index]
        producers = {}
        for value in node.inputs():
            if value.node().kind() not in ("prim::Constant", "prim::Param"):
                producers[value.unique()] = self.producer_of[value.unique()]
        picks = sorted(set(producers.values()))
        values = _run_native(_returning(self.graph, picks), self.native_arguments) if picks else []
        native = {key: values[picks.index(pick)] for key, pick in producers.items()}
        position_of = {v.unique(): i for i, v in enumerate(self.graph.inputs())}  # 0 is the module
        graph = torch._C.Graph()
        mapped: dict[int, torch._C.Value] = {}
        arguments: list[torch.Tensor] = []
        for value in node.inputs():
            if value.unique() in mapped:
                continue
            if value.node().kind() == "prim::Constant":
                mapped[value.unique()] = graph.insertNode(graph.createClone(value.node(), lambda v: v)).output()
                continue
            if value.unique() in position_of:  # a graph argument: the test's own tensor
                tensor = self.tensors[self.capture.argument_indices[position_of[value.unique()] - 1]]
            else:
                tensor = native[value.unique()]
            if isinstance(tensor, torch.Tensor):
                new = graph.addInput()
                new.setType(value.type())
                arguments.append(tensor.detach().clone())
                mapped[value.unique()] = new
            else:
                mapped[value.unique()] = graph.insertConstant(tensor)
        clone = graph.insertNode(graph.createClone(node, lambda v: mapped[v.unique()]))
        outputs = _tensor_outputs(clone)
        if len(outputs) == 1:
            graph.registerOutput(outputs[0])
        else:
            pack = graph.create("prim::TupleConstruct", outputs)
            pack.output().setType(torch._C.TupleType([o.type() for o in outputs]))
            graph.appendNode(pack)
            graph.registerOutput(pack.output())
        return graph, arguments


def localize_jit(module, inputs, to_executor, frontend, *, tolerance=None, deadline: float) -> JitMismatch | str:
    """The first node of the captured TorchScript graph whose compiled value differs, alone;
    or a sentence saying why there is none."""
    from compiler.frontends.jit import TensorArg

    search = JitSearch(module, inputs, to_executor, frontend, tolerance)
    last = len(search.candidates) - 1
    whole = search.prefix_differs(last)
    if not whole:
        return (
            "the captured graph's tensors do not compile together"
            if whole is None
            else "every tensor of the captured graph agrees with TorchScript's own run"
        )
    low, high = 0, last
    while low < high:
        if time.monotonic() > deadline:
            return f"time box reached after {search.queries} queries (first differing node between {low} and {high})"
        middle = (low + high) // 2
        if search.prefix_differs(middle):
            high = middle
        else:
            low = middle + 1  # agrees, or does not compile: look later
    index = search.candidates[low]
    node = search.nodes[index]
    graph, arguments = search.single_node(index)
    expected = _run_native(graph, arguments)
    compiled = search.compile_and_run(graph, [TensorArg(tuple(t.shape), t.dtype) for t in arguments], arguments)
    found = search.differs(expected, compiled[1]) if compiled else None
    text = str(node).strip().splitlines()[0]
    if found is None:
        return f"the first differing node does not miscompile alone: {text[:200]}"
    torch_ir, _, dtypes = compiled
    return JitMismatch(
        node=text,
        kind=node.kind(),
        torch_backend_ir=torch_ir,
        inputs=[to_storage_array(t) for t in arguments],
        expected=[to_storage_array(torch.as_tensor(e)) for e in expected],
        result_dtypes=[str(d).removeprefix("torch.") for d in dtypes],
        signature=found[0],
        detail=found[1],
        queries=search.queries,
        nodes_searched=len(search.candidates),
    )


def reduce_jit_mismatch(
    module,
    inputs,
    to_executor,
    *,
    frontend,
    test,
    config,
    reports_dir,
    tolerance=None,
    time_box: float = DEFAULT_TIME_BOX,
    verify: bool = True,
) -> ReduceOutcome:
    """Wrong results only the JIT path gives: the first differing node of the TorchScript graph
    (captured by `frontend`, a JIT frontend), alone."""
    start = time.monotonic()
    try:
        found = localize_jit(module, inputs, to_executor, frontend, tolerance=tolerance, deadline=start + time_box)
    except Exception as error:
        return ReduceOutcome(
            note=f"the TorchScript graph search failed: {type(error).__name__}: {error}"[:300], stopped=NO_LOCALIZATION
        )
    if isinstance(found, str):
        return ReduceOutcome(note=found, seconds=time.monotonic() - start, stopped=NO_LOCALIZATION)
    notes = [
        f"localized in the TorchScript graph ({found.nodes_searched} tensor-producing nodes, "
        f"{found.queries} queries): the first node whose compiled value differs from TorchScript's "
        f"own run, here alone with the native values of its inputs: `{found.node}`",
        f"compiled vs native: {found.detail}",
    ]
    guilty = "torch." + found.kind.replace("::", ".")
    return LocalizedMismatch(found, guilty, to_executor, notes, ONE_MINIMAL).bundle(
        BundleTarget(test, config, reports_dir, tolerance, start, time_box, verify)
    )


class JitGraphMismatch:
    """The torchscript config's wrong results that the FX graph search did not localize."""

    name, follows = "in the TorchScript graph", True

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.stage == "compare" and pair.frontend.reducer.jit_graph_search

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        method, call = pair.prepared.failing_call(pair.result.failing_call)
        return reduce_jit_mismatch(
            pair.prepared.module,
            call,
            stage_pipelines(pair.config)["backend"],
            frontend=pair.frontend,
            tolerance=pair.prepared.test.tolerance,
            **pair.where(time_box),
        )

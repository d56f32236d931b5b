"""Localize a wrong result of the onnx config in the ONNX model: the smallest group of nodes that miscompiles.

The oracle is ONNX's own semantics: `onnx.reference.ReferenceEvaluator` runs the whole
model on the call's inputs with every intermediate value exposed. First the model's
outputs are compared with torch's golden values: where they differ, the model itself
computes something else (the exporter, or ONNX semantics), and nothing is reduced.
Else a *group* of nodes becomes an ONNX model of its own: the values it consumes from
outside enter as inputs fed the reference values (keeping the types shape inference gave
them, dynamic dims included; initializers and `Constant` outputs stay constants), and
every value it hands to the rest of the graph, or that the graph returns, is an output.
The group is compiled as the config compiles (`onnx_import` -> `onnx_torch_backend_ir` ->
the backend stage's entries -> executor), run in a child, and compared with the
reference values. Delta debugging (`graph.ddmin`) finds a 1-minimal group that still differs.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from e2e.configs.onnx_oracle import _to_numpy, _to_torch
from e2e.reducer.graph import (
    NO_MISMATCH,
    ONE_MINIMAL,
    QUERY_MEMORY,
    QUERY_SECONDS,
    TIME_BOX,
    GroupMismatch,
    ddmin,
)
from e2e.reducer.outcome import NO_LOCALIZATION, ReduceOutcome
from e2e.reducer.pair import BundleTarget, FailingPair, LocalizedMismatch

REFERENCE = "onnx.reference.ReferenceEvaluator"  # the oracle: ONNX's own semantics
# Ops whose values no other run reproduces: a model with one is not compared.
RANDOM_OPS = frozenset(
    {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)


@dataclass
class OnnxGroupMismatch(GroupMismatch):
    """A group of ONNX nodes whose compiled result differs from the reference evaluator's;
    `torch_backend_ir` is the group imported as raw torch-onnx IR (what the bundle compiles),
    `targets` its nodes' op types as `onnx.<OpType>`."""

    model: bytes = b""  # the group as an ONNX model


def _format(node) -> str:
    return f"{', '.join(node.output)} = {node.op_type}({', '.join(node.input)})"


def _subgraph_uses(node) -> list[str]:
    """Names a node's subgraphs (If, Loop, Scan bodies) take from the enclosing scope."""
    used: list[str] = []
    for attribute in node.attribute:
        for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
            local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
            for inner in graph.node:
                used += [n for n in [*inner.input, *_subgraph_uses(inner)] if n and n not in local]
                local.update(inner.output)
    return used


class OnnxSearch:
    """An ONNX model, its reference values at every edge for one call, and group checks."""

    def __init__(
        self,
        model: bytes,
        tensors: Sequence[torch.Tensor],
        to_executor: Sequence[str],
        *,
        tolerance=None,
        evaluator_seconds: float = QUERY_SECONDS,
    ):
        """`to_executor`: the entries from torch backend IR to the executor (the config's backend stage).
        The reference evaluator (pure Python: slow on large convolutions) runs in a child
        given `evaluator_seconds`."""
        import onnx

        self.to_executor = list(to_executor)
        self.tolerance = tolerance
        self.model = onnx.shape_inference.infer_shapes(onnx.load_from_string(model), data_prop=True)
        graph = self.model.graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.input_names = [v.name for v in graph.input if v.name not in self.initializers]
        if len(self.input_names) != len(tensors):
            raise ValueError(f"the ONNX model takes {len(self.input_names)} inputs, the call passes {len(tensors)}")
        feeds = {name: _to_numpy(t) for name, t in zip(self.input_names, tensors)}
        self.values: dict[str, np.ndarray] = _reference_values(self.model, feeds, evaluator_seconds)
        self.types = {v.name: v.type for v in (*graph.input, *graph.value_info, *graph.output)}
        self.nodes = list(graph.node)
        self.constants = {o for n in self.nodes if n.op_type == "Constant" for o in n.output}
        # Constants are never blamed: a group takes their values as constants of its own.
        self.units = [i for i, n in enumerate(self.nodes) if n.op_type != "Constant"]
        self.queries = 0
        self.crashed_queries = 0
        self._seen: dict[str, Any] = {}

    def outputs(self) -> list[np.ndarray]:
        """The reference evaluator's values of the model's outputs."""
        return [self.values[v.name] for v in self.model.graph.output]

    def disagreement_with(self, golden: Sequence[torch.Tensor]) -> str | None:
        """How the reference outputs differ from torch's golden values (None: they agree)."""
        from e2e.framework.compare import compare_tensors

        reference = self.outputs()
        if len(reference) != len(golden):
            return f"the model returns {len(reference)} values, torch {len(golden)}"
        for i, (g, r) in enumerate(zip(golden, reference)):
            mismatch = compare_tensors(g, _to_torch(r), f"output {i}", self.tolerance)
            if mismatch is not None:
                return str(mismatch)
        return None

    def _value_info(self, name: str):
        import onnx

        info = onnx.ValueInfoProto(name=name)
        known = self.types.get(name)
        if known is not None and known.HasField("tensor_type") and known.tensor_type.HasField("shape"):
            info.type.CopyFrom(known)
            return info
        value = self.values[name]
        return onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)

    def build(self, group: Sequence[int]) -> tuple[bytes, list[str], list[str]]:
        """The group as an ONNX model: (its bytes, its input names, its output names)."""
        import onnx

        members = [self.nodes[i] for i in sorted(group)]
        produced = {o for n in members for o in n.output if o}
        inputs: list[str] = []
        constants: list = []
        for node in members:
            for name in [*node.input, *_subgraph_uses(node)]:
                if not name or name in produced or name in inputs or any(c.name == name for c in constants):
                    continue
                if name in self.initializers:
                    constants.append(self.initializers[name])
                elif name in self.constants:
                    constants.append(onnx.numpy_helper.from_array(self.values[name], name))
                else:
                    inputs.append(name)
        outside = {v.name for v in self.model.graph.output}
        chosen = set(group)
        for i, node in enumerate(self.nodes):
            if i not in chosen:
                outside.update([*node.input, *_subgraph_uses(node)])
        outputs = [o for n in members for o in n.output if o and o in outside]
        graph = onnx.helper.make_graph(
            members,
            "main",
            [self._value_info(n) for n in inputs],
            [self._value_info(n) for n in outputs],
            initializer=constants,
        )
        model = onnx.helper.make_model(
            graph,
            opset_imports=list(self.model.opset_import),
            ir_version=self.model.ir_version,
            functions=list(self.model.functions),
        )
        return model.SerializeToString(), inputs, outputs

    def check(self, group: Sequence[int]) -> tuple[str, str] | None:
        """(mismatch signature, detail) when the group's compiled result differs, else None."""
        key = hashlib.sha1(repr(sorted(group)).encode()).hexdigest()
        if key not in self._seen:
            self.queries += 1
            self._seen[key] = self._check(group)
        return self._seen[key][0] if self._seen[key] else None

    def _check(self, group: Sequence[int]):
        from e2e.framework import isolation
        from e2e.framework.compare import compare_tensors

        model, inputs, outputs = self.build(group)
        if not outputs:
            return None
        tensors = [_to_torch(self.values[n]) for n in inputs]
        outcome = isolation.run_forked(
            lambda: compile_and_run(model, self.to_executor, tensors), QUERY_SECONDS, QUERY_MEMORY
        )
        if not isinstance(outcome, tuple):  # does not import, compile or run: says nothing about values
            if not isinstance(outcome, isolation.Raised):
                self.crashed_queries += 1
            return None
        raw_ir, actual, dtypes = outcome
        for i, (name, value) in enumerate(zip(outputs, actual)):
            mismatch = compare_tensors(_to_torch(self.values[name]), value, f"output {i}", self.tolerance)
            if mismatch is not None:
                from e2e.framework.signature import mismatch_signature

                return (mismatch_signature(mismatch.kind), str(mismatch)), model, inputs, outputs, raw_ir, dtypes
        return None

    def result(self, group: Sequence[int], stopped: str) -> OnnxGroupMismatch:
        (signature, detail), model, inputs, outputs, raw_ir, dtypes = self._seen[
            hashlib.sha1(repr(sorted(group)).encode()).hexdigest()
        ]
        members = [self.nodes[i] for i in sorted(group)]
        return OnnxGroupMismatch(
            nodes=[_format(n) for n in members],
            targets=[f"onnx.{n.op_type}" for n in members],
            torch_backend_ir=raw_ir,
            inputs=[self.values[n] for n in inputs],
            expected=[self.values[n] for n in outputs],
            result_dtypes=[str(d).removeprefix("torch.") for d in dtypes],
            signature=signature,
            detail=detail,
            queries=self.queries,
            stopped=stopped,
            model=model,
        )


def _reference_values(model, feeds: dict[str, np.ndarray], seconds: float) -> dict[str, np.ndarray]:
    """Every value the reference evaluator computes (graph inputs, node outputs), by name."""
    from onnx.reference import ReferenceEvaluator

    from e2e.framework import isolation

    def evaluate() -> dict[str, np.ndarray]:
        results = ReferenceEvaluator(model).run(None, feeds, intermediate=True)
        return {name: np.asarray(value) for name, value in results.items() if name}

    outcome = isolation.run_forked(evaluate, seconds, QUERY_MEMORY)
    if isinstance(outcome, isolation.Raised):
        raise RuntimeError(outcome.traceback.strip().splitlines()[-1])
    if isinstance(outcome, isolation.TimedOut):
        raise TimeoutError(f"no answer in {seconds:.0f} s")
    if not isinstance(outcome, dict):
        raise RuntimeError(f"the evaluator's process ended: {outcome}"[:200])
    return outcome


def compile_and_run(model: bytes, to_executor: Sequence[str], tensors: Sequence[torch.Tensor]):
    """(raw torch-onnx IR, outputs, result dtypes) of an ONNX model compiled as the onnx config does."""
    from compiler.frontends.onnx import onnx_import, onnx_torch_backend_ir
    from e2e.reducer.graph import run_torch_backend_ir

    raw_ir = onnx_import(model).raw_ir
    actual, dtypes = run_torch_backend_ir(onnx_torch_backend_ir(raw_ir), to_executor, tensors)
    return raw_ir, actual, dtypes


def localize_onnx_group(search: OnnxSearch, deadline: float) -> OnnxGroupMismatch | str:
    """The smallest group of nodes found that miscompiles, or why there is none."""
    if not search.units:
        return NO_MISMATCH + " (the model has no node but constants)"
    if search.check(search.units) is None:
        return NO_MISMATCH + f": the whole model, compiled from the call's inputs, agrees with {REFERENCE}"
    group, completed = ddmin(search.units, lambda g: search.check(g) is not None, deadline)
    return search.result(group, ONE_MINIMAL if completed else TIME_BOX)


def model_is_wrong_note(disagreement: str, golden_from: str = "torch") -> str:
    return (
        f"{REFERENCE} disagrees with {golden_from} ({disagreement}): the model itself computes other "
        f"values than {golden_from}; the failure is in the model (exporter or ONNX semantics), not in "
        "torch-mlir: no compile-side reduction"
    )


def reduce_onnx_mismatch(
    model: bytes,
    tensors: Sequence[torch.Tensor],
    golden: Sequence[torch.Tensor],
    to_executor: Sequence[str],
    *,
    test: str,
    config: str,
    reports_dir,
    tolerance=None,
    time_box: float = 60.0,
    verify: bool = True,
    golden_from: str = "torch",
) -> ReduceOutcome:
    """Wrong results of the onnx config: the smallest group of ONNX nodes whose compiled
    result differs from the reference evaluator's, as a bundle (with the group as `model.onnx`).

    `to_executor` (pass entries) compiles torch backend IR to the executor (the config's backend stage);
    the bundle's pipeline is the onnx torch-backend pipeline followed by it. `golden_from`
    names what computed `golden` (for the notes).
    """
    from compiler.frontends.onnx import onnx_import
    from compiler.pipelines import ONNX_TO_TORCH_BACKEND
    from e2e.reducer.finish import crashed_queries_note, nothing_localized

    start = time.monotonic()
    try:
        search = OnnxSearch(model, tensors, to_executor, tolerance=tolerance, evaluator_seconds=max(time_box, 10.0))
    except Exception as error:
        return ReduceOutcome(
            note=f"{REFERENCE} cannot run the model: {type(error).__name__}: {error}"[:300], stopped=NO_LOCALIZATION
        )
    random = sorted({n.op_type for n in search.nodes if n.op_type in RANDOM_OPS})
    if random:
        return ReduceOutcome(
            note=f"the model draws random values ({', '.join(random)}): {REFERENCE}'s values cannot be "
            "compared with the golden ones or the compiled ones; not reduced",
            stopped=NO_LOCALIZATION,
        )
    disagreement = search.disagreement_with(golden)
    if disagreement is not None:
        return ReduceOutcome(note=model_is_wrong_note(disagreement, golden_from)[:500], stopped=NO_LOCALIZATION)
    found = localize_onnx_group(search, start + time_box)
    if isinstance(found, str):
        return nothing_localized(found, search, start)
    notes = [
        f"localized to {len(found.nodes)} ONNX node(s) of {len(search.units)}, given the reference evaluator's "
        "values at their inputs: " + "; ".join(f"`{n}`" for n in found.nodes),
        f"compiled vs {REFERENCE}: {found.detail}",
        "`model.onnx` is the reduced ONNX model (those nodes alone); `repro.mlir` is its import as raw "
        "torch-onnx IR, `original.mlir` the whole model's",
    ]
    if search.crashed_queries:
        notes.append(crashed_queries_note(search.crashed_queries))
    return LocalizedMismatch(
        found,
        found.guilty_op,
        [*ONNX_TO_TORCH_BACKEND, *to_executor],
        notes,
        found.stopped,
        onnx_import(model).raw_ir,
        expected_from=REFERENCE,
        files={"model.onnx": found.model},
    ).bundle(BundleTarget(test, config, reports_dir, tolerance, start, time_box, verify))


def reduce_onnx_result(result, prepared, config, reports_dir, time_box: float) -> ReduceOutcome:
    """A compare failure of the onnx config: the failing call's model, exported again as the
    config exports it (or the test's own ONNX model), reduced over its nodes."""
    from compiler.frontends.onnx import onnx_export
    from e2e.configs.pipeline import tensor_leaves
    from e2e.reducer.localize import stage_pipelines

    method, call = prepared.failing_call(result.failing_call)
    item = next(i for i in prepared.golden if i.method == method and i.inputs is call)
    model = given = getattr(prepared.module, "onnx_model", None)
    try:
        if given is None:
            model = onnx_export(prepared.module, call, prepared.arg_shapes(method), method=method)
    except Exception as error:
        return ReduceOutcome(
            note=f"the module does not export again: {type(error).__name__}: {error}"[:300], stopped=NO_LOCALIZATION
        )
    return reduce_onnx_mismatch(
        model,
        tensor_leaves(call),
        tensor_leaves([item.outputs]),
        stage_pipelines(config)["backend"],
        test=result.test,
        config=config.name,
        reports_dir=reports_dir,
        tolerance=prepared.test.tolerance,
        time_box=time_box,
        golden_from="torch" if given is None else "the test's expected outputs",
    )


class OnnxMismatch:
    """The onnx configs' wrong results: the smallest miscompiled group of the ONNX model's nodes."""

    name, follows = "in the ONNX model", False

    def applies(self, pair: FailingPair) -> bool:
        return pair.result.stage == "compare" and pair.frontend.reducer.onnx_graph_search

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        return reduce_onnx_result(pair.result, pair.prepared, pair.config, pair.reports_dir, time_box)


class OwnOnnxModel:
    """A capture or import failure of a test that is an ONNX model: the model is the reproducer."""

    name, follows = "the test's ONNX model", False

    def applies(self, pair: FailingPair) -> bool:
        return (
            pair.result.stage in ("capture", "import") and getattr(pair.prepared.module, "onnx_model", None) is not None
        )

    def reduce(self, pair: FailingPair, time_box: float) -> ReduceOutcome:
        return ReduceOutcome(
            note=f"the ONNX model is the test's own: {pair.ir_dir / 'model.onnx'} is what the importer was given",
            stopped=NO_LOCALIZATION,
        )

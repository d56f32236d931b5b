"""Localize a wrong result in the FX graph: the smallest group of nodes that miscompiles.

The module is exported as the config compiled it (the test's shapes and dynamic dims),
and run node by node on native torch to record every intermediate value. A *group* of
nodes becomes a module of its own: values from outside the group enter as inputs fed
their golden values (keeping the dynamic dims the original graph gave them), the
scalar sizes the group uses are recomputed from those inputs (so `view(x, [s0*s1, 8])`
stays dynamic), and every value the group hands to the rest of the graph is an output.
Native torch computes the group's expected outputs, the config's passes compile
and runs it, and the two are compared.

Search: delta debugging (ddmin) over the nodes, from the whole graph down to a
1-minimal group whose compiled result still differs; a single guilty node is found
in ~2·log2(N) queries. Then each size the group takes from a scalar computation is
tried as a literal (-1, then its value): `view(x, [-1, 8])` needs no `size`/`mul` ops.
Expected values always come from native torch, so a reduced group is never wrong
about what the right answer is.

Nodes whose values are not reproducible are never blamed: uninitialized memory
(`empty`, `empty_strided`, `empty_like`, ...) and random ops enter groups only as inputs.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.utils._pytree as pytree

from compiler.replay_runtime.engine import to_storage_array
from e2e.framework.signature import Signature

# Ops whose values say nothing about a compiler (uninitialized memory, randomness).
UNREPRODUCIBLE = frozenset(
    {
        "empty",
        "empty_strided",
        "empty_like",
        "empty_permuted",
        "new_empty",
        "new_empty_strided",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "bernoulli",
        "normal",
        "uniform",
        "native_dropout",
        "dropout",
        "multinomial",
        "exponential",
    }
)
TIME_BOX, NO_MISMATCH, ONE_MINIMAL = "time box", "no group disagrees", "1-minimal"


def _op_name(target: Any) -> str:
    """`aten.empty_strided.default` -> `empty_strided`."""
    name = getattr(target, "__name__", str(target))
    packet = getattr(target, "_overloadpacket", None)
    return getattr(packet, "__name__", name.split(".")[0])


def _tensors(value: Any) -> list[torch.Tensor]:
    return [x for x in pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool))


def _dynamic_dims(node: torch.fx.Node) -> list[int] | None:
    """The node's shape with -1 where the exported graph keeps the dim symbolic."""
    fake = node.meta.get("val")
    if not isinstance(fake, torch.Tensor):
        return None
    return [-1 if not isinstance(d, int) else d for d in fake.shape]


@dataclass
class GroupModule:
    """A group of nodes as a module of its own, with its golden inputs."""

    module: torch.fx.GraphModule
    inputs: list[torch.Tensor]
    dynamic_dims: list[list[int] | None]
    nodes: list[str]  # formatted, for the README


@dataclass
class GroupMismatch:
    """A group whose compiled result differs from native torch on golden inputs."""

    nodes: list[str]
    targets: list[str]
    torch_backend_ir: str
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    result_dtypes: list[str]
    signature: Signature
    detail: str
    queries: int = 0
    stopped: str = ONE_MINIMAL
    literals: dict[str, int] = field(default_factory=dict)

    @property
    def guilty_op(self) -> str:
        return ", ".join(dict.fromkeys(self.targets))


class _Recorder(torch.fx.Interpreter):
    def __init__(self, module):
        super().__init__(module)
        self.values: dict[str, Any] = {}

    def run_node(self, node):
        value = super().run_node(node)
        self.values[node.name] = value
        return value


def run_torch_backend_ir(torch_ir: str, to_executor: Sequence[str], inputs: Sequence[torch.Tensor]):
    """(outputs, result dtypes) of torch backend IR compiled by `to_executor` and run on `inputs`:
    on the RefBackend, or on the runtime its last entry names (`compiler.executors.replay`)."""
    from compiler.executors import load_executor
    from compiler.refbackend import RefBackendProgram, result_dtypes
    from compiler.stages import Snapshots, new_context, parse_module
    from compiler.toolchain import split_executor
    from e2e.reducer.case import run_entries

    dtypes = result_dtypes(torch_ir)
    compiled = parse_module(torch_ir, new_context())
    passes, runtime = split_executor(to_executor)
    run_entries(compiled, passes)
    program = (
        RefBackendProgram(compiled, dtypes)
        if runtime is None
        else load_executor(runtime[0], input=runtime[1]).compile(compiled, dtypes, Snapshots())
    )
    try:
        actual = program(*inputs)
    finally:
        program.close()
    return (list(actual) if isinstance(actual, (list, tuple)) else [actual]), dtypes


# What one candidate's compile and run may take (in its own child).
QUERY_SECONDS = 60.0
QUERY_MEMORY = 4 << 30


class GraphSearch:
    """The exported graph of one method, its golden intermediate values, and group checks."""

    def __init__(
        self,
        module: torch.nn.Module,
        inputs: Sequence[Any],
        to_executor: Sequence[str],
        *,
        arg_shapes: Sequence[Sequence[int] | None] | None = None,
        tolerance=None,
        method: str = "forward",
        decompose: bool = True,
        blame_unreproducible: bool = False,
    ):
        """`decompose=False` keeps the ops as the module called them (for frontends other than FX);
        `blame_unreproducible` lets random and empty ops be units (a frontend may fail on them)."""
        from compiler.frontends import fx

        self.to_executor = list(to_executor)
        self.tolerance = tolerance
        self.blame_unreproducible = blame_unreproducible
        self.graph_module = fx.capture(module, list(inputs), arg_shapes, method, decompose=decompose).module()
        recorder = _Recorder(self.graph_module)
        with torch.no_grad():
            recorder.run(*[x for x in pytree.tree_leaves(list(inputs)) if isinstance(x, torch.Tensor)])
        self.values = recorder.values
        self.nodes = list(self.graph_module.graph.nodes)
        self.by_name = {n.name: n for n in self.nodes}
        self.units = [n.name for n in self.nodes if self._is_unit(n)]
        self.queries = 0
        self.crashed_queries = 0  # candidates whose compile or run crashed, hung or outgrew the cap
        self._seen: dict[str, tuple[str, str] | None] = {}

    def _is_unit(self, node: torch.fx.Node) -> bool:
        if node.op != "call_function" or not _tensors(self.values.get(node.name)):
            return False
        if str(node.target) == "<built-in function getitem>":
            return False
        return self.blame_unreproducible or _op_name(node.target) not in UNREPRODUCIBLE

    def scalar_uses(self, group: Sequence[str]) -> list[str]:
        """The computed scalars (sizes) the group's nodes take as arguments."""
        found: list[str] = []
        for name in group:
            for arg in pytree.tree_leaves((self.by_name[name].args, self.by_name[name].kwargs)):
                if (
                    isinstance(arg, torch.fx.Node)
                    and arg.op == "call_function"
                    and _is_scalar(self.values.get(arg.name))
                    and arg.name not in found
                ):
                    found.append(arg.name)
        return found

    def build(self, group: Sequence[str], literals: dict[str, int] | None = None) -> GroupModule:
        """The group as a module: outside tensors -> inputs, computed sizes -> recomputed or literals."""
        literals = literals or {}
        members = set(group)
        for name in list(members):  # a multi-output node brings its getitems
            members.update(u.name for u in self.by_name[name].users if str(u.target) == "<built-in function getitem>")
        graph = torch.fx.Graph()
        env: dict[str, Any] = {}
        inputs: list[torch.Tensor] = []
        dims: list[list[int] | None] = []

        def placeholder(name: str) -> torch.fx.Node:
            first = next((n for n in graph.nodes if n.op != "placeholder"), None)
            if first is None:
                return graph.placeholder(name)
            with graph.inserting_before(first):
                return graph.placeholder(name)

        def value_of(arg: torch.fx.Node) -> Any:
            if arg.name in env:
                return env[arg.name]
            if arg.name in literals:
                return literals[arg.name]
            value = self.values[arg.name]
            if isinstance(value, torch.Tensor):
                env[arg.name] = placeholder(arg.name)
                inputs.append(value.detach().clone())
                dims.append(_dynamic_dims(arg))
            elif _is_scalar(value) and arg.op == "call_function":  # recompute the size from inputs
                env[arg.name] = graph.node_copy(arg, value_of)
            else:
                env[arg.name] = value
            return env[arg.name]

        for node in self.nodes:
            if node.name in members:
                env[node.name] = graph.node_copy(node, value_of)
        outputs = [
            env[n.name]
            for n in self.nodes
            if n.name in members
            and isinstance(self.values.get(n.name), torch.Tensor)
            and any(u.name not in members for u in n.users)
        ]
        graph.output(tuple(outputs))
        module = torch.fx.GraphModule(torch.nn.Module(), graph)
        return GroupModule(module, inputs, dims, [self.by_name[n].format_node() for n in group])

    def check(self, group: Sequence[str], literals: dict[str, int] | None = None) -> tuple[str, str] | None:
        """(mismatch signature, detail) when the group's compiled result differs, else None."""
        key = hashlib.sha1(repr((sorted(group), sorted((literals or {}).items()))).encode()).hexdigest()
        if key not in self._seen:
            self.queries += 1
            self._seen[key] = self._check(group, literals)
        return self._seen[key]

    def _compiled(self, built: GroupModule) -> tuple[str, list[torch.Tensor], list[torch.dtype]] | None:
        """(torch backend IR, compiled outputs, result dtypes), None when it does not compile or run."""
        from compiler.frontends.fx import fx_to_torch_backend_ir
        from e2e.framework import isolation

        try:
            torch_ir, _ = fx_to_torch_backend_ir(built.module, built.inputs, built.dynamic_dims)
        except Exception:  # a group that does not compile alone says nothing about values
            return None
        # Compiled and run in a child: a candidate that crashes or hangs answers this query
        # (it does not show the mismatch) instead of ending the search.
        outcome = isolation.run_forked(
            lambda: run_torch_backend_ir(torch_ir, self.to_executor, built.inputs), QUERY_SECONDS, QUERY_MEMORY
        )
        if not isinstance(outcome, tuple):
            if not isinstance(outcome, isolation.Raised):
                self.crashed_queries += 1
            return None
        actual, dtypes = outcome
        return torch_ir, actual, dtypes

    def _check(self, group: Sequence[str], literals: dict[str, int] | None) -> tuple[str, str] | None:
        from e2e.framework.compare import compare_tensors
        from e2e.framework.signature import mismatch_signature

        built = self.build(group, literals)
        try:
            with torch.no_grad():
                expected = _tensors(built.module(*[x.clone() for x in built.inputs]))
        except Exception:  # not a valid program (e.g. a literal torch refuses)
            return None
        compiled = self._compiled(built)
        if compiled is None or not expected:
            return None
        for i, (g, a) in enumerate(zip(expected, compiled[1])):
            mismatch = compare_tensors(g, a, f"output {i}", self.tolerance)
            if mismatch is not None:
                return mismatch_signature(mismatch.kind), str(mismatch)
        return None

    def result(
        self, group: Sequence[str], literals: dict[str, int], found: tuple[str, str], stopped: str
    ) -> GroupMismatch:
        built = self.build(group, literals)
        with torch.no_grad():
            expected = _tensors(built.module(*[x.clone() for x in built.inputs]))
        torch_ir, _, dtypes = self._compiled(built)
        return GroupMismatch(
            nodes=built.nodes,
            targets=[str(self.by_name[n].target) for n in group],
            torch_backend_ir=torch_ir,
            inputs=[to_storage_array(x) for x in built.inputs],
            expected=[to_storage_array(x) for x in expected],
            result_dtypes=[str(d).removeprefix("torch.") for d in dtypes],
            signature=found[0],
            detail=found[1],
            queries=self.queries,
            stopped=stopped,
            literals=dict(literals),
        )


def ddmin(items: list[str], fails: Callable[[list[str]], bool], deadline: float) -> tuple[list[str], bool]:
    """A 1-minimal sublist of `items` for which `fails` holds (it holds for `items`); (it, completed)."""
    granularity = 2
    while len(items) >= 2:
        size = len(items)
        chunks = [items[i * size // granularity : (i + 1) * size // granularity] for i in range(granularity)]
        chunks = [c for c in chunks if c]
        complements = [[x for x in items if x not in c] for c in chunks] if granularity > 2 else []
        for candidate, next_granularity in [(c, 2) for c in chunks] + [
            (c, max(granularity - 1, 2)) for c in complements
        ]:
            if time.monotonic() > deadline:
                return items, False
            if fails(candidate):
                items, granularity = candidate, next_granularity
                break
        else:
            if granularity >= size:
                break
            granularity = min(2 * granularity, size)
    return items, True


def localize_group(search: GraphSearch, deadline: float) -> GroupMismatch | str:
    """The smallest group found that miscompiles, or why there is none (TIME_BOX, NO_MISMATCH)."""
    units = search.units
    if not units:
        return NO_MISMATCH + " (the graph has no reproducible tensor op)"
    if search.check(units) is None:
        return NO_MISMATCH + ": the whole graph, recompiled from its golden inputs, agrees with native torch"
    group, completed = ddmin(units, lambda g: search.check(g) is not None, deadline)
    literals: dict[str, int] = {}
    for scalar in search.scalar_uses(group):  # sizes as literals: fewer ops, same bug
        if time.monotonic() > deadline:
            completed = False
            break
        for literal in (-1, int(search.values[scalar])):
            if search.check(group, {**literals, scalar: literal}) is not None:
                literals[scalar] = literal
                break
    found = search.check(group, literals)
    return search.result(group, literals, found, ONE_MINIMAL if completed else TIME_BOX)

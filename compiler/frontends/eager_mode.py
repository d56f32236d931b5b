"""Eager mode: run an unmodified PyTorch program, compiling every aten op alone (the eager
config's dispatcher; its frontend object is `compiler.frontends.eager.EagerFrontend`).

    from compiler.frontends.eager_mode import EagerSession, eager_mode, from_eager, to_eager

    session = EagerSession()
    to_eager(model, session)                         # parameters and buffers wrapped
    out = from_eager(model(to_eager(x, session)))    # each aten op compiled and run
    print(session.report.summary())                  # compiled vs fell back, cache hits

    with eager_mode(session):                        # factory ops (`arange`) too
        out = from_eager(model(x))

An `EagerTensor` wraps a real tensor (`elem`). Autograd runs above the dispatcher, so
forward and backward ops alike reach `__torch_dispatch__` as aten ops. For each op the
session compiles a single-op program (`eager_ops.compile_single_op`: one-node FX graph
-> import -> torch backend -> linalg -> RefBackend) and runs it on the tensors' data.
Compiled ops are cached by op overload, tensor shapes and dtypes and non-tensor
arguments, so a cache hit costs a dict lookup and the ExecutionEngine call. An op that
does not compile alone is compiled through its decomposition as one program, else runs
its decomposition with each of its ops dispatched here (`DecomposedOp`); an op that
fails all three runs natively and is recorded as a `Fallback`, a failure; ops in
`NATIVE_BY_DESIGN` (views, metadata, allocation, random numbers) run natively and are
not failures. In-place and `out=` ops run their functional variant, then copy into
the destination, so views see the writes.

A config that checks a test in eager mode wraps the module, runs the test's calls in
`eager_mode` and compares `from_eager(outputs)` with golden; the test fails if
`session.report.fallbacks` is not empty, each fallback a failure with `signature`
(op overload @ stage) and `torch_ir` (the single op, its saved IR).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

import torch
import torch.utils._pytree as pytree
from torch._C import DispatchKey
from torch._ops import HigherOrderOperator
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch_mlir import ir

from compiler.frontends.eager_ops import (
    NATIVE_BY_DESIGN,
    CompiledOp,
    DecomposedOp,
    DecompositionMismatch,
    InBatch,
    LoweredOp,
    OpCall,
    Plan,
    StagedOp,
    can_decompose,
    compile_single_op,
    decomposition,
    native_reason,
    plan,
    result_types,
    stage_single_op,
    type_text,
)
from compiler.refbackend import LoweredBatch, RefBackendProgram, lower_together
from compiler.stages import Snapshots, StageError, new_context

__all__ = [
    "NATIVE_BY_DESIGN",
    "EagerReport",
    "EagerSession",
    "EagerTensor",
    "Fallback",
    "LoweredOpStore",
    "eager_mode",
    "from_eager",
    "native_reason",
    "to_eager",
]


# --- the report --------------------------------------------------------------------------


@dataclass
class Fallback:
    """One op signature that ran on native PyTorch because compiling or running it failed."""

    op: str  # the op overload, e.g. "aten.max.dim"
    arguments: str  # e.g. "float32[4,4], 1"
    stage: str  # capture, import, torch-backend, backend, lower, execute or compare
    message: str  # the first diagnostic
    torch_ir: str | None = None  # the single op as raw torch-dialect IR; None if import failed
    graph: str = ""  # the single-op FX graph the importer was given
    failing_pass: str | None = None
    failing_ir: str | None = None  # the IR just before the failing pass
    calls: int = 0

    @property
    def signature(self) -> str:
        return f"{self.op} @ {self.stage}"

    def describe(self) -> str:
        where = f" in {self.failing_pass}" if self.failing_pass else ""
        return f"{self.op}({self.arguments}): [{self.stage}{where}] {self.message}"


@dataclass
class EagerReport:
    """Calls per op overload. `passed`: no op that computes values fell back."""

    compiled_calls: Counter[str] = field(default_factory=Counter)
    cache_hits: Counter[str] = field(default_factory=Counter)
    compiles: Counter[str] = field(default_factory=Counter)  # signatures compiled (misses)
    loaded: Counter[str] = field(default_factory=Counter)  # signatures JIT-compiled from the session's store
    native_calls: Counter[str] = field(default_factory=Counter)  # native by design
    native_reasons: dict[str, str] = field(default_factory=dict)
    fallbacks: list[Fallback] = field(default_factory=list)  # one per op signature
    decomposed: set[str] = field(default_factory=set)  # ops compiled through their decomposition
    # Calls of ops run through their decomposition op by op (their parts are counted as ops).
    decomposed_calls: Counter[str] = field(default_factory=Counter)
    compile_seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.fallbacks

    @property
    def fallback_calls(self) -> Counter[str]:
        calls: Counter[str] = Counter()
        for fallback in self.fallbacks:
            calls[fallback.op] += fallback.calls
        return calls

    def summary(self) -> str:
        """One line per op (compiled, cache hits, fell back, native), then each fallback's reason."""
        fallback_calls = self.fallback_calls
        lines = [
            f"eager: {sum(self.compiled_calls.values())} calls compiled ({len(self.compiled_calls)} ops, "
            f"{sum(self.compiles.values())} signatures compiled and {sum(self.loaded.values())} loaded "
            f"in {self.compile_seconds:.2f} s, "
            f"{sum(self.cache_hits.values())} cache hits), "
            f"{sum(fallback_calls.values())} fell back ({len(fallback_calls)} ops), "
            f"{sum(self.native_calls.values())} native by design ({len(self.native_calls)} ops)"
        ]
        ops = sorted(set(self.compiled_calls) | set(fallback_calls) | set(self.native_calls))
        width = max((len(op) for op in ops), default=2)
        if ops:
            lines.append(f"  {'op':<{width}}  compiled  hits  fallback  native")
        for op in ops:
            lines.append(
                f"  {op:<{width}}  {self.compiled_calls[op]:>8}  {self.cache_hits[op]:>4}"
                f"  {fallback_calls[op]:>8}  {self.native_calls[op]:>6}"
            )
        if self.decomposed:
            lines.append("compiled through their decompositions: " + ", ".join(sorted(self.decomposed)))
        if self.decomposed_calls:
            lines.append(
                "run as their decompositions, op by op: "
                + ", ".join(f"{op} ({calls} calls)" for op, calls in sorted(self.decomposed_calls.items()))
            )
        if self.fallbacks:
            lines.append("fallbacks:")
            lines.extend(f"  {f.describe()}" for f in self.fallbacks)
        if self.native_calls:
            lines.append("native by design:")
            lines.extend(f"  {op}: {self.native_reasons[op]}" for op in sorted(self.native_calls))
        return "\n".join(lines)


# --- the tensor subclass ------------------------------------------------------------------


class EagerTensor(torch.Tensor):
    """A tensor whose aten ops are compiled one by one by its session."""

    elem: torch.Tensor
    session: "EagerSession"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor, session: "EagerSession", requires_grad: bool = False):
        tensor = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=elem.device,
            requires_grad=requires_grad,
        )
        tensor.elem = elem
        tensor.session = session
        return tensor

    def __repr__(self, *, tensor_contents=None) -> str:
        grad = f", grad_fn=<{type(self.grad_fn).__name__}>" if self.grad_fn is not None else ""
        with _disable_current_modes():  # printing is not part of the program
            return f"EagerTensor({self.elem!r}{grad})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _session_of(args, kwargs).dispatch(func, args, kwargs or {})


def _session_of(args: tuple, kwargs: dict | None) -> "EagerSession":
    for value in args:  # the common case, without flattening
        if type(value) is EagerTensor:
            return value.session
    for value in pytree.tree_leaves((args, kwargs)):
        if type(value) is EagerTensor:
            return value.session
    raise RuntimeError("EagerTensor.__torch_dispatch__ called without an EagerTensor argument")


def _signature(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The cache key of one argument; appends the data of its tensors to `tensors`.

    Walks arguments in the order `single_op_graph` makes placeholders (pytree order).
    """
    if isinstance(value, torch.Tensor):
        if type(value) is EagerTensor:
            value = value.elem
        tensors.append(value)
        return (value.dtype, value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(item, tensors) for item in value)
    if isinstance(value, float):
        return (float, repr(value))  # 1.0 and 1 differ, nan equals nan
    return (type(value), value)


def _call_signature(func, args: tuple, kwargs: dict, tensors: list[torch.Tensor]) -> Any:
    """The cache key of a call: `_signature` of its arguments, EagerTensors inline (the
    common case, on every call)."""
    positional = []
    for value in args:
        if type(value) is EagerTensor:
            value = value.elem
            tensors.append(value)
            positional.append((value.dtype, value.shape))
        else:
            positional.append(_signature(value, tensors))
    return (func, tuple(positional), tuple((k, _signature(v, tensors)) for k, v in kwargs.items()) if kwargs else ())


# Argument values whose repr is their value, in every process: what an op's key is written with.
_STABLE_VALUES = (bool, int, float, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def op_key(key: Any, backend: str, opt_level: int | None) -> str | None:
    """A session's cache key (`_call_signature`) as text that means the same in another
    process, with the backend and opt level; None when an argument has no such text (an
    object whose repr is its address): that op is compiled by every session."""

    def text(value: Any) -> str | None:
        if isinstance(value, torch._ops.OpOverload):
            return str(value)
        if isinstance(value, torch.Size):
            return repr(value)
        if isinstance(value, tuple):
            items = [text(item) for item in value]
            return None if None in items else "(" + ", ".join(items) + ")"
        if isinstance(value, type):
            return f"{value.__module__}.{value.__qualname__}"
        if type(value) in _STABLE_VALUES:
            return repr(value)
        return None

    op_text = text(key)
    return None if op_text is None else f"{op_text} backend={backend} opt_level={opt_level}"


def _unwrap(value: Any) -> Any:
    return value.elem if type(value) is EagerTensor else value


def _holds_tensors(value: Any) -> bool:
    """A list or tuple with a tensor in it, at any depth."""
    return (type(value) is list or type(value) is tuple) and any(
        isinstance(item, torch.Tensor) or _holds_tensors(item) for item in value
    )


def _argument_text(args: tuple, kwargs: dict) -> str:
    def text(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return type_text(value.shape, value.dtype)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(text(v) for v in value) + "]"
        return repr(value)

    return ", ".join([text(a) for a in args] + [f"{k}={text(v)}" for k, v in kwargs.items()])


# --- the session: dispatch, cache, report ---------------------------------------------------


class LoweredOpStore(Protocol):
    """Lowered ops kept beyond one session (a later test host, a later run): the session
    asks for an op by `op_key` (its op, argument signature, backend and opt level) before
    compiling it, and JIT-compiles what it gets (`LoweredOp.load`); it puts every op it
    compiled. The store keys them by what else a lowered op depends on (torch, torch-mlir,
    the compiler's sources, the JIT target). Failures are never put: a fallback compiles
    again, so its stage, message and saved IR are the compile's own."""

    def get(self, key: str) -> object | None: ...

    def put(self, key: str, value: LoweredOp) -> None: ...


class EagerSession:
    """Compiles and runs aten ops one at a time; owns the compiled-op cache and the report.

    `backend` is one of `compiler.pipelines.BACKENDS` ("linalg", "tosa", "stablehlo");
    `opt_level` the ExecutionEngine's for every op, or None: the RefBackend's policy per
    op (`compiler.refbackend.opt_level_for`: O2 on a tensor of a million elements or
    more, else O0). O2 by default: a session calls its programs again and again, so
    O2's longer JIT (about 2x per op) is paid once per signature and its faster code
    on every call (benchmarks/eager_zoo.py; the `eager` config, which calls each op
    once or twice, compiles at O0). `lowered_ops`: ops lowered by earlier sessions, this
    session's own put there (None: every op compiled here).
    """

    def __init__(
        self, backend: str = "linalg", *, opt_level: int | None = 2, lowered_ops: LoweredOpStore | None = None
    ):
        self.backend = backend
        self.opt_level = opt_level
        self.lowered_ops = lowered_ops
        self.report = EagerReport()
        # (op, argument signature) -> its CompiledOp, its DecomposedOp (run op by op), or
        # the Fallback recorded for it.
        self._cache: dict[Any, CompiledOp | DecomposedOp | Fallback] = {}
        self._fake_mode = FakeTensorMode()
        self._decomposing: set[str] = set()  # ops whose decomposition is running
        # One MLIR context for every op this session compiles or loads: a context takes
        # ~2 ms to make, and three per op (the import, the backend stage's parse, the JIT's
        # parse) were a fifth of a small op's compile.
        # Its uniqued types and attributes grow with the ops (no tensor data: a single-op
        # program takes its tensors as arguments); `close` lets it go.
        self._context: ir.Context | None = None
        # While a run is rehearsed (`compile_ahead`): the signatures it would compile, in order.
        self._rehearsal: dict[Any, tuple] | None = None
        self._ahead: set[Any] = set()  # compiled ahead, not called yet: a first call is no cache hit
        self._batches: dict[str, dict[str, RefBackendProgram]] = {}  # loaded from the store, by key

    def dispatch(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
        """Run one aten op on EagerTensors (or plain tensors); tensor results are EagerTensors."""
        op = plan(func)
        if op.native_reason is not None:
            self.report.native_calls[op.name] += 1
            self.report.native_reasons[op.name] = op.native_reason
            return self._run_native(func, args, kwargs)
        if op.mutating and op.functional is not None and op.functional.is_view:
            return self._run_in_place_view(func, op, args, kwargs)
        if op.mutating:
            return self._run_mutating(func, op, args, kwargs)
        tensors: list[torch.Tensor] = []
        key: Any = _call_signature(func, args, kwargs, tensors)
        try:
            entry = self._cache.get(key)
        except TypeError:  # an unhashable argument: compile, but do not cache
            key, entry = None, None
        hit = entry is not None
        if hit and self._ahead and key in self._ahead:
            self._ahead.discard(key)
            hit = False
        if entry is None:
            if self._rehearsal is not None:
                return self._rehearse(func, args, kwargs, key)
            entry = self._compile(func, op, args, kwargs, key)
        if type(entry) is DecomposedOp:
            entry = self._run_decomposed(entry, op, args, kwargs, key)
            if type(entry) is not Fallback:
                return entry
            hit = False
        if type(entry) is CompiledOp:
            try:
                results = entry.run(tensors)
            except StageError as error:
                entry.program.close()
                entry = self._record_fallback(op, args, kwargs, error, key, torch_ir=entry.torch_ir)
                hit = False
            else:
                self.report.compiled_calls[op.name] += 1
                if hit:
                    self.report.cache_hits[op.name] += 1
                return self._wrap_results(entry, results)
        return self._run_fallback(entry, func, args, kwargs, key, fresh=not hit)

    def _run_fallback(self, fallback: Fallback, func, args: tuple, kwargs: dict, key: Any, fresh: bool) -> Any:
        try:
            result = self._run_native(func, args, kwargs)
        except Exception:
            if fresh:  # PyTorch rejects the call too: the program's error, not a fallback
                self.report.fallbacks.remove(fallback)
                self._cache.pop(key, None)
            raise
        fallback.calls += 1
        return result

    def _run_decomposed(self, entry: DecomposedOp, op: Plan, args: tuple, kwargs: dict, key: Any) -> Any:
        """The op's decomposition run here, its ops dispatched to this session one by one;
        its result, or the op's Fallback if the decomposition cannot stand in for it."""
        if op.name in self._decomposing:  # the decomposition calls the op itself again
            return self._record_fallback(op, args, kwargs, entry.failure, key)
        self._decomposing.add(op.name)
        try:
            with _EagerDispatchMode(self):  # factory ops of the decomposition too
                result = entry.run(*args, **kwargs)
            entry.check(result)
        except Exception as error:  # noqa: BLE001 - recorded; the op then runs natively
            cause = error.message if isinstance(error, StageError) else f"{type(error).__name__}: {error}"
            fallback = self._record_fallback(
                op, args, kwargs, _with_cause(entry.failure, cause.strip().split("\n")[0]), key, torch_ir=entry.torch_ir
            )
            fallback.graph = entry.graph
            return fallback
        finally:
            self._decomposing.discard(op.name)
        self.report.decomposed_calls[op.name] += 1
        return result

    def compile_ahead(self, rehearse: Callable[[], object]) -> None:
        """Compile, before a run, the op signatures it will compile, together: `rehearse()`
        runs the program on native kernels, this session recording each signature it
        would compile; each is then compiled alone up to its `lower` stage, as
        `compile_single_op` does, and all of them go through one `lower` stage and one
        JIT (`refbackend.lower_together`). A test's ops then cost about half as much
        (`benchmarks/eager_compile.py`); each is still its own function, lowered by the
        same passes. The run itself finds them compiled.

        Nothing the rehearsal does is kept but the compiled ops: not its report, not the
        fallbacks of ops without a functional variant, not the random numbers it drew
        (the generator's state is put back). An op that fails to stage, or a lowering or
        JIT of them all that fails, leaves those ops to the run, which compiles each alone
        and records its failure as always. `rehearse` must run on its own copies of the
        module and inputs (it may change them); an exception it raises ends it (the run
        raises it again)."""
        report, cached = self.report, set(self._cache)
        self.report, self._rehearsal = EagerReport(), {}
        try:
            with torch.random.fork_rng(devices=[]):
                rehearse()
        except Exception:  # noqa: BLE001 - the run itself raises it again, where it is reported
            pass
        finally:
            recorded, self._rehearsal, self.report = self._rehearsal, None, report
            for key in set(self._cache) - cached:
                del self._cache[key]  # the rehearsal's fallbacks: the run records its own
        start = time.perf_counter()
        stored = {}  # key -> (its key in the store, what the store keeps for it)
        for key in recorded:
            stored_as = None if self.lowered_ops is None else op_key(key, self.backend, self.opt_level)
            stored[key] = (stored_as, self._stored(stored_as))
        wanted = Counter(
            lowered.program.batch
            for _, lowered in stored.values()
            if lowered is not None and isinstance(lowered.program, InBatch)
        )
        for batch_key, count in wanted.items():
            self._load_batch(batch_key, count)
        staged: list[tuple[Any, Plan, StagedOp, str | None]] = []
        for key, (func, op, args, kwargs) in recorded.items():
            stored_as, lowered = stored[key]
            loaded = None if lowered is None else self._load_stored(lowered, op)
            if loaded is not None:
                self._cache[key] = loaded
                self._ahead.add(key)
                continue
            item = self._stage(func, args, kwargs)
            if item is not None:
                staged.append((key, op, item, stored_as))
        groups: dict[tuple, list] = {}
        for entry in staged:
            to_lower = entry[2].to_lower
            groups.setdefault((to_lower.to_linalg, to_lower.opt_level), []).append(entry)
        for group in groups.values():
            try:
                programs, batch = lower_together(
                    [item.to_lower for _, _, item, _ in group], keep_text=self.lowered_ops is not None
                )
            except Exception:  # noqa: BLE001 - each op then compiles alone in the run
                continue
            batch_key = ""
            if batch is not None:  # kept once; each op's entry names it
                batch_key = "lowered together " + hashlib.sha256(batch.llvm_ir.encode()).hexdigest()
                self.lowered_ops.put(batch_key, batch)
            for (key, op, item, stored_as), program in zip(group, programs):
                compiled = CompiledOp(program, item.lowered(InBatch(batch_key, program.entry)))
                self._cache[key] = compiled
                self._ahead.add(key)
                self.report.compiles[op.name] += 1
                if item.decomposed:
                    self.report.decomposed.add(op.name)
                if stored_as is not None and batch is not None:
                    self.lowered_ops.put(stored_as, compiled.lowered)
        self.report.compile_seconds += time.perf_counter() - start

    def _stage(self, func, args: tuple, kwargs: dict) -> StagedOp | None:
        """The op up to its `lower` stage as `_compile_op` would compile it: alone, else
        through its decomposition as one program; None if neither stages (the run then
        compiles it, and records how it failed)."""
        call = self._op_call(func, args, kwargs)
        for decompose in (False, True):
            if decompose and not can_decompose(func):
                return None
            try:
                return stage_single_op(call.decomposed() if decompose else call, Snapshots())
            except Exception:  # noqa: BLE001 - see above
                continue
        return None

    def _op_call(self, func, args: tuple, kwargs: dict) -> OpCall:
        """`func` called with `args` and `kwargs`, as this session compiles it (alone)."""
        return OpCall(func, args, kwargs, self._fake_mode, self.backend, self.opt_level, context=self.context)

    def _rehearse(self, func, args: tuple, kwargs: dict, key: Any) -> Any:
        """A rehearsal's op: its signature recorded, the op run natively."""
        if key is not None and key not in self._rehearsal:
            plain_args, plain_kwargs = pytree.tree_map(_unwrap, (args, kwargs))
            self._rehearsal[key] = (func, plan(func), plain_args, plain_kwargs)
        return self._run_native(func, args, kwargs)

    def close(self) -> None:
        """Release every compiled program (their ExecutionEngines) now."""
        for entry in self._cache.values():
            if type(entry) is CompiledOp:
                entry.program.close()
        self._cache.clear()
        self._batches.clear()
        self._context = None

    @property
    def context(self) -> ir.Context:
        if self._context is None:
            self._context = new_context()
        return self._context

    def _compile(self, func, op: Plan, args: tuple, kwargs: dict, key: Any) -> CompiledOp | DecomposedOp | Fallback:
        snapshots = Snapshots()
        start = time.perf_counter()
        stored_as = None if key is None or self.lowered_ops is None else op_key(key, self.backend, self.opt_level)
        try:
            entry: CompiledOp | Fallback | None = self._load(stored_as, op)
            if entry is None:
                plain_args, plain_kwargs = pytree.tree_map(_unwrap, (args, kwargs))
                entry = self._compile_op(func, op, plain_args, plain_kwargs, snapshots)
                if type(entry) is CompiledOp:
                    self.report.compiles[op.name] += 1
                    if stored_as is not None:
                        self.lowered_ops.put(stored_as, entry.lowered)
            if type(entry) is CompiledOp and entry.lowered.decomposed:
                self.report.decomposed.add(op.name)
            if key is not None:
                self._cache[key] = entry
        except StageError as error:
            entry = self._record_fallback(op, args, kwargs, error, key, snapshots=snapshots)
        self.report.compile_seconds += time.perf_counter() - start
        return entry

    def _load(self, stored_as: str | None, op: Plan) -> CompiledOp | None:
        """The op as an earlier session lowered it, JIT-compiled; None: compile it here."""
        lowered = self._stored(stored_as)
        return None if lowered is None else self._load_stored(lowered, op)

    def _stored(self, stored_as: str | None) -> LoweredOp | None:
        lowered = None if stored_as is None else self.lowered_ops.get(stored_as)
        return lowered if isinstance(lowered, LoweredOp) else None

    def _load_stored(self, lowered: LoweredOp, op: Plan) -> CompiledOp | None:
        """`lowered` JIT-compiled, or, for an op lowered with others, its entry of their batch
        if this session loaded it (`_load_batch`); None: compile it here (a program the JIT
        cannot load is compiled again, so its failure is the compile's)."""
        try:
            if isinstance(lowered.program, InBatch):
                program = self._batches.get(lowered.program.batch, {}).get(lowered.program.entry)
                if program is None:
                    return None
                compiled = CompiledOp(program, lowered)
            else:
                compiled = lowered.load(self.context)
        except Exception:  # noqa: BLE001 - compiled again below, where a failure is recorded
            return None
        self.report.loaded[op.name] += 1
        return compiled

    def _load_batch(self, batch_key: str, wanted: int) -> None:
        """JIT-compile the batch the store keeps under `batch_key` if this session wants at
        least half of its ops: a rerun of the test that lowered them wants them all, while
        a test that shares an op or two with another compiles them with its own, cheaper
        than the other's whole batch."""
        if batch_key in self._batches:
            return
        batch = self.lowered_ops.get(batch_key)
        if not isinstance(batch, LoweredBatch) or 2 * wanted < len(batch.entries):
            return
        try:
            self._batches[batch_key] = batch.load(self.context)
        except Exception:  # noqa: BLE001 - its ops compile again
            self._batches[batch_key] = {}

    def _compile_op(self, func, op: Plan, args: tuple, kwargs: dict, snapshots: Snapshots) -> CompiledOp | DecomposedOp:
        """The op alone; if that fails, its decomposition (as the FX configs would compile
        it) as one program; if that fails too, the decomposition to run op by op."""
        call = self._op_call(func, args, kwargs)
        try:
            return compile_single_op(call, snapshots)
        except StageError:
            if not can_decompose(func):
                raise
            first_failure = sys.exc_info()[1]
        try:
            return compile_single_op(call.decomposed(), Snapshots())
        except DecompositionMismatch:
            raise first_failure from None  # the op's own failure is the one to report
        except Exception:  # noqa: BLE001 - as above, if op by op fails too
            pass
        run = decomposition(func)
        if run is None:
            raise first_failure from None
        try:
            types = result_types(func, args, kwargs, self._fake_mode)
        except Exception:
            raise first_failure from None
        texts = snapshots.texts
        return DecomposedOp(run, first_failure, types, texts.get("torch-backend"), texts.get("graph", ""))

    def _record_fallback(
        self,
        op: Plan,
        args: tuple,
        kwargs: dict,
        error: StageError,
        key: Any,
        *,
        torch_ir: str | None = None,
        snapshots: Snapshots | None = None,
    ) -> Fallback:
        texts = snapshots.texts if snapshots is not None else {}
        fallback = Fallback(
            op=op.name,
            arguments=_argument_text(args, kwargs),
            stage=error.stage,
            message=error.message,
            torch_ir=torch_ir or texts.get("torch-backend"),
            graph=texts.get("graph", ""),
            failing_pass=error.failing_pass,
            failing_ir=error.input_ir,
        )
        self.report.fallbacks.append(fallback)
        if key is not None:
            self._cache[key] = fallback
        return fallback

    def _wrap_results(self, compiled: CompiledOp, results: list[torch.Tensor]) -> Any:
        if compiled.result_kind == "tensor":
            return EagerTensor(results[0], self)
        values = [None if slot is None else EagerTensor(results[slot], self) for slot in compiled.result_slots]
        return values if compiled.result_kind == "list" else tuple(values)

    def _run_native(self, func, args: tuple, kwargs: dict) -> Any:
        """Run on the wrapped data. A result that is an input's data returns that input,
        as in-place ops must return the tensor they were given."""
        if any(_holds_tensors(a) for a in args) or any(_holds_tensors(v) for v in kwargs.values()):
            leaves = pytree.tree_leaves((args, kwargs))
            plain_args, plain_kwargs = pytree.tree_map(_unwrap, (args, kwargs))
        else:  # no tensor inside a list (views, most of them): no pytree walk
            leaves = (*args, *kwargs.values())
            plain_args = [_unwrap(a) for a in args]
            plain_kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        inputs = {id(v.elem): v for v in leaves if type(v) is EagerTensor}
        result = func(*plain_args, **plain_kwargs)

        def wrap(value: Any) -> Any:
            if not isinstance(value, torch.Tensor) or type(value) is EagerTensor:
                return value
            original = inputs.get(id(value))
            return original if original is not None else EagerTensor(value, self)

        return wrap(result) if isinstance(result, torch.Tensor) else pytree.tree_map(wrap, result)

    def _run_in_place_view(self, func, op: Plan, args: tuple, kwargs: dict) -> Any:
        """`transpose_`, `squeeze_`, `t_`: metadata only. The data's sizes and strides change
        natively; the wrapper's own are then set to match, or later views would go stale."""
        self.report.native_calls[op.name] += 1
        self.report.native_reasons[op.name] = IN_PLACE_VIEW
        target = args[0]
        result = self._run_native(func, args, kwargs)
        if type(target) is EagerTensor:
            _mirror_metadata(target)
        return result

    def _run_mutating(self, func, op: Plan, args: tuple, kwargs: dict) -> Any:
        """In-place and out= ops: the functional variant (compiled or a recorded fallback),
        then a copy into each destination, which views of it see."""
        if op.functional is None:
            key = _call_signature(func, args, kwargs, [])
            entry = self._cache.get(key)
            fresh = entry is None
            if entry is None:
                error = StageError("capture", f"{op.name} mutates its arguments and has no functional variant")
                entry = self._record_fallback(op, args, kwargs, error, key)
            return self._run_fallback(entry, func, args, kwargs, key, fresh)
        bound = dict(zip(op.argument_names, args)) | kwargs
        destinations = [bound[name] for name in op.written]
        functional_kwargs = kwargs if op.in_place else {k: v for k, v in kwargs.items() if k not in op.written}
        result = self.dispatch(op.functional, args, functional_kwargs)
        values = [result] if isinstance(result, torch.Tensor) else [r for r in result if r is not None]
        for destination, value in zip(destinations, values):
            target, source = _unwrap(destination), _unwrap(value)
            if target.shape != source.shape:
                # A wrapper's sizes cannot follow a resize of its data.
                raise NotImplementedError(
                    f"eager: {op.name} would resize its destination from {list(target.shape)} "
                    f"to {list(source.shape)}; pass a destination of the result's shape"
                )
            target.copy_(source)
        return destinations[0] if len(destinations) == 1 else tuple(destinations)


def _with_cause(failure: StageError, cause: str) -> StageError:
    """The op's own failure, saying why its decomposition could not stand in for it."""
    return StageError(
        failure.stage,
        f"{failure.message} (run as its decomposition: {cause})",
        failing_pass=failure.failing_pass,
        input_ir=failure.input_ir,
    )


IN_PLACE_VIEW = "metadata: changes its tensor's sizes/strides in place, no values computed"

# Below these keys, an op on a wrapper runs PyTorch's own kernel on the wrapper's metadata.
_PYTHON_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
    torch._C.DispatchKey.PythonTLSSnapshot
)


def _mirror_metadata(wrapper: EagerTensor) -> None:
    """Give the wrapper the sizes, strides and offset its data now has."""
    elem = wrapper.elem
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
        torch.ops.aten.as_strided_.default(wrapper, elem.shape, elem.stride(), elem.storage_offset())


# --- the user API -----------------------------------------------------------------------------


def to_eager(value: Any, session: EagerSession) -> Any:
    """Wrap a tensor or a pytree of tensors, or a module's parameters and buffers in place.

    The wrapper shares its data with the tensor it wraps (no copy). A tensor that
    requires grad becomes a new leaf that requires grad. Inside `eager_mode` too:
    the wrapping itself (`detach`) is not dispatched to the session, so a tensor is
    never wrapped twice.
    """
    with _disable_current_modes():
        return _wrap_tree(value, session)


def _wrap_tree(value: Any, session: EagerSession) -> Any:
    if isinstance(value, torch.nn.Module):
        for module in value.modules():
            for name, parameter in list(module._parameters.items()):
                if parameter is not None and type(parameter) is not EagerTensor:
                    wrapped = EagerTensor(parameter.detach(), session)
                    module._parameters[name] = torch.nn.Parameter(wrapped, parameter.requires_grad)
            for name, buffer in list(module._buffers.items()):
                if buffer is not None and type(buffer) is not EagerTensor:
                    module._buffers[name] = EagerTensor(buffer, session)
        return value

    def wrap(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and type(x) is not EagerTensor:
            return EagerTensor(x.detach(), session, requires_grad=x.requires_grad)
        return x

    return pytree.tree_map(wrap, value)


def from_eager(value: Any) -> Any:
    """The plain tensors inside a pytree of EagerTensors: their data, without autograd history."""
    return pytree.tree_map(_unwrap, value)


class _EagerDispatchMode(TorchDispatchMode):
    # Higher-order operators (`cond`, `while_loop`, `map`, `scan`) reach
    # `__torch_dispatch__` too, instead of raising "no rule registered".
    supports_higher_order_operators = True

    def __init__(self, session: EagerSession):
        super().__init__()
        self.session = session

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if isinstance(func, HigherOrderOperator):
            return self._run_higher_order(func, args, kwargs or {})
        return self.session.dispatch(func, args, kwargs or {})

    def _run_higher_order(self, func: HigherOrderOperator, args: tuple, kwargs: dict) -> Any:
        """Run a higher-order operator as PyTorch runs it on CPU (its dense kernel: `cond`
        evaluates its predicate and calls one branch, `while_loop` calls its body while its
        condition holds), with each function it calls running in this mode, so the ops
        of a branch or a body are compiled one by one like any other."""
        kernel = func.py_kernels.get(DispatchKey.CompositeExplicitAutograd)
        if kernel is None:
            raise NotImplementedError(
                f"eager: higher-order operator {func.name()} has no dense (CompositeExplicitAutograd) "
                "kernel to run op by op"
            )

        def in_mode(function):
            @functools.wraps(function)
            def run(*call_args, **call_kwargs):
                with self:
                    return function(*call_args, **call_kwargs)

            return run

        def wrap(value: Any) -> Any:
            return in_mode(value) if callable(value) and not isinstance(value, torch.Tensor) else value

        # The mode is off here (torch pops it around this call), as the dense kernels require.
        return kernel(*pytree.tree_map(wrap, args), **pytree.tree_map(wrap, kwargs))


@contextlib.contextmanager
def _composite_cpu_kernels() -> Iterator[None]:
    """Make PyTorch choose, below composite ops, the aten ops torch.export traces rather
    than fused CPU kernels torch-mlir has no lowering for: `scaled_dot_product_attention`
    its math path (`_scaled_dot_product_attention_math`, which is what torch's own
    decomposition of `_scaled_dot_product_flash_attention_for_cpu` calls), and `nn.LSTM`
    / `nn.GRU` their unrolled cells instead of `mkldnn_rnn_layer`. Both are global
    switches of PyTorch's (not per thread), restored on exit."""
    mkldnn_was_enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        torch._C._set_mkldnn_enabled(mkldnn_was_enabled)


@contextlib.contextmanager
def eager_mode(session: EagerSession | None = None) -> Iterator[EagerSession]:
    """Run every aten op in the block through `session` (a new one if None): ops on plain
    tensors and factory ops (`arange`, `full`) too, and the branches and bodies of `cond`,
    `while_loop`, `map` and `scan`. Tensor results are EagerTensors. Inside the block,
    attention and RNNs take PyTorch's composite paths (`_composite_cpu_kernels`)."""
    session = session if session is not None else EagerSession()
    # force_eager: `torch.compile` (which `torch.cond` calls in eager PyTorch) runs its
    # function as written, op by op here. Else Dynamo skips the frame under this mode and
    # marks its code skipped for good: a nested `cond` then fails later, in this mode or not.
    with torch.compiler.set_stance("force_eager"), _composite_cpu_kernels(), _EagerDispatchMode(session):
        yield session

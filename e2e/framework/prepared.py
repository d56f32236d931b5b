"""What every config of one test starts from, computed once per process: the test's
pristine module, its golden trace, and what its configs share.

    prepared = prepare(test)                      # user code: run it in a test host
    imported = prepared.imported(frontend, item, key, shapes, snapshots)

`PreparedTest` owns a test's frontend results for all its configs: the capture and the
import of each call (`imported`), and each pipeline's torch-backend IR (`share`). Each
is computed once per test, by whichever config comes first, and reused by the others
(noted on their Results); across runs, the frontend cache keeps what the frontend's
`keeps` says: a capture that pickles (FX's; the JIT frontends' as their importer's text),
keyed by torch, the test and the capture code, and its import (by torch-mlir too), or
another frontend's import (dynamo's). A test host computes them
(`e2e.framework.host`); a child forked for one pair sends back what it computed
(`new_shared`).
"""

from __future__ import annotations

import copy
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.utils._pytree as pytree

from compiler.frontends import KEEPS_CAPTURE, KEEPS_IMPORT, NotCapturable, StaticShapesOnly
from compiler.stages import Snapshots, StageError
from e2e.framework.fingerprints import CAPTURE, IMPORT
from e2e.framework.registry import Test
from e2e.framework.result import NotApplicable
from e2e.framework.testutils import seed_for, seed_global_rng
from e2e.framework.trace import Trace, TraceItem, record_trace

if TYPE_CHECKING:
    from e2e.framework.cache import FrontendEntries, ProgramCache


# What a frontend result may be instead of a value, kept and raised again like one.
_SHARED_ERRORS = (StageError, NotCapturable, StaticShapesOnly)


@dataclass
class PreparedTest:
    """One test's module, golden trace and config-shared frontend results, in one process."""

    test: Test
    module: torch.nn.Module | None = None  # pristine instance the configs compile
    golden: Trace = field(default_factory=list)
    golden_error: str | None = None
    golden_kind: str | None = None  # how the test is broken: module_factory, deepcopy, invoker, outputs
    shared: dict[Any, Any] = field(default_factory=dict)  # config-shared frontend results
    new_shared: dict[Any, Any] = field(default_factory=dict)  # filled in a child, sent back
    shape_mode: str = "annotated"  # one of result.SHAPE_MODES
    # Per method the golden trace calls: its argument shapes as annotated (-1 = dynamic), or None.
    annotated: dict[str, list[list[int] | None] | None] = field(default_factory=dict)
    reused: set = field(default_factory=set)  # shared keys this config took from an earlier one
    frontend_cache: FrontendEntries | None = None  # this test's `share(..., across_runs=stage)` values of earlier runs
    from_earlier_run: set = field(default_factory=set)  # shared keys this config took from the frontend cache
    program_cache: ProgramCache | None = None  # lowered programs of earlier hosts and runs, for the compiler

    def share(
        self,
        key: Any,
        compute: Callable[[], Any],
        *,
        across_runs: str | None = None,
        capture_sources: tuple[str, ...] = (),
    ) -> Any:
        """`compute()` once per test (its host and the configs' children); a StageError is
        shared too, and so is a frontend's word that the test is outside its reach
        (`NotCapturable`, `StaticShapesOnly`: torch, the test and the capture code decide
        it, as they decide a capture). A value an earlier config computed is noted as reused. `across_runs`:
        a frontend result of that stage (`fingerprints.CAPTURE`, with the frontend's
        `capture_sources`, or `fingerprints.IMPORT`: they decide what its key covers), kept
        in the frontend cache for later runs and taken from it."""
        if key in self.shared and key not in self.new_shared:
            self.reused.add(key)
        cache = self.frontend_cache if across_runs else None
        if key not in self.shared and cache is not None:
            kept = cache.get(key, across_runs, capture_sources)
            if kept is not None:
                self.shared[key] = self.new_shared[key] = kept
                self.from_earlier_run.add(key)
        if key not in self.shared:
            try:
                self.shared[key] = compute()
            except _SHARED_ERRORS as error:
                self.shared[key] = error
            self.new_shared[key] = self.shared[key]
            if cache is not None:
                cache.put(key, self.shared[key], across_runs, capture_sources)
        value = self.shared[key]
        if isinstance(value, _SHARED_ERRORS):
            raise value
        return value

    def imported(self, frontend, item: TraceItem, key: tuple, shapes, snapshots: Snapshots):
        """The capture and import of `item` by `frontend` (its program's `key`: method and
        call shapes, or None with dynamic `shapes`), once per test and, through the frontend
        cache, across runs as the frontend `keeps` it: a capture that pickles (FX's, the JIT
        frontends' text) while torch, the test and the capture code are unchanged, and its
        import while torch-mlir is too (a rebuild of torch-mlir imports the kept capture
        again); or only the import, where the capture is a graph of live objects (dynamo's)."""
        dims = None if shapes is None else tuple(None if s is None else tuple(s) for s in shapes)
        import_key = (f"{frontend.name}-import", *key, dims)
        try:
            if frontend.keeps == KEEPS_CAPTURE:
                return self.share(
                    import_key,
                    lambda: self._import_kept_capture(
                        frontend, item, (f"{frontend.name}-capture", *key, dims), shapes, snapshots
                    ),
                    across_runs=IMPORT,
                )
            if frontend.keeps == KEEPS_IMPORT:
                return self.share(
                    import_key,
                    lambda: frontend.import_capture(self._capture(frontend, item, shapes, snapshots), snapshots),
                    across_runs=IMPORT,
                )
            captured = self.share(  # this run only
                (f"{frontend.name}-capture", *key, dims), lambda: self._capture(frontend, item, shapes, snapshots)
            )
            return frontend.import_capture(captured, snapshots)
        except StaticShapesOnly as error:
            raise NotApplicable(f"{error}: run with --shapes static to compile the example inputs' shapes") from None
        except NotCapturable as error:
            raise NotApplicable(str(error)) from None

    def recapture(self, call: TraceItem, dynamic: bool, frontend):
        """The program `frontend` captured of `call`, again, as a config captured it: with the
        test's dynamic dims when its program was compiled with them, else at the call's shapes."""
        shapes = self.arg_shapes(call.method) if dynamic else None
        return frontend.import_capture(self._capture(frontend, call, shapes, Snapshots()), Snapshots()).exported

    def _capture(self, frontend, item: TraceItem, shapes, snapshots: Snapshots):
        return frontend.capture(self.module, item.inputs, shapes, item.method, snapshots)

    def _import_kept_capture(self, frontend, item: TraceItem, capture_key: tuple, shapes, snapshots: Snapshots):
        """The import of a capture kept across runs (a rebuild of torch-mlir imports the capture
        of an earlier run again); one that did not survive being kept is captured again."""
        captured = self.share(
            capture_key,
            lambda: self._capture(frontend, item, shapes, snapshots),
            across_runs=CAPTURE,
            capture_sources=frontend.capture_sources,
        )
        if capture_key in self.from_earlier_run:
            snapshots.enter("capture")  # this run's capture: loading the kept one
        lost = captured.lost_on_the_way()
        if lost is not None:  # it did not survive being kept: captured again
            self.from_earlier_run.discard(capture_key)
            captured = self._capture(frontend, item, shapes, snapshots)
        imported = frontend.import_capture(captured, snapshots)
        if lost := lost or captured.lost:
            imported.result_notes.append(f"frontend cache: the capture is not kept across runs ({lost})")
        return imported

    def first_call(self, method: str) -> list[Any]:
        return next(item.inputs for item in self.golden if item.method == method)

    def failing_call(self, index: int | None) -> tuple[str, list[Any]]:
        """The method and inputs of golden trace item `index` (a Result's `failing_call`); else the first call."""
        if index is not None and index < len(self.golden):
            item = self.golden[index]
            return item.method, item.inputs
        method = self.methods()[0]
        return method, self.first_call(method)

    def methods(self) -> list[str]:
        return list(dict.fromkeys(item.method for item in self.golden))

    def arg_shapes(self, method: str) -> list[list[int] | None] | None:
        """The argument shapes to compile for (-1 = dynamic); None: the example inputs' shapes."""
        if self.shape_mode == "static":
            return None
        if method not in self.annotated:
            self.annotated[method] = self.test.arg_shapes(self.module, method)
        return self.annotated[method]


def prepare(test: Test) -> PreparedTest:
    """Build the module and run the golden trace; a broken test is recorded, not raised.

    This is user code: run it where a crash or hang is contained (a `TestHost`).
    """
    prepared = PreparedTest(test)
    step = "module_factory"
    try:
        seed_global_rng(seed_for(test.name))  # factories that draw weights draw the same ones
        prepared.module = test.module_factory()
        step = "deepcopy"
        native = copy.deepcopy(prepared.module)
        step = "invoker"
        prepared.golden = record_trace(test, lambda method, inputs: getattr(native, method)(*inputs))
    except Exception:
        prepared.golden_kind = step
        prepared.golden_error = _BROKEN[step] + traceback.format_exc(limit=-4)
        return prepared
    problem = bad_outputs(prepared.golden)
    if problem is not None:
        prepared.golden_kind, prepared.golden_error = "outputs", problem
    methods = dict.fromkeys(item.method for item in prepared.golden)
    prepared.annotated = {method: test.arg_shapes(prepared.module, method) for method in methods}
    return prepared


_BROKEN = {
    "module_factory": "the test's module_factory raised on native torch:\n",
    "deepcopy": (
        "the test's module cannot be deep-copied (the golden run uses a copy, so the "
        "compiled program starts from the same state):\n"
    ),
    "invoker": "the test failed on native torch:\n",
}


def bad_outputs(trace: Trace) -> str | None:
    """Why a golden trace cannot be compared (a broken test), or None."""
    if not trace:
        return "the invoker made no call on the module"
    for number, item in enumerate(trace):
        where = f"trace item #{number} ({item.method})"
        if item.outputs is None:
            return f"{where} returned None: an e2e test returns the values to compare"
        for leaf in pytree.tree_leaves(item.outputs):
            if leaf is not None and not isinstance(leaf, (torch.Tensor, bool, int, float)):
                return (
                    f"{where} returned a {type(leaf).__name__}: outputs must be tensors, Python "
                    "scalars, or tuples, lists and dicts of them"
                )
    return None


class PreparedCache:
    """A few recently prepared tests, in this process (for `--no-isolation` and benchmarks)."""

    def __init__(self, size: int = 4):
        self.size = size
        self._entries: OrderedDict[str, PreparedTest] = OrderedDict()

    def get(self, test: Test, shape_mode: str = "annotated") -> PreparedTest:
        if test.name not in self._entries:
            self._entries[test.name] = prepare(test)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        self._entries.move_to_end(test.name)
        prepared = self._entries[test.name]
        prepared.shape_mode = shape_mode
        return prepared

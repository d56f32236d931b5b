"""A test host: a forked process that holds everything one test's configs share.

The host builds the module and runs the golden trace (user code: it may crash, hang,
or allocate without bound), then serves requests from the pytest process: run a config
(in the host itself, under the pair's limits), reduce a failure (in a grandchild), or
run another client's task (`call`: mutation testing's survey and mutants). The
pytest process never runs a test's module; it only waits, under limits, for replies.
Configs of one test share the host's export and torch-backend IR, whichever config
comes first.

A pair that crashes, hangs or outgrows its memory cap takes the host down with it: the
pair ends as its `crash`, `timeout` or `memory` result in the stage it was in, and the
next request starts a new host (which builds the module and golden trace again). A
host whose compiled program ran and gave a wrong answer or failed (stage `execute` or
`compare`), or whose pair raised past the runner (a framework error: a program that wrote
out of bounds can make the comparison itself raise), retires after replying: its heap
corruption must not crash or skew the next config. It hands what the test's
configs share (export, import, torch-backend IR) to the host that takes over. A fork per pair cost ~25%
of a small pair's time (the fork itself, then copy-on-write faults on every page the
pair touched); a new host is rare. A host whose test ended cleanly serves the next test
(`TestHost.hand_over`, `_serve_adopted`), which saves the fork per test the same way.

What a host imported from installed libraries to build its module and run it (a
transformers model class and what it pulls in: 2-3 s, paid by every host of a zoo test)
is imported by the pytest process after the host is ready, so the hosts forked after it
inherit it (`library_modules`, `import_libraries`). Only library modules: never the
project's or a suite's code, which runs in hosts alone.

    host = TestHost(test, shape_mode="annotated", config_loader=load_config, golden_limits=limits)
    result = host.run("linalg", reports_dir, limits)      # a Result, whatever happened
    host.close()
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import importlib
import os
import site
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from e2e.framework import isolation
from e2e.framework.cache import FrontendCache, ProgramCache
from e2e.framework.isolation import Channel, Child, Limits
from e2e.framework.prepared import prepare
from e2e.framework.registry import Test
from e2e.framework.result import Result
from e2e.framework.runner import abnormal_result, attempt_pair, broken_test_result, finish_pair

# What a reduction's host may need beyond its grandchild's deadline (unpickling, bookkeeping).
_HOST_MARGIN_SECONDS = 30.0


@dataclass
class _Run:
    config: str
    reports_dir: Path
    limits: Limits


@dataclass
class _Retiring:
    """A retiring host's reply: the pair's result, and what the test's configs share so
    far (export, import, torch-backend IR), for the host that takes over."""

    result: Result | isolation.Raised
    shared: dict


@dataclass(frozen=True)
class _Caches:
    """What a host reads and writes beyond its test: captures and lowered programs of
    earlier hosts and runs (on disk, so a host's new entries reach the hosts after it)."""

    frontend: FrontendCache | None
    programs: ProgramCache | None


@dataclass
class _Call:
    """A task of another client of the host (mutation testing): `fn(prepared, state)`, run on the
    host; `state` is the host's own dict, kept between calls while the host lives."""

    fn: Callable[[Any, dict], Any]


@dataclass
class _Reduce:
    result: Result
    reports_dir: Path
    time_box: float
    limits: Limits


@dataclass
class _Adopt:
    """What a spare host needs to become a test's host: the test (its file, imported
    there, and its name) and what `TestHost` would have given a host it forked. The
    callables are module-level functions (or partials of them): they travel by pickle."""

    origin: str
    name: str
    shape_mode: str
    config_loader: Callable
    reducer: Callable | None
    shared: dict
    caches: _Caches
    # What the parent set up after the spare's fork (`--jit-target` sets E2E_JIT_TARGET,
    # `--generate` the seeds; pytest puts the ini's `pythonpath` on sys.path), as a host
    # forked now would inherit it.
    environ: dict = field(default_factory=lambda: dict(os.environ))
    path: list = field(default_factory=lambda: list(sys.path))
    cwd: str = field(default_factory=os.getcwd)


class SpareHost:
    """A test host forked before its test is known, as soon as the pytest process has
    imported torch, which warms up (`warm_up`: the frontends' one-time initialization, in
    steps) while that process is still starting and collecting; the first `TestHost`
    adopts it (`TestHost(spare=...)`), so a one-pair run does not wait for that
    initialization after its collection. A spare whose test comes while it warms up stops
    after the step it is in. `close()` an unused one."""

    def __init__(self, warm_up: Sequence[Callable[[], None]]):
        self.child = Child(lambda channel: _serve_spare(tuple(warm_up), channel), name="host")

    @classmethod
    def of(cls, child: Child) -> SpareHost:
        """A host whose test ended cleanly, waiting for its next (`TestHost.hand_over`)."""
        spare = cls.__new__(cls)
        spare.child = child
        return spare

    def close(self) -> None:
        self.child.kill()


def _serve_spare(warm_up: tuple[Callable[[], None], ...], channel: Channel) -> None:
    """The spare's life (in the child): warm up until its test comes, import the test's
    file, then serve as that test's host."""
    os.dup2(2, 1)  # forked before pytest captured output: what the test prints goes with its errors
    for step in warm_up:
        if channel.waiting():  # its test is known: the pair is worth more than the rest of the warm-up
            break
        try:
            step()
        except Exception:  # noqa: BLE001 - an initialization that fails, fails again in its pair, with a result
            pass
    try:
        adopt = channel.receive()
    except EOFError:
        return
    _serve_adopted(adopt, channel)


def _serve_adopted(adopt: _Adopt | None, channel: Channel) -> None:
    """Serve the test of `adopt`, then each next test the parent hands this host, until EOF
    or the host retires (`TestHost.hand_over`)."""
    scratch = os.environ["TMPDIR"]  # its own (`Child`), which stays
    from e2e.framework.registry import GLOBAL_TEST_REGISTRY
    from e2e.framework.suite_files import load_suite

    while adopt is not None:
        os.environ.clear()
        os.environ.update({**adopt.environ, "TMPDIR": scratch})
        sys.path[:] = adopt.path
        os.chdir(adopt.cwd)
        loaded = load_suite([adopt.origin], isolate=False)[Path(adopt.origin).resolve()]
        if adopt.name not in GLOBAL_TEST_REGISTRY:  # the parent starts a host of its own
            why = loaded.broken.error if loaded.broken is not None else loaded.skip_reason
            channel.send(isolation.Raised(None, f"{adopt.name}: not registered by {adopt.origin}: {why}"))
            return
        test = GLOBAL_TEST_REGISTRY[adopt.name]
        adopt = _serve_ready(
            test, adopt.shape_mode, adopt.config_loader, adopt.reducer, adopt.shared, adopt.caches, channel
        )
        _forget_test()


def _forget_test() -> None:
    """What a test left in this process that could reach the next one's pairs, as a new fork
    would not have it: TorchScript's compiled classes (a class one test's module scripted
    resolves a name the next test's `torch.jit.script` fails on in a new process:
    `isinstance(m, torch.nn.LSTMCell)` after a test scripted an LSTMCell; torch's own
    `JitTestCase` clears the same three between tests), torch.compile's compiled frames (the
    same `forward` of another test would reuse them, or hit the recompile limit), and the
    test's objects themselves.

    What survives that collection is the host's own state (modules imported since the fork,
    MLIR contexts, caches): it is frozen (`gc.freeze`, as the pytest process freezes its own
    before forking hosts), so the next test's collection looks only at what that test made.
    Scanned again at every hand-over, it cost 20-70 ms a test (~30 ms on average in a block
    of generated programs, by py-spy; a block of 256 ran 7% faster without it)."""
    torch._C._jit_clear_class_registry()
    torch.jit._recursive.concrete_type_store = torch.jit._recursive.ConcreteTypeStore()
    torch.jit._state._clear_class_state()
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    gc.collect()
    gc.freeze()


def _serve(
    test: Test, shape_mode: str, config_loader, reducer, shared: dict, caches: _Caches, channel: Channel
) -> None:
    """The host's loop (in the child): prepare once, then answer requests until EOF; then the
    next tests the parent hands it, if any. `shared`: what an earlier host of this test
    computed for its configs."""
    channel.receive()  # "ready?": the golden run counts against the request's limits
    adopt = _serve_ready(test, shape_mode, config_loader, reducer, shared, caches, channel)
    if adopt is not None:
        _forget_test()
        _serve_adopted(adopt, channel)


def _serve_ready(
    test: Test, shape_mode: str, config_loader, reducer, shared: dict, caches: _Caches, channel: Channel
) -> _Adopt | None:
    """The host's loop once asked to get ready: prepare, reply "ready", then answer requests.
    Returns the next test's `_Adopt` when the parent hands this host over, else None (EOF,
    or the host retired)."""
    torch.set_num_threads(1)  # a forked grandchild of a multi-threaded OpenMP process hangs
    before = set(sys.modules)
    prepared = prepare(test)
    prepared.shape_mode = shape_mode
    prepared.shared.update(shared)
    prepared.frontend_cache = caches.frontend.for_test(test, shape_mode) if caches.frontend is not None else None
    prepared.program_cache = caches.programs
    channel.send(("ready", prepared.golden_error, prepared.golden_kind, library_modules(since=before)))
    rng = torch.get_rng_state()  # every config starts where the golden run left it
    state: dict = {}  # what `_Call`s keep between them
    while True:
        try:
            request = channel.receive()
        except EOFError:
            return None
        if isinstance(request, _Run):
            config = config_loader(request.config)
            torch.set_rng_state(rng)
            outcome = attempt_pair(prepared, config, request.reports_dir)  # what `share` computed stays here
            result = outcome[0] if isinstance(outcome, tuple) else outcome  # a Result, or Raised
            if isinstance(result, isolation.Raised) or result.ran_and_failed:
                channel.send(_Retiring(result, prepared.shared))
                return None
            channel.send(result)
        elif isinstance(request, _Adopt):
            return request
        elif isinstance(request, _Reduce):
            channel.send(_reduce(prepared, config_loader, reducer, request))
        elif isinstance(request, _Call):
            channel.send(isolation.call_reporting(lambda: request.fn(prepared, state)))
        else:
            channel.send(isolation.Raised(None, f"unknown request {request!r}"))


def _library_roots() -> tuple[str, ...]:
    """Where installed libraries live: this interpreter's (or venv's) site-packages, the
    system's (a distribution's dist-packages) and the user's (`pip install --user`)."""
    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        roots.add(site.getusersitepackages())
    return tuple(os.path.join(root, "") for root in roots)


def library_modules(since: set[str]) -> tuple[str, ...]:
    """The modules imported since `since` from installed libraries (site-packages), in an
    order that imports a package before its submodules."""
    libraries = _library_roots()
    names = []
    for name in set(sys.modules) - since:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and file.startswith(libraries):
            names.append(name)
    return tuple(sorted(names))


def import_libraries(names: tuple[str, ...]) -> None:
    """Import `names` (`library_modules` of a host that imported them cleanly) here, for
    the hosts forked from this process later."""
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - one that imports only in a host's state: each host imports it
                pass


def _reduce(prepared, config_loader, reducer, request: _Reduce):
    if reducer is None:
        return isolation.Raised(None, "this host was given no reducer")
    config = config_loader(request.result.config)
    return reducer(request.result, prepared, config, request.reports_dir, request.time_box, request.limits.memory_bytes)


# How much a host may have grown over the process it was forked from and still serve the
# next test (`TestHost.hand_over`); one that grew more (a model's weights, a large
# program's allocator arenas) ends with its test.
REUSE_GROWTH_BYTES = 512 * isolation.MIB


@dataclass
class _HandedOver:
    """What a `TestHost` keeps of a child it handed over: its peak, and nothing to close."""

    child: Child

    alive = False

    @property
    def peak_rss(self) -> int:
        return self.child.peak_rss

    def close(self) -> None:
        pass


class TestHost:
    """The pytest side of one test's host process."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        test: Test,
        *,
        shape_mode: str,
        config_loader,
        golden_limits: Limits,
        reducer=None,
        frontend_cache: FrontendCache | None = None,
        program_cache: ProgramCache | None = None,
        spare: SpareHost | None = None,
    ):
        """`reducer(result, prepared, config, reports_dir, time_box, memory_bytes)` reduces a
        failure on the host (the session hands it `e2e.session._reduce_on_host`, which calls
        `e2e.reducer.strategies.reduce_isolated`; the framework does not import the reducer).
        `frontend_cache`: captures of earlier runs
        (`e2e.framework.cache.FrontendCache`), read and written by the host; `program_cache`:
        programs lowered by earlier hosts and runs (`ProgramCache`: the eager config's ops, and
        every config's pipeline stage outputs through `Snapshots.memo`), too.
        `spare`: a `SpareHost` to adopt as the first host (then `config_loader` and `reducer`
        must pickle); one that cannot become it is killed and a host forked here instead."""
        self.test = test
        self.shape_mode = shape_mode
        self._config_loader = config_loader
        self._reducer = reducer
        self._golden_limits = golden_limits
        self._caches = _Caches(frontend_cache, program_cache)
        self._child: Child | None = None
        self._shared: dict = {}  # what a retired host handed over
        self.peak_rss = 0  # the largest any of this test's hosts grew
        self.restarts: list[str] = []  # the configs whose pair ended or retired a host
        # Set when the test itself is broken: every config of the test reports it.
        self.golden_failure: Result | None = None
        self._start(spare)

    def _start(self, spare: SpareHost | None = None) -> None:
        test = self.test
        shared = self._shared
        reply = None
        if spare is not None and not Path(test.origin).is_file():  # not from a suite file: it has no file to import
            spare.close()
            spare = None
        if spare is not None:
            self._child = spare.child
            self._child.forget_output()  # a crash's tail is this test's own
            adopt = _Adopt(
                test.origin, test.name, self.shape_mode, self._config_loader, self._reducer, shared, self._caches
            )
            reply = self._child.request(adopt, self._golden_limits)
            if not (isinstance(reply, tuple) and reply[0] == "ready"):
                # It could not become this test's host (or the test took it down: then the
                # host forked here meets the same end, and that is the result). A golden run
                # that overstayed its budget is the result now: a second would only wait as long.
                self._child.kill()
                if not isinstance(reply, isolation.TimedOut):
                    reply = None
        if reply is None:
            self._child = Child(
                lambda channel: _serve(
                    test, self.shape_mode, self._config_loader, self._reducer, shared, self._caches, channel
                ),
                name="host",
            )
            reply = self._child.request("ready?", self._golden_limits)
        self.peak_rss = max(self.peak_rss, self._child.peak_rss)
        if isinstance(reply, tuple) and reply[0] == "ready":
            _, error, kind, imported = reply
            import_libraries(imported)
            if error is not None:
                self.golden_failure = broken_test_result(test, "", kind, error)
        else:
            self.golden_failure = abnormal_result(test, "", reply, "golden")
            self.golden_failure.error += f"\n(the module's construction or golden run; defined at {test.source})"
            self._child.kill()

    def _ensure_alive(self) -> None:
        """A new host when a pair took the last one down (the golden run is repeated)."""
        if self.golden_failure is None and not self._child.alive:
            self._start()

    def run(self, config: str, reports_dir: Path, limits: Limits, *, diagnose: bool = True, gdb: bool = True) -> Result:
        """One pair on this host; a Result whatever happens. `diagnose`: a host that times out
        is looked at before it is killed (`hang_stack`: a second, and gdb's time if `gdb`)."""
        self._ensure_alive()
        if self.golden_failure is not None:
            return dataclasses.replace(copy.deepcopy(self.golden_failure), config=config, shape_mode=self.shape_mode)
        start, earlier = time.monotonic(), list(self.restarts)
        reply = self._child.request(_Run(config, reports_dir, limits), limits, diagnose=diagnose, gdb=gdb)
        self.peak_rss = max(self.peak_rss, self._child.peak_rss)
        if isinstance(reply, _Retiring):  # the host exits by itself
            self._child.close()
            self._shared = reply.shared
            self.restarts.append(config)
            reply = reply.result
        if not isinstance(reply, (Result, isolation.Raised)):  # the pair took the host down: that is its result
            self._child.kill()
            self.restarts.append(config)
        result = finish_pair(
            self.test,
            config,
            reply,
            reports_dir=reports_dir,
            start=start,
            peak_bytes=self._child.request_peak_rss,
            shape_mode=self.shape_mode,
        )
        if earlier:
            result.notes.append(f"ran on a new test host: an earlier one ended after {', '.join(earlier)}")
        return result

    def restart(self) -> None:
        """A fresh host for this test (its golden run repeated), whatever ran on the last one."""
        self._child.kill()
        self._child.close()
        self._start()

    @property
    def alive(self) -> bool:
        """Whether this test's current host still runs (a `call`'s `state` lives only as long)."""
        return self._child.alive

    def call(self, fn: Callable[[Any, dict], Any], limits: Limits) -> Any:
        """`fn(prepared, state)` on this test's host under `limits` (`fn` a module-level function,
        or a partial of one: it is sent by pickle), for clients other than the runner. Its
        reply; or how the host ended (`isolation.Crashed`, `TimedOut`, `OverMemory`: the host
        is gone, its `state` with it, and the next call starts a new one); `isolation.Raised`
        when `fn` raised; the test's golden failure (a Result) when the test is broken."""
        self._ensure_alive()
        if self.golden_failure is not None:
            return self.golden_failure
        reply = self._child.request(_Call(fn), limits)
        self.peak_rss = max(self.peak_rss, self._child.peak_rss)
        if isinstance(reply, (isolation.Crashed, isolation.TimedOut, isolation.OverMemory)):
            self._child.kill()
        return reply

    def reduce(self, result: Result, reports_dir: Path, time_box: float, memory_bytes: int | None):
        """The reducer's outcome for a failing pair: a ReduceOutcome, or a note saying why not."""
        self._ensure_alive()
        if self.golden_failure is not None:
            return "reducer: no bundle: the test host is gone"
        limits = Limits(time_box + 150, memory_bytes)
        host_limits = Limits(limits.seconds + _HOST_MARGIN_SECONDS, None)
        reply = self._child.request(_Reduce(result, reports_dir, time_box, limits), host_limits)
        if isinstance(reply, (isolation.Crashed, isolation.TimedOut, isolation.OverMemory)):
            self._child.kill()
            return f"reducer: no bundle: the test host ended while reducing ({type(reply).__name__})"
        return reply

    def hand_over(self) -> SpareHost | None:
        """This host, to serve the next test (`TestHost(spare=...)`), when its test ended
        cleanly: alive, the test not broken, and grown less than `REUSE_GROWTH_BYTES` over the
        process it was forked from. None otherwise (then `close` it). A fork per test cost
        ~30,000 copy-on-write page faults (every page its pairs touched), ~0.1 s of a small
        test's ~0.5 s; a host that serves the next test has taken them already."""
        child = self._child
        if not child.alive or self.golden_failure is not None:
            return None
        if isolation.rss_bytes(child.pid) - child.baseline_rss > REUSE_GROWTH_BYTES:
            return None
        self.peak_rss = max(self.peak_rss, child.peak_rss)
        self._child = _HandedOver(child)
        return SpareHost.of(child)

    def close(self) -> None:
        self._child.close()
        self.peak_rss = max(self.peak_rss, self._child.peak_rss)

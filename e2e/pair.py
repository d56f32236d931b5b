"""One (test, config) pair's life in the pytest process, owned by one object.

    Pair(state, path, test_name, config_name, entry, options).settle() -> Settled

1. its Result from the result cache, else from its test's host (`HostPool.run_pair`:
   capture, compile, run, judge and explain happen there, contained);
2. a failure reduced on that host when it is unexpected (`Pair._reduce_on_host`);
3. a timeout nothing reproduced rerun once on a fresh host, the rerun deciding;
4. the cache written with the final Result.

A failure of the framework itself before the pair had a Result is a Result too (stage
`framework`), never a lost row. `E2EItem.runtest` (`e2e.collect`) maps the `Settled` to
pytest's outcome and does nothing else.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from pathlib import Path

from e2e.framework.cache import pair_key
from e2e.framework.isolation import Limits
from e2e.framework.result import ERROR, SKIP, TIMEOUT, Result
from e2e.framework.runner import after_rerun, set_aside_first_attempt
from e2e.framework.signature import ended_signature
from e2e.session import E2EState


@dataclass(frozen=True)
class PairOptions:
    """The command line's say in a pair's life."""

    runxfail: bool  # --runxfail: every failure is reported failed, and reduced
    reduce_xfailed: bool  # --reduce-xfailed: expected failures get bundles too
    reduce_timeout: float  # --reduce-timeout: the reducer's time box (its default is the option's)


@dataclass
class Settled:
    """A pair's final Result and how its xfail entry sees it."""

    result: Result
    entry: object | None = None  # the pair's xfail entry, if listed
    differently: bool = False  # listed, but failing otherwise than the entry says
    internal: bool = False  # the framework failed before the pair had a result


class Pair:
    """A collected pair: its test (by file and name), its config and its xfail entry."""

    def __init__(
        self, state: E2EState, path: Path, test_name: str, config_name: str, entry, options: PairOptions
    ) -> None:
        self.state = state
        self.path = path
        self.test_name = test_name
        self.config_name = config_name
        self.entry = entry
        self.options = options

    def settle(self) -> Settled:
        state, diagnose = self.state, self._diagnoses_hangs()
        try:
            test = state.suite.test(self.path, self.test_name)
            # Its test's budget, else the run's; a listed pair's own (a listed timeout gets the
            # short one), unless --runxfail.
            seconds = test.timeout_seconds or state.settings.budget
            if self.entry is not None and not self.options.runxfail:
                seconds = self.entry.budget(seconds)
            limits = Limits(seconds, state.settings.memory_cap)
            key = pair_key(test, self.config_name, state.settings.shape_mode, limits.seconds)
            result = state.caches.results.get(key)
            if result is None:
                result = state.hosts.run_pair(test, self.config_name, limits, diagnose=diagnose)
        except Exception:  # noqa: BLE001 - the framework's own bug: a result like any other
            return Settled(self._internal_error(traceback.format_exc(limit=-12)), self.entry, internal=True)
        settled = self._after(test, limits, result, first=True)
        state.caches.results.put(key, settled.result)  # once, the final Result (a cached one is not written again)
        return settled

    def _after(self, test, limits, result: Result, *, first: bool) -> Settled:
        """Steps 2-3 for `result`; a rerun's Result goes through them again (not rerun twice)."""
        state, entry = self.state, self.entry
        if result.outcome == SKIP or result.passed:
            return Settled(result, entry)
        differently = entry is not None and entry.differs_from(result.outcome, result.signature)
        expected = entry is not None and not differently
        reduced = None
        if (
            not result.cached
            and state.settings.reduce
            and result.outcome != ERROR
            and (not state.settings.reduce_unnamed_only or _names_no_op(result))
            and (not expected or self.options.reduce_xfailed or self.options.runxfail)
        ):  # every unexpected failure gets a bundle, and with --runxfail (reported failed) every failure
            try:
                reduced = self._reduce(test, result)
            except Exception:  # noqa: BLE001 - the reducer's bug: the pair keeps its own result
                result.notes.append(f"reducer: internal error:\n{traceback.format_exc(limit=-6)}"[-1500:])
        if first and _unconfirmed_hang(state, result, reduced) and (not expected or self.options.runxfail):
            # A pair that timed out but whose hang nothing reproduced (the reducer's replay of
            # its stage finished, or its stage has no passes to replay) may have hung on what
            # the host's earlier pairs left behind, or on the machine's load: it runs once
            # more in a fresh host, and that run decides. A second timeout confirms the hang.
            first_dir = set_aside_first_attempt(result, state.settings.reports_dir)
            rerun = after_rerun(result, self._rerun_on_fresh_host(test, limits), first_dir)
            if rerun is not result:
                return self._after(test, limits, rerun, first=False)
        return Settled(result, entry, differently=differently)

    def _reduce(self, test, result: Result):
        """Reduce the failure (in its test's host); the ReduceOutcome. What the reducer found
        goes to the Result's fields (`ReduceOutcome.to_result`), and in words to its notes."""
        from e2e.reducer.outcome import ReduceOutcome

        outcome = self._reduce_on_host(test, result, self.options.reduce_timeout)
        if not isinstance(outcome, ReduceOutcome):  # the host or the reducer's child gave no answer
            outcome = ReduceOutcome.not_reduced(str(outcome)[-800:])
            result.notes.append(outcome.note)
            return outcome
        outcome.to_result(result)
        result.notes.append(outcome.summary())
        if outcome.types_broke:
            bundle = f"; {outcome.types_bundle}" if outcome.types_bundle else ""
            result.notes.append(f"reducer: {outcome.types_broke}{bundle}")
            if outcome.types_root:
                result.notes.append(f"reducer: types root: {outcome.types_root}")
        if outcome.type_check_failed:
            result.notes.append(f"reducer: {outcome.type_check_failed}")
        if outcome.bundle is not None and not outcome.verified:
            result.notes.append(f"reducer: bundle {outcome.bundle} did not re-verify: {outcome.note}")
        return outcome

    def _rerun_on_fresh_host(self, test, limits: Limits) -> Result:
        """The pair again, on a fresh host of its test (nothing an earlier pair ran is in it):
        for a timeout nothing confirmed. Isolated runs only. A second timeout is sampled
        but not given to gdb: the first attempt's backtrace is the hang's (gdb takes 10-20 s
        of the pair's ~45)."""
        state = self.state
        host = state.hosts.host_for(test)
        host.restart()
        return host.run(self.config_name, state.settings.reports_dir, limits, gdb=False)

    def _reduce_on_host(self, test, result: Result, time_box: float):
        """The reducer's outcome for the failing pair (in its test's host), or a note saying why none."""
        settings = self.state.settings
        if not settings.isolate:
            return "reducer: not run: --no-isolation turns it off (it runs in the test host)"
        return self.state.hosts.host_for(test).reduce(result, settings.reports_dir, time_box, settings.memory_cap)

    def _diagnoses_hangs(self) -> bool:
        """Whether a timeout is looked at before the kill: not for an entry that expects the
        pair to hang (its stack is not worth gdb's 10-20 s), unless --runxfail."""
        expected = self.entry.expected if self.entry is not None else None
        return expected is None or expected[0] != TIMEOUT or self.options.runxfail

    def _internal_error(self, text: str) -> Result:
        return Result(
            self.test_name,
            self.config_name,
            ERROR,
            stage="framework",
            signature=ended_signature("framework", "pytest item"),
            error=f"internal error before the pair had a result:\n{text}",
            shape_mode=self.state.settings.shape_mode,
        )


def _unconfirmed_hang(state: E2EState, result: Result, reduced) -> bool:
    """A pair's timeout (not its golden run's: that is the test's own) that nothing showed
    again: the reducer wrote no bundle of it, or did not run; in this run, on a test host."""
    return (
        result.outcome == TIMEOUT
        and result.stage != "golden"
        and not result.cached
        and state.settings.isolate
        and getattr(reduced, "bundle", None) is None
    )


def _names_no_op(result: Result) -> bool:
    """Whether a failure is a wrong result or a crash whose signature names no op: only its
    bundle's guilty op tells it apart from another (`--reduce-unnamed`)."""
    signature = result.signature
    return signature is not None and signature.stage in ("compare", "crash") and signature.op is None

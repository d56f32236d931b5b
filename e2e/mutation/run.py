"""Run mutations over a suite: one test host per test, one forked child per mutant.

Per test, a host (the suite's own `TestHost`, a forked child) builds the module, runs the golden trace, and
`survey`s its programs once (capture, import, torch-backend and backend stages); the
unmutated program from linalg-on-tensors is the baseline, and only a test whose baseline
passes (and that the config's xfail set does not list) can catch a mutation. Sites are
counted on the surveyed IR without running anything; each mutation with sites > 0 then
runs in a child forked from the host, from its boundary on. A crash, hang or runaway
allocation of a mutant is that mutant's verdict, never the end of the run.

Records are cached per (test, config) and, inside, per mutation fingerprint: a rerun on
an unchanged suite and compiler only runs what is new.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch

from e2e.framework import isolation
from e2e.framework.cache import cache_key
from e2e.framework.compare import compare_traces
from e2e.framework.fingerprints import source_digest
from e2e.framework.host import TestHost
from e2e.framework.isolation import Limits
from e2e.framework.registry import GLOBAL_TEST_REGISTRY
from e2e.framework.result import Result
from e2e.framework.stores import JsonStore
from e2e.generate.ties import Settles
from e2e.mutation.catalogue import Mutation, mutations

# Verdicts of one (test, mutation): the test caught it (and how), or it survived.
SURVIVED, WRONG, ERROR, CRASH, TIMEOUT = "survived", "wrong-values", "compile-error", "crash", "timeout"
EQUIVALENT = "equivalent"  # survived, and no input where both are defined tells the mutant from the program
# the mutant's result is undefined on the test's own inputs (poison reaches an output): caught,
# since some CPU returns another value there, though this one may not
UNDEFINED = "undefined"
BROKEN_MUTATION = "broken-mutation"  # the rewrite itself raised: neither caught nor survived
CAUGHT = (WRONG, UNDEFINED, ERROR, CRASH, TIMEOUT)
# The sources that decide a verdict (besides the toolchain's): a record's cache key includes them.
_MUTATION_SOURCES = "e2e/mutation"


@dataclass
class TestRecord:
    test: str
    file: str  # topic file stem: the test's family
    baseline: str  # "pass", or why the test cannot catch anything ("xfail", "fail: ...")
    sites: dict[str, int] = field(default_factory=dict)  # mutation fingerprint -> sites
    verdicts: dict[str, list[str]] = field(default_factory=dict)  # fingerprint -> [verdict, detail]
    seconds: float = 0.0


def mutation_key(mutation: Mutation) -> str:
    return hashlib.sha256(mutation.fingerprint().encode()).hexdigest()[:16]


def _record_key(test: str, config: str, shape_mode: str) -> str:
    """A record's key: `cache_key`'s, with mutation testing's own sources as one more part."""
    return cache_key(GLOBAL_TEST_REGISTRY[test], config, shape_mode, source_digest(_MUTATION_SOURCES))


class RecordCache:
    """Test records by key, in `directory` (None: disabled), in the result cache's store."""

    def __init__(self, directory: Path | None):
        self.store = JsonStore(directory)

    def get(self, key: str) -> TestRecord | None:
        data = self.store.get(key)
        try:
            return None if data is None else TestRecord(**data)
        except TypeError:
            return None

    def put(self, key: str, record: TestRecord) -> None:
        # Timeouts depend on the machine's load: not cached.
        kept = TestRecord(
            **{**asdict(record), "verdicts": {k: v for k, v in record.verdicts.items() if v[0] != TIMEOUT}}
        )
        kept.sites = {k: v for k, v in record.sites.items() if v == 0 or k in kept.verdicts}
        self.store.put(key, asdict(kept))


def _run_mutant(prepared, programs, backend: str, mutation: Mutation | None, samples=None):
    """Compile from the boundary on, run the golden calls, compare. For the baseline
    (`mutation` None): None when it matches, else the verdict, and the compiled programs.
    For a mutant: its verdict; a surviving one is judged on the `samples` by what it means
    (`equivalence.judge`)."""
    from compiler.stages import StageError
    from e2e.configs.pipeline import run_programs
    from e2e.mutation.equivalence import Meanings, judge
    from e2e.mutation.mutant import MutationFailed, compiled

    torch.set_num_threads(1)
    try:
        mutant = compiled(programs, backend, mutation)
        trace = run_programs(mutant, prepared.golden)
    except MutationFailed as error:
        return [BROKEN_MUTATION, str(error)[:300]]
    except StageError as error:
        verdict = CRASH if error.stage == "execute" else ERROR
        return [verdict, f"{error.stage}: {error.message.splitlines()[0][:300] if error.message else ''}"]
    except Exception as error:  # noqa: BLE001 - a marshalling failure is the mutant's, not the run's
        return [ERROR, f"{type(error).__name__}: {str(error)[:300]}"]
    mismatch = compare_traces(prepared.golden, trace, prepared.test.tolerance)
    if mismatch is not None:
        # An index among equal values that the op's tie contract leaves open (a generated
        # program's sort or topk) is a right answer, not a catch.
        for explainer in getattr(prepared.test, "explainers", ()):
            if isinstance(explainer, Settles):
                settlement = explainer.settle(prepared.golden, trace)
                if settlement.allowed and not settlement.forbidden:
                    mismatch = compare_traces(prepared.golden, settlement.trace, prepared.test.tolerance)
    if mutation is None:
        return None if mismatch is None else [WRONG, str(mismatch)[:300]], mutant
    if mismatch is not None:
        return [WRONG, str(mismatch)[:300]]
    if not samples:
        return [SURVIVED, "not checked for equivalence: the unmutated program could not be judged"]
    try:
        judgement = judge(samples, Meanings(programs, backend, mutation), prepared.test.tolerance)
    except Exception as error:  # noqa: BLE001 - a guarded compile failed: say so, claim nothing
        return [SURVIVED, f"not checked for equivalence: {type(error).__name__}: {str(error)[:200]}"]
    if judgement.verdict == "undefined":
        return [UNDEFINED, judgement.detail[:400]]
    if judgement.verdict == "equivalent":
        return [EQUIVALENT, judgement.detail]
    if judgement.verdict == "unjudged":
        return [SURVIVED, f"not checked for equivalence: {judgement.detail}"]
    return [SURVIVED, f"not equivalent: {judgement.detail[:400]}"]


def _survey(backend: str, keys: list[str], prepared, state: dict):
    """On the test's host: compile the test's programs to each boundary, run the unmutated one
    (the baseline), count each mutation's sites, and keep what its mutants start from."""
    from e2e.mutation.equivalence import Meanings, boundary_samples, program_thresholds
    from e2e.mutation.mutant import sites, survey

    os.dup2(2, 1)  # what native code prints goes to the host's stderr tail, not the terminal
    if prepared.golden_error is not None:
        return ("broken test: " + prepared.golden_error.splitlines()[0], {}, 0.0)
    by_key = _by_key(keys)
    start = time.monotonic()
    try:
        programs = survey(prepared, backend)
        outcome = _run_mutant(prepared, programs, backend, None)
        baseline, _ = outcome if isinstance(outcome, tuple) else (outcome, None)
    except Exception as error:  # noqa: BLE001
        return (f"fail: {type(error).__name__}: {str(error)[:200]}", {}, 0.0)
    seconds = time.monotonic() - start
    by_name = sites(programs, list(by_key.values()))
    counts = {key: by_name[mutation.name] for key, mutation in by_key.items()}
    samples = []
    if baseline is None and any(counts.values()):
        # What the unmutated program computes on boundary inputs: shared by every mutant.
        thresholds = program_thresholds([p.texts["linalg"] for p in programs.values()])
        found = isolation.run_forked(
            lambda: boundary_samples(prepared.golden, Meanings(programs, backend, None), thresholds),
            max(20.0, 20 * seconds),
            2 * isolation.GIB,
        )
        samples = found if isinstance(found, list) else []  # a crash on odd inputs: no samples
    state["mutation"] = (backend, programs, samples)
    return ("pass" if baseline is None else f"fail: {baseline[1]}", counts, seconds)


def _mutate(key: str, limit: float, prepared, state: dict) -> list[str]:
    """On the test's host, after `_survey`: one mutant's verdict, in a child forked from the host."""
    backend, programs, samples = state["mutation"]
    mutation = _by_key([key])[key]
    outcome = isolation.run_forked(
        lambda: _run_mutant(prepared, programs, backend, mutation, samples), limit, 2 * isolation.GIB
    )
    return _verdict(outcome, limit)


def _by_key(keys: list[str]) -> dict[str, Mutation]:
    """The catalogue's mutations by their keys (sent to the host as keys: they are data there too)."""
    every = {mutation_key(mutation): mutation for mutation in mutations()}
    return {key: every[key] for key in keys}


def _verdict(outcome, limit: float) -> list[str]:
    if isinstance(outcome, list):
        return outcome
    if isinstance(outcome, isolation.TimedOut):
        return [TIMEOUT, f"over {limit:.0f} s"]
    if isinstance(outcome, isolation.Raised):
        return [ERROR, outcome.traceback.strip().splitlines()[-1][:300]]
    reason = getattr(outcome, "reason", type(outcome).__name__)
    return [CRASH, reason]


@dataclass(frozen=True)
class Job:
    test: str
    config: str
    shape_mode: str
    xfailed: bool
    cache_dir: str | None
    mutation_names: tuple[str, ...]


def run_test(job: Job) -> TestRecord:
    """One test under every mutation that reaches it (in a pool worker)."""
    start = time.monotonic()
    test = GLOBAL_TEST_REGISTRY[job.test]
    file = Path(test.source.rsplit(":", 1)[0]).stem
    by_name = {m.name: m for m in mutations()}
    wanted = {mutation_key(by_name[n]): by_name[n] for n in job.mutation_names}
    cache = RecordCache(Path(job.cache_dir) if job.cache_dir else None)
    key = _record_key(job.test, job.config, job.shape_mode)
    if job.xfailed:
        return TestRecord(job.test, file, "xfail")
    record = cache.get(key) or TestRecord(job.test, file, "")
    missing = [k for k in wanted if k not in record.sites or (record.sites[k] and k not in record.verdicts)]
    if record.baseline and not missing:
        return record
    backend = job.config
    budget = test.timeout_seconds or 300.0
    host = TestHost(
        test, shape_mode=job.shape_mode, config_loader=None, golden_limits=Limits(budget, 6 * isolation.GIB)
    )
    try:
        reply = host.call(partial(_survey, backend, missing), Limits(budget, 6 * isolation.GIB))
        if isinstance(reply, Result):  # the test is broken, or its golden run ended abnormally
            first = reply.error.splitlines()[0] if reply.error else ""
            record.baseline = first if reply.outcome == "error" else f"{reply.outcome}: {first}"
            return record
        if not isinstance(reply, tuple):
            tail = getattr(reply, "stderr_tail", "").strip().splitlines()[-1:] or [""]
            record.baseline = f"{type(reply).__name__}: {getattr(reply, 'reason', '')} {tail[0][:300]}".strip()
            return record
        record.baseline, counts, baseline_seconds = reply
        record.sites.update(counts)
        limit = max(20.0, 10 * baseline_seconds)
        if record.baseline == "pass":
            for mkey in missing:
                if not record.sites.get(mkey):
                    continue
                if not host.alive:
                    record.verdicts[mkey] = [CRASH, "the test host died"]
                    continue
                reply = host.call(partial(_mutate, mkey, limit), Limits(limit + 30, 6 * isolation.GIB))
                record.verdicts[mkey] = reply if isinstance(reply, list) else [CRASH, f"host: {reply}"]
    finally:
        host.close()
    record.seconds = round(time.monotonic() - start, 2)
    cache.put(key, record)
    return record


def run_jobs(jobs: list[Job], workers: int, progress=None) -> list[TestRecord]:
    """`run_test` over the jobs, `workers` at a time (forked after the registry is loaded)."""
    from compiler.frontends import load_frontend
    from e2e.mutation.mutant import FRONTEND, _context

    load_frontend(FRONTEND).warm_up()
    _context()  # every host and mutant inherits it
    records = []
    if workers <= 1:
        try:
            for job in jobs:
                records.append(run_test(job))
                progress and progress(records[-1], len(records), len(jobs))
        except KeyboardInterrupt:
            print(f"interrupted after {len(records)} of {len(jobs)} tests", flush=True)
        return records
    # No maxtasksperchild: a worker holds little (each test runs in its own forked host), and a
    # replaced worker left the pool waiting for a result that never came.
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_default_signals)
    # SIGTERM stops the run like Ctrl-C (a background job ignores SIGINT): what finished is reported.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        for record in pool.imap_unordered(run_test, jobs, chunksize=1):
            records.append(record)
            progress and progress(record, len(records), len(jobs))
        pool.close()  # all done: the workers exit on their own (terminate() could hang here)
    except KeyboardInterrupt:  # Ctrl-C: what finished is kept and reported
        print(f"interrupted after {len(records)} of {len(jobs)} tests", flush=True)
        pool.terminate()
    finally:
        signal.signal(signal.SIGTERM, previous)
        pool.join()
    return records


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _default_signals() -> None:
    """A pool worker: the default SIGTERM, and it dies with the run."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    isolation.die_with_parent()

"""Run mutations over a suite: one test host per test, one forked child per mutant.

Per test, a host (a forked child) builds the module, runs the golden trace, and
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
from pathlib import Path

import torch

from e2e.framework import isolation
from e2e.framework.cache import JsonStore, cache_key, source_digest
from e2e.framework.compare import compare_traces
from e2e.framework.isolation import Limits
from e2e.framework.registry import GLOBAL_TEST_REGISTRY
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
    from e2e.configs.fx import run_programs
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


def _serve_host(test_name: str, backend: str, shape_mode: str, by_key: dict[str, Mutation], channel) -> None:
    """A test host: golden trace and survey once, then one forked child per mutant."""
    from e2e.framework.runner import prepare
    from e2e.mutation.equivalence import Meanings, boundary_samples, program_thresholds
    from e2e.mutation.mutant import sites, survey

    torch.set_num_threads(1)
    os.dup2(2, 1)  # what native code prints goes to the host's stderr tail, not the terminal
    prepared = prepare(GLOBAL_TEST_REGISTRY[test_name])
    prepared.shape_mode = shape_mode
    programs, samples = None, []
    while True:
        try:
            request = channel.receive()
        except EOFError:
            return
        if request is None:
            return
        kind, payload = request
        if kind == "survey":
            if prepared.golden_error is not None:
                channel.send(("broken test: " + prepared.golden_error.splitlines()[0], {}, 0.0))
                continue
            start = time.monotonic()
            try:
                programs = survey(prepared, backend)
                outcome = _run_mutant(prepared, programs, backend, None)
                baseline, _ = outcome if isinstance(outcome, tuple) else (outcome, None)
            except Exception as error:  # noqa: BLE001
                channel.send((f"fail: {type(error).__name__}: {str(error)[:200]}", {}, 0.0))
                continue
            seconds = time.monotonic() - start
            by_name = sites(programs, [by_key[key] for key in payload])
            counts = {key: by_name[by_key[key].name] for key in payload}
            if baseline is None and any(counts.values()):
                # What the unmutated program computes on boundary inputs: shared by every mutant.
                thresholds = program_thresholds([p.texts["linalg"] for p in programs.values()])
                found = isolation.run_forked(
                    lambda: boundary_samples(prepared.golden, Meanings(programs, backend, None), thresholds),
                    max(20.0, 20 * seconds),
                    2 * isolation.GIB,
                )
                samples = found if isinstance(found, list) else []  # a crash on odd inputs: no samples
            channel.send(("pass" if baseline is None else f"fail: {baseline[1]}", counts, seconds))
        else:  # ("mutate", (key, seconds))
            key, limit = payload
            outcome = isolation.run_forked(
                lambda: _run_mutant(prepared, programs, backend, by_key[key], samples), limit, 2 * isolation.GIB
            )
            channel.send(_verdict(outcome, limit))


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
    host = isolation.Child(
        lambda channel: _serve_host(job.test, backend, job.shape_mode, wanted, channel), name="mutation-host"
    )
    budget = test.timeout_seconds or 300.0
    try:
        reply = host.request(("survey", missing), Limits(budget, 6 * isolation.GIB))
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
                reply = host.request(("mutate", (mkey, limit)), Limits(limit + 30, 6 * isolation.GIB))
                record.verdicts[mkey] = reply if isinstance(reply, list) else [CRASH, f"host: {reply}"]
    finally:
        if host.alive:
            try:
                host._channel.send(None)
            except OSError:
                pass
        host.close()
    record.seconds = round(time.monotonic() - start, 2)
    cache.put(key, record)
    return record


def run_jobs(jobs: list[Job], workers: int, progress=None) -> list[TestRecord]:
    """`run_test` over the jobs, `workers` at a time (forked after the registry is loaded)."""
    from e2e.framework.runner import warm_up
    from e2e.mutation.mutant import _context

    warm_up()
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

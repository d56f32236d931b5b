"""A fuzzing campaign: generated programs run by the suite itself, batch after batch.

A campaign runs `pytest --generate B --generate-seed s` (the plugin, so containment,
judging, explainers, the reducer and bundles all apply) on blocks of B seeds until its
time budget (or program count) is spent, each block a pytest run in its own reports
directory (`<reports>/batches/<first seed>/`); after each block the blocks so far are merged
into `<reports>` (`e2e.tools.merge`), which then reads like any run's reports directory
(`results.json`, `run.json`, `index.html`, `repro/`) for `e2e.tools.merge` and `e2e.tools.diff`.
The blocks claim bundles in one index (`<reports>/repro-index`), so a bug is reduced by the
first block that meets it and shared by the later ones.

Seeds are dealt in blocks: block k holds seeds S + kB .. S + (k+1)B - 1, and shard I/N
runs the blocks k = I-1, I-1+N, ... So the same seed, block size and shard give the same
programs, and their verdicts; the budget only decides where the campaign stops, recorded
in `run.json` (`campaign`: blocks run, first and last seed).

CPU time (`cpu_s`, what "new distinct bugs over CPU time" is plotted against) is the
campaign process's own (merges) and every descendant's: pytest, its xdist workers, their
forked hosts and pairs, runtimes' subprocesses. A descendant's CPU reaches its parent's
`RUSAGE_CHILDREN` only when it is waited for; the campaign makes itself a child subreaper
(Linux), so a process orphaned under it (a worker's host whose worker died) is adopted
and reaped by it, and counted, not lost to init.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from e2e.framework.results_files import load_rows
from e2e.framework.run_record import WORKER_PARTS, write_json_atomic
from e2e.framework.shards import ShardSpec
from e2e.fuzz import PAIR_BUDGET, pytest_command
from e2e.reducer.bundle import REPRO_INDEX_ENV
from e2e.tools.merge import merge

BATCHES = "batches"
PROGRAM_CACHE = "cache"  # pytest's cache dir for the blocks: the program cache only
REPRO_INDEX = "repro-index"  # the blocks' shared claim index (`e2e.reducer.bundle.index_root`)
# pytest's exit statuses that still mean a finished run: all passed, some failed.
FINISHED = (0, 1)
PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); whether it is."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans() -> int:
    """Wait for the adopted descendants that have ended (their CPU then counts); how many."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1


def cpu_seconds() -> float:
    """User and system CPU of this process and of every descendant waited for so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# A block's pytest run pays a fixed start-up (the pytest process imports torch and torch-mlir
# and grows the block's programs, its workers import them too, fork their first hosts and
# warm each config up: the first pair starts about 11 s after the command on the six built-in
# configs, and the last ends ~2 s before it does) before its pairs: ~25 worker-seconds a
# block. Blocks of this many pairs keep that near a fortieth of a block's worker time (1,024
# programs of 5.5 ops on average on the six built-in configs, ~450 s on an AMD EPYC with
# AVX-512; blocks of 512 took 4 starts in a 12-minute campaign, 7% of its worker time), and a
# block of the thirteen built-in and runtime configs at 472 programs. The last block is cut to
# what fits in the budget (`Campaign.run`), so a long block wastes none of it.
BLOCK_PAIRS = 6144
MAX_BLOCK = 1024  # programs: one config's block (a block's programs are grown up front)


def default_block(configs: Sequence[str]) -> int:
    """Programs per block when `--block` is not given: `BLOCK_PAIRS` pairs, at most `MAX_BLOCK`
    programs (1,024 on the six built-in configs, 472 on those and the seven runtime configs)."""
    return max(1, min(MAX_BLOCK, BLOCK_PAIRS // max(1, len(configs))))


# A campaign with a time budget runs this many programs first, to measure its rate.
FIRST_TIMED_BLOCK = 48


@dataclass(frozen=True)
class Plan:
    """Which seeds a campaign (or one shard of it) runs, in which blocks."""

    seed: int
    block: int
    shard: ShardSpec = ShardSpec(1, 1)

    def blocks(self):
        """The first seed of each of this shard's blocks, in order (endless)."""
        k = self.shard.index - 1
        while True:
            yield self.seed + k * self.block
            k += self.shard.count

    def digest(self, configs: Sequence[str]) -> str:
        """Names the whole campaign (every shard computes the same one): merge checks it."""
        text = json.dumps([self.seed, self.block, self.shard.count, list(configs)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Batch:
    """One block's pytest run: its seeds and what it cost."""

    first_seed: int
    programs: int
    pairs: int
    wall_s: float
    cpu_s: float  # since the previous block ended: this pytest run and its descendants, the campaign's merge
    exit_status: int
    directory: str
    # Its workers' time, summed (`run.json`'s `worker_seconds`): before their first item, in
    # items, of which in pairs, after their last item.
    worker_seconds: dict = field(default_factory=dict)


def fitting(count: int, left_s: float, last: Batch) -> int:
    """How many of a block's `count` programs to run with `left_s` seconds of the budget left:
    as many as the last block's pace says end in time; 0 (stop) when fewer than a first
    block's (`FIRST_TIMED_BLOCK`: a smaller one would be mostly start-up) would. A rule by
    share of the block would leave minutes unused after a block that a hang slowed."""
    fits = int(left_s * last.programs / max(last.wall_s, 1e-3))
    return min(count, fits) if fits >= min(count, FIRST_TIMED_BLOCK) else 0


@dataclass
class Campaign:
    configs: list[str]
    plan: Plan
    reports_dir: Path
    workers: int = 2
    pair_budget: float = PAIR_BUDGET
    minutes: float | None = None
    programs: int | None = None  # stop after this many programs (instead of, or before, the budget)
    extra: list[str] = field(default_factory=list)  # more pytest arguments
    batches: list[Batch] = field(default_factory=list)
    cpu_mark: float | None = None  # `cpu_seconds()` when the last block ended (or the campaign began)
    client: object = None  # a Dask client (`e2e.fuzz.cluster`): the blocks run on its cluster

    def pytest_command(self, first_seed: int, count: int, directory: Path, cache: Path | None = None) -> list[str]:
        command = pytest_command(
            self.configs,
            directory,
            self.workers,
            "--generate",
            str(count),
            "--generate-seed",
            str(first_seed),
            # A bug is reduced once, after triage; a block bundles only the failures whose
            # signature names no op (wrong results, crashes), whose bundle names the guilty op.
            # Such a bundle is most often minimal in a few seconds; one that is not by 10 s is
            # left to the shrinking after triage (a 30 s box spent ~30 s of a block's ~230
            # worker-seconds on one JIT-frontend crash, and ended with 34 ops, not minimal).
            "--reduce-unnamed",
            "--reduce-timeout",
            "10",
            "--timeout",
            f"{self.pair_budget:g}",
            cache_dir=cache or self.reports_dir / PROGRAM_CACHE,
        )
        return command + self.extra

    def run(self, log: Callable[[str], None] = print) -> dict:
        """Run blocks until the budget is spent; merge them into the reports directory."""
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        if self.client is not None:
            from e2e.fuzz.cluster import run_blocks

            started = time.monotonic()
            run_blocks(self, self.client, log)
            return self.record(time.monotonic() - started)
        adopt_orphans()
        self.cpu_mark = cpu_seconds()
        started = time.monotonic()
        budget = None if self.minutes is None else self.minutes * 60
        done = 0
        for first_seed in self.plan.blocks():
            if self.programs is not None and done >= self.programs:
                break
            count = self.plan.block if self.programs is None else min(self.plan.block, self.programs - done)
            if budget is not None and self.batches:
                # At most twice the last block: a block's size follows the measured pace.
                count = min(count, 2 * self.batches[-1].programs)
                count = fitting(count, budget - (time.monotonic() - started), self.batches[-1])
                if count == 0:
                    break
            elif budget is not None:
                # Nothing measured yet: a small first block, so that a 10-minute campaign does
                # not commit to the default block's 1,024 programs (an hour on 2 cores).
                count = min(count, FIRST_TIMED_BLOCK)
            batch = self.run_batch(first_seed, count)
            done += batch.programs
            log(
                f"fuzz: seeds {first_seed}..{first_seed + count - 1}: {batch.pairs} pairs in {batch.wall_s:.0f} s "
                f"(pytest exit {batch.exit_status}); {done} programs so far"
            )
            self.record(time.monotonic() - started)
        return self.record(time.monotonic() - started)

    def run_batch(self, first_seed: int, count: int) -> Batch:
        directory = self.reports_dir / BATCHES / f"{first_seed:08d}"
        command = self.pytest_command(first_seed, count, directory)
        if self.cpu_mark is None:
            self.cpu_mark = cpu_seconds()
        begun = time.monotonic()
        # One claim index for every block: a bug an earlier block reduced is shared, not reduced again.
        index = {REPRO_INDEX_ENV: str(self.reports_dir / REPRO_INDEX)}
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **index}
        )
        wall = time.monotonic() - begun
        reap_orphans()
        mark, self.cpu_mark = self.cpu_mark, cpu_seconds()
        return self._finish_block(
            first_seed, count, directory, command, done.returncode, done.stdout, wall, cpu=None, mark=mark
        )

    def record_block(self, first_seed: int, count: int, outcome) -> Batch:
        """A block run elsewhere (`e2e.fuzz.cluster.BlockOutcome`), written into its folder here."""
        from e2e.fuzz.cluster import unpack_block

        directory = self.reports_dir / BATCHES / f"{first_seed:08d}"
        unpack_block(outcome, directory)
        command = self.pytest_command(first_seed, count, directory)
        return self._finish_block(
            first_seed, count, directory, command, outcome.exit_status, outcome.output, outcome.wall_s, outcome.cpu_s
        )

    def _finish_block(
        self,
        first_seed: int,
        count: int,
        directory: Path,
        command: list[str],
        exit_status: int,
        output: str,
        wall: float,
        cpu: float | None,
        mark: float | None = None,
    ) -> Batch:
        (directory / "pytest.log").parent.mkdir(parents=True, exist_ok=True)
        (directory / "pytest.log").write_text(shlex.join(command) + "\n" + output)
        if exit_status not in FINISHED:
            tail = "\n".join(output.splitlines()[-15:])
            raise RuntimeError(
                f"fuzz: the block of seeds {first_seed}..{first_seed + count - 1} did not run "
                f"(pytest exit {exit_status}); its log is {directory / 'pytest.log'}:\n{tail}\n"
                f"rerun: {shlex.join(command)}"
            )
        rows, run = load_rows(directory)
        if cpu is None:
            cpu = self.cpu_mark - mark
        clocks = (run.get("worker_seconds") or {}).values()
        spent = {part: round(sum(c.get(part, 0.0) for c in clocks), 1) for part in WORKER_PARTS} if clocks else {}
        batch = Batch(first_seed, count, len(rows), round(wall, 2), round(cpu, 2), exit_status, str(directory), spent)
        self.batches.append(batch)
        return batch

    def record(self, wall_s: float) -> dict:
        """Merge the blocks so far into the reports directory and say what the campaign did
        in its `run.json` (`campaign`, and `shard` for `e2e.tools.merge`'s completeness check)."""
        self.batches.sort(key=lambda b: b.first_seed)
        info = {
            "configs": self.configs,
            "workers": self.workers,
            "seed": self.plan.seed,
            "block": self.plan.block,
            "shard": str(self.plan.shard),
            "blocks_run": len(self.batches),
            "programs": sum(b.programs for b in self.batches),
            "pairs": sum(b.pairs for b in self.batches),
            "seeds": [[b.first_seed, b.first_seed + b.programs - 1] for b in self.batches],
            "last_seed": max((b.first_seed + b.programs - 1 for b in self.batches), default=None),
            "wall_s": round(wall_s, 1),
            "cpu_s": round(sum(b.cpu_s for b in self.batches), 1),
            "batches": [asdict(b) for b in self.batches],
        }
        if not self.batches:
            write_json_atomic(self.reports_dir / "campaign.json", info)
            return info
        directories = [Path(b.directory) for b in self.batches]
        command = "python -m e2e.fuzz " + shlex.join(sys.argv[1:]) if "fuzz" in Path(sys.argv[0]).parts else ""
        run = merge(directories, self.reports_dir, command=command)
        run["campaign"] = info
        if self.plan.shard.count > 1:
            run["shard"] = {
                "index": self.plan.shard.index,
                "count": self.plan.shard.count,
                "plan": self.plan.digest(self.configs),
            }
        write_json_atomic(self.reports_dir / "run.json", run)
        write_json_atomic(self.reports_dir / "campaign.json", info)
        return info

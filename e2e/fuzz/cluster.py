"""A campaign's blocks on a Dask cluster: `python -m e2e.fuzz ... --scheduler tcp://HOST:PORT`
(or `--scheduler local:N`, a local cluster of N worker processes).

Each block is one task: on a worker, the block's `pytest --generate B --generate-seed s` runs
in a scratch folder of its own (its program cache and bundle index too: workers share no
disk), and the task returns the block's reports directory as a tar.gz with what the block
cost. The campaign writes each into `<reports>/batches/<first seed>/` as it arrives and
merges the blocks as on one machine, so the same seeds give the same pairs and verdicts
(test, config, outcome, signature); only which block's bundle a later block shares differs.

A worker that dies (SIGKILL, a lost machine) takes its task's attempt with it: the block's
pytest run is killed with its worker (`PR_SET_PDEATHSIG`), Dask runs the task again on
another worker, and the campaign records each block once, whichever attempt finished it.
"""

from __future__ import annotations

import ctypes
import io
import os
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PR_SET_PDEATHSIG = 1


def connect(scheduler: str):
    """A Dask client: `local:N` starts a local cluster of N single-threaded worker processes,
    anything else is a scheduler's address."""
    from distributed import Client, LocalCluster

    if scheduler.startswith("local"):
        workers = int(scheduler.partition(":")[2] or 2)
        return Client(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None))
    return Client(scheduler)


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    os.setpgrp()


@dataclass
class BlockOutcome:
    """What a block task hands back."""

    exit_status: int
    output: str
    wall_s: float
    cpu_s: float
    archive: bytes  # the block's reports directory, tar.gz
    worker: str


def run_block(command: list[str], seed_range: str) -> BlockOutcome:
    """On a worker: `command` (a block's pytest run, with `{directory}` and `{cache}` and
    `{index}` standing for scratch folders) in a scratch folder; its reports as tar.gz."""
    scratch = Path(tempfile.mkdtemp(prefix=f"e2e-block-{seed_range}-"))
    try:
        directory, cache, index = scratch / "reports", scratch / "cache", scratch / "index"
        argv = [a.format(directory=directory, cache=cache, index=index) for a in command]
        argv[0] = sys.executable  # this worker's Python, with the project installed
        root = Path(__file__).resolve().parents[2]  # the project's checkout on this worker
        env = {**os.environ, "E2E_REPRO_INDEX": str(index)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        begun = time.monotonic()
        done = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=root,
            preexec_fn=_die_with_parent,
        )
        wall = time.monotonic() - begun
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            if directory.is_dir():
                archive.add(directory, arcname=".")
        return BlockOutcome(done.returncode, done.stdout, wall, cpu, buffer.getvalue(), os.uname().nodename)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unpack_block(outcome: BlockOutcome, directory: Path) -> None:
    """A block's archive written into `directory` (emptied first: an attempt's only)."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(outcome.archive)) as archive:
        archive.extractall(directory, filter="data")


def run_blocks(campaign, client, log: Callable[[str], None]) -> None:
    """Run `campaign`'s blocks on `client`'s cluster, as many in flight as it has workers
    (and one more, so none waits for the campaign), recording each as it ends."""
    from distributed import as_completed

    started = time.monotonic()
    budget = None if campaign.minutes is None else campaign.minutes * 60
    width = max(1, len(client.scheduler_info()["workers"])) + 1
    seeds = campaign.plan.blocks()
    submitted = 0
    flying = as_completed()
    pending: dict = {}

    def submit() -> bool:
        nonlocal submitted
        if campaign.programs is not None and submitted >= campaign.programs:
            return False
        if budget is not None and time.monotonic() - started > budget:
            return False
        count = (
            campaign.plan.block
            if campaign.programs is None
            else min(campaign.plan.block, campaign.programs - submitted)
        )
        first_seed = next(seeds)
        command = campaign.pytest_command(first_seed, count, Path("{directory}"), cache=Path("{cache}"))
        future = client.submit(run_block, command, f"{first_seed}", pure=False, retries=2)
        pending[future.key] = (first_seed, count)
        flying.add(future)
        submitted += count
        return True

    while len(pending) < width and submit():
        pass
    for future in flying:
        first_seed, count = pending.pop(future.key)
        outcome: BlockOutcome = future.result()
        batch = campaign.record_block(first_seed, count, outcome)
        log(
            f"fuzz: seeds {first_seed}..{first_seed + count - 1}: {batch.pairs} pairs in {batch.wall_s:.0f} s on "
            f"{outcome.worker} (pytest exit {outcome.exit_status})"
        )
        campaign.record(time.monotonic() - started)
        while len(pending) < width and submit():
            pass

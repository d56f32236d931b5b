"""What a Dask worker runs for the service's jobs (`e2e.service.jobs`): each function takes the
job's arguments and returns what the service ingests. The suite's own runs go through
`e2e.fuzz.cluster.run_block` (a pytest run in a scratch folder, its reports as an archive);
a bundle is data until a retest runs its `repro.py` here, in a subprocess of its own, in a
scratch folder, with time and memory limits."""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from e2e.fuzz.cluster import BlockOutcome, run_block

BUNDLE_SECONDS = 300
BUNDLE_MEMORY = 8 * 2**30  # address space a bundle's repro.py may take


def _campaign(args: dict):
    from e2e.fuzz import pair_budget
    from e2e.fuzz.campaign import Campaign, Plan

    configs = args["configs"]
    return Campaign(
        configs,
        Plan(args["seed"], args["block"]),
        Path("."),
        workers=args.get("workers", 1),
        pair_budget=pair_budget(configs),
    )


def block(args: dict) -> BlockOutcome:
    """One block of a campaign: the same pytest run `python -m e2e.fuzz` makes of those seeds."""
    command = _campaign(args).pytest_command(
        args["first_seed"], args["count"], Path("{directory}"), cache=Path("{cache}")
    )
    return run_block(command, str(args["first_seed"]))


def reduce(args: dict) -> BlockOutcome:
    """A bug's first generated program alone on its config, every failure reduced at full length
    (the MLIR reducer, the bundle re-verified in a fresh process)."""
    from e2e.fuzz import pytest_command

    command = pytest_command(
        [args["config"]], Path("{directory}"), 1, "--generate", "1", "--generate-seed", str(args["seed"]),
        "--reduce-timeout", str(args.get("reduce_seconds", 120)), cache_dir=Path("{cache}"),
    )  # fmt: skip
    return run_block(command, f"reduce-{args['seed']}")


def shard(args: dict) -> BlockOutcome:
    """Shard I/N of a suite run (`pytest e2e --shard I/N` with the job's options)."""
    command = [
        sys.executable, "-m", "pytest", *args.get("paths", ["e2e"]), "-q", "-p", "no:cacheprovider",
        "--no-result-cache", "--shard", f"{args['index']}/{args['shards']}", "--reports-dir={directory}",
        *args.get("options", []),
    ]  # fmt: skip
    return run_block(command, f"shard-{args['index']}")


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (BUNDLE_MEMORY, BUNDLE_MEMORY))
    os.setpgrp()


def run_bundle(archive: bytes, seconds: float = BUNDLE_SECONDS):
    """A bundle archive's `repro.py` run in a scratch folder, judged by the release ranges'
    rule (`e2e.service.releases.judge_run`: exit 1 with REPRODUCED fails, exit 0 passes, anything
    else cannot tell); the run and the tail of its output."""
    from e2e.service.releases import CANNOT_TELL, Run, judge_run

    with tempfile.TemporaryDirectory(prefix="e2e-retest-") as scratch:
        with tarfile.open(fileobj=io.BytesIO(archive)) as bundle:
            bundle.extractall(scratch, filter="data")
        [folder] = [p for p in Path(scratch).iterdir() if p.is_dir()]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        begun = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-I", "repro.py"], cwd=folder, env=env, capture_output=True, text=True,
                timeout=seconds, preexec_fn=_limits,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return Run(CANNOT_TELL, None, seconds, f"timeout after {seconds:g} s"), ""
        run = judge_run(done.returncode, done.stdout, done.stderr, round(time.monotonic() - begun, 1))
        return run, (done.stdout + done.stderr)[-2000:]


def retest(args: dict) -> dict:
    """Each bundle run again on this worker's versions: it fails (the bug is there), passes (it
    is gone) or cannot tell (`run_bundle`)."""
    from e2e.framework.provenance import versions

    verdicts = []
    for bundle in args["bundles"]:
        run, output = run_bundle(bundle["archive"])
        verdicts.append(
            {
                "bug": bundle["bug"],
                "status": bundle["status"],
                "outcome": run.outcome,
                "exit": run.exit_code,
                "output": output[-500:],
            }
        )
    return {"verdicts": verdicts, "versions": versions(), "worker": os.uname().nodename}


def release_range(args: dict) -> dict:
    """A bug's bundle run on a component's releases (`e2e.service.releases`): its range."""
    from e2e.service.releases import COMPONENTS
    from e2e.service.releases import release_range as search

    with tempfile.TemporaryDirectory(prefix="e2e-range-") as scratch:
        with tarfile.open(fileobj=io.BytesIO(args["archive"])) as bundle:
            bundle.extractall(scratch, filter="data")
        [folder] = [p for p in Path(scratch).iterdir() if p.is_dir()]
        found = search(folder, COMPONENTS[args["component"]], args.get("releases"), runs=args.get("runs", 3))
    return {"range": json.loads(found.to_json()), "markdown": found.markdown(), "worker": os.uname().nodename}


def worker_versions() -> dict:
    """The versions a worker runs bundles with (`e2e.framework.provenance`)."""
    from e2e.framework.provenance import versions

    return versions()

"""The service's jobs on a real Dask cluster the test starts (`dask scheduler`, two `dask
worker` processes): a campaign submitted to the service gives the same pairs and verdicts as
`python -m e2e.fuzz` with the same seeds on one machine and as `e2e.fuzz --scheduler`; a
worker killed with SIGKILL, and the service itself killed and restarted, lose no block and
ingest none twice; a retest marks a bug fixed when its bundle stops reproducing."""

from __future__ import annotations

import pytest

from tests.extras import missing_extra

if reason := missing_extra("service"):
    pytest.skip(reason, allow_module_level=True)

import subprocess
import sys
import time
from pathlib import Path

import httpx

from e2e.framework.results_files import load_rows
from tests.servers import ROOT, Service, free_port, wait_for_port

TOKEN = "jobs-token"
SEED, PROGRAMS, BLOCK = 7_300_000, 12, 4
CONFIGS = ["linalg", "tosa"]


class Cluster:
    """`dask scheduler` and two single-threaded `dask worker` processes on this machine."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
        self.scheduler = subprocess.Popen(
            [*dask, "--port", str(self.port), "--dashboard-address", ":0", "--no-show"],
            stdout=open(folder / "scheduler.log", "w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(self.port, self.scheduler)
        self.workers = [self.worker(folder, name) for name in ("w1", "w2")]

    def worker(self, folder: Path, name: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--nthreads", "1",
                   "--name", name, "--dashboard-address", ":0", "--no-nanny"]  # fmt: skip
        return subprocess.Popen(command, cwd=ROOT, stdout=open(folder / f"{name}.log", "w"), stderr=subprocess.STDOUT)

    def kill_a_busy_worker(self) -> str:
        """SIGKILL the worker that is running a task, once one is (its name)."""
        from distributed import Client

        names = dict(zip(("w1", "w2"), self.workers))
        with Client(self.address, timeout=60) as client:

            def busy():
                workers = client.scheduler_info()["workers"]
                return next(
                    (workers[a]["name"] for a, keys in client.processing().items() if keys and a in workers), None
                )

            name = wait_for(busy, 300, "no worker took a task")
        names[name].kill()
        names[name].wait(30)
        return name

    def stop(self) -> None:
        for process in (*self.workers, self.scheduler):
            process.kill()
            process.wait(30)


@pytest.fixture
def cluster(tmp_path):
    started = Cluster(tmp_path)
    yield started
    started.stop()


def verdicts(rows: list[dict]) -> dict[tuple[str, str], tuple]:
    return {(r["test"], r["config"]): (r["outcome"], r.get("signature")) for r in rows}


def fuzz(folder: Path, *options: str) -> dict:
    command = [sys.executable, "-m", "e2e.fuzz", "--programs", str(PROGRAMS), "--block", str(BLOCK), "--seed",
               str(SEED), "--config", ",".join(CONFIGS), "-n", "1", "--reports-dir", str(folder), *options]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return verdicts(load_rows(folder)[0])


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(2)
    raise AssertionError(f"{what} within {seconds:g} s")


@pytest.mark.timeout(2400)
def test_a_campaign_on_the_cluster_is_the_campaign_on_one_machine(cluster, tmp_path):
    local = fuzz(tmp_path / "local")
    on_cluster = fuzz(tmp_path / "cluster", "--scheduler", cluster.address)
    assert on_cluster == local and len(local) == PROGRAMS * len(CONFIGS)

    service = Service(str(tmp_path / "service.db"), TOKEN, tmp_path / "service.log", "--scheduler", cluster.address)
    try:
        args = {"configs": CONFIGS, "seed": SEED, "block": BLOCK, "programs": PROGRAMS, "workers": 1}
        answer = httpx.post(f"{service.url}/api/jobs", json={"kind": "campaign", "args": args},
                            headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert answer.status_code == 201, answer.text
        campaign = answer.json()["id"]

        def block_jobs():
            listed = httpx.get(f"{service.url}/api/jobs", params={"kind": "block"}).json()["jobs"]
            return [j for j in listed if j["parent_id"] == campaign]

        # A worker killed while it runs a block: its task runs again on the other worker.
        cluster.kill_a_busy_worker()
        done = wait_for(
            lambda: (blocks := block_jobs()) and len(blocks) == PROGRAMS // BLOCK and all(j["state"] == "done" for j in blocks) and blocks,
            1500, "the campaign's blocks did not all finish",
        )  # fmt: skip
        assert len({j["run_id"] for j in done}) == PROGRAMS // BLOCK  # each block ingested once
        runs = httpx.get(f"{service.url}/api/runs").json()["runs"]
        block_runs = [r for r in runs if (r["label"] or "").startswith(f"campaign {campaign} ")]
        assert len(block_runs) == PROGRAMS // BLOCK and sum(r["pairs"] for r in block_runs) == PROGRAMS * len(CONFIGS)
        from e2e.service import queries
        from e2e.service.store import Store

        store = Store(str(tmp_path / "service.db"))
        served = {}
        for run in block_runs:
            served |= verdicts(queries.rows_of(store, run["id"]))
        assert served == local
    finally:
        service.stop()


@pytest.mark.timeout(1800)
def test_a_service_killed_while_jobs_run_finishes_them_once_restarted(cluster, tmp_path):
    db = str(tmp_path / "service.db")
    options = ("--scheduler", cluster.address)
    service = Service(db, TOKEN, tmp_path / "service-1.log", *options)
    args = {"configs": ["linalg"], "seed": SEED + 1000, "block": 2, "programs": 6, "workers": 1}
    answer = httpx.post(f"{service.url}/api/jobs", json={"kind": "campaign", "args": args},
                        headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
    campaign = answer.json()["id"]

    def blocks(url):
        listed = httpx.get(f"{url}/api/jobs", params={"kind": "block"}).json()["jobs"]
        return [j for j in listed if j["parent_id"] == campaign]

    wait_for(lambda: any(j["state"] == "running" for j in blocks(service.url)), 120, "no block started")
    service.process.kill()  # SIGKILL: no chance to tidy up
    service.process.wait(30)
    service = Service(db, TOKEN, tmp_path / "service-2.log", *options)
    try:
        done = wait_for(
            lambda: (found := blocks(service.url)) and len(found) == 3 and all(j["state"] == "done" for j in found) and found,
            1200, "the restarted service did not finish the campaign",
        )  # fmt: skip
        runs = httpx.get(f"{service.url}/api/runs").json()["runs"]
        assert len(runs) == 3 and sorted(r["id"] for r in runs) == sorted(j["run_id"] for j in done)
        assert sum(r["pairs"] for r in runs) == 6
    finally:
        service.stop()

"""The record of a run in its reports directory, kept consistent whatever ends the run.

    reports/run.json       run id, status (running | finished | interrupted), command, versions
    reports/results.jsonl  one row per pair, appended as each pair finishes
    reports/results.json   every row, sorted, written when the run ends

and the clock each worker keeps of its time (`WorkerClock`, in `run.json`'s `worker_seconds`).

A run holds a lock on the directory for its whole life: a second run on the same
directory is refused with a clear error instead of deleting files the first one is
writing. A run killed outright leaves `run.json` saying `running` for a dead pid, and
every row it had in `results.jsonl`.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from e2e.framework.stores import write_bytes_atomic

if TYPE_CHECKING:
    from e2e.framework.html_report import ReportTable


class ReportsDirBusy(RuntimeError):
    pass


def write_json_atomic(path: Path, value: Any) -> None:
    write_bytes_atomic(path, (json.dumps(value, indent=1) + "\n").encode())


class RunRecord:
    def __init__(self, reports_dir: Path, meta: dict[str, Any]):
        self.reports_dir = Path(reports_dir)
        self.meta = meta
        self.run_id = uuid.uuid4().hex[:12]
        self.started = time.time()
        self.rows: list[dict] = []
        self._lock_fd: int | None = None
        self._jsonl = None

    def start(self) -> None:
        self.reports_dir.mkdir(parents=True, exist_ok=True)
        lock_path = self.reports_dir / ".lock"
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._read_run()
            raise ReportsDirBusy(
                f"{self.reports_dir} is in use by another live run (pid {holder.get('pid', '?')}, "
                f"run {holder.get('run_id', '?')}, started {holder.get('started_at', '?')}): wait for it, "
                "or give this run its own directory with --reports-dir"
            ) from None
        self._lock_fd = fd
        (self.reports_dir / "results.json").unlink(missing_ok=True)
        self._jsonl = open(self.reports_dir / "results.jsonl", "w")
        self._write_run("running")

    def _read_run(self) -> dict:
        try:
            return json.loads((self.reports_dir / "run.json").read_text())
        except (OSError, ValueError):
            return {}

    def _write_run(self, status: str, **extra: Any) -> None:
        write_json_atomic(
            self.reports_dir / "run.json",
            {
                "run_id": self.run_id,
                "status": status,
                "pid": os.getpid(),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started)),
                "duration_s": round(time.time() - self.started, 1),
                "rows": len(self.rows),
                **self.meta,
                **extra,
            },
        )

    def add(self, row: dict) -> None:
        row = {**row, "run_id": self.run_id}
        self.rows.append(row)
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(row) + "\n")
            self._jsonl.flush()

    def finish(
        self,
        status: str,
        tables: Sequence[ReportTable] = (),
        changes: Mapping[tuple[str, str], Sequence[str]] | None = None,
        **extra: Any,
    ) -> Path | None:
        """Write results.json, the final run.json and the HTML report (with the `tables` its
        suites add, and the `changes` since a baseline marked); release the directory.
        Returns the report's path."""
        if self._lock_fd is None:
            return None
        from e2e.framework.html_report import write_html

        rows = sorted(self.rows, key=lambda r: (r["test"], r["config"]))
        write_json_atomic(self.reports_dir / "results.json", rows)
        self._write_run(status, **extra)
        page = write_html(rows, self._read_run(), self.reports_dir / "index.html", tables, changes)
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        os.close(self._lock_fd)
        self._lock_fd = None
        return page


# What a `WorkerClock.summary()` holds, in order (`run.json`'s `worker_seconds`, per worker).
WORKER_PARTS = ("before_first_item", "items", "pairs", "after_last_item")


class WorkerClock:
    """Where a process that runs pairs spends its time (`run.json`'s `worker_seconds`, read
    by `benchmarks/suite_report.py`): before its first item (imports, collection, warm-ups),
    in its items, of which in its pairs (their rows' durations: capture to compare, in the
    test's host), and after its last item. An item's time beyond its pair is the framework's:
    starting or handing over the test's host, the golden run, the pair's row, a reduction."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.first_item: float | None = None
        self.last_item_end: float | None = None
        self.item_seconds = 0.0
        self.pair_seconds = 0.0
        self._item_start = 0.0

    def item_starts(self) -> None:
        self._item_start = time.monotonic()
        if self.first_item is None:
            self.first_item = self._item_start

    def item_ends(self) -> None:
        self.last_item_end = time.monotonic()
        self.item_seconds += self.last_item_end - self._item_start

    def summary(self) -> dict:
        now = time.monotonic()
        first = self.first_item if self.first_item is not None else now
        last = self.last_item_end if self.last_item_end is not None else now
        seconds = (first - self.started, self.item_seconds, self.pair_seconds, now - last)
        return {part: round(value, 2) for part, value in zip(WORKER_PARTS, seconds)}

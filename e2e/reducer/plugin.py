"""The pytest side: reduce each failing pair after it runs (conftest registers this)."""

from __future__ import annotations

import shutil
from pathlib import Path

from e2e.configs import load_config
from e2e.reducer.failure import DEFAULT_TIME_BOX, ReduceOutcome, reduce_isolated


class ReducerPlugin:
    """Writes a bundle for every unexpected failure (xfailed ones with `reduce_xfailed`)."""

    def __init__(self, reports_dir: Path, time_box: float = DEFAULT_TIME_BOX, reduce_xfailed: bool = False):
        self.reports_dir = Path(reports_dir)
        self.time_box = time_box
        self.reduce_xfailed = reduce_xfailed

    def clear_stale_bundles(self, config) -> None:
        if not hasattr(config, "workerinput"):  # the controller: bundles of an earlier run are stale
            shutil.rmtree(self.reports_dir / "repro", ignore_errors=True)

    def pytest_e2e_after_result(self, item, prepared, result) -> None:
        if result.passed or result.outcome == "error":
            return
        if item.get_closest_marker("xfail") is not None and not self.reduce_xfailed:
            return
        config = load_config(result.config)
        # Isolated: a crashing query or a leak never touches the pytest process.
        outcome = reduce_isolated(result, prepared, config, self.reports_dir, self.time_box)
        if not isinstance(outcome, ReduceOutcome):
            result.notes.append(outcome)
            return
        result.notes.append(outcome.summary())
        if outcome.bundle is not None and outcome.verified:
            result.repro_path = str(outcome.bundle)
        elif outcome.bundle is not None:
            result.notes.append(f"reducer: bundle {outcome.bundle} did not re-verify: {outcome.note}")

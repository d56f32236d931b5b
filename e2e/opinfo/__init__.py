"""The OpInfo sweep: every op of PyTorch's OpInfo database as e2e tests through every config.

    python -m pytest --opinfo-slice full -n 2             # the full sweep (suite and xfail sets)
    python -m pytest --opinfo-slice ci -n 2               # the CI slice: sample 0 of one op in 8
    python -m e2e.opinfo --report                         # what the sweep takes and skips, by reason
    python -m e2e.opinfo.op_matrix reports/results.json    # ops x configs after a run

It lives outside `e2e/test_suite` so the default run does not pay op_db's import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Slice:
    """What `--opinfo-slice NAME` runs: a suite directory and the xfail sets recorded from it."""

    suite: Path
    xfail_dir: Path


# The CI slice is its own suite file (it registers only the slice's tests, in seconds), so
# its xfail sets name only registered tests and its import probe is cached by its content.
SLICES = {
    "ci": Slice(_HERE / "ci", _HERE / "xfail" / "ci"),
    "full": Slice(_HERE / "suite", _HERE / "xfail" / "full"),
}

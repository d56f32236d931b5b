"""The fuzzing campaign (`python -m e2e.fuzz`): see docs/fuzz.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence


def pytest_command(configs: Sequence[str], reports_dir: Path, workers: int, *arguments: str) -> list[str]:
    """The pytest command the campaign runs a selection with: quiet, without pytest's own
    cache, on `configs`, writing to `reports_dir` (one `--reports-dir=` word: given as two,
    pytest takes the directory for its rootdir before the plugin's options are known)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *arguments]
    command += ["--config", ",".join(configs), f"--reports-dir={reports_dir}"]
    return command + (["-n", str(workers)] if workers > 1 else [])

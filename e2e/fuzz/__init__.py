"""The fuzzing campaign (`python -m e2e.fuzz`): see docs/fuzz.md."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

# Seconds a campaign's pair may take (`--timeout`; the suite's own default is 300 s, for its
# largest models). A generated program is small: of the 60-minute campaign's 10,738 pairs on
# thirteen configs the slowest took 9.5 s (onnx@iree; 3.0 s on the six built-in configs). A
# hang runs twice (the rerun in a fresh host confirms it) and gdb takes its stack each time
# (~8 s): at 300 s one hang of torch-mlir's greedy rewriter held a worker 620 s (its block
# took 644 s, the others 142-223 s), at 60 s another held one 144 s (390 s, the others 154-168 s).
PAIR_BUDGET = 30.0
# A campaign on the six built-in configs alone gives a pair a third of that: their slowest
# generated pair took 3.0 s, and a hang costs its budget twice, with gdb's look each time:
# at 30 s, `Gen_998`'s hang in torch-mlir's contract pass (torchscript) held a worker 72 s
# at the end of its block while the other had nothing left to run.
BUILT_IN_PAIR_BUDGET = 10.0


def pair_budget(configs: Sequence[str]) -> float:
    """A campaign pair's budget on `configs`: `BUILT_IN_PAIR_BUDGET` when each is a built-in
    config, else `PAIR_BUDGET` (a runtime's compile of a generated program takes up to 9.5 s)."""
    from e2e.configs import CONFIG_NAMES

    return BUILT_IN_PAIR_BUDGET if configs and all(c in CONFIG_NAMES for c in configs) else PAIR_BUDGET


def pytest_command(
    configs: Sequence[str], reports_dir: Path, workers: int, *arguments: str, cache_dir: Path | None = None
) -> list[str]:
    """The pytest command the campaign runs a selection with: quiet, on `configs`, writing to
    `reports_dir` (one `--reports-dir=` word: given as two, pytest takes the directory for its
    rootdir before the plugin's options are known). Without `cache_dir`, pytest's cache is off;
    with it, only the program cache is kept there (compiled programs: an op a generated program
    shares with an earlier one, with the same types, is compiled once per campaign), never a
    verdict or a capture."""
    if cache_dir is None:
        cache = ["-p", "no:cacheprovider"]
    else:
        cache = ["-o", f"cache_dir={cache_dir}", "--no-result-cache", "--no-frontend-cache"]
    command = [sys.executable, "-m", "pytest", *cache, "-q", *arguments]
    command += ["--config", ",".join(configs), f"--reports-dir={reports_dir}"]
    return command + (["-n", str(workers)] if workers > 1 else [])

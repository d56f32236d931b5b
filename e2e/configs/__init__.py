"""The configs, by name, and their xfail sets.

A config is an object with a `name`, `compile(prepared, snapshots) -> artifact` and
`run(artifact, golden_trace) -> trace`; each lives in `e2e/configs/<name>.py` as
`CONFIG`. Its expected failures are in `e2e/configs/xfail/<name>.txt`: one test
name per line, sorted, each with `# reason`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

CONFIG_NAMES = ("linalg", "tosa", "stablehlo", "ltc", "torchscript", "eager")
XFAIL_DIR = Path(__file__).parent / "xfail"


def load_config(name: str):
    if name not in CONFIG_NAMES:
        raise ValueError(f"unknown config {name!r}; known: {', '.join(CONFIG_NAMES)}")
    return importlib.import_module(f"e2e.configs.{name}").CONFIG


@dataclass(frozen=True)
class XfailEntry:
    test: str
    reason: str
    line: int


class XfailError(ValueError):
    pass


def xfail_path(config: str, directory: Path = XFAIL_DIR) -> Path:
    return directory / f"{config}.txt"


def load_xfails(
    config: str, known_tests: set[str] | None = None, directory: Path = XFAIL_DIR
) -> dict[str, XfailEntry]:
    """Parse and validate one xfail file: reasons present, sorted, no duplicates, known names."""
    path = xfail_path(config, directory)
    if not path.exists():
        return {}
    entries: dict[str, XfailEntry] = {}
    problems: list[str] = []
    previous = ""
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = (part.strip() for part in line.partition("#"))
        where = f"{path}:{number}"
        if not reason:
            problems.append(f"{where}: {name} has no reason (write `{name}  # why it fails`)")
        if name in entries:
            problems.append(f"{where}: {name} is listed twice (first on line {entries[name].line})")
        if name < previous:
            problems.append(f"{where}: {name} is out of order (the file is sorted)")
        if known_tests is not None and name not in known_tests:
            problems.append(f"{where}: unknown test {name!r}: remove the line (renamed or deleted test?)")
        entries[name] = XfailEntry(name, reason, number)
        previous = name
    if problems:
        raise XfailError("invalid xfail set:\n  " + "\n  ".join(problems))
    return entries

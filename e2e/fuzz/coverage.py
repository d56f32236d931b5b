"""Which ops a config takes alone: the op support matrix, else the op run alone on the spot.

The matrix (`docs/support.md`, written by `python -m e2e.support`) names OpInfo ops; a
cell is `pass`, `partial k/n` or the stage every sample failed in. A config takes an op
alone when its cell is `pass`; it does not when the cell is a failing stage. A `partial`
cell, or an op the matrix lacks, is settled on the spot when a check is given (a one-op
generated program run on the config), and the answer is cached in a JSON file; without
one, such an op counts as not taken: a campaign reports only what is surely a bug.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MATRIX = Path(__file__).resolve().parents[2] / "docs" / "support.md"
_ROW = re.compile(r"^\| `([^`]+)` \|(.*)\|\s*$")


def read_matrix(path: Path = MATRIX) -> dict[str, dict[str, str]]:
    """op -> config -> cell ("pass", "partial", or the failing stage), from the markdown matrix."""
    if not path.is_file():
        return {}
    configs: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    for line in path.read_text().splitlines():
        if line.startswith("| op |"):
            configs = [cell.strip() for cell in line.strip().strip("|").split("|")][1:]
            continue
        match = _ROW.match(line)
        if match and configs:
            cells = [cell.strip() for cell in match[2].split("|")]
            matrix[match[1]] = {config: cell.split()[0] if cell else "" for config, cell in zip(configs, cells)}
    return matrix


@dataclass
class Support:
    """`takes(config, op)`: whether `config` compiles and runs `op` alone."""

    matrix: dict[str, dict[str, str]] = field(default_factory=read_matrix)
    check: Callable[[str, str], bool] | None = None  # the op alone on the config, run now
    cache_path: Path | None = None
    checked: dict[str, bool] = field(default_factory=dict)  # "config op" -> taken

    def __post_init__(self) -> None:
        if self.cache_path is not None and self.cache_path.is_file():
            self.checked.update(json.loads(self.cache_path.read_text()))

    def cell(self, config: str, op: str) -> str | None:
        for name in (op, f"nn.functional.{op}", op.rstrip("_")):
            cell = self.matrix.get(name, {}).get(config)
            if cell:
                return cell
        return None

    def takes(self, config: str, op: str) -> bool:
        cell = self.cell(config, op)
        if cell == "pass":
            return True
        if cell is not None and cell != "partial":
            return False
        key = f"{config} {op}"
        if key not in self.checked:
            if self.check is None:
                return False
            self.checked[key] = bool(self.check(config, op))
            if self.cache_path is not None:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                self.cache_path.write_text(json.dumps(self.checked, indent=1, sort_keys=True) + "\n")
        return self.checked[key]

"""The testdata's results by op family: family x config, pass/ran per cell.

One computation (`family_counts`) with two renderings: Markdown
(`python -m e2e.stablehlo_testdata --table`) and the HTML report's table
(`report_table`: a run whose configs include `testdata-*` ones gets it on its page).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from e2e.framework.html_report import ReportTable
from e2e.stablehlo_testdata.register import PREFIX

CONFIG_PREFIX = "testdata-"  # the suite's configs (e2e/stablehlo_testdata/configs.py)


def family(test: str) -> str:
    """The op family of a test name: the first word of the program's file name
    (`stablehlo/scatter_add_uint32_...` -> `scatter`), prefixed with its subdirectory."""
    path = test.removeprefix(PREFIX)
    directory, _, base = path.rpartition("/")
    word = base.split("_")[0]
    return f"{directory}/{word}" if directory else word


@dataclass(frozen=True)
class FamilyCounts:
    """Per family (by program count, then name) its programs and a `pass/ran` cell per
    config (ran: not skipped); a last row `all`."""

    configs: list[str]
    rows: list[tuple[str, int, list[str]]]  # family, programs, cells


def family_counts(rows: list[dict]) -> FamilyCounts:
    configs = sorted({row["config"] for row in rows})
    cells: dict[str, dict[str, Counter]] = {}
    programs: dict[str, set] = {}
    for row in rows:
        name = family(row["test"])
        programs.setdefault(name, set()).add(row["test"])
        cells.setdefault(name, {}).setdefault(row["config"], Counter())[row["outcome"]] += 1

    def cell(counts: Counter) -> str:
        return f"{counts['pass']}/{sum(counts.values()) - counts['skip']}"

    table = [
        (name, len(programs[name]), [cell(cells[name].get(c, Counter())) for c in configs])
        for name in sorted(cells, key=lambda n: (-len(programs[n]), n))
    ]
    totals = [cell(sum((cells[n].get(c, Counter()) for n in cells), Counter())) for c in configs]
    table.append(("all", sum(len(p) for p in programs.values()), totals))
    return FamilyCounts(configs, table)


def testdata_config_rows(rows: list[dict]) -> list[dict]:
    """The rows of the testdata configs."""
    return [row for row in rows if row["config"].startswith(CONFIG_PREFIX) and row["test"].startswith(PREFIX)]


def report_table(rows: list[dict]) -> ReportTable | None:
    """The HTML report's table of a run's testdata configs; None when it ran none."""
    mine = testdata_config_rows(rows)
    if not mine:
        return None
    counts = family_counts(mine)
    return ReportTable(
        id="testdata-families",
        title="StableHLO testdata by op family",
        note="Per op family (the first word of a program's file name) and executor: programs passed / run "
        "(skipped ones not counted). A family that passes on the interpreter and fails on the RefBackend "
        "shows a bug of torch-mlir's StableHLO -> linalg conversion on that op.",
        header=("family", "programs", *counts.configs),
        rows=tuple((name, str(programs), *cells) for name, programs, cells in counts.rows),
    )

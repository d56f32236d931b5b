"""The tables suites add to a run's HTML report (`html_report.ReportTable`), one builder
each: given the run's rows, a table or None. The plugin and `e2e.tools.merge` hand them to the page;
the framework renders them without knowing the suites."""

from __future__ import annotations

from e2e.framework.html_report import ReportTable
from e2e.stablehlo_testdata.families import report_table as testdata_families

BUILDERS = (testdata_families,)


def report_tables(rows: list[dict]) -> list[ReportTable]:
    return [table for build in BUILDERS if (table := build(rows)) is not None]

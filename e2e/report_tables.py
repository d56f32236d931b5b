"""`e2e.tools.report_tables` under its former name, for e2e/fuzz/triage.py (edited on another branch)."""

from e2e.tools.report_tables import report_tables

__all__ = ["report_tables"]

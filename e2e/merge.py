"""`e2e.tools.merge` under its former name, for e2e/fuzz/campaign.py (edited on another branch)."""

from e2e.tools.merge import merge

__all__ = ["merge"]

"""Replay a bundle: what each bundle's repro.py runs."""

from __future__ import annotations

import re
from pathlib import Path

from e2e.reducer.case import Case, observe


def strip_reproducer_resource(text: str) -> str:
    return re.sub(r"  external_resources: \{\n    mlir_reproducer: \{.*?\n    \}\n  \},?\n", "", text, flags=re.S)


def replay(bundle_dir: Path, *, isolate: bool = False, report=None) -> tuple[Case, str | None]:
    """(the bundle's case, the signature its repro.mlir shows now)."""
    case = Case.from_json((bundle_dir / "case.json").read_text())
    text = strip_reproducer_resource((bundle_dir / "repro.mlir").read_text())
    return case, observe(case, text, bundle_dir, isolate=isolate, report=report)


def main(bundle_dir: Path) -> int:
    """Exit status: 1 the bug is there, 0 it is gone, 2 a different failure."""
    case, observed = replay(bundle_dir, report=print)
    if observed == case.signature:
        print(f"REPRODUCED: {observed}")
        return 1
    if observed is None:
        print(f"not reproduced: the module compiles (and computes the expected values); was: {case.signature}")
        return 0
    print(f"different failure: {observed}\nexpected: {case.signature}")
    return 2

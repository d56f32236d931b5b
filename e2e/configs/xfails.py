"""Expected-failure sets: which tests a config is known to fail, and how.

`e2e/configs/xfail/<config>.txt` (annotated shapes) and `<config>.static.txt`
(`--shapes static`) list one test per line, each with its reason. A reason of the form
`<outcome>: <signature>` is also a check: a listed test that now fails differently (its
outcome, stage, or pass/op/mismatch kind changed) is reported as "fails differently".
Tests sharing one cause can be grouped under it:

    Binary_Atan2SameShape  # fail: backend | convert-torch-to-tosa | loc: failed to legalize ...
    [fail: lower | one-shot-bufferize | loc: op was not bufferized]
    AddAlpha
    BmmModule_basic  # a note of your own; the group's reason still applies

A line with its own reason outside a group stands alone; a bare name belongs to the
group above it (the updater writes a reason on every line). Names are sorted within each block, unique, and must be registered
tests: a stale or misspelt name is an error at collection, with its file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from e2e.framework.result import SHAPE_MODES

OUTCOMES = ("fail", "crash", "timeout", "memory")
_EXPECTED = re.compile(rf"^({'|'.join(OUTCOMES)}): (.+)$")


@dataclass(frozen=True)
class XfailEntry:
    test: str
    reason: str
    path: Path
    line: int
    note: str = ""  # a hand-written note beside a grouped name

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def expected(self) -> tuple[str, str] | None:
        """(outcome, signature) when the reason records how the test fails."""
        match = _EXPECTED.match(self.reason)
        return (match[1], match[2]) if match else None

    def differs_from(self, outcome: str, signature: str | None) -> bool:
        """Whether a failure is not the one this entry expects (same outcome, stage and
        pass/op/kind); always False for a reason that records no signature."""
        expected = self.expected
        if expected is None:
            return False
        return (expected[0], signature_key(expected[1])) != (outcome, signature_key(signature or ""))


def signature_key(signature: str) -> str:
    """The part of a signature that names the bug's place: stage and pass, op or kind.

    Wrong values and wrong NaN positions are one kind: which one a miscompile that reads
    uninitialized memory shows changes from run to run.
    """
    key = " | ".join(part.strip() for part in signature.split("|")[:2])
    return "compare | values" if key == "compare | nan" else key


class XfailError(ValueError):
    pass


def xfail_path(config: str, directory: Path, shape_mode: str = "annotated") -> Path:
    if shape_mode not in SHAPE_MODES:
        raise ValueError(f"unknown shape mode {shape_mode!r}")
    suffix = "" if shape_mode == "annotated" else f".{shape_mode}"
    return Path(directory) / f"{config}{suffix}.txt"


def load_xfails(
    config: str, known_tests: set[str] | None, directory: Path, shape_mode: str = "annotated"
) -> dict[str, XfailEntry]:
    """Parse and validate one xfail file (empty when it does not exist)."""
    path = xfail_path(config, directory, shape_mode)
    if not path.exists():
        return {}
    entries: dict[str, XfailEntry] = {}
    problems: list[str] = []
    group: str | None = None
    previous = ""
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        where = f"{path}:{number}"
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group, previous = line[1:-1].strip(), ""
            if not group:
                problems.append(f"{where}: an empty group header")
            continue
        name, _, own = (part.strip() for part in line.partition("#"))
        if group is not None:
            reason, note = group, own
        elif own:
            reason, note = own, ""
        else:
            problems.append(f"{where}: {name} has no reason (write `{name}  # why it fails`, or list it under a [group])")
            continue
        if name in entries:
            problems.append(f"{where}: {name} is listed twice (first on line {entries[name].line})")
        if name < previous:
            problems.append(f"{where}: {name} is out of order (names are sorted within each block)")
        if known_tests is not None and name not in known_tests:
            problems.append(f"{where}: unknown test {name!r}: remove the line (renamed or deleted test?)")
        entries[name] = XfailEntry(name, reason, path, number, note)
        previous = name
    if problems:
        raise XfailError(f"invalid xfail set {path}:\n  " + "\n  ".join(problems))
    return entries


def format_xfails(reasons: dict[str, str], notes: dict[str, str] | None = None) -> str:
    """The text of an xfail file: one sorted line per test, each with its reason (a note
    written beside a grouped name is kept after the reason)."""
    notes = notes or {}
    lines = [
        f"{name}  # {reasons[name]}" + (f" -- {notes[name]}" if notes.get(name) else "")
        for name in sorted(reasons)
    ]
    return "".join(line + "\n" for line in lines)

"""Expected-failure sets: which tests a config is known to fail, and how.

`e2e/configs/xfail/<config>.txt` (annotated shapes) and `<config>.static.txt`
(`--shapes static`) list one test per line, each with its reason. A reason of the form
`<outcome>: <signature>` is also a check: a listed test that now fails differently (its
outcome, or its signature's stage, pass or mismatch kind, or the op its message blames,
changed: `Signature.covers`) is reported as "fails differently".
Tests sharing one cause can be grouped under it:

    Binary_Atan2SameShape  # fail: backend | convert-torch-to-tosa | loc: failed to legalize ...
    [fail: lower | one-shot-bufferize | loc: 'stablehlo.scatter': op was not bufferized]
    AddAlpha
    BmmModule_basic  # a note of your own; the group's reason still applies
    Cumsum_Dynamic  # fail: compare | values -- a note after the checked reason

An entry that holds only where native torch's kernels give the golden values it was
recorded against names those platforms (torch's CPU kernel ISA, `e2e.framework.platform`)
after the test; on other platforms the test is expected to pass:

    NanInf_Gelu @avx512  # fail: compare | nan -- torch's AVX-512 gelu(-inf) is 0, its others NaN

A miscompile whose result depends on memory it should not read (garbage that is
sometimes the right value) passes on some runs: its reason starts with `flaky:` and says
why, and the pair may pass or fail (pytest's non-strict xfail); the updater keeps it:
    node/test_gridsample_zeros_padding  # flaky: reads outside the input for zero padding
A line with its own reason outside a group stands alone; a bare name belongs to the
group above it (the updater writes a reason on every line). Names are sorted within each
block and must be registered tests: a stale or misspelt name is an error at collection,
with its file and line. A name appears once, or once per disjoint set of platforms.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from e2e.framework.result import SHAPE_MODES
from e2e.framework.signature import Signature

OUTCOMES = ("fail", "crash", "timeout", "memory")
# torch's CPU capabilities (`torch.backends.cpu.get_cpu_capability()`, lower case).
PLATFORMS = ("default", "avx2", "avx512", "sve128", "sve256", "vsx", "zvector")
_EXPECTED = re.compile(rf"^({'|'.join(OUTCOMES)}): (.+)$")


# The budget of a pair whose xfail entry records a timeout (`# timeout: timeout | <stage>`):
# a compiler that no longer hangs answers well within it (a median pair takes 0.1 s, the
# suite's slowest, its dynamic zoo models, under 9 s). At 30 s, the suite's one listed hang
# (`GenBug_387_torchscript`) cost 30 of its ~850 pair-seconds on every run.
EXPECTED_HANG_SECONDS = 10.0
# The budget of a pair whose entry records no signature: undefined behaviour that ends
# another way from run to run (an out-of-bounds write, sizes read from garbage). A heap it
# corrupted can deadlock the allocator (three pairs of `IndexPut_NegativeIndex` slept out
# 300 s each in one run); `e2e.framework.deadlock` now ends those within a second, and
# this bounds the hangs it cannot see (a loop over a size read from garbage spins, it
# does not sleep). Such pairs otherwise end within 30 s (the zoo's dynamic models on `eager`).
RUN_TO_RUN_SECONDS = 90.0


@dataclass(frozen=True)
class XfailEntry:
    test: str
    reason: str
    path: Path
    line: int
    note: str = ""  # a hand-written note beside a grouped name
    platforms: frozenset[str] = frozenset()  # where it holds; empty: everywhere

    def holds_on(self, platform: str) -> bool:
        return not self.platforms or platform in self.platforms

    @property
    def label(self) -> str:
        """The name as written, with its platforms."""
        return self.test + (f" @{','.join(sorted(self.platforms))}" if self.platforms else "")

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def flaky(self) -> bool:
        """A result that differs from run to run (a read of uninitialized memory): pass or fail."""
        return self.reason.startswith("flaky:")

    @functools.cached_property
    def expected(self) -> tuple[str, Signature] | None:
        """(outcome, signature) when the reason records how the test fails: the reason is
        the file's text, read here once."""
        match = _EXPECTED.match(self.reason)
        return (match[1], Signature.parse(match[2])) if match else None

    def budget(self, seconds: float) -> float:
        """The pair's budget: a pair this entry expects to hang gets `EXPECTED_HANG_SECONDS`
        at most, not the whole budget again on every run (a fixed compiler answers sooner);
        one whose failure differs from run to run (no signature), `RUN_TO_RUN_SECONDS`."""
        expected = self.expected
        if expected is None:
            return min(seconds, RUN_TO_RUN_SECONDS)
        return min(seconds, EXPECTED_HANG_SECONDS) if expected[0] == "timeout" else seconds

    def differs_from(self, outcome: str, signature: Signature | None) -> bool:
        """Whether a failure is not the one this entry expects (same outcome, stage,
        pass or kind, and op: `Signature.covers`); always False for a reason that records
        no signature."""
        expected = self.expected
        if expected is None:
            return False
        return expected[0] != outcome or signature is None or not expected[1].covers(signature)


class XfailError(ValueError):
    pass


def xfail_path(config: str, directory: Path, shape_mode: str = "annotated") -> Path:
    if shape_mode not in SHAPE_MODES:
        raise ValueError(f"unknown shape mode {shape_mode!r}")
    suffix = "" if shape_mode == "annotated" else f".{shape_mode}"
    return Path(directory) / f"{config}{suffix}.txt"


def load_xfails(
    config: str,
    known_tests: set[str] | None,
    directory: Path,
    shape_mode: str = "annotated",
    platform: str | None = None,
) -> dict[str, XfailEntry]:
    """The entries of one xfail file (validated) that hold on `platform` (default: this
    run's, `e2e.framework.platform.torch_cpu_capability`)."""
    if platform is None:
        from e2e.framework.platform import torch_cpu_capability

        platform = torch_cpu_capability()
    entries = read_xfails(xfail_path(config, directory, shape_mode), known_tests)
    return {entry.test: entry for entry in entries if entry.holds_on(platform)}


def read_xfails(path: Path, known_tests: set[str] | None) -> list[XfailEntry]:
    """Every entry of an xfail file, for all platforms; empty when it does not exist."""
    if not path.exists():
        return []
    entries: list[XfailEntry] = []
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
        head, _, own = (part.strip() for part in line.partition("#"))
        name, *qualifiers = head.split()
        platforms, bad = _platforms(qualifiers)
        if bad:
            problems.append(f"{where}: {bad} (write `{name} @avx512`; platforms: {', '.join(PLATFORMS)})")
        if group is not None:
            reason, note = group, own
        elif own:
            reason, _, note = (part.strip() for part in own.partition(" -- "))
        else:
            problems.append(
                f"{where}: {name} has no reason (write `{name}  # why it fails`, or list it under a [group])"
            )
            continue
        for other in entries:
            if other.test == name and (not other.platforms or not platforms or other.platforms & platforms):
                problems.append(f"{where}: {name} is listed twice for one platform (first on line {other.line})")
        if name < previous:
            problems.append(f"{where}: {name} is out of order (names are sorted within each block)")
        if known_tests is not None and name not in known_tests:
            problems.append(f"{where}: unknown test {name!r}: remove the line (renamed or deleted test?)")
        entries.append(XfailEntry(name, reason, path, number, note, platforms))
        previous = name
    if problems:
        raise XfailError(f"invalid xfail set {path}:\n  " + "\n  ".join(problems))
    return entries


def _platforms(qualifiers: list[str]) -> tuple[frozenset[str], str | None]:
    """`@avx512,avx2` -> the platforms, or an error for anything else after the name."""
    if not qualifiers:
        return frozenset(), None
    if len(qualifiers) > 1 or not qualifiers[0].startswith("@"):
        return frozenset(), f"unexpected {' '.join(qualifiers)!r} after the test name"
    platforms = frozenset(p.strip().lower() for p in qualifiers[0][1:].split(",") if p.strip())
    unknown = sorted(platforms - set(PLATFORMS))
    if unknown or not platforms:
        return frozenset(), f"unknown platform {','.join(unknown) or '(none)'!r}"
    return platforms, None


def format_xfails(entries: list[XfailEntry]) -> str:
    """The text of an xfail file: one sorted line per entry, each with its reason (a note
    written beside a grouped name is kept after the reason)."""
    lines = [
        f"{entry.label}  # {entry.reason}" + (f" -- {entry.note}" if entry.note else "")
        for entry in sorted(entries, key=lambda e: (e.test, sorted(e.platforms)))
    ]
    return "".join(line + "\n" for line in lines)

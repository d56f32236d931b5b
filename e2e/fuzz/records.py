"""A run's distinct bugs as data (`bugs.json`): what a campaign's triage found, or a
suite run's failing pairs grouped by the campaign's key, in the form the reproducer
service (`e2e.service`) reads.

    {"format": "e2e-bugs/1", "bugs": [{"config", "key", "guilty_op", "kind", "stage",
     "signature", "known", "tests", "root", "bundle", "verified"}, ...]}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from e2e.reducer.outcome import BUNDLE_RECORD

BUGS_FILE = "bugs.json"
BUGS_FORMAT = "e2e-bugs/1"
FAILING = ("fail", "crash", "timeout", "memory", "error")


@dataclass(frozen=True)
class BugRecord:
    """One distinct bug of a run (a row of `bugs.json`)."""

    config: str
    key: str  # stage | pass or mismatch kind | message without numbers and types
    guilty_op: str  # "" when none is known
    kind: str  # wrong result | crash or hang | compile failure
    stage: str
    signature: str  # its first pair's signature, as people read it
    known: bool  # an xfail entry carries it
    tests: tuple[str, ...]  # the tests whose pair on `config` hit it
    # Where its reduced program fails, at any config (`e2e.fuzz.bugs.Bug.root`): its guilty op
    # and the pass of its bundle's failing step, or what broke the types when an earlier step
    # did; bugs of one root are one compiler bug.
    root: str | None = None
    bundle: str | None = None  # its bundle's folder, relative to the reports directory
    verified: bool | None = None  # the bundle's repro.py re-verified in a fresh process

    @property
    def ident(self) -> str:
        """The bug's identity across runs: its config, key and guilty op."""
        return hashlib.sha1("\0".join((self.config, self.key, self.guilty_op)).encode()).hexdigest()

    def to_json(self) -> dict:
        return {**asdict(self), "tests": list(self.tests)}

    @classmethod
    def from_json(cls, value: dict) -> "BugRecord":
        try:
            return cls(**{**value, "tests": tuple(value["tests"])})
        except (TypeError, KeyError) as error:
            raise ValueError(f"a bug is not of the form {BUGS_FORMAT} ({error})") from None


def key_text(signature) -> str:
    from e2e.fuzz.bugs import bug_key

    return " | ".join(part for part in bug_key(signature) if part is not None)


def bundle_record(bundle: Path) -> dict:
    """A bundle's `bundle.json` ({} for a bundle written before it, or none)."""
    try:
        return json.loads((bundle / BUNDLE_RECORD).read_text())
    except (OSError, ValueError):
        return {}


def resolve_bundle(reports_dir: Path, repro_path: str | None) -> Path | None:
    """A row's `repro_path` as a folder under `reports_dir`, wherever the run was started
    from: as written, else its part from the last `repro` folder on, under `reports_dir`."""
    if not repro_path:
        return None
    given = Path(repro_path)
    candidates = [given] if given.is_absolute() else [Path.cwd() / given, reports_dir.parent / given]
    parts = given.parts
    if "repro" in parts:
        tail = parts[len(parts) - 1 - parts[::-1].index("repro") :]
        candidates.append(reports_dir.joinpath(*tail))
    for candidate in candidates:
        if is_bundle(candidate):
            return candidate.resolve()
    return None


def is_bundle(folder: Path) -> bool:
    """A reproducer a maintainer can run: its program and the script that shows the bug (an
    in-block reduction that was cut short leaves only `case.json` and `repro.mlir`)."""
    return (folder / "repro.mlir").is_file() and (folder / "repro.py").is_file()


def group_failures(rows: list[dict], reports_dir: Path, parse_ir: bool = True) -> list[BugRecord]:
    """A run's failing pairs grouped into bugs by the campaign's key (`e2e.fuzz.bugs`): for
    runs without a campaign's triage. A bug is known when an xfail entry expected each of its
    pairs. Its bundle: the smallest verified one of its pairs' (else the smallest)."""
    from e2e.framework.result import Result
    from e2e.fuzz.bugs import BROKEN, Bug, Failure

    grouped: dict[tuple, list[tuple[dict, object]]] = {}
    for row in rows:
        if row.get("outcome") not in FAILING:
            continue
        failure = Failure.of(Result.from_json(row), site=parse_ir)
        if failure.kind == BROKEN:
            continue
        grouped.setdefault(failure.key, []).append((row, failure))
    bugs = []
    for members in grouped.values():
        first = members[0][1]
        known = all(row.get("final") == "xfailed" for row, _ in members)
        bugs.append(Bug(first.config, first.signature, first.guilty_op, first.kind, known, [f for _, f in members]))
    return sorted(campaign_bugs(bugs, reports_dir), key=lambda b: (b.config, b.key, b.guilty_op))


def smallest_bundle(bundles: list[Path]) -> Path | None:
    """The bundle to keep: verified before unverified, then the smallest `repro.mlir`."""
    if not bundles:
        return None
    return min(
        set(bundles), key=lambda b: (bundle_record(b).get("verified") is not True, (b / "repro.mlir").stat().st_size)
    )


def _relative(bundle: Path | None, reports_dir: Path) -> str | None:
    if bundle is None:
        return None
    try:
        return str(bundle.relative_to(reports_dir.resolve()))
    except ValueError:
        return str(bundle)  # outside the reports directory: `pack` copies it in


def write_bugs(directory: Path, bugs: list[BugRecord]) -> Path:
    """`bugs.json`: a run's distinct bugs, as the service reads them."""
    from e2e.framework.run_record import write_json_atomic

    path = Path(directory) / BUGS_FILE
    write_json_atomic(path, {"format": BUGS_FORMAT, "bugs": [bug.to_json() for bug in bugs]})
    return path


def campaign_bugs(bugs, reports_dir: Path) -> list[BugRecord]:
    """Bugs (`e2e.fuzz.bugs.Bug`: a campaign's triaged ones, or a run's grouped failures) as
    records; each one's bundle its regression test's, else the smallest verified of its pairs'."""
    records = []
    for bug in bugs:
        given = [bug.regression_bundle] if bug.regression_bundle else [f.repro_path for f in bug.failures]
        found = [b for b in (resolve_bundle(reports_dir, path) for path in given) if b is not None]
        bundle = smallest_bundle(found)
        verified = bug.verified if bug.regression_bundle and bundle is not None else None
        if verified is None and bundle is not None:
            verified = bundle_record(bundle).get("verified")
        records.append(
            BugRecord(
                config=bug.config,
                key=key_text(bug.signature),
                guilty_op=bug.guilty_op or "",
                kind=bug.kind,
                stage=bug.stage,
                signature=bug.signature.format(),
                known=bug.known,
                tests=tuple(sorted(dict.fromkeys(f.test for f in bug.failures))),
                root=bug.root,
                bundle=_relative(bundle, reports_dir),
                verified=verified,
            )
        )
    return records

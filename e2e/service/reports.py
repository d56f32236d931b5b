"""A run as the service takes it: a reports directory read into one value (`RunReport`),
and the archive an upload carries it in.

Any run the project makes is a reports directory: a suite run (`pytest e2e`), a merged CI
run (`e2e.merge`), a campaign (`e2e.fuzz`) or a sweep. `read_reports` reads its rows and
`run.json`, and its distinct bugs: the campaign's own triage (`bugs.json`, written by
`e2e.fuzz`), or for any other run its failing pairs grouped by the campaign's key (config,
signature key, guilty op: `e2e.fuzz.bugs.Failure`), a bug known when an xfail entry expected
every pair of it. `pack` writes what an upload needs (results, run record, bugs, each bug's
bundle) as one tar.gz; `unpack` checks an archive member by member before anything of it
is read (no path outside its folder, no link, nothing past the size limit).
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e.framework.results_files import ResultsError, load_rows
from e2e.reducer.outcome import BUNDLE_RECORD

BUGS_FILE = "bugs.json"
BUGS_FORMAT = "e2e-bugs/1"
FAILING = ("fail", "crash", "timeout", "memory", "error")
# Past these an upload is refused (HTTP 413): a run of 10,000 pairs with its bundles is a
# few MB; the limits keep a runaway upload from filling the server's disk or memory.
MAX_ARCHIVE_BYTES = 256 * 2**20
MAX_UNPACKED_BYTES = 1024 * 2**20
MAX_MEMBERS = 200_000


class UploadError(ValueError):
    """An upload that is not a run: what is wrong with it, for the 4xx the server answers."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


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
    root: str | None = None  # what broke the types, whatever the step (`e2e.fuzz.bugs.Bug.types_root`)
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
            raise UploadError(f"{BUGS_FILE}: a bug is not of the form {BUGS_FORMAT} ({error})") from None


def key_text(signature) -> str:
    from e2e.fuzz.bugs import bug_key

    return " | ".join(part for part in bug_key(signature) if part is not None)


def bundle_record(bundle: Path) -> dict:
    """A bundle's `bundle.json` ({} for a bundle written before it, or none)."""
    try:
        return json.loads((bundle / BUNDLE_RECORD).read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class RunReport:
    """A run read from its reports directory."""

    directory: Path
    run: dict
    rows: list[dict]
    bugs: list[BugRecord]
    campaign: dict | None = None
    bug_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (test, config) -> bug ident

    @property
    def kind(self) -> str:
        if self.campaign is not None or self.run.get("campaign"):
            return "campaign"
        return "merged" if self.run.get("merged_from") else "suite"

    @property
    def key(self) -> str:
        """The run's identity: its run id and every pair's outcome and signature (a second
        upload of one run is the same run; two runs are never one)."""
        digest = hashlib.sha256(str(self.run.get("run_id")).encode())
        for row in sorted(self.rows, key=lambda r: (r["test"], r["config"])):
            digest.update(f"\n{row['test']}\0{row['config']}\0{row.get('outcome')}\0{row.get('signature')}".encode())
        return digest.hexdigest()

    def bundle_dir(self, bug: BugRecord, inside: bool = True) -> Path | None:
        """The folder of `bug`'s bundle, if it holds one; with `inside` (an upload), only
        a folder inside the reports directory."""
        if bug.bundle is None:
            return None
        path = (self.directory / bug.bundle).resolve()
        if inside and not path.is_relative_to(self.directory.resolve()):
            return None
        return path if (path / "repro.mlir").is_file() else None


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
        if (candidate / "repro.mlir").is_file():
            return candidate.resolve()
    return None


def group_failures(rows: list[dict], reports_dir: Path, parse_ir: bool = True) -> list[BugRecord]:
    """A run's failing pairs grouped into bugs by the campaign's key (`e2e.fuzz.bugs`): for
    runs without a campaign's triage. A bug is known when an xfail entry expected each of its
    pairs. Its bundle: the smallest verified one of its pairs' (else the smallest)."""
    from e2e.fuzz.bugs import BROKEN, Failure

    grouped: dict[tuple, list[tuple[dict, object]]] = {}
    for row in rows:
        if row.get("outcome") not in FAILING:
            continue
        failure = Failure.of(row, site=parse_ir)
        if failure.kind == BROKEN:
            continue
        grouped.setdefault(failure.key, []).append((row, failure))
    bugs = []
    for members in grouped.values():
        row, first = members[0]
        bundles = [b for b in (resolve_bundle(reports_dir, r.get("repro_path")) for r, _ in members) if b]
        bundle = smallest_bundle(bundles)
        record = bundle_record(bundle) if bundle else {}
        bugs.append(
            BugRecord(
                config=first.config,
                key=key_text(first.signature),
                guilty_op=first.guilty_op or "",
                kind=first.kind,
                stage=first.signature.stage,
                signature=first.signature.format(),
                known=all(r.get("final") == "xfailed" for r, _ in members),
                tests=tuple(sorted({r["test"] for r, _ in members})),
                root=next((f.types_root for _, f in members if f.types_root), None),
                bundle=_relative(bundle, reports_dir),
                verified=record.get("verified"),
            )
        )
    return sorted(bugs, key=lambda b: (b.config, b.key, b.guilty_op))


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


def read_reports(directory: Path | str, parse_ir: bool = True) -> RunReport:
    """The run in a reports directory. `parse_ir=False` (a server reading an upload) never
    parses a bundle's IR; it matters only for a run without `bugs.json`."""
    directory = Path(directory)
    try:
        rows, run = load_rows(directory)
    except ResultsError as error:
        raise UploadError(f"not a reports directory: {error}") from None
    if not rows:
        raise UploadError(f"{directory}: the run has no results")
    campaign = _json_file(directory / "campaign.json")
    bugs_file = _json_file(directory / BUGS_FILE)
    if bugs_file is not None:
        if not isinstance(bugs_file, dict) or bugs_file.get("format") != BUGS_FORMAT:
            raise UploadError(f"{BUGS_FILE}: not of the form {BUGS_FORMAT}")
        bugs = [BugRecord.from_json(value) for value in bugs_file.get("bugs", [])]
    else:
        bugs = group_failures(rows, directory, parse_ir)
    report = RunReport(directory, run if isinstance(run, dict) else {}, rows, bugs, campaign)
    report.bug_of = {(test, bug.config): bug.ident for bug in bugs for test in bug.tests}
    return report


def _json_file(path: Path):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as error:
        raise UploadError(f"{path.name}: bad JSON ({error})") from None


def write_bugs(directory: Path, bugs: list[BugRecord]) -> Path:
    """`bugs.json`: a run's distinct bugs, as the service reads them."""
    from e2e.framework.run_record import write_json_atomic

    path = Path(directory) / BUGS_FILE
    write_json_atomic(path, {"format": BUGS_FORMAT, "bugs": [bug.to_json() for bug in bugs]})
    return path


def pack(report: RunReport) -> bytes:
    """The upload of a run: `results.json`, `run.json`, `bugs.json` (bundles renamed to
    where the archive holds them) and each bug's bundle, as a tar.gz."""
    buffer = io.BytesIO()
    bugs, folders = [], {}
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
        for bug in report.bugs:
            source = report.bundle_dir(bug, inside=False)
            if source is None:
                bugs.append({**bug.to_json(), "bundle": None})
                continue
            if source not in folders:
                folders[source] = f"repro/{len(folders)}"
                _add_tree(archive, source, folders[source])
            bugs.append({**bug.to_json(), "bundle": folders[source]})
        _add_bytes(archive, "results.json", json.dumps(report.rows).encode())
        _add_bytes(archive, "run.json", json.dumps(report.run).encode())
        _add_bytes(archive, BUGS_FILE, json.dumps({"format": BUGS_FORMAT, "bugs": bugs}).encode())
        if report.campaign is not None:
            _add_bytes(archive, "campaign.json", json.dumps(report.campaign).encode())
    return buffer.getvalue()


def bundle_archive(bundle: Path) -> bytes:
    """A bundle folder as a tar.gz of its own (the download a bug page offers), the same
    bytes for the same files: members sorted, times and owners left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
        archive.fileobj.mtime = 0  # gzip's header time
        _add_tree(archive, bundle, bundle.name)
    return buffer.getvalue()


def _add_tree(archive: tarfile.TarFile, source: Path, name: str) -> None:
    for path in sorted(source.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            _add_bytes(archive, f"{name}/{path.relative_to(source).as_posix()}", path.read_bytes(), path.stat().st_mode)


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode & 0o755 | 0o644, 0
    archive.addfile(info, io.BytesIO(data))


def unpack(data: bytes, into: Path) -> Path:
    """Check an uploaded archive and write it into `into`; every refusal an `UploadError`
    naming what is wrong (the caller's folder is left to be removed)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise UploadError(f"the archive is {len(data)} bytes, past the limit of {MAX_ARCHIVE_BYTES}", 413)
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            members = []
            for count, member in enumerate(archive, 1):
                if count > MAX_MEMBERS:
                    raise UploadError(f"the archive holds more than {MAX_MEMBERS} files", 413)
                name = Path(member.name)
                if name.is_absolute() or ".." in name.parts:
                    raise UploadError(f"archive member {member.name!r} is outside its folder")
                if member.issym() or member.islnk():
                    raise UploadError(f"archive member {member.name!r} is a link; an upload holds files only")
                if not (member.isfile() or member.isdir()):
                    raise UploadError(f"archive member {member.name!r} is not a file or a folder")
                total += member.size
                if total > MAX_UNPACKED_BYTES:
                    raise UploadError(f"the archive unpacks past the limit of {MAX_UNPACKED_BYTES} bytes", 413)
                members.append(member)
            archive.extractall(into, members=members, filter="data")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise UploadError(f"not a readable tar.gz archive (truncated or corrupt?): {error}") from None
    return into

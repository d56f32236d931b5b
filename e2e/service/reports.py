"""A run as the service takes it: a reports directory read into one value (`RunReport`),
and the archive an upload carries it in.

Any run the project makes is a reports directory: a suite run (`pytest e2e`), a merged CI
run (`e2e.tools.merge`), a campaign (`e2e.fuzz`) or a sweep. `read_reports` reads its rows and
`run.json`, and its distinct bugs: the campaign's own triage (`bugs.json`, written by
`e2e.fuzz`), or for any other run its failing pairs grouped by the campaign's key (config,
signature key, guilty op: `e2e.fuzz.bugs.Failure`), a bug known when an xfail entry expected
every pair of it. `pack` writes what an upload needs (results, run record, bugs, each bug's
bundle) as one tar.gz; `unpack` checks an archive member by member before anything of it
is read (no path outside its folder, no link, nothing past the size limit).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import re
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from e2e.framework.result import CRASH, ERROR, FAIL, MEMORY, PASS, SKIP, TIMEOUT
from e2e.framework.results_files import ResultsError, load_rows
from e2e.fuzz.records import BUGS_FILE, BUGS_FORMAT, BugRecord, group_failures, is_bundle

# Past these an upload is refused (HTTP 413): a run of 10,000 pairs with its bundles is a
# few MB; the limits keep a runaway upload from filling the server's disk or memory.
OUTCOMES = (PASS, FAIL, CRASH, TIMEOUT, MEMORY, ERROR, SKIP)  # how a pair can end (`e2e.framework.result`)
MAX_ARCHIVE_BYTES = 256 * 2**20
MAX_UNPACKED_BYTES = 1024 * 2**20
MAX_MEMBERS = 200_000


class UploadError(ValueError):
    """An upload that is not a run: what is wrong with it, for the 4xx the server answers."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass
class RunReport:
    """A run read from its reports directory."""

    directory: Path
    run: dict
    rows: list[dict]
    bugs: list[BugRecord]
    campaign: dict | None = None

    @functools.cached_property
    def bug_of(self) -> dict[tuple[str, str], str]:
        """(test, config) -> the ident of the bug that pair hit."""
        return {(test, bug.config): bug.ident for bug in self.bugs for test in bug.tests}

    @property
    def kind(self) -> str:
        if self.campaign is not None or self.run.get("campaign"):
            return "campaign"
        return "merged" if self.run.get("merged_from") else "suite"

    @functools.cached_property
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
        return path if is_bundle(path) else None


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
    strange = next((row for row in rows if row.get("outcome") not in OUTCOMES), None)
    if strange is not None:
        raise UploadError(
            f"{strange['test']} on {strange['config']}: outcome {strange.get('outcome')!r} is not one of {', '.join(OUTCOMES)}"
        )
    campaign = _json_file(directory / "campaign.json")
    bugs_file = _json_file(directory / BUGS_FILE)
    if bugs_file is not None:
        if not isinstance(bugs_file, dict) or bugs_file.get("format") != BUGS_FORMAT:
            raise UploadError(f"{BUGS_FILE}: not of the form {BUGS_FORMAT}")
        try:
            bugs = [BugRecord.from_json(value) for value in bugs_file.get("bugs", [])]
        except ValueError as error:
            raise UploadError(f"{BUGS_FILE}: {error}") from None
    else:
        bugs = group_failures(rows, directory, parse_ir)
    return RunReport(directory, run if isinstance(run, dict) else {}, rows, bugs, campaign)


def _json_file(path: Path):
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as error:
        raise UploadError(f"{path.name}: bad JSON ({error})") from None


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


def bundle_folder(test: str, config: str) -> str:
    """The folder a bundle's archive unpacks into: `<test>.<config>`, in characters a shell takes."""
    return re.sub(r"[^\w.@-]", "_", f"{test}.{config}")


def bundle_archive(bundle: Path, folder: str) -> bytes:
    """A bundle as a tar.gz of its own holding `folder/` (the download a bug page offers),
    the same bytes for the same files: members sorted, times and owners left out."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, compresslevel=6) as zipped:
        with tarfile.open(fileobj=zipped, mode="w") as archive:
            _add_tree(archive, bundle, folder)
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

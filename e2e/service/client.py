"""Sending a run to a service: what `python -m e2e.service upload` and `pytest
--e2e-service URL` do. The run's bugs are grouped here, on the machine that made the run
(a crash's bundle is parsed to find where it crashes), so the server parses no IR."""

from __future__ import annotations

import os
from pathlib import Path

from e2e.service.reports import pack, read_reports

TOKEN_ENV = "E2E_SERVICE_TOKEN"
DEFAULT_DB = "reports/service.db"


def default_token_file(db: str = DEFAULT_DB) -> Path:
    """Where `serve` keeps its token: beside a SQLite database, else in `reports/`."""
    folder = Path(db).expanduser().resolve().parent if "://" not in db else Path("reports")
    return folder / "service.token"


def read_token(token: str | None = None, token_file: str | Path | None = None) -> str | None:
    """The token: given, else `$E2E_SERVICE_TOKEN`, else the token file's first line (by
    default the one `serve --db reports/service.db` writes)."""
    if token:
        return token
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    token_file = token_file or default_token_file()
    if Path(token_file).is_file():
        return Path(token_file).read_text().strip() or None
    return None


class UploadFailed(RuntimeError):
    pass


def upload(
    reports_dir: Path | str, url: str, token: str | None, label: str | None = None, timeout: float = 600
) -> dict:
    """Send the run in `reports_dir` to the service at `url`; its answer (`Ingested` as JSON)."""
    import httpx

    report = read_reports(reports_dir)
    data = pack(report)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"} if token else {}
    try:
        answer = httpx.post(
            f"{url.rstrip('/')}/api/runs",
            content=data,
            headers=headers,
            params={"label": label} if label else None,
            timeout=timeout,
        )
    except httpx.HTTPError as error:
        raise UploadFailed(f"upload of {reports_dir} to {url} failed: {error}") from None
    if answer.status_code >= 400:
        try:
            detail = answer.json().get("detail")
        except ValueError:
            detail = answer.text[:500]
        raise UploadFailed(f"upload of {reports_dir} to {url} refused ({answer.status_code}): {detail}")
    return answer.json()


def first_seen(done: dict) -> str:
    """`3 bugs first seen (1 new, 2 known)`: known, an xfail entry (or a campaign's triage) carries it."""
    known = done.get("known_new_bugs", 0)
    return f"{len(done['new_bugs'])} bugs first seen ({len(done['new_bugs']) - known} new, {known} known)"


def describe(done: dict, where: str) -> str:
    """What an upload or ingest did, in a line."""
    if not done["created"]:
        return f"run {done['run_id']} of {where} was already there: nothing changed"
    return (
        f"run {done['run_id']} of {where}: {done['pairs']} pairs, {first_seen(done)}, "
        f"{len(done['seen_bugs'])} seen before, {len(done['reopened'])} reopened, {len(done['fixed'])} fixed, "
        f"{done['flaky']} pairs flaky ({done['seconds']:.2f} s)"
    )

"""The service's web app (FastAPI on uvicorn, pages from Jinja2 templates): a page per list
and per thing, each with the same data as JSON under `/api/`. Reading is open; an upload
and a change of a bug's status need the token (`Authorization: Bearer TOKEN`).

FastAPI, because the API is most of the app: typed query parameters, 4xx answers and an
OpenAPI description (`/openapi.json`, `/docs`) come with the routes; it is Starlette
underneath, so the pages and the streamed upload are plain Starlette. The server is thin:
every route calls `e2e.service.queries` or the `Store`, which the tests and the CLI call
directly."""

from __future__ import annotations

import hmac
import shutil
import tempfile
import time
from pathlib import Path

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from e2e.service import issue, jobs, plots, queries
from e2e.service.reports import MAX_ARCHIVE_BYTES, UploadError, read_reports, unpack
from e2e.service.store import STATUSES, Store

PAGE = 200  # bugs a list page shows; the rest a page further (`offset`), or all of them from /api/bugs
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
TEMPLATES.env.filters["when"] = lambda at: time.strftime("%Y-%m-%d %H:%M", time.gmtime(at)) if at else ""
TEMPLATES.env.filters["percent"] = lambda rate: "-" if rate is None else f"{100 * rate:.1f}%"


def create_app(store: Store, token: str | None, max_upload: int = MAX_ARCHIVE_BYTES, runner=None) -> FastAPI:
    """The app over `store`; writes need `token` (none: every write is refused); an upload
    past `max_upload` bytes is refused (413); `runner` (`e2e.service.jobs.JobRunner`) runs
    the jobs submitted (none: jobs wait until a service with one starts)."""
    app = FastAPI(title="e2e reproducer service", version="1")
    app.state.store = store

    def check_token(request: Request) -> str:
        given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not token:
            raise HTTPException(403, "this server was started without a token: it takes no writes")
        if not given or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(401, "a write needs the service's token: Authorization: Bearer TOKEN")
        return "token"

    def page(request: Request, name: str, **context) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(request, name, context)

    def found(value, what: str):
        if value is None:
            raise HTTPException(404, f"no {what}")
        return value

    # Bugs.

    @app.get("/api/bugs")
    def api_bugs(
        config: str | None = None,
        stage: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        since_run: int | None = None,
        root: str | None = None,
        limit: int = Query(500, le=5000),
        offset: int = 0,
    ):
        return queries.bugs(store, config, stage, status, kind, since_run, root, limit, offset)

    @app.get("/", response_class=HTMLResponse)
    def bugs_page(
        request: Request,
        config: str | None = None,
        stage: str | None = None,
        status: str | None = None,
        kind: str | None = None,
        since_run: int | None = None,
        root: str | None = None,
        offset: int = 0,
    ):
        chosen = {"config": config, "stage": stage, "status": status, "kind": kind, "since_run": since_run}
        listed = queries.bugs(store, config, stage, status, kind, since_run, root, limit=PAGE, offset=offset)
        return page(request, "bugs.html", listed=listed, chosen=chosen, statuses=STATUSES, offset=offset, size=PAGE)

    @app.get("/api/bugs/{bug_id}")
    def api_bug(bug_id: int, request: Request):
        bug = found(queries.bug(store, bug_id), f"bug {bug_id}")
        return {**bug, "issue": issue.issue_markdown(bug, _base(request))}

    @app.get("/bugs/{bug_id}", response_class=HTMLResponse)
    def bug_page(bug_id: int, request: Request):
        bug = found(queries.bug(store, bug_id), f"bug {bug_id}")
        return page(
            request, "bug.html", bug=bug, issue_text=issue.issue_markdown(bug, _base(request)), statuses=STATUSES
        )

    @app.get("/bugs/{bug_id}/bundle.tar.gz")
    @app.get("/api/bugs/{bug_id}/bundle.tar.gz")
    def bundle(bug_id: int):
        name, data = found(queries.bundle_archive(store, bug_id), f"bundle for bug {bug_id}")
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(data, media_type="application/gzip", headers=headers)

    @app.post("/api/bugs/{bug_id}/status")
    async def set_status(bug_id: int, request: Request):
        actor = check_token(request)
        try:
            body = await request.json()
            status, reason = body["status"], str(body.get("reason") or "")
            duplicate_of = int(body["duplicate_of"]) if body.get("duplicate_of") not in (None, "") else None
        except (ValueError, KeyError, TypeError) as error:
            raise HTTPException(400, f'a status change is JSON {{"status": ..., "reason": ...}}: {error}') from None
        if status in ("invalid", "duplicate") and not reason:
            raise HTTPException(400, f"marking a bug {status} needs a reason")
        try:
            await run_in_threadpool(store.set_status, bug_id, status, reason, actor, duplicate_of)
        except KeyError as error:
            raise HTTPException(404, str(error.args[0])) from None
        except ValueError as error:
            raise HTTPException(400, str(error)) from None
        return queries.bug(store, bug_id)

    # Runs.

    @app.post("/api/runs", status_code=201)
    async def upload(request: Request, label: str | None = None):
        check_token(request)
        declared = int(request.headers.get("content-length") or 0)
        if declared > max_upload:
            raise HTTPException(413, f"the upload is {declared} bytes, past the limit of {max_upload}")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_upload:
                raise HTTPException(413, f"the upload is past the limit of {max_upload} bytes")
        try:
            done = await run_in_threadpool(_ingest_archive, store, bytes(body), label)
        except UploadError as error:
            raise HTTPException(error.status, str(error)) from None
        return JSONResponse(done.to_json(), status_code=201 if done.created else 200)

    @app.get("/api/runs")
    def api_runs(branch: str | None = None, limit: int = Query(100, le=1000), offset: int = 0):
        return queries.runs(store, branch, limit, offset)

    @app.get("/runs", response_class=HTMLResponse)
    def runs_page(request: Request, branch: str | None = None):
        return page(request, "runs.html", listed=queries.runs(store, branch, limit=200), branch=branch)

    @app.get("/api/runs/{run_id}")
    def api_run(run_id: int, baseline: int | None = None):
        return found(queries.run(store, run_id, baseline), f"run {run_id}")

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    def run_page(run_id: int, request: Request, baseline: int | None = None):
        return page(request, "run.html", run=found(queries.run(store, run_id, baseline), f"run {run_id}"))

    @app.get("/api/runs/{run_id}/summary", response_class=PlainTextResponse)
    def api_summary(run_id: int, request: Request, base: str = "main"):
        try:
            return issue.summary(store, run_id, base, _base(request))
        except KeyError as error:
            raise HTTPException(404, str(error.args[0])) from None

    @app.get("/api/diff")
    def api_diff(base: int, new: int):
        return queries.diff(store, base, new)

    # Pairs, flaky pairs, trends, xfail sets.

    @app.get("/api/pair")
    def api_pair(test: str, config: str, limit: int = Query(200, le=5000)):
        return found(queries.pair_history(store, test, config, limit), f"pair {test} on {config}")

    @app.get("/pair", response_class=HTMLResponse)
    def pair_page(request: Request, test: str, config: str):
        history = found(queries.pair_history(store, test, config), f"pair {test} on {config}")
        return page(request, "pair.html", pair=history)

    @app.get("/api/flaky")
    def api_flaky(config: str | None = None):
        return {"flaky": queries.flaky(store, config)}

    @app.get("/flaky", response_class=HTMLResponse)
    def flaky_page(request: Request, config: str | None = None):
        return page(request, "flaky.html", flaky=queries.flaky(store, config), config=config)

    @app.get("/api/trends")
    def api_trends(limit: int = Query(200, le=2000)):
        return queries.trends(store, limit)

    @app.get("/trends", response_class=HTMLResponse)
    def trends_page(request: Request):
        points = queries.trends(store)["runs"]
        return page(
            request, "trends.html", points=points, bugs_svg=plots.bugs_plot(points), rates_svg=plots.rates_plot(points)
        )

    # Jobs.

    @app.get("/api/jobs")
    def api_jobs(state: str | None = None, kind: str | None = None, limit: int = Query(500, le=5000)):
        return {
            "jobs": jobs.jobs(store, state, kind, limit),
            "counts": jobs.counts(store),
            "running": runner is not None,
        }

    @app.get("/api/jobs/{job_id}")
    def api_job(job_id: int):
        return found(jobs.job(store, job_id), f"job {job_id}")

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_page(request: Request, state: str | None = None, kind: str | None = None):
        listed = jobs.jobs(store, state, kind, limit=300)
        return page(request, "jobs.html", listed=listed, counts=jobs.counts(store), running=runner is not None)

    @app.post("/api/jobs", status_code=201)
    async def submit_job(request: Request):
        check_token(request)
        try:
            body = await request.json()
            job_id = jobs.submit(store, body["kind"], dict(body.get("args") or {}))
        except (ValueError, KeyError, TypeError) as error:
            raise HTTPException(400, f'a job is JSON {{"kind": ..., "args": {{...}}}}: {error}') from None
        return jobs.job(store, job_id)

    @app.get("/api/xfails/{config}", response_class=PlainTextResponse)
    def api_xfails(config: str):
        return queries.export_xfails(store, config)

    return app


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _ingest_archive(store: Store, data: bytes, label: str | None):
    """An uploaded archive checked, read and ingested; the database untouched on any refusal."""
    folder = Path(tempfile.mkdtemp(prefix="e2e-upload-"))
    try:
        unpack(data, folder)
        report = read_reports(folder, parse_ir=False)
        return store.ingest(report, label)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

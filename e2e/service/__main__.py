"""The reproducer service's commands.

    python -m e2e.service serve --db reports/service.db --port 8080       # SQLite, the default
    python -m e2e.service serve --db postgresql://user@host/e2e --port 8080
    python -m e2e.service upload REPORTS_DIR --url http://localhost:8080 [--label L]
    python -m e2e.service ingest REPORTS_DIR --db reports/service.db [--label L]   # without a server
    python -m e2e.service summary RUN --base main --db ...     # a pull request's failures, as Markdown
    python -m e2e.service xfails CONFIG --db ...                # the xfail set the database knows
    python -m e2e.service migrate --db ...                      # make or upgrade the schema only

The token (uploads and status changes need it): `--token`, `$E2E_SERVICE_TOKEN`, or the
token file (`--token-file`, by default `service.token` beside a SQLite database; `serve`
writes a new one there when there is none, readable by its owner only).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from e2e.service.client import DEFAULT_DB, UploadFailed, default_token_file, describe, read_token, upload
from e2e.service.reports import UploadError, read_reports


def serve(args) -> int:
    import uvicorn

    from e2e.service.app import create_app
    from e2e.service.store import Store

    store = Store(args.db)
    token_file = Path(args.token_file or default_token_file(args.db))
    token = read_token(args.token, token_file)
    if token is None:
        token_file.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_urlsafe(24)
        token_file.touch(mode=0o600)
        token_file.write_text(token + "\n")
        print(f"e2e.service: a new token is in {token_file} (uploads and status changes need it)", flush=True)
    runner = None
    if args.scheduler != "none":
        from e2e.fuzz.cluster import connect
        from e2e.service.jobs import JobRunner

        data_dir = Path(args.data_dir or Path(store.url.removeprefix("sqlite:///")).with_name("service-data"))
        if not store.sqlite and args.data_dir is None:
            data_dir = Path("reports/service-data")
        runner = JobRunner(store, connect(args.scheduler), data_dir).start()
        print(f"e2e.service: jobs on {args.scheduler}, their files in {data_dir}", flush=True)
    print(f"e2e.service: {store.url} at schema {store.revision()}; http://{args.host}:{args.port}/", flush=True)
    app = create_app(store, token, args.max_upload_mib * 2**20, runner)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if runner is not None:
            runner.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.service", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def with_db(command):
        command.add_argument("--db", default=DEFAULT_DB, help=f"a SQLite file or a database URL (default {DEFAULT_DB})")
        return command

    def with_token(command):
        command.add_argument(
            "--token", default=None, help="the service's token (else $E2E_SERVICE_TOKEN or --token-file)"
        )
        command.add_argument("--token-file", default=None, help="a file holding the token")
        return command

    run = with_token(with_db(commands.add_parser("serve", help="start the web service")))
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8080)
    run.add_argument("--log-level", default="warning")
    run.add_argument(
        "--scheduler",
        default="local:2",
        help="where jobs run: local:N (a local Dask cluster of N worker processes, the default local:2), a "
        "scheduler's address (tcp://HOST:8786), or none",
    )
    run.add_argument("--data-dir", default=None, help="the jobs' files (default: service-data beside the database)")
    run.add_argument("--max-upload-mib", type=int, default=256, help="refuse an upload past this size (default 256)")
    send = with_token(commands.add_parser("upload", help="send a run to a service"))
    send.add_argument("reports_dir")
    send.add_argument("--url", required=True)
    send.add_argument("--label", default=None, help="a name for the run on its pages (a campaign, a nightly)")
    send.add_argument("--json", action="store_true", help="print the service's answer as JSON")
    take = with_db(commands.add_parser("ingest", help="record a run in a database, without a server"))
    take.add_argument("reports_dir")
    take.add_argument("--label", default=None)
    summary = with_db(commands.add_parser("summary", help="a run's failures sorted as new, broken on BASE or flaky"))
    summary.add_argument("run", type=int)
    summary.add_argument("--base", default="main", help="the base branch (its latest run is the baseline)")
    summary.add_argument("--url", default="", help="the service's address, for links")
    xfails = with_db(commands.add_parser("xfails", help="a config's xfail set, as the database knows it"))
    xfails.add_argument("config")
    with_db(commands.add_parser("migrate", help="make or upgrade the database's schema"))
    args = parser.parse_args(argv)

    if args.command == "serve":
        return serve(args)
    if args.command == "upload":
        token_file = args.token_file or default_token_file(DEFAULT_DB)
        try:
            done = upload(args.reports_dir, args.url, read_token(args.token, token_file), args.label)
        except (UploadFailed, UploadError) as error:
            print(f"e2e.service upload: {error}", file=sys.stderr)
            return 1
        print(json.dumps(done) if args.json else describe(done, args.url))
        return 0

    from e2e.service.store import Store

    store = Store(args.db)
    if args.command == "ingest":
        try:
            done = store.ingest(read_reports(args.reports_dir), args.label)
        except UploadError as error:
            print(f"e2e.service ingest: {error}", file=sys.stderr)
            return 1
        print(describe(done.to_json(), args.db))
    elif args.command == "summary":
        from e2e.service.issue import summary as pr_summary

        print(pr_summary(store, args.run, args.base, args.url), end="")
    elif args.command == "xfails":
        from e2e.service.queries import export_xfails

        print(export_xfails(store, args.config), end="")
    elif args.command == "migrate":
        print(f"{store.url}: schema at {store.revision()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

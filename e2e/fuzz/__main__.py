"""A fuzzing campaign: generated programs through the suite, reported as distinct bugs.

    python -m e2e.fuzz --minutes M --seed S --config linalg,tosa -n 2 --reports-dir R [--shard I/N]
    python -m e2e.fuzz --programs 3 --config linalg --reports-dir R
    python -m e2e.fuzz --report-only --reports-dir R      # classify and report an existing campaign

Writes R/results.json, run.json, index.html and repro/ (the run format `e2e.merge` and
`e2e.diff` read; shards of one campaign merge like any run's), R/campaign.json (blocks,
seeds, costs) and the campaign report R/fuzz.md and R/fuzz.html (see docs/fuzz.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from e2e.framework.results_files import load_rows
from e2e.framework.shards import ShardSpec
from e2e.fuzz.bugs import KnownSignatures, classify
from e2e.fuzz.campaign import Campaign, Plan
from e2e.fuzz.coverage import Support
from e2e.fuzz.programs import ops_of, seed_of
from e2e.fuzz.report import campaign_table, discovery, html_page, markdown

XFAIL_DIR = Path(__file__).resolve().parents[1] / "configs" / "xfail"


def load_campaign(reports_dir: Path, run: dict) -> dict:
    """The campaign a reports directory holds: its `campaign.json`, or (a merge of a
    campaign's shards) the shards' own, added together."""
    if (reports_dir / "campaign.json").is_file():
        return json.loads((reports_dir / "campaign.json").read_text())
    parts = []
    for source in run.get("merged_from", []):
        path = Path(source["path"])
        path = path if path.is_dir() else path.parent
        if (path / "campaign.json").is_file():
            parts.append(json.loads((path / "campaign.json").read_text()))
    if not parts:
        raise SystemExit(f"fuzz: {reports_dir} holds no campaign.json, nor do the runs it was merged from")
    batches = sorted((b for part in parts for b in part["batches"]), key=lambda b: b["first_seed"])
    return {
        **parts[0],
        "shard": f"{len(parts)} merged",
        "blocks_run": len(batches),
        "programs": sum(p["programs"] for p in parts),
        "pairs": sum(p["pairs"] for p in parts),
        "seeds": sorted(seeds for p in parts for seeds in p["seeds"]),
        "last_seed": max(p["last_seed"] for p in parts if p.get("last_seed") is not None),
        "wall_s": max(p["wall_s"] for p in parts),
        "cpu_s": round(sum(p["cpu_s"] for p in parts), 1),
        "batches": batches,
    }


def analyse(reports_dir: Path, configs: list[str] | None = None) -> str:
    """Classify the campaign in `reports_dir` and write its report; returns the markdown."""
    rows, run = load_rows(reports_dir)
    campaign = load_campaign(reports_dir, run)
    configs = configs or campaign.get("configs") or sorted({row["config"] for row in rows})
    known = KnownSignatures.load(XFAIL_DIR, configs, generated=lambda test: seed_of(test) is not None)
    support = Support(cache_path=reports_dir / "takes-alone.json")
    classified = classify(rows, known, ops_of, support.takes)

    def bug_ops(bug) -> tuple[str, ...]:
        return ops_of(bug.first.test)

    text = markdown(campaign, rows, classified, bug_ops)
    points = discovery(campaign, rows, classified)
    (reports_dir / "fuzz.md").write_text(text)
    (reports_dir / "fuzz.html").write_text(html_page(text, points))
    from e2e.framework.html_report import write_html
    from e2e.report_tables import report_tables

    write_html(rows, run, reports_dir / "index.html", [*report_tables(rows), campaign_table(classified)])
    return text


def parser() -> argparse.ArgumentParser:
    """The campaign's command line."""
    parser = argparse.ArgumentParser(prog="python -m e2e.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=None, help="time budget (default: none; give --programs)")
    parser.add_argument("--programs", type=int, default=None, help="stop after this many programs")
    parser.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--block", type=int, default=16, help="programs per pytest run (default 16)")
    parser.add_argument("--config", default="linalg", help="comma-separated configs (default linalg)")
    parser.add_argument("-n", dest="workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    parser.add_argument("--reports-dir", type=Path, required=True)
    parser.add_argument("--shard", type=ShardSpec.parse, default=ShardSpec(1, 1), help="I/N: this shard's blocks")
    parser.add_argument("--report-only", action="store_true", help="classify and report the campaign in the directory")
    return parser


def main(argv: list[str] | None = None) -> int:
    command = parser()
    args, extra = command.parse_known_args(argv)
    if not args.report_only and args.minutes is None and args.programs is None:
        command.error("give --minutes or --programs (or both)")
    configs = [c.strip() for c in args.config.split(",") if c.strip()]
    if not args.report_only:
        Campaign(
            configs,
            Plan(args.seed, args.block, args.shard),
            args.reports_dir,
            workers=args.workers,
            minutes=args.minutes,
            programs=args.programs,
            extra=extra,
        ).run(log=lambda line: print(line, flush=True))
    print(analyse(args.reports_dir, configs if not args.report_only else None))
    print(f"fuzz: report in {args.reports_dir / 'fuzz.md'} and {args.reports_dir / 'fuzz.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

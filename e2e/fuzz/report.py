"""A campaign's report: distinct bugs, not failing programs.

`fuzz.md` (and a section of the run's `index.html`, `campaign_table`): distinct bugs per
config and stage (new and known), coverage gaps per op, programs and pairs per second,
how many verdicts each oracle check turned away (`Result.check`, `Result.check_turned_away`),
new distinct signatures over CPU time (an inline SVG in `fuzz.html`), every bug with its
root and bundle, and the roots behind them (`Bug.root`).
"""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from e2e.framework.html_report import ReportTable
from e2e.framework.result import Result
from e2e.framework.run_record import WORKER_PARTS
from e2e.fuzz.bugs import Bug, Classified
from e2e.fuzz.programs import seed_of
from e2e.generate.oracle import F64_DISTANCE, NARROW_ACCUMULATION, ROUNDING_BAND, SPEC_REFUSAL, TIE_CONTRACT

# The oracle checks that can turn a verdict away: acquit the pair (torch's rounding, a tie)
# or re-attribute it (a reference model's refusal), in the order they are made.
TURNING_CHECKS = (TIE_CONTRACT, F64_DISTANCE, NARROW_ACCUMULATION, ROUNDING_BAND, SPEC_REFUSAL)


def oracle_counts(results: list[Result]) -> dict[str, int]:
    """How many verdicts each oracle check turned away (`Result.check`, `Result.check_turned_away`)."""
    counts = Counter(result.check for result in results if result.check_turned_away)
    return {check: counts[check] for check in TURNING_CHECKS}


def discovery(campaign: dict, classified: Classified) -> list[tuple[float, int]]:
    """(CPU seconds, new distinct bugs found so far) after each block of the campaign."""
    block_of = {}
    for number, batch in enumerate(campaign.get("batches", [])):
        block_of[Path(batch["directory"]).name] = number
    first_block = {}
    for bug in classified.new:
        blocks = [_block(f.test, campaign) for f in bug.failures]
        first_block[id(bug)] = min((b for b in blocks if b is not None), default=0)
    points, cpu = [(0.0, 0)], 0.0
    for number, batch in enumerate(campaign.get("batches", [])):
        cpu += batch["cpu_s"]
        points.append((cpu, sum(1 for b in first_block.values() if b <= number)))
    return points


def _block(test: str, campaign: dict) -> int | None:
    """The block whose seeds hold generated test `test` (its seed ends its name)."""
    seed = seed_of(test)
    for number, (first, last) in enumerate(campaign.get("seeds", [])):
        if seed is not None and first <= seed <= last:
            return number
    return None


def svg_plot(points: list[tuple[float, int]], width: int = 420, height: int = 160) -> str:
    """A step plot of new distinct bugs over CPU seconds."""
    most_x = max((x for x, _ in points), default=1.0) or 1.0
    most_y = max((y for _, y in points), default=1) or 1
    pad = 30

    def at(x: float, y: int) -> str:
        return f"{pad + x / most_x * (width - 2 * pad):.1f},{height - pad - y / most_y * (height - 2 * pad):.1f}"

    steps = []
    for (x0, y0), (x1, _) in zip(points, points[1:]):
        steps += [at(x0, y0), at(x1, y0)]
    if points:
        steps.append(at(*points[-1]))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="new distinct bugs over CPU seconds">'
        f'<polyline fill="none" stroke="#c33" stroke-width="2" points="{" ".join(steps)}"/>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#888"/>'
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#888"/>'
        f'<text x="{pad}" y="{height - 8}" font-size="11">0</text>'
        f'<text x="{width - pad}" y="{height - 8}" font-size="11" text-anchor="end">{most_x:.0f} CPU s</text>'
        f'<text x="4" y="{pad + 4}" font-size="11">{most_y}</text>'
        "</svg>"
    )


def per_config_stage(classified: Classified) -> list[tuple[str, str, int, int]]:
    counts: Counter = Counter()
    for bug in classified.bugs:
        counts[(bug.config, bug.stage, bug.known)] += 1
    keys = sorted({(config, stage) for config, stage, _ in counts})
    return [(config, stage, counts[(config, stage, False)], counts[(config, stage, True)]) for config, stage in keys]


def campaign_table(classified: Classified) -> ReportTable:
    """The section of the run's HTML report: distinct bugs per config and stage."""
    return ReportTable(
        "fuzz-bugs",
        "Fuzzing campaign: distinct bugs",
        "Distinct bugs (failing pairs grouped by signature and guilty op) per config and stage; "
        "coverage gaps are not bugs and are counted in fuzz.md. The list of bugs with their bundles is in fuzz.md.",
        ("config / stage", "new", "known"),
        tuple(
            (f"{config} / {stage}", str(new), str(known)) for config, stage, new, known in per_config_stage(classified)
        ),
    )


def generator_checks(programs) -> tuple[Counter, int]:
    """The op insertions each of the generator's checks turned away over `programs`, and its repairs."""
    turned, repairs = Counter(), 0
    for program in programs:
        turned.update(dict(program.checks.turned_away))
        repairs += program.checks.repairs
    return turned, repairs


def _triage_cost(campaign: dict) -> list[str]:
    """What the triage cost beside the blocks (classification, and reduction if asked)."""
    if "triage_cpu_s" not in campaign:
        return []
    text = f"Triage (oracle, ops run alone): {campaign['triage_cpu_s']:.0f} CPU s"
    if "reduce_cpu_s" in campaign:
        text += (
            f"; reduction (shrinks, regression runs, bundles): {campaign['reduce_cpu_s']:.0f} CPU s, "
            f"{campaign['reduce_wall_s']:.0f} s wall"
        )
    return [text + ".", ""]


def _worker_time(campaign: dict) -> list[str]:
    """Where the blocks' workers spent their time (each block's `worker_seconds`): in pairs,
    in the framework's share of their items, before the first and after the last item, and
    outside pytest's plugin altogether (a worker's start before it; the time after xdist shut
    down a worker that had nothing left while the other ran the block's last tests)."""
    batches = [b for b in campaign.get("batches", []) if b.get("worker_seconds")]
    workers = campaign.get("workers") or 2
    total = sum(b["wall_s"] for b in batches) * workers
    if not batches or not total:
        return []
    spent = {part: sum(b["worker_seconds"].get(part, 0.0) for b in batches) for part in WORKER_PARTS}
    framework = spent["items"] - spent["pairs"]
    rest = total - spent["items"] - spent["before_first_item"] - spent["after_last_item"]
    parts = [
        ("in pairs", spent["pairs"]),
        ("the framework's within items (hosts, golden runs, rows, in-block reductions)", framework),
        ("before the first item (imports, collection, warm-ups)", spent["before_first_item"]),
        ("after the last", spent["after_last_item"]),
        (
            "outside the plugin (a worker's start-up, a worker shut down while the other ran the block's last tests)",
            rest,
        ),
    ]
    text = ", ".join(f"{100 * seconds / total:.0f}% {what}" for what, seconds in parts)
    return [f"Workers' time ({workers} workers x the blocks' wall, {total:.0f} s): {text}.", ""]


def markdown(campaign: dict, results: list[Result], classified: Classified, ops_of, programs=()) -> str:
    """The campaign's report as markdown. `ops_of(bug)`: the ops of the bug's reduced
    program; `programs`: the campaign's programs (for the generator's checks)."""
    generator, repairs = generator_checks(programs)
    cpu, wall = campaign.get("cpu_s") or 0.0, campaign.get("wall_s") or 0.0
    programs, pairs = campaign.get("programs", 0), campaign.get("pairs", 0)
    rate = f"{programs / wall:.2f} programs/s, {pairs / wall:.1f} pairs/s" if wall else "-"
    lines = [
        "# Fuzzing campaign",
        "",
        f"Configs {', '.join(campaign.get('configs', []))}; seed {campaign.get('seed')}, block "
        f"{campaign.get('block')}, shard {campaign.get('shard')}; seeds run: "
        + ", ".join(f"{a}..{b}" for a, b in campaign.get("seeds", []))
        + f" (last seed {campaign.get('last_seed')}).",
        "",
        f"{programs} programs, {pairs} pairs in {wall:.0f} s wall, {cpu:.0f} CPU s ({rate}; CPU s: the "
        "campaign process and every descendant, pytest, its workers, hosts and pairs).",
        "",
        *_worker_time(campaign),
        *_triage_cost(campaign),
        f"**{len(classified.new)} new distinct bugs**, {len(classified.known)} known (an xfail entry of the "
        f"hand-written suites carries the signature); {len(classified.gaps)} coverage gaps (config, op); "
        f"{len(classified.broken)} pairs of programs torch itself refused. The new bugs are "
        f"{len({(b.signature, b.guilty_op) for b in classified.new})} distinct (signature, guilty op) across configs "
        "(a frontend failure shows on every config it feeds).",
        "",
        "## Distinct bugs per config and stage",
        "",
        "| config | stage | new | known |",
        "|---|---|---:|---:|",
        *(f"| {c} | {s} | {n} | {k} |" for c, s, n, k in per_config_stage(classified)),
        "",
        "## Oracle checks: verdicts turned away",
        "",
        "| check | verdicts turned away |",
        "|---|---:|",
        *(f"| {check} | {count} |" for check, count in oracle_counts(results).items()),
        f"| coverage gap (op not taken alone) | {sum(len(f) for f in classified.gaps.values())} |",
        "",
        "The generator's own checks (every registered program passed them all on its inputs) turned "
        "away these op insertions while growing the campaign's programs: "
        + (", ".join(f"{check} {count}" for check, count in sorted(generator.items())) or "none")
        + f" ({repairs} guards inserted).",
        "",
        "## Coverage gaps (not bugs)",
        "",
        "| config | op | failing pairs |",
        "|---|---|---:|",
        *(f"| {config} | `{op}` | {len(failures)} |" for (config, op), failures in sorted(classified.gaps.items())),
        "",
        "## Bugs",
        "",
        "| | config | stage | signature | guilty op | root | ops in the reduced program | wrong result | pairs | "
        "regression test | bundle (repro.py exits 1) |",
        "|---|---|---|---|---|---|---|---|---:|---|---|",
    ]
    for number, bug in enumerate(classified.bugs, start=1):
        signature = bug.signature.format().replace("|", "\\|")[:160]
        ops = ", ".join(ops_of(bug)) or "-"
        lines.append(
            f"| {number}{' (known)' if bug.known else ''} | {bug.config} | {bug.stage} | `{signature}` | "
            f"`{bug.guilty_op or '-'}` | {bug.root or '-'} | {ops} | {'yes' if bug.kind == 'wrong result' else 'no'} | "
            f"{len(bug.failures)} | {bug.regression or '-'} | {bug.bundle or '-'}"
            f"{' (verified)' if bug.verified else ' (NOT verified)' if bug.verified is False else ''} |"
        )
    broke = [(number, bug.types_broke) for number, bug in enumerate(classified.bugs, start=1) if bug.types_broke]
    if broke:
        lines += [
            "",
            "## Where the types broke",
            "",
            "Bugs whose failing pass may only have tripped over types an earlier step broke: the reducer "
            "(or, for a bug it did not reduce, the triage) replayed the torch-backend stage pass by pass "
            "and checked every torch op's result shape against what torch computes from its operands "
            "(`compiler.type_check`).",
            "",
            *(f"- {number}: {text}" for number, text in broke),
        ]
    lines += roots_section(classified)
    return "\n".join(lines) + "\n"


def roots_section(classified: Classified) -> list[str]:
    """The roots behind the bugs (`Bug.root`): each root, the bugs (numbered as the report
    lists them) and the configs it shows on."""
    found = roots(classified)
    if not found:
        return []
    rooted = sum(len(bugs) for bugs in found.values())
    unrooted = len(classified.bugs) - rooted
    return [
        "",
        "## Roots",
        "",
        f"**{len(found)} roots behind {rooted} bugs**"
        + (f" ({unrooted} more with no pass and guilty op known)" if unrooted else "")
        + ": bugs whose reduced programs fail in one lowering of one op (the same pass and the same guilty "
        "op, at any config), or whose types one step broke (a fold runs in whichever pass first folds), are one "
        "root: one compiler bug to report (a types root's `types/` bundle starts where the types still agreed).",
        "",
        "| root | bugs | configs |",
        "|---|---|---|",
        *(
            f"| {root} | {', '.join(str(n) for n, _ in bugs)} | {', '.join(sorted({b.config for _, b in bugs}))} |"
            for root, bugs in found.items()
        ),
    ]


def html_page(text: str, points: list[tuple[float, int]]) -> str:
    """fuzz.html: the markdown as preformatted text under the discovery plot."""
    return (
        "<!doctype html><meta charset=utf-8><title>Fuzzing campaign</title>"
        "<h1>Fuzzing campaign</h1><h2>New distinct bugs over CPU time</h2>"
        f"{svg_plot(points)}<pre>{html.escape(text)}</pre>"
    )


def roots(classified: Classified) -> dict[str, list[tuple[int, Bug]]]:
    """Each root (`Bug.root`) -> the bugs (numbered as the report lists them) it is behind."""
    found: dict[str, list[tuple[int, Bug]]] = {}
    for number, bug in enumerate(classified.bugs, start=1):
        if bug.root:
            found.setdefault(bug.root, []).append((number, bug))
    return found

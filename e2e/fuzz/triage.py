"""A finished campaign's triage: classify its failures, reduce each new bug, report.

1. classify (`e2e.fuzz.bugs`): distinct bugs, known bugs, coverage gaps (refused ops run
   alone on the spot, `e2e.fuzz.coverage`);
2. for each new bug: shrink its first program on the Program value (`e2e.fuzz.shrink`),
   write the smallest as a regression test into the suite (`e2e.fuzz.regressions`), run the
   regression tests through pytest (the MLIR reducer writes their bundles), add their xfail
   entries, and check each bundle's `repro.py` exits 1;
3. write `fuzz.md`, `fuzz.html` and the campaign's section of `index.html` (`e2e.fuzz.report`).
"""

from __future__ import annotations

import copy
import functools
import json
import time
from pathlib import Path

from e2e.framework.result import PASS, Result
from e2e.framework.results_files import load_rows
from e2e.framework.signature import Signature
from e2e.fuzz import PAIR_BUDGET
from e2e.fuzz.bugs import CRASH, Bug, Classified, Failure, KnownSignatures, classify
from e2e.fuzz.bundles import bundle_ops
from e2e.fuzz.coverage import Support
from e2e.fuzz.programs import CampaignPrograms, seed_of
from e2e.fuzz.report import campaign_table, discovery, html_page, markdown
from e2e.generate.program import Program

XFAIL_DIR = Path(__file__).resolve().parents[1] / "configs" / "xfail"
# Seconds a hang's shrink candidate may take: a generated pair that does not hang ends in a
# few (the slowest of a 13-config block, onnx@iree's, in 5.3 s).
HANG_CANDIDATE_SECONDS = 20.0


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


def alone_signature(one, config: str, work: Path) -> Signature | None:
    """A one-op program's signature on `config` (None: it passes)."""
    from e2e.fuzz.shrink import run_program

    result = run_program(one, config, work, seconds=60)
    return None if result.passed else result.signature


def judge_by_oracle(
    results: list[Result], programs: CampaignPrograms, work: Path, seconds: float = 600.0, log=print
) -> int:
    """Wrong results the oracle has not judged (no `Result.check` of its: a test registered
    without `Test.explainers`), judged now: the program run again on its config with the
    oracle carried (`e2e.generate.register.program_test`); each takes the check that ruled,
    and a pair it acquits becomes a pass, in `results`. Returns how many were judged."""
    from e2e.fuzz.shrink import run_program
    from e2e.generate.oracle import ORACLE_CHECKS

    deadline, judged = time.monotonic() + seconds, 0
    for result in results:
        if result.stage != "compare" or result.passed or result.check in ORACLE_CHECKS:
            continue
        original = programs.of_test(result.test)
        if original is None or time.monotonic() > deadline:
            continue
        again = run_program(original, result.config, work)
        judged += 1
        if again.check is None:
            continue
        result.check, result.check_turned_away = again.check, again.check_turned_away
        verdict = "turned the verdict away" if again.check_turned_away else "kept the verdict"
        result.notes.append(f"judged again in triage: the oracle's {again.check} {verdict}")
        if again.passed:
            result.outcome, result.stage, result.signature = PASS, None, None
    if judged:
        log(f"fuzz: {judged} wrong results judged again by the float64 oracle")
    return judged


def known_signatures(configs: list[str]) -> KnownSignatures:
    """What the hand-written suites' xfail entries carry on `configs`."""
    return KnownSignatures.load(XFAIL_DIR, configs, generated=lambda test: seed_of(test) is not None)


def classify_campaign(
    reports_dir: Path,
    results: list[Result],
    programs: CampaignPrograms,
    known: KnownSignatures,
    seconds: float = 600.0,
) -> Classified:
    """Classify the results; ops are run alone for `seconds` at most (then the matrix answers)."""
    work = reports_dir / "triage"
    support = Support(
        programs.of_test,
        check=lambda one, config: alone_signature(one, config, work),
        cache_path=reports_dir / "takes-alone.json",
        deadline=time.monotonic() + seconds,
    )
    return classify(results, known, support.untaken)


def check_types(bugs: list[Bug], reports_dir: Path, log=print) -> int:
    """For each bug the reducer did not type-check (a campaign's blocks reduce only what no
    signature names): its first pair's torch-backend stage replayed with its types checked
    (`e2e.reducer.strategies.types_broke`, in a forked child). Returns how many named a step."""
    from e2e.configs import load_config
    from e2e.framework.result import FAIL, Result
    from e2e.reducer.pair import FailingPair
    from e2e.reducer.strategies import types_broke

    named = 0
    for bug in bugs:
        if bug.types_broke is not None:
            continue
        first = bug.first
        pair = FailingPair(
            Result(first.test, first.config, FAIL, stage=bug.stage), None, load_config(first.config), reports_dir
        )
        checked = types_broke(pair)
        if checked.broke is not None:
            bug.checked_types = checked.broke + (f"; {checked.bundle}" if checked.bundle else "")
            bug.checked_root = checked.root
            named += 1
    log(f"fuzz: types checked: {named} of {len(bugs)} bugs failed after a step that broke the types")
    return named


def reduce_bugs(
    bugs: list[Bug], programs: CampaignPrograms, configs: list[str], reports_dir: Path, seconds: float, log=print
) -> dict[str, str]:
    """Shrink each bug's first program (within `seconds` in all), write the regression
    tests, run them for bundles, record their xfail entries, verify the bundles. Returns
    the regression programs written (name -> JSON)."""
    from e2e.configs.update_xfails import update
    from e2e.fuzz.regressions import read_programs, run_regressions, test_name, verify_bundle, write_programs
    from e2e.fuzz.shrink import keeps_op, op_to_keep, run_program, same_bug, shrink

    work = reports_dir / "triage"
    deadline = time.monotonic() + seconds
    written: dict[str, str] = {}
    for number, bug in enumerate(bugs):
        original = programs.of_test(bug.first.test)
        if original is None:
            continue
        name = test_name(original, bug.config)
        kept = read_programs().get(name)
        if kept is not None:
            if not shrunk_from(Program.from_json(kept), original):
                log(
                    f"fuzz: {bug.config}: {bug.first.test} not reduced: its regression's name, {name}, holds "
                    "another program (the same seed under an earlier generator); run campaigns on seeds no "
                    "regression test uses"
                )
                continue
            # reduced by an earlier triage of this campaign: its regression test
            bug.reduced, bug.regression = Program.from_json(kept), name
            written[name] = kept
            continue
        share = max(0.0, (deadline - time.monotonic()) / (len(bugs) - number))
        # A candidate that still hangs takes its whole limit, one that does not ends in seconds:
        # a hang's shrink pays the limit about once per op it drops, so its limit is short.
        limit = HANG_CANDIDATE_SECONDS if bug.kind == CRASH and bug.stage == "timeout" else PAIR_BUDGET
        # A wrong result's or a crash's signature names no op: a candidate must still compute the guilty one.
        guilty = op_to_keep(bug.signature, bug.guilty_op)

        def still_fails(candidate: Program, bug: Bug = bug, guilty: str | None = guilty, limit: float = limit) -> bool:
            if not keeps_op(candidate, guilty):
                return False
            return same_bug(run_program(candidate, bug.config, work, seconds=limit), bug.signature)

        started = time.monotonic()
        reduced, tried = shrink(original, still_fails, share)
        bug.reduced = reduced
        bug.regression = test_name(reduced, bug.config)
        written[bug.regression] = reduced.to_json()
        log(
            f"fuzz: {bug.config}: {bug.first.test} shrunk from {len(original.nodes)} to {len(reduced.nodes)} ops "
            f"({tried} candidates tried in {time.monotonic() - started:.0f} s)"
        )
    if not written:
        return written
    write_programs(written)
    regressions = reports_dir / "regressions"
    from e2e.configs import CONFIG_NAMES

    # Every default config too: the regression tests join the suite, which must stay green.
    run_regressions(sorted(written), list(dict.fromkeys([*CONFIG_NAMES, *configs])), regressions, workers=2)
    if (regressions / "results.json").is_file():
        update(regressions / "results.json", XFAIL_DIR)
        results = {(r.test, r.config): r for r in map(Result.from_json, load_rows(regressions)[0])}
        for bug in bugs:
            result = results.get((bug.regression, bug.config))
            if result is not None and not result.passed:
                bug.reduced_failure = Failure.of(result)
            if result is not None and result.repro_path:
                bug.regression_bundle = result.repro_path
                bug.verified = verify_bundle(Path(result.repro_path))
    return written


def reduced_ops(bug: Bug, reports_dir: Path) -> tuple[str, ...]:
    """The ops of a bug's reduced program: its bundle's (`repro.mlir`: the regression test's,
    else a pair's), else its shrunk program's; () when it was not reduced."""
    from e2e.fuzz.records import resolve_bundle

    bundled = bundle_ops(resolve_bundle(reports_dir, bug.bundle))
    return bundled or (tuple(bug.reduced.ops) if bug.reduced is not None else ())


def known_by_root(bugs: list[Bug], known: KnownSignatures, log=print) -> int:
    """New bugs made known by their root once reduced (`KnownSignatures.knows_root`): the
    reduction may have moved the symptom (a `nan` mismatch now `values`), not the pass and
    op it fails in. Returns how many."""
    found = [bug for bug in bugs if not bug.known and known.knows_root(bug)]
    for bug in found:
        bug.known = True
    if found:
        log(f"fuzz: {len(found)} new bugs known by their root once reduced")
    return len(found)


def shrunk_from(kept: Program, original: Program) -> bool:
    """Whether `kept` can be a shrink of `original`: each of its ops is one of the original's,
    by name and op (shrinking drops ops, cuts values into inputs, narrows types)."""
    ops = {(node.name, node.op) for node in original.nodes}
    return all((node.name, node.op) in ops for node in kept.nodes)


def chosen_for_reduction(bugs: list[Bug], limit: int | None) -> list[Bug]:
    """At most `limit` of the new bugs to reduce (all when None): one per (signature, guilty
    op) first, since one failure on several configs (a frontend's, fed to each) is one
    program to shrink, dealt round-robin over the configs so that each gets its share."""
    if limit is None:
        return bugs
    by_config: dict[str, list[Bug]] = {}
    for bug in bugs:
        by_config.setdefault(bug.config, []).append(bug)
    chosen: list[Bug] = []
    seen: set[tuple[str, str | None]] = set()
    queues = [list(queue) for _, queue in sorted(by_config.items())]
    while len(chosen) < limit and any(queues):
        for queue in queues:
            while queue and (queue[0].signature, queue[0].guilty_op) in seen:
                queue.pop(0)
            if queue and len(chosen) < limit:
                bug = queue.pop(0)
                seen.add((bug.signature, bug.guilty_op))
                chosen.append(bug)
    return chosen


def analyse(
    reports_dir: Path,
    configs: list[str] | None = None,
    reduce_seconds: float = 0.0,
    log=print,
    reduce_limit: int | None = None,
) -> str:
    """Classify the campaign in `reports_dir` (and, given `reduce_seconds`, reduce its new
    bugs into regression tests, at most `reduce_limit` of them); write its report; returns
    the markdown."""
    recorded, run = load_rows(reports_dir)
    # judged again by the oracle below; the run's record stays as it ran
    results = [Result.from_json(row) for row in copy.deepcopy(recorded)]
    campaign = load_campaign(reports_dir, run)
    configs = configs or campaign.get("configs") or sorted({result.config for result in results})
    from e2e.fuzz.campaign import cpu_seconds

    # The triage's own cost, beside the blocks' (`cpu_s`): the report gives both.
    begun = cpu_seconds()
    programs = CampaignPrograms.load(reports_dir, run)
    judge_by_oracle(results, programs, reports_dir / "triage", log=log)
    known = known_signatures(configs)
    classified = classify_campaign(reports_dir, results, programs, known)
    check_types(classified.bugs, reports_dir, log)
    campaign["triage_cpu_s"] = round(cpu_seconds() - begun, 1)
    if reduce_seconds > 0:
        begun, started = cpu_seconds(), time.monotonic()
        reduce_bugs(
            chosen_for_reduction(classified.new, reduce_limit), programs, configs, reports_dir, reduce_seconds, log
        )
        campaign["reduce_cpu_s"] = round(cpu_seconds() - begun, 1)
        campaign["reduce_wall_s"] = round(time.monotonic() - started, 1)
        known_by_root(classified.new, known, log)
    from e2e.fuzz.records import campaign_bugs, write_bugs

    seeds = sorted({seed for result in results if (seed := seed_of(result.test)) is not None})
    ops_of = functools.partial(reduced_ops, reports_dir=reports_dir)
    text = markdown(campaign, results, classified, ops_of, [programs(seed) for seed in seeds])
    (reports_dir / "fuzz.md").write_text(text)
    write_bugs(reports_dir, campaign_bugs(classified.bugs, reports_dir))
    (reports_dir / "fuzz.html").write_text(html_page(text, discovery(campaign, classified)))
    from e2e.framework.html_report import write_html
    from e2e.tools.report_tables import report_tables

    write_html(recorded, run, reports_dir / "index.html", [*report_tables(recorded), campaign_table(classified)])
    return text

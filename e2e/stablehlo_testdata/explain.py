"""What StableHLO's testdata tells about the `stablehlo` config's verdicts.

The `stablehlo` config lowers torch to StableHLO, then runs torch-mlir's StableHLO ->
linalg conversion and the RefBackend: exactly what `testdata-refbackend` runs on each
testdata program. So a testdata program that fails on `testdata-refbackend` while
StableHLO's reference interpreter (`testdata-interp`) passes it shows a bug of that
conversion (or of the RefBackend) in isolation, on one op and element type
(`ops.op_under_test`). A failing pair of the `stablehlo` config is *explained* when its
StableHLO (the IR its stage `lower` was given, saved under the run's `ir/`) runs an op on
an element type of such a program (`ops.program_ops`): the testdata shows that op failing
alone. An explanation names the programs, and says whether they fail as the pair does
(the same stage, pass and op: the signature's key).

Each testdata config's verdicts come from a testdata run's results when given and they
hold that config, else from its recorded xfail set (`e2e/stablehlo_testdata/xfail/`: a
listed program fails, any other program taken passed when the set was recorded).

    python -m e2e.stablehlo_testdata --explain reports/ [--testdata-results TD_REPORTS]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from torch_mlir import ir

from compiler.stages import STAGES, Snapshots, new_context
from e2e.configs.xfails import read_xfails
from e2e.framework.result import CRASH, FAIL, MEMORY, PASS, TIMEOUT
from e2e.framework.results_files import results_file
from e2e.framework.runner import pair_ir_dir
from e2e.framework.signature import Signature
from e2e.stablehlo_testdata.ops import OpUse, op_under_test, program_ops
from e2e.stablehlo_testdata.program import SPLIT
from e2e.stablehlo_testdata.register import PREFIX, program_paths, testdata_root

CONFIG = "stablehlo"  # the suite's config whose verdicts the testdata explains
LOWERED = "testdata-refbackend"  # its StableHLO -> linalg and RefBackend, on testdata programs
REFERENCE = "testdata-interp"  # StableHLO's reference interpreter: the program itself is right
STABLEHLO_STAGE = "lower"  # under `stablehlo`, the stage given StableHLO (the `backend` stage's output)
XFAIL_DIR = Path(__file__).resolve().parent / "xfail"
FAILED = (FAIL, CRASH, TIMEOUT, MEMORY)
SHOWN = 3  # programs named per explanation


@dataclass(frozen=True)
class Failed:
    """How a program or pair fails, as a results row or an xfail entry records it: the
    file's words (`<outcome>: <signature>`) and the signature they hold, read once."""

    text: str
    signature: Signature

    @classmethod
    def read(cls, text: str) -> "Failed":
        return cls(text, Signature.parse(text.partition(": ")[2]))

    @classmethod
    def of_row(cls, row: dict) -> "Failed":
        return cls.read(f"{row['outcome']}: {row.get('signature') or ''}")

    def __str__(self) -> str:
        return self.text


@dataclass
class Verdicts:
    """One testdata config's verdicts: the programs it fails, and those it passes."""

    config: str
    source: str  # where they were read: a results file or an xfail set
    failed: dict[str, Failed]  # test -> how it fails
    passed: set[str] | None = None  # None (an xfail set): every program not failed

    def passes(self, test: str) -> bool:
        return test not in self.failed and (self.passed is None or test in self.passed)


def recorded_verdicts(config: str, xfail_dir: Path = XFAIL_DIR) -> Verdicts:
    path = xfail_dir / f"{config}.txt"
    entries = read_xfails(path, None)
    return Verdicts(config, f"xfail set {path}", {entry.test: Failed.read(entry.reason) for entry in entries})


def run_verdicts(config: str, rows: list[dict], source: str) -> Verdicts | None:
    """`config`'s verdicts in a run's rows; None when the run did not run it."""
    mine = [row for row in rows if row["config"] == config]
    if not mine:
        return None
    failed = {row["test"]: Failed.of_row(row) for row in mine if row["outcome"] in FAILED}
    return Verdicts(config, source, failed, {row["test"] for row in mine if row["outcome"] == PASS})


def testdata_verdicts(config: str, rows: list[dict] | None = None, source: str = "") -> Verdicts:
    """From the run's rows when they hold `config`, else its recorded xfail set."""
    return (rows and run_verdicts(config, rows, source)) or recorded_verdicts(config)


@dataclass(frozen=True)
class IsolatedFailure:
    """A testdata program failing on `testdata-refbackend` and passing on `testdata-interp`."""

    test: str
    use: OpUse  # its op under test
    failure: Failed  # on testdata-refbackend

    @property
    def key(self) -> str:
        return self.failure.signature.key()


def program_op_under_test(path: Path, test: str, context: ir.Context | None = None) -> OpUse | None:
    """The op under test of the program at `path` (the test `test`), read as `read_program`
    takes it: of a split-input file, the module with @main."""
    text = path.read_text()
    if SPLIT in text:
        text = next((chunk for chunk in text.split(SPLIT) if "@main(" in chunk), text)
    return op_under_test(text, test.removeprefix(PREFIX), context)


def isolated_failures(corpus: Path, lowered: Verdicts, reference: Verdicts) -> dict[OpUse, list[IsolatedFailure]]:
    """The programs below `corpus` that `lowered` fails and `reference` passes, by their op
    under test (a program whose checked value is no op's result is left out)."""
    base = testdata_root(corpus)
    context = new_context()
    found: dict[OpUse, list[IsolatedFailure]] = {}
    for path in program_paths(corpus):
        test = PREFIX + path.relative_to(base).as_posix().removesuffix(".mlir")
        if test not in lowered.failed or not reference.passes(test):
            continue
        use = program_op_under_test(path, test, context)
        if use is not None:
            found.setdefault(use, []).append(IsolatedFailure(test, use, lowered.failed[test]))
    return found


@dataclass
class PairExplanation:
    """What the testdata tells about one failing pair of the `stablehlo` config."""

    test: str
    failure: Failed
    matches: dict[OpUse, list[IsolatedFailure]] = field(default_factory=dict)
    why_not: str = ""  # when nothing matched: why
    before_stablehlo: bool = False  # failed before there was StableHLO

    @property
    def explained(self) -> bool:
        return bool(self.matches)

    @property
    def key(self) -> str:
        """Its signature's stage and pass."""
        return self.failure.signature.key()

    @property
    def fails_alike(self) -> bool:
        """Some matching program fails as the pair does (the same stage, pass and op)."""
        return any(failure.key == self.key for failures in self.matches.values() for failure in failures)


def saved_stablehlo(row: dict, reports_dir: Path) -> Path | None:
    """The StableHLO a pair's stage `lower` was given, saved in its run's reports (or, for a
    result from the cache, in the run its `ir_path` names)."""
    directories = [pair_ir_dir(reports_dir, row["test"], row["config"])]
    if row.get("ir_path"):
        directories.append(Path(row["ir_path"]).parent)
    paths = (Snapshots(directory).path_of(STABLEHLO_STAGE) for directory in directories)
    return next((path for path in paths if path.is_file()), None)


def explain_pair(row: dict, reports_dir: Path, index: dict[OpUse, list[IsolatedFailure]], context) -> PairExplanation:
    explanation = PairExplanation(row["test"], Failed.of_row(row))
    stage = row.get("stage") or ""
    if stage in STAGES and STAGES.index(stage) < STAGES.index(STABLEHLO_STAGE):
        explanation.why_not, explanation.before_stablehlo = f"failed in stage {stage}, before StableHLO", True
        return explanation
    path = saved_stablehlo(row, reports_dir)
    if path is None:
        explanation.why_not = "no saved StableHLO (a result from the cache? rerun with --no-result-cache)"
        return explanation
    try:
        uses = program_ops(path.read_text(), context)
    except ir.MLIRError as error:
        explanation.why_not = f"its StableHLO ({path}) does not parse: {str(error).splitlines()[0]}"
        return explanation
    explanation.matches = {use: index[use] for use in sorted(uses) if use in index}
    if not explanation.matches:
        explanation.why_not = f"none of its {len(uses)} ops on their element types fails alone in the testdata"
    return explanation


def explain_run(results: Path, index: dict[OpUse, list[IsolatedFailure]], rows: list[dict]) -> list[PairExplanation]:
    """Every failing pair of the `stablehlo` config in `rows` (the results at `results`)."""
    reports_dir = results_file(results).parent
    context = new_context()
    failing = [row for row in rows if row["config"] == CONFIG and row["outcome"] in FAILED]
    return [explain_pair(row, reports_dir, index, context) for row in sorted(failing, key=lambda row: row["test"])]


def explanation_lines(
    explanations: list[PairExplanation],
    index: dict[OpUse, list[IsolatedFailure]],
    lowered: Verdicts,
    reference: Verdicts,
) -> list[str]:
    """Per failing pair: the testdata programs that explain it, or why none does; the counts last."""
    lines = []
    for explanation in explanations:
        lines.append(f"{explanation.test}  ({explanation.failure})")
        if not explanation.explained:
            lines.append(f"    not explained: {explanation.why_not}")
        for use, failures in explanation.matches.items():
            alike = sum(failure.key == explanation.key for failure in failures)
            named = ", ".join(failure.test for failure in failures[:SHOWN])
            more = f" (+{len(failures) - SHOWN})" if len(failures) > SHOWN else ""
            lines.append(
                f"    explained: {use}: {len(failures)} testdata programs fail on {LOWERED} and pass on {REFERENCE}"
                f" ({alike} failing as this pair does): {named}{more}"
            )
            signatures = Counter(failure.failure.text for failure in failures)
            lines += [f"        {n:4d}  {signature[:160]}" for signature, n in signatures.most_common(2)]
    explained = [e for e in explanations if e.explained]
    unexplained = [e for e in explanations if not e.explained]
    before = sum(e.before_stablehlo for e in unexplained)
    unsaved = sum(e.why_not.startswith("no saved") for e in unexplained)
    programs = sum(len(failures) for failures in index.values())
    lines += [
        "",
        f"testdata: {programs} programs fail on {LOWERED} ({lowered.source}) and pass on {REFERENCE} "
        f"({reference.source}): {len(index)} ops on element types",
        f"{CONFIG}: {len(explanations)} failing pairs: explained {len(explained)} "
        f"({sum(e.fails_alike for e in explained)} failing as their testdata programs do), "
        f"not explained {len(unexplained)} ({before} failed before StableHLO, {unsaved} without saved StableHLO, "
        f"{len(unexplained) - before - unsaved} whose ops pass alone)",
    ]
    return lines

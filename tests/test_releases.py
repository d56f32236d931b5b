"""The release range of a bug (e2e.service.releases): the search with a fake runner, the
rule that judges a run, a run as a real subprocess on hand-made wheels, and one real IREE
bundle on two IREE releases."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from e2e.service import releases as r
from tests.extras import requires_extra

IREE = [f"3.{minor}.0" for minor in range(14)]  # 3.0.0 .. 3.13.0


def fake_probe(outcome_of, runs: int = 3):
    """A probe from `release -> outcome` (or -> a list of outcomes, one a run), counting calls."""
    calls = []

    def probe(release: str) -> r.Step:
        calls.append(release)
        outcomes = outcome_of(release)
        outcomes = iter(outcomes if isinstance(outcomes, list) else [outcomes] * runs)

        def run() -> r.Run:
            outcome = next(outcomes)
            return r.Run(outcome, None, 1.0, "why: the release cannot tell" if outcome == r.CANNOT_TELL else "")

        return r.step(release, run, runs)

    return probe, calls


def search(outcome_of, candidates=IREE) -> tuple[r.ReleaseRange, list[str]]:
    probe, calls = fake_probe(outcome_of)
    found = r.ReleaseRange("iree", "bundle", list(candidates), *r.bisect(candidates, probe))
    assert len(calls) == len(set(calls)), "a release is probed once"
    return found, calls


def since(first: str, then: str, before: str):
    return lambda release: then if r.Version(release) >= r.Version(first) else before


def test_introduced_in_the_first_failing_release_after_the_last_passing_one():
    found, calls = search(since("3.5.0", r.FAILS, r.PASSES))
    assert (found.kind, found.before, found.after) == (r.INTRODUCED, "3.4.0", "3.5.0")
    assert found.summary() == "introduced in 3.5.0 (passes on 3.4.0, fails on 3.5.0)"
    # exponential back from 3.13.0 (3.12, 3.11, 3.9, 3.5, 3.0 passes), then binary search in 3.0 .. 3.5
    assert calls == ["3.13.0", "3.12.0", "3.11.0", "3.9.0", "3.5.0", "3.0.0", "3.2.0", "3.3.0", "3.4.0"]


def test_fixed_when_the_newest_passes_and_an_older_release_failed():
    found, _ = search(since("3.8.0", r.PASSES, r.FAILS))
    assert (found.kind, found.before, found.after) == (r.FIXED, "3.7.0", "3.8.0")
    assert found.summary() == "fixed in 3.8.0 (fails on 3.7.0, passes on 3.8.0)"


@pytest.mark.parametrize("outcome, kind", [(r.FAILS, r.FAILS_EVERYWHERE), (r.PASSES, r.PASSES_EVERYWHERE)])
def test_the_same_verdict_on_every_release_tried(outcome, kind):
    found, calls = search(lambda release: outcome)
    assert found.kind == kind and found.before is None and found.after is None
    assert "3.0.0" in calls, "the oldest release is tried before saying every release"
    assert found.summary() == f"{kind} (3.0.0 .. 3.13.0, {len(calls)} told)"


def test_a_release_that_cannot_tell_is_skipped_and_widens_the_range():
    def outcome(release):
        return r.CANNOT_TELL if release == "3.4.0" else since("3.5.0", r.FAILS, r.PASSES)(release)

    found, calls = search(outcome)
    assert (found.kind, found.before, found.after, found.skipped) == (r.INTRODUCED, "3.3.0", "3.5.0", ["3.4.0"])
    assert found.summary() == "introduced after 3.3.0, in or before 3.5.0 (3.4.0 could not tell)"
    assert "could not tell: 3.4.0 (why)" in found.markdown()


def test_the_newest_release_that_tells_gives_the_verdict():
    def outcome(release):  # the two newest cannot parse the bundle's IR
        return r.CANNOT_TELL if release in ("3.13.0", "3.12.0") else since("3.2.0", r.FAILS, r.PASSES)(release)

    found, _ = search(outcome)
    assert (found.newest_told, found.kind, found.after) == ("3.11.0", r.INTRODUCED, "3.2.0")


def test_oldest_releases_that_cannot_tell_are_walked_past():
    def outcome(release):  # the old releases refuse the IR; 3.10.0 passes, 3.11.0 on fail
        minor = int(release.split(".")[1])
        return r.CANNOT_TELL if minor < 10 else since("3.11.0", r.FAILS, r.PASSES)(release)

    found, calls = search(outcome)
    assert calls == ["3.13.0", "3.12.0", "3.11.0", "3.9.0", "3.5.0", "3.0.0", "3.10.0"]
    assert (found.kind, found.before, found.after) == (r.INTRODUCED, "3.10.0", "3.11.0")

    found, calls = search(since("3.11.0", r.FAILS, r.CANNOT_TELL))
    assert calls[-1] == "3.10.0" and found.kind == r.FAILS_EVERYWHERE
    assert found.summary() == (
        "fails on every release tried (3.11.0 .. 3.13.0, 3 told; older: 3.0.0, 3.5.0, 3.9.0, 3.10.0 could not tell)"
    )


def test_no_release_tells():
    found, calls = search(lambda release: r.CANNOT_TELL)
    assert found.kind == r.UNTOLD and found.summary() == r.UNTOLD and len(calls) == len(IREE)


def test_runs_that_disagree_make_a_step_flaky_and_the_search_skips_it():
    def outcome(release):
        if release == "3.5.0":
            return [r.FAILS, r.PASSES, r.FAILS]
        return since("3.5.0", r.FAILS, r.PASSES)(release)

    found, _ = search(outcome)
    flaky = next(s for s in found.steps if s.release == "3.5.0")
    assert flaky.verdict == r.FLAKY and flaky.reason == "runs disagree: fails, passes, fails"
    assert (found.before, found.after, found.skipped) == ("3.4.0", "3.6.0", ["3.5.0"])


def test_a_first_run_that_cannot_tell_is_not_repeated():
    runs = iter([r.Run(r.CANNOT_TELL, 2, 1.0, "different failure: ..."), r.Run(r.FAILS, 1, 1.0)])
    step = r.step("3.0.0", lambda: next(runs), 3)
    assert step.verdict == r.CANNOT_TELL and len(step.runs) == 1 and step.reason == "different failure: ..."


@pytest.mark.parametrize(
    "exit_code, stdout, stderr, outcome",
    [
        (1, "REPRODUCED: lower | ...", "", r.FAILS),
        (0, "not reproduced: the module compiles", "", r.PASSES),
        (2, "different failure: lower | iree-compile: error: custom op 'x' is unknown", "", r.CANNOT_TELL),
        (1, "", "ImportError: cannot import name 'compile_and_load'", r.CANNOT_TELL),  # no REPRODUCED
        (-11, "", "Fatal Python error: Segmentation fault", r.CANNOT_TELL),
        (r.MIXED_EXIT, "", f"{r.MIXED}: iree imported from outside /cache/iree-3.0.0", r.CANNOT_TELL),
    ],
)
def test_the_rule_that_judges_a_run(exit_code, stdout, stderr, outcome):
    run = r.judge_run(exit_code, stdout, stderr, 1.0)
    assert run.outcome == outcome
    assert (run.reason == "") == (outcome != r.CANNOT_TELL)


def test_the_result_as_json_and_as_a_table():
    found, _ = search(since("3.5.0", r.FAILS, r.PASSES))
    data = json.loads(found.to_json())
    assert data["summary"] == found.summary() and data["after"] == "3.5.0"
    assert {s["release"] for s in data["steps"]} == {s.release for s in found.steps}
    assert found.table().count("\n") == len(found.steps) + 1
    assert found.markdown().startswith("**Release range (iree)**: introduced in 3.5.0")


# A release as a wheel of a tiny package, `buggy`, whose `version` the bundle's repro.py reads:
# the bug is there from 2.0 on. The repro's check runs in a child started as a crash's replay
# is (`sys.executable -I`), which must still see the release.
REPRO = """import subprocess, sys
child = subprocess.run([sys.executable, "-I", "-c", "import buggy; print(buggy.version)"],
                       capture_output=True, text=True)
if child.returncode:
    sys.exit("the child could not import the release: " + child.stderr)
if float(child.stdout) >= 2:
    print("REPRODUCED: buggy")
    sys.exit(1)
print("not reproduced")
"""


def write_wheel(directory: Path, version: str, body: str) -> None:
    dist = f"buggy-{version}.dist-info"
    with zipfile.ZipFile(directory / f"buggy-{version}-py3-none-any.whl", "w") as wheel:
        wheel.writestr("buggy/__init__.py", body)
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: buggy\nVersion: {version}\n")
        wheel.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{dist}/RECORD", "")


def test_a_wheels_directory_as_the_releases_each_run_a_subprocess(tmp_path):
    wheels, bundle = tmp_path / "wheels", tmp_path / "bundle"
    wheels.mkdir(), bundle.mkdir()
    for version in ("1.0", "1.5", "2.0", "3.0"):
        write_wheel(wheels, version, f"version = {version}\n")
    write_wheel(wheels, "2.5", "import time\ntime.sleep(60)\nversion = 2.5\n")  # a hang: cannot tell
    (bundle / "repro.py").write_text(REPRO)
    found = r.release_range(bundle, r.wheels_component(wheels), cache=tmp_path / "cache", runs=2, timeout=8)
    assert found.summary() == "introduced in 2.0 (passes on 1.5, fails on 2.0)"
    verdicts = {s.release: (s.verdict, s.cached) for s in found.steps}
    assert verdicts["3.0"] == (r.FAILS, False) and verdicts["2.5"] == (r.CANNOT_TELL, False)
    assert "timeout" in next(s.reason for s in found.steps if s.release == "2.5")
    assert not list(bundle.glob("__pycache__")), "runs use a scratch copy of the bundle"
    again = r.release_range(bundle, r.wheels_component(wheels), ["1.0", "3.0"], tmp_path / "cache", runs=1)
    assert again.kind == r.INTRODUCED and all(s.cached for s in again.steps), "each release is installed once"


REAL_BUG = "GenBug_600208_linalg_iree"  # iree-compile's 'flow.tensor.reshape' verifier error


@requires_extra("runtimes", "iree.compiler", "iree.runtime")
def test_a_real_linalg_iree_bundle_on_two_iree_releases(tmp_path):
    """Installs IREE 3.0.0 and 3.13.0 into the release cache unless they are there (~11 s each
    from the package index)."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "xfails").mkdir()
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "e2e/test_suite/generated_regressions.py"]
        + ["-k", REAL_BUG, "--config", "linalg@iree", "--xfail-dir", str(tmp_path / "xfails")]
        + ["--reports-dir", str(tmp_path / "reports")],
        cwd=root,
        capture_output=True,
    )
    bundle = tmp_path / "reports" / "repro" / REAL_BUG / "linalg@iree"
    assert (bundle / "repro.py").exists(), f"no bundle written for {REAL_BUG}"
    found = r.release_range(bundle, r.COMPONENTS["iree"], ["3.0.0", "3.13.0"], runs=1)
    verdicts = {s.release: s.verdict for s in found.steps}
    assert verdicts == {"3.13.0": r.FAILS, "3.0.0": r.PASSES}
    assert (found.kind, found.after) == (r.INTRODUCED, "3.13.0")

"""The CI workflow users copy (.github/workflows/conformance.yml) is valid YAML whose jobs
fit together: a matrix of shards x config groups, each uploading its reports, a merge
job that downloads them all, and only commands and options that exist."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import yaml

from e2e.configs import RUNTIME_CONFIG_NAMES

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "conformance.yml"
TORCH_FIRST = "python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def scripts(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def commands(text: str) -> list[list[str]]:
    """The shell words of each `python -m ...` command in a script: continuations joined, a
    `${{ expression }}` kept as one word (`${{matrix.shard}}/4`), up to a pipe or `||`."""
    joined = re.sub(r"\$\{\{\s*(.*?)\s*\}\}", r"${{\1}}", text.replace("\\\n", " "))
    found = []
    for line in joined.splitlines():
        for match in re.finditer(r"python -m .*?(?=\s(?:\|\|?|&&|;)\s|\s\{\s*$|$)", line):
            found.append(shlex.split(match[0], comments=True))
    return found


def test_the_jobs_and_their_order(workflow):
    jobs = workflow["jobs"]
    assert set(jobs) == {"baseline", "shard", "merge", "fuzz", "fuzz-merge"}
    assert jobs["shard"]["needs"] == "baseline"
    assert set(jobs["merge"]["needs"]) == {"baseline", "shard"} and "always()" in jobs["merge"]["if"]
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"pull_request", "push"} <= set(triggers)
    assert workflow["permissions"]["actions"] == "read"


def test_the_matrix_is_shards_by_config_groups_and_each_shard_says_its_number(workflow):
    shard = workflow["jobs"]["shard"]
    matrix = shard["strategy"]["matrix"]
    assert shard["strategy"]["fail-fast"] is False
    assert matrix["group"] == ["builtin", "runtimes"]
    count = len(matrix["shard"])
    assert matrix["shard"] == list(range(1, count + 1)) and count == 4
    configs = {entry["group"]: entry["configs"] for entry in matrix["include"]}
    assert configs["builtin"] == ""
    assert configs["runtimes"].split(",") == ["tosa@tosa-ref", "stablehlo@xla", "linalg@iree", "torch@iree"]
    assert set(configs["runtimes"].split(",")) <= set(RUNTIME_CONFIG_NAMES)
    (run,) = [c for s in scripts(shard) for c in commands(s) if c[:3] == ["python", "-m", "pytest"]]
    assert run[run.index("--shard") + 1] == f"${{{{matrix.shard}}}}/{count}"
    assert shard["name"].endswith(f"/{count}")


def test_torch_is_installed_first_from_the_cpu_wheel_index(workflow):
    for name in ("shard", "merge"):
        install = next(s for s in scripts(workflow["jobs"][name]) if "pip install" in s).splitlines()
        assert install[0] == TORCH_FIRST and "pip install -e" in install[1], name
    tosa = [s for s in scripts(workflow["jobs"]["shard"]) if "tosa_ref --install" in s]
    assert tosa == ["python -m compiler.executors.tosa_ref --install"]


def test_every_python_module_the_workflow_runs_exists(workflow):
    modules = {
        words[2]
        for job in workflow["jobs"].values()
        if "steps" in job
        for text in scripts(job)
        for words in commands(text)
    }
    assert {"e2e.tools.merge", "e2e.tools.diff", "pytest", "pip", "compiler.executors.tosa_ref"} <= modules
    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


def test_the_shard_run_uses_only_options_the_plugin_defines(workflow):
    (run,) = [c for s in scripts(workflow["jobs"]["shard"]) for c in commands(s) if c[2] == "pytest"]
    options = {word.split("=")[0] for word in run if word.startswith("--")}
    options_defined = (ROOT / "e2e" / "hooks" / "options.py").read_text()
    ours = {option for option in options if f'"{option}"' in options_defined}
    assert {"--shard", "--reports-dir", "--no-result-cache"} <= ours
    assert options - ours == {"--junitxml"}  # pytest's own
    script = next(s for s in scripts(workflow["jobs"]["shard"]) if "--shard-durations" in s)
    assert "options+=(--shard-durations base/results.json)" in script
    assert "options+=(--config" in script


def test_what_the_shards_upload_is_what_the_merge_downloads_and_the_diff_finds(workflow):
    shard, merge = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    upload = next(s for s in shard["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ env.REPORTS }}"
    assert upload["with"]["name"] == "reports-${{ matrix.group }}-${{ matrix.shard }}"
    assert shard["env"]["REPORTS"] == "reports/${{ matrix.group }}-${{ matrix.shard }}"
    download = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"] == {"pattern": "reports-*", "path": "shards"}
    merged = [c for s in scripts(merge) for c in commands(s) if c[2] == "e2e.tools.merge"]
    assert merged and all(c[3:6] == ["shards/*", "-o", "merged"] for c in merged)
    (diff,) = [c for s in scripts(merge) for c in commands(s) if c[2] == "e2e.tools.diff"]
    assert diff[3:5] == ["base", "merged"] and "--html" in diff
    published = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    assert published["with"]["name"] == "merged-reports" and published["with"]["path"] == "merged"
    # The name the baseline job looks for, and the shards and the merge job download.
    assert '.name == "merged-reports"' in scripts(workflow["jobs"]["baseline"])[0]
    assert sum("--name merged-reports" in s for job in (shard, merge) for s in scripts(job)) == 2
    # The base is downloaded before the merge, which marks the changed pairs in index.html.
    names = [step.get("name", "") for step in merge["steps"]]
    assert names.index("Download the base branch's run") < names.index("Merge the shards")
    merging = next(s for s in merge["steps"] if s.get("name") == "Merge the shards")["run"]
    assert "options+=(--baseline base)" in merging and merging.count('"${options[@]}"') == 2


def test_the_schedule_runs_the_fuzzing_campaign_and_only_it(workflow):
    from e2e.fuzz.__main__ import parser

    triggers = workflow.get("on", workflow.get(True))
    assert triggers["schedule"][0]["cron"]
    jobs = workflow["jobs"]
    assert "github.event_name != 'schedule'" in jobs["baseline"]["if"] and "!= 'schedule'" in jobs["merge"]["if"]
    assert jobs["fuzz"]["if"] == "github.event_name == 'schedule'" and jobs["fuzz-merge"]["needs"] == "fuzz"
    (run,) = [c for s in scripts(jobs["fuzz"]) for c in commands(s) if c[2] == "e2e.fuzz"]
    count = len(jobs["fuzz"]["strategy"]["matrix"]["shard"])
    assert run[run.index("--shard") + 1] == f"${{{{matrix.shard}}}}/{count}"
    known = {option for action in parser()._actions for option in action.option_strings}
    assert {word for word in run[3:] if word.startswith("-")} <= known
    merged = [c for s in scripts(jobs["fuzz-merge"]) for c in commands(s) if c[2] != "pip"]
    assert merged[0][2:] == ["e2e.tools.merge", "fuzz/*", "-o", "merged-fuzz"]
    assert merged[1][2:6] == ["e2e.fuzz", "--report-only", "--reports-dir", "merged-fuzz"]
    assert {word for word in merged[1][3:] if word.startswith("-")} <= known

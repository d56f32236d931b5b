"""`--shard I/N`: a test's configs stay together, tests are dealt longest first to the
least-loaded shard, unknown tests weigh the median, and every shard computes one plan."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from e2e.framework.shards import Durations, Scope, ShardSpec, plan, scope_of, scopes_of

ROOT = Path(__file__).resolve().parents[1]


def items(tests: dict[str, list[str]], file: str = "suite/ops.py") -> list[SimpleNamespace]:
    return [
        SimpleNamespace(nodeid=f"{file}::{test}::{config}", test_name=test, config_name=config)
        for test, configs in tests.items()
        for config in configs
    ]


def shards_of(result, scopes) -> list[set[str]]:
    return [{s.name.split("::")[1] for s in scopes if result.shard_of[s.name] == i} for i in (1, 2, 3, 4)]


def test_a_shard_spec_is_one_based_and_checked():
    assert ShardSpec.parse("1/4") == ShardSpec(1, 4) and str(ShardSpec.parse(" 4 / 4 ")) == "4/4"
    for bad in ("0/4", "5/4", "1/0", "1-4", "a/b", "1/"):
        with pytest.raises(ValueError, match="--shard"):
            ShardSpec.parse(bad)


def test_the_scope_of_an_item_is_its_test():
    assert scope_of("e2e/test_suite/matmul.py::MmModule_basic::linalg") == "e2e/test_suite/matmul.py::MmModule_basic"
    assert scope_of("e2e/test_suite/broken.py::import") == "e2e/test_suite/broken.py::import"
    found = scopes_of(items({"A": ["linalg", "tosa"], "B": ["tosa"]}))
    assert found == [Scope("suite/ops.py::A", "A", ("linalg", "tosa")), Scope("suite/ops.py::B", "B", ("tosa",))]


def test_tests_are_dealt_longest_first_to_the_least_loaded_shard():
    tests = {"A": ["linalg", "tosa"], "B": ["linalg", "tosa"], "C": ["linalg", "tosa"], "D": ["linalg", "tosa"]}
    seconds = {"A": 10.0, "B": 6.0, "C": 5.0, "D": 1.0}
    durations = Durations(pairs={(t, c): seconds[t] / 2 for t in tests for c in tests[t]})
    scopes = scopes_of(items(tests))
    result = plan(scopes, 2, durations)
    # A -> 1 (10); B -> 2 (6); C -> 2 (11); D -> 1 (11): not round-robin, not by name.
    assert shards_of(result, scopes)[:2] == [{"A", "D"}, {"B", "C"}]
    assert result.loads == [11.0, 11.0] and result.known == 4


def test_a_config_the_earlier_run_lacked_weighs_the_mean_of_the_tests_other_configs():
    durations = Durations(pairs={("A", "linalg"): 3.0, ("A", "tosa"): 5.0}, tests={"B": 7.0})
    assert durations.weight("A", ("linalg", "tosa", "stablehlo")) == 12.0
    assert durations.weight("B", ("linalg",)) == 7.0  # only a total: the plugin's cache
    assert durations.weight("C", ("linalg",)) is None


def test_tests_without_a_duration_weigh_the_median_and_are_spread_stably():
    known = {"A": 10.0, "B": 2.0, "C": 6.0}  # median 6
    tests = {name: ["linalg"] for name in [*known, *(f"New{i}" for i in range(9))]}
    durations = Durations(tests=known)
    scopes = scopes_of(items(tests))
    result = plan(scopes, 3, durations)
    assert result.known == 3
    assert sum(result.loads) == pytest.approx(10 + 2 + 6 + 9 * 6)
    assert max(result.loads) - min(result.loads) <= 6  # within one median test of each other
    # Unknown tests are not all piled on one shard, and no timing enters: the same inputs
    # in any order give the same plan.
    unknown_per_shard = [sum(1 for s in shard if s.startswith("New")) for shard in shards_of(result, scopes)[:3]]
    assert all(n >= 1 for n in unknown_per_shard) and sum(unknown_per_shard) == 9, unknown_per_shard
    shuffled = scopes[:]
    random.Random(0).shuffle(shuffled)
    again = plan(shuffled, 3, durations)
    assert again.shard_of == result.shard_of and again.digest == result.digest


def test_with_no_durations_at_all_shards_get_equal_counts():
    scopes = scopes_of(items({f"T{i}": ["linalg", "tosa"] for i in range(10)}))
    result = plan(scopes, 4, Durations())
    assert sorted(len(s) for s in shards_of(result, scopes)) == [2, 2, 3, 3]


def test_the_digest_names_the_assignment_of_every_item():
    tests = {"A": ["linalg"], "B": ["linalg"], "C": ["linalg"]}
    nodeids = [i.nodeid for i in items(tests)]
    scopes = scopes_of(items(tests))
    one = plan(scopes, 2, Durations(tests={"A": 1.0, "B": 5.0, "C": 4.0}), nodeids)
    same = plan(scopes, 2, Durations(tests={"A": 1.0, "B": 50.0, "C": 40.0}), nodeids)  # same deal
    other = plan(scopes, 2, Durations(tests={"A": 9.0, "B": 5.0, "C": 4.0}), nodeids)  # A alone now
    assert one.shard_of == same.shard_of and one.digest == same.digest
    assert one.shard_of != other.shard_of and one.digest != other.digest
    more_configs = [i.nodeid for i in items({t: ["linalg", "tosa"] for t in tests})]
    assert plan(scopes, 2, Durations(), nodeids).digest != plan(scopes, 2, Durations(), more_configs).digest


SUITE = "import torch\nfrom e2e.framework import op_test\n" + "".join(
    f"op_test('Op{i}', torch.tanh, lambda tu: [tu.rand(2, {i + 1})])\n" for i in range(8)
)


def collect(directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, not an installed copy
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--e2e-suite", "suite", "--collect-only", "-q"]
        + list(args),
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def collected(output: str) -> set[str]:
    return {line for line in output.splitlines() if line.startswith("suite/ops.py::")}


def test_the_shards_of_a_suite_cover_it_once_keeping_each_tests_configs_together(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "ops.py").write_text(SUITE)
    # An earlier run: Op3 took as long as all the others together.
    rows = [
        {"test": f"Op{i}", "config": config, "duration": 14.0 if i == 3 else 1.0}
        for i in range(8)
        for config in ("linalg", "tosa")
    ]
    (tmp_path / "earlier.json").write_text(json.dumps(rows))
    everything = collected(collect(tmp_path, "--config", "linalg,tosa").stdout)
    assert len(everything) == 16
    shards = []
    for index in (1, 2):
        result = collect(
            tmp_path, "--config", "linalg,tosa", "--shard", f"{index}/2", "--shard-durations", "earlier.json"
        )
        assert result.returncode == 0, result.stdout + result.stderr
        shards.append(collected(result.stdout))
    assert shards[0] | shards[1] == everything and not shards[0] & shards[1]
    tests = [{nodeid.split("::")[1] for nodeid in shard} for shard in shards]
    assert not tests[0] & tests[1]  # no test is split across shards
    assert tests[0] == {"Op3"} and len(shards[1]) == 14  # 28 s alone; the 7 others weigh 14 s


def test_bad_shard_and_baseline_options_are_usage_errors(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "ops.py").write_text(SUITE)
    result = collect(tmp_path, "--shard", "3/2")
    assert result.returncode == 4 and "I must be between 1 and N" in result.stderr
    result = collect(tmp_path, "--shard", "1/2", "--shard-durations", "nowhere")
    assert result.returncode == 4 and "--shard-durations: nowhere: no such file or directory" in result.stderr
    (tmp_path / "empty").mkdir()
    result = collect(tmp_path, "--baseline", "empty")
    assert result.returncode == 4 and "--baseline: empty: no results.json or results.jsonl" in result.stderr

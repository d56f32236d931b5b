"""The plugin as a user meets it, driven with pytest's pytester: an installed plugin run
on a directory of tests from anywhere, node ids, and configs of one test sharing a host."""

import json
import subprocess
import sys

SUITE = """
import torch
from e2e.framework import op_test

op_test("Tanh", torch.tanh, lambda tu: [tu.rand(2, 3)])
op_test("Mm", torch.mm, lambda tu: [tu.rand(2, 3), tu.rand(3, 4)], dynamic=True)
"""


def run(pytester, *args):
    return pytester.runpytest_subprocess(
        "-p", "e2e.plugin", "-p", "no:cacheprovider", "--no-reduce", *args, timeout=600
    )


def test_a_directory_of_tests_runs_from_anywhere_and_the_header_names_the_compiler(pytester):
    import torch_mlir

    pytester.mkdir("my_suite").joinpath("ops.py").write_text(SUITE)
    result = run(pytester, "--e2e-suite", "my_suite", "--config", "linalg,tosa")
    result.assert_outcomes(passed=3, failed=1)  # tosa cannot lower aten.mm with dynamic dims
    result.stdout.fnmatch_lines([f"e2e: torch-mlir * ({next(iter(torch_mlir.__path__))})"])
    rows = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert sorted((r["test"], r["config"], r["final"]) for r in rows) == [
        ("Mm", "linalg", "passed"),
        ("Mm", "tosa", "failed"),
        ("Tanh", "linalg", "passed"),
        ("Tanh", "tosa", "passed"),
    ]
    result.stdout.fnmatch_lines(["rerun: python -m pytest my_suite/ops.py::Mm::tosa --e2e-suite my_suite --no-reduce"])


def printed_reruns(output: str) -> list[str]:
    return [line.split("rerun: ", 1)[1] for line in output.splitlines() if line.startswith("rerun: ")]


def test_a_printed_rerun_command_reruns_its_pair_as_pasted(pytester, tmp_path):
    """An out-of-tree suite, a config given as module:attribute, static shapes, an xfail
    dir, and an option value spelled as a separate argument (which moves pytest's rootdir)."""
    project = pytester.mkdir("project")
    project.joinpath("my_e2e").mkdir()
    project.joinpath("my_e2e", "cases.py").write_text(
        "import torch\nfrom e2e.framework import op_test\n"
        "op_test('Atan2', torch.atan2, lambda tu: [tu.rand(2, 3), tu.rand(2, 3)])\n"  # TOSA has no atan2
        "op_test('Tanh', torch.tanh, lambda tu: [tu.rand(2, 3)])\n"
    )
    project.joinpath("my_configs.py").write_text("from e2e.configs import load_config\nTOSA = load_config('tosa')\n")
    project.joinpath("xfails").mkdir()
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--no-reduce",
        "--e2e-suite",
        "my_e2e",
        "--config",
        "my_configs:TOSA",
        "--shapes",
        "static",
        "--xfail-dir",
        "xfails",
        "--reports-dir",
        str(tmp_path / "elsewhere" / "reports"),
    ]
    first = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=600)
    # A set: in CI (env CI set) pytest's short summary repeats the whole failure message.
    reruns = {line for line in printed_reruns(first.stdout) if "::Atan2::" in line}
    assert len(reruns) == 1, first.stdout[-4000:]
    (rerun,) = reruns
    assert rerun.startswith("python -m pytest my_e2e/cases.py::Atan2::tosa ") and "--config my_configs:TOSA" in rerun
    assert "--shapes static" in rerun and "--xfail-dir xfails" in rerun
    again = subprocess.run(
        rerun + " -p no:cacheprovider", shell=True, cwd=project, capture_output=True, text=True, timeout=600
    )
    assert "= 1 failed" in again.stdout.splitlines()[-1], again.stdout + again.stderr
    assert set(printed_reruns(again.stdout)) == {rerun}  # the same pair, failing the same way


def test_a_suite_file_named_like_a_test_module_or_given_alone_is_collected_once(pytester):
    pytester.mkdir("suite").joinpath("test_ops.py").write_text(SUITE)
    run(pytester, "--e2e-suite", "suite", "--config", "linalg").assert_outcomes(passed=2)
    run(pytester, "suite/test_ops.py", "--e2e-suite", "suite", "--config", "linalg").assert_outcomes(passed=2)
    # Without pytest's python plugin (a suite whose __init__.py must not be imported).
    run(pytester, "-p", "no:python", "--e2e-suite", "suite", "--config", "linalg").assert_outcomes(passed=2)


def test_under_xdist_the_configs_of_a_test_share_one_worker_and_its_frontend(pytester):
    suite = pytester.mkdir("suite")
    suite.joinpath("ops.py").write_text(
        "import torch\nfrom e2e.framework import op_test\n"
        + "".join(f"op_test('Op{i}', torch.tanh, lambda tu: [tu.rand(2, {i + 1})])\n" for i in range(6))
    )
    result = run(pytester, "--e2e-suite", "suite", "--config", "linalg,tosa,stablehlo", "-n", "2")
    result.assert_outcomes(passed=18)
    rows = json.loads((pytester.path / "reports" / "results.json").read_text())
    for test in {row["test"] for row in rows}:
        mine = [row for row in rows if row["test"] == test]
        reused = [row for row in mine if any(note.startswith("shared: reused") for note in row["notes"])]
        assert len(reused) == 2, (test, [row["notes"] for row in mine])  # every config but the first
    # Each worker's time: its items hold its pairs and the framework's share of them.
    clocks = json.loads((pytester.path / "reports" / "run.json").read_text())["worker_seconds"]
    assert sorted(clocks) == ["gw0", "gw1"]
    assert abs(sum(c["pairs"] for c in clocks.values()) - sum(r["duration"] for r in rows)) < 0.05
    assert all(c["items"] > c["pairs"] > 0 and c["before_first_item"] > 0 for c in clocks.values()), clocks


def test_no_isolation_runs_in_process_and_says_once_what_it_turns_off(pytester):
    pytester.mkdir("my_suite").joinpath("ops.py").write_text(SUITE)
    result = pytester.runpytest_subprocess(
        "-p", "e2e.plugin", "-p", "no:cacheprovider", "--e2e-suite", "my_suite", "--config", "linalg,tosa",
        "--no-isolation", "-q", timeout=600,
    )  # fmt: skip
    result.assert_outcomes(passed=3, failed=1)
    said = [line for line in result.stdout.lines if line.startswith("--no-isolation: ")]
    assert said == [
        "--no-isolation: every pair ran in this process; turned off: crash, hang and memory containment "
        "(a crash or hang ends the run; --timeout and --memory-cap do not apply), the import probes, "
        "the result, frontend and program caches and the reducer"
    ]
    rows = json.loads((pytester.path / "reports" / "results.json").read_text())
    assert {row["shape_mode"] for row in rows} == {"annotated"}
    (failed,) = [row for row in rows if row["final"] == "failed"]
    assert failed["signature"].startswith("backend | ") and failed["repro_path"] is None
    assert "reducer: not run: --no-isolation turns it off (it runs in the test host)" in failed["notes"]


def test_a_node_id_naming_an_opt_in_or_runtime_config_selects_it():
    """`python -m pytest 'file::Test::torch@iree'`, as a failing pair's rerun line prints it,
    runs that pair without `--config` (runtime configs are not in the default set)."""
    from types import SimpleNamespace

    from e2e.configs import CONFIG_NAMES
    from e2e.settings import _selected_configs

    def selected(*args: str) -> list[str]:
        return list(_selected_configs(SimpleNamespace(getoption=lambda name: [], args=list(args))))

    assert selected("e2e/test_suite/backward.py::BackwardOp_Silu::torch@iree") == [*CONFIG_NAMES, "torch@iree"]
    assert selected("e2e/x.py::T::onnx", "e2e/x.py::T::tosa@tosa-ref") == [*CONFIG_NAMES, "onnx", "tosa@tosa-ref"]
    assert selected("e2e/test_suite") == list(CONFIG_NAMES)


KEYWORD_SUITE = """
import dataclasses
import torch
from e2e.framework import op_test
from e2e.framework.registry import GLOBAL_TEST_REGISTRY

op_test("Tanh", torch.tanh, lambda tu: [tu.rand(2, 3)])
op_test("Mm", torch.mm, lambda tu: [tu.rand(2, 3), tu.rand(3, 4)])
marked = op_test("SinMarked", torch.sin, lambda tu: [tu.rand(2, 3)])
GLOBAL_TEST_REGISTRY["SinMarked"] = dataclasses.replace(marked, marks=("models",))
"""

# pytest's own `-k` alone: the prefilter turned off, every item built, then deselected.
PREFILTER_OFF = "import e2e.collect\ne2e.collect.KeywordPrefilter.of = staticmethod(lambda config: None)\n"


def test_k_collects_the_items_pytest_alone_would_keep(pytester):
    """`-k` decides per test before building its items; the selection must be what pytest
    deselecting from every item gives, over test, file and config names, marks and the
    xfail mark an expected failure gets later."""
    pytester.mkdir("suite").joinpath("ops.py").write_text(KEYWORD_SUITE)
    pytester.mkdir("xfail").joinpath("tosa.txt").write_text("Mm  # fail: backend | convert-torch-to-tosa | loc: x\n")
    pytester.makepyfile(prefilter_off=PREFILTER_OFF)

    def collected(expression: str, *extra: str) -> set[str]:
        args = ("--e2e-suite", "suite", "--config", "linalg,tosa", "--xfail-dir", "xfail", "--co", "-q")
        result = run(pytester, *args, "-k", expression, *extra)
        return {line for line in result.stdout.lines if "::" in line}

    pytester.syspathinsert()
    expressions = ["Mm", "not tosa", "not xfail and tosa", "models", "Sin or (Mm and linalg)"]
    for expression in expressions:
        prefiltered = collected(expression)
        alone = collected(expression, "-p", "prefilter_off")
        assert prefiltered == alone, expression
    assert collected("xfail") == {"suite/ops.py::Mm::tosa"}
    assert collected("models and linalg") == {"suite/ops.py::SinMarked::linalg"}


ROLES = ("options", "watchdog", "scheduling", "reporting", "collection")


def test_the_plugin_registers_its_roles_each_keeping_its_own_state(pytester):
    from e2e.hooks.reporting import RECORDER
    from e2e.hooks.scheduling import SHARDER
    from e2e.session import STATE

    config = pytester.parseconfigure("--shard", "2/3", "-p", "no:cacheprovider")
    assert all(config.pluginmanager.has_plugin(f"e2e.hooks.{role}") for role in ROLES)
    sharder, recorder = config.stash[SHARDER], config.stash[RECORDER]
    assert (sharder.spec.index, sharder.spec.count) == (2, 3) and sharder.summary is None
    assert config.pluginmanager.get_plugin("e2e-sharder") is sharder
    assert recorder.record is None and recorder.baseline is None  # not a suite run; no --baseline
    assert not hasattr(config.stash[STATE], "shard")


def test_pytest_imports_the_roles_itself_so_it_can_rewrite_them(pytester):
    """A role module imported before pytest registers it (from the top of `e2e.plugin`)
    misses assertion rewriting, and pytest warns on every run."""
    result = pytester.runpytest_subprocess("-p", "e2e.plugin", "-p", "no:cacheprovider", "--co", "-q")
    assert "cannot be rewritten" not in result.stdout.str() + result.stderr.str()
    assert "e2e.hooks" not in result.stdout.str() + result.stderr.str()


WARMING_REPORTER = """
from e2e.session import STATE


def pytest_collection_finish(session):
    print("warmed while probing:", session.config.stash[STATE].hosts.warming is not None)
"""


def test_a_collection_that_probes_several_files_warms_up_meanwhile_and_a_one_file_run_does_not(pytester):
    """`-k` over a suite probes every file (with no cache): the process warms up while it
    waits, so every host inherits it; a node id probes one file and starts its host at once."""
    suite = pytester.mkdir("my_suite")
    suite.joinpath("ops.py").write_text(SUITE)
    suite.joinpath("more_ops.py").write_text(SUITE.replace('"Tanh"', '"Tanh2"').replace('"Mm"', '"Mm2"'))
    pytester.makepyfile(warming_reporter=WARMING_REPORTER)
    common = ("-p", "warming_reporter", "-s", "--e2e-suite", "my_suite", "--config", "linalg")
    many = run(pytester, *common, "-k", "Tanh2")
    many.assert_outcomes(passed=1)
    many.stdout.fnmatch_lines(["warmed while probing: True"])
    one = run(pytester, *common, "my_suite/ops.py::Tanh::linalg")
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(["warmed while probing: False"])


SABOTAGE = """
from e2e.host_pool import HostPool

real = HostPool.run_pair


def run_pair(self, test, config, limits, **kwargs):
    if test.name == "Tanh" and config == "tosa":
        raise RuntimeError("sabotaged: a framework bug before the pair has a result")
    return real(self, test, config, limits, **kwargs)


HostPool.run_pair = run_pair
"""


def test_a_framework_error_before_a_result_is_a_failed_row_even_when_the_pair_is_listed(pytester):
    """A bug of the framework itself (here injected into the session) must not lose the
    pair's row, nor hide behind the pair's xfail entry."""
    pytester.mkdir("my_suite").joinpath("ops.py").write_text(SUITE)
    pytester.makeconftest(SABOTAGE)
    pytester.mkdir("xfails").joinpath("tosa.txt").write_text("Tanh  # listed: a framework error must still fail\n")
    result = run(pytester, "--e2e-suite", "my_suite", "--config", "linalg,tosa", "--xfail-dir", "xfails", "-k", "Tanh")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*internal error before the pair had a result*", "*RuntimeError: sabotaged*"])
    rows = {(r["test"], r["config"]): r for r in json.loads((pytester.path / "reports" / "results.json").read_text())}
    assert sorted(rows) == [("Tanh", "linalg"), ("Tanh", "tosa")]
    broken = rows["Tanh", "tosa"]
    assert (broken["final"], broken["outcome"], broken["stage"]) == ("failed", "error", "framework")
    assert broken["signature"] == "framework | pytest item"

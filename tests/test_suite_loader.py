"""The suite loader: a file's tests are the ones its own code registered, whoever imported
it, whether it was probed in a child or imported here; and the reducer's command line
loads any suite with it."""

import subprocess
import sys
import textwrap

import pytest

from e2e.framework import registry
from e2e.framework.isolation import Limits
from e2e.framework.suite_files import load_suite

SHARED = """
import torch
from e2e.framework import op_test

op_test("SharedTanh", torch.tanh, lambda tu: [tu.rand(2, 3)])
op_test("SharedNeg", torch.neg, lambda tu: [tu.rand(2, 3)])
"""

# Sorted first, so it is loaded before the file it imports (which registers its tests then).
IMPORTER = """
import pathlib, sys
import torch
from e2e.framework import op_test

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import {module} as shared  # a user's suite sharing cases between its files

op_test("OwnAbs", torch.abs, lambda tu: [tu.rand(2, 3)])
"""


@pytest.fixture
def suite(tmp_path, monkeypatch):
    """A suite of two files, one importing the other, on an empty registry."""
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    module = f"shared_{tmp_path.name}"  # unique: each test imports it afresh
    (tmp_path / "a_importer.py").write_text(IMPORTER.format(module=module))
    (tmp_path / f"{module}.py").write_text(SHARED)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    for name in [n for n in sys.modules if tmp_path.name in n or n.startswith("e2e_suite_")]:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def _by_name(loaded):
    return {path.name: file.tests for path, file in loaded.items()}


def _by_name_and_files(loaded):
    return {path.name: file for path, file in loaded.items()}


@pytest.mark.parametrize("isolate", [False, True], ids=["imported", "probed"])
def test_tests_are_attributed_to_the_file_that_registered_them(suite, isolate):
    loaded = load_suite([suite], Limits(120), isolate=isolate)
    shared = f"shared_{suite.name}.py"
    assert _by_name(loaded) == {"a_importer.py": ["OwnAbs"], shared: ["SharedTanh", "SharedNeg"]}
    assert sorted(registry.GLOBAL_TEST_REGISTRY) == ["OwnAbs", "SharedNeg", "SharedTanh"]
    assert all(f.broken is None for f in loaded.values())


def test_probing_alone_learns_the_same_attribution_and_registers_nothing(suite):
    loaded = load_suite([suite], Limits(120), register=False)
    assert _by_name(loaded) == {"a_importer.py": ["OwnAbs"], f"shared_{suite.name}.py": ["SharedTanh", "SharedNeg"]}
    assert registry.GLOBAL_TEST_REGISTRY == {}


def test_a_broken_file_is_its_own_result_and_the_others_load(suite):
    (suite / "b_broken.py").write_text("raise RuntimeError('this test file is broken')\n")
    (suite / "c_crash.py").write_text("import os\nos.abort()\n")
    loaded = _by_name_and_files(load_suite([suite], Limits(120)))
    assert loaded["a_importer.py"].tests == ["OwnAbs"]
    assert loaded["b_broken.py"].broken.signature.format().startswith("import | broken test file | RuntimeError")
    assert loaded["c_crash.py"].broken.stage == "import" and loaded["c_crash.py"].tests == []


def test_an_import_probe_past_its_budget_names_the_option_that_sets_it(suite):
    (suite / "slow.py").write_text("import time\ntime.sleep(30)\n")
    slow = load_suite([suite / "slow.py"], Limits(1))[(suite / "slow.py").resolve()]
    assert slow.broken is not None and "--import-timeout 1 s" in slow.broken.error


def test_the_reducer_reduces_a_test_of_an_out_of_tree_suite(tmp_path):
    suite = tmp_path / "my_e2e"
    suite.mkdir()
    (suite / "cases.py").write_text(
        textwrap.dedent("""
        import torch
        from e2e.framework import op_test
        op_test('Atan2', torch.atan2, lambda tu: [tu.rand(2, 3), tu.rand(2, 3)])  # TOSA has no atan2
        """)
    )
    command = [sys.executable, "-m", "e2e.reducer", "test", "Atan2", "--config", "tosa", "--reports-dir", "r"]
    unknown = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert unknown.returncode == 2 and "unknown test 'Atan2'" in unknown.stderr  # not in this checkout's suite
    reduced = subprocess.run(
        [*command, "--e2e-suite", "my_e2e", "--timeout", "60"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert reduced.returncode == 0, reduced.stdout + reduced.stderr
    assert "Atan2 on tosa: fail: backend | convert-torch-to-tosa" in reduced.stdout
    assert (tmp_path / "r" / "repro" / "Atan2" / "tosa" / "README.md").is_file()


PID_NAMED = """
import os
import torch
from e2e.framework import op_test

op_test("{name}_" + str(os.getpid()), torch.tanh, lambda tu: [tu.rand(2, 3)])
"""


def test_the_files_of_a_load_are_probed_in_one_child_and_a_crash_ends_only_its_own(tmp_path, monkeypatch):
    """One child probes file after file (what one imports, the next need not); a file that
    crashes it is its own result, and the next file gets a new child."""
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    for name in ("a", "b", "d"):
        (tmp_path / f"{name}.py").write_text(PID_NAMED.format(name=name.upper()))
    (tmp_path / "c.py").write_text("import os\nos.abort()\n")
    loaded = _by_name_and_files(load_suite([tmp_path], Limits(120), register=False))
    pid = {name: int(loaded[f"{name}.py"].tests[0].split("_")[1]) for name in ("a", "b", "d")}
    assert pid["a"] == pid["b"] != pid["d"]
    assert loaded["c.py"].broken is not None and "SIGABRT" in loaded["c.py"].broken.error
    assert registry.GLOBAL_TEST_REGISTRY == {}

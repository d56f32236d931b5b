"""Tests written in upstream torch-mlir's form run here unchanged (`torch_mlir_e2e_test`)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from compiler.compiled_module import compile_module
from e2e.configs import load_config
from e2e.framework import registry
from e2e.framework.compare import compare_traces
from e2e.framework.isolation import Limits
from e2e.framework.prepared import prepare
from e2e.framework.runner import run_pair
from e2e.framework.trace import TraceItem
from torch_mlir_e2e_test.registry import UPSTREAM_TIMEOUT_SECONDS, UPSTREAM_TOLERANCE

UPSTREAM_FORM = Path(__file__).parent / "upstream_form"


def load_suite(name: str) -> dict[str, registry.Test]:
    """Import one upstream-form file into the (patched, empty) registry."""
    spec = importlib.util.spec_from_file_location(f"upstream_form_{name}", UPSTREAM_FORM / f"{name}.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return registry.GLOBAL_TEST_REGISTRY


@pytest.fixture
def empty_registry(monkeypatch):
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})


def run(test: registry.Test, config: str, tmp_path: Path, shapes: str = "static"):
    prepared = prepare(test)
    prepared.shape_mode = shapes
    return run_pair(prepared, load_config(config), reports_dir=tmp_path, limits=Limits(120, None), isolate=False)


def test_upstream_arguments_are_honoured(empty_registry):
    tests = load_suite("basic_suite")
    basic, short = tests["AddmmModule_basic"], tests["AddmmModule_shortDeadline"]
    assert basic.timeout_seconds == UPSTREAM_TIMEOUT_SECONDS
    assert short.timeout_seconds == 15
    assert basic.tolerance == UPSTREAM_TOLERANCE
    assert basic.arg_shapes(basic.module_factory()) == [[-1, -1]] * 3
    assert basic.source.endswith("basic_suite.py:27")


def test_an_upstream_invoker_gets_the_inputs_upstreams_framework_draws(empty_registry, tmp_path):
    # Upstream's TestUtils seeds the global RNG with 0 and draws from it; an integer
    # remainder test is valid only for draws whose divisor has no zero, as upstream's has.
    test = load_suite("basic_suite")["RemainderIntModule_basic"]
    torch.manual_seed(0)
    upstream = [torch.randint(0, 10, (3, 4), dtype=torch.int32) for _ in range(2)]
    assert (upstream[1] != 0).all()
    (call,) = prepare(test).golden
    assert all(torch.equal(mine, theirs) for mine, theirs in zip(call.inputs, upstream, strict=True))
    assert run(test, "linalg", tmp_path).passed


def test_upstream_tolerance_is_for_floats_only():
    golden = [TraceItem("forward", [], (torch.tensor([1000.0]), torch.tensor([8_600_000_000])))]
    within_1e3 = [TraceItem("forward", [], (torch.tensor([1000.5]), torch.tensor([8_600_000_000])))]
    assert compare_traces(golden, within_1e3, UPSTREAM_TOLERANCE) is None
    assert compare_traces(golden, within_1e3) is not None  # the project's f32 table is tighter
    off_by_one = [TraceItem("forward", [], (torch.tensor([1000.0]), torch.tensor([8_600_000_001])))]
    mismatch = compare_traces(golden, off_by_one, UPSTREAM_TOLERANCE)
    assert mismatch is not None and mismatch.kind == "values" and "output[1]" in mismatch.where


def test_upstream_form_file_passes_on_linalg(empty_registry, tmp_path):
    tests = load_suite("basic_suite")
    for name in ("AddmmModule_basic", "RandLikeMeanModule_basic"):
        result = run(tests[name], "linalg", tmp_path)
        assert result.passed, f"{name}: {result.error}"


def test_the_global_rng_is_seeded_per_test():
    from e2e.framework.testutils import TestUtils

    TestUtils(seed=7)
    first = torch.rand(3)
    TestUtils(seed=7)
    assert torch.equal(first, torch.rand(3))


@pytest.mark.parametrize("config", ["linalg", "tosa", "stablehlo"])
@pytest.mark.parametrize("name", ["AddInPlaceModule_basic", "ArangeOutModule_basic"])
def test_mutated_inputs_compare_the_return_value(empty_registry, tmp_path, config, name):
    result = run(load_suite("compiler_suite")[name], config, tmp_path)
    assert result.passed, result.error
    assert any("updated in place and not compared" in note for note in result.notes)


def test_scalar_results_and_data_dependent_values_on_linalg(empty_registry, tmp_path):
    result = run(load_suite("compiler_suite")["ScalarResultsModule_basic"], "linalg", tmp_path)
    assert result.passed, result.error
    assert any("exported with strict torch.export" in note for note in result.notes), result.notes


def test_adaptive_max_pool2d_stays_whole_for_linalg(empty_registry, tmp_path):
    test = load_suite("compiler_suite")["AdaptiveMaxPool2dModule_basic"]
    result = run(test, "linalg", tmp_path)
    assert result.passed, result.error
    x = torch.rand(1, 4, 10, 9)
    compiled = compile_module(test.module_factory(), [x], "linalg")
    assert "torch.aten.adaptive_max_pool2d" in compiled.snapshots.texts["backend"]
    torch.testing.assert_close(compiled(x), test.module_factory()(x))


def test_the_global_rng_is_independent_of_the_inputs():
    from e2e.framework.testutils import TestUtils

    x = TestUtils(seed=5).rand(256, 256)
    kept = torch.dropout(x, 0.3, train=True) != 0
    assert abs(x[kept].mean().item() - 0.5) < 0.01  # the mask does not pick the small inputs


def test_upstreams_own_checkout_layout_runs_under_xdist(tmp_path):
    """A suite at `<root>/torch_mlir_e2e_test/test_suite`, as in an upstream checkout, beside
    upstream's own framework (which needs packages not installed here): under xdist each
    file is imported when its first test runs, and must still get this project's
    `torch_mlir_e2e_test`, not the checkout's."""
    package = tmp_path / "checkout" / "torch_mlir_e2e_test"
    (package / "test_suite").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for module in ("framework", "registry", "annotations"):
        (package / f"{module}.py").write_text("import a_package_upstream_needs_and_this_machine_lacks\n")
    (package / "test_suite" / "__init__.py").write_text("")
    (package / "test_suite" / "basic.py").write_text((UPSTREAM_FORM / "basic_suite.py").read_text())
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--e2e-suite", str(package / "test_suite")]
    command += ["--config", "linalg", "--shapes", "static", "-n", "2", "--no-reduce", "-k", "Addmm", "-q"]
    command += ["--reports-dir", str(tmp_path / "reports")]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]

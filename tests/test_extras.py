"""A test that needs an optional extra is skipped without it, naming it (`tests/extras.py`),
and a Python without the extras makes a test that forgot to say so fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.extras import EXTRAS, TOSA_REF, requires_extra, without_extras_env

ROOT = Path(__file__).resolve().parents[1]

PROBE = """import importlib.util, json
from compiler.executors.tosa_ref import TosaReferenceModel
from tests.extras import missing_extra
try:
    import iree.runtime
    iree = "imported"
except ModuleNotFoundError as error:
    iree = str(error)
print(json.dumps({
    "jax": importlib.util.find_spec("jax") is None, "iree": iree, "numpy": importlib.util.find_spec("numpy") is None,
    "reason": missing_extra("runtimes", "jax"), "tosa": TosaReferenceModel().missing() is None,
}))
"""


def test_without_an_extra_its_packages_and_binaries_are_not_found_and_the_rest_is(tmp_path):
    env = without_extras_env(tmp_path / "shim", "runtimes", TOSA_REF)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == (
        '{"jax": true, "iree": "No module named \'iree\'", "numpy": false, '
        '"reason": "needs the runtimes extra (jax not installed): pip install -e \\".[runtimes]\\"", "tosa": false}'
    )


def test_under_the_shim_a_marked_test_is_skipped_naming_its_extra_and_an_unmarked_one_fails(tmp_path):
    (tmp_path / "test_needs_onnx.py").write_text(
        "from tests.extras import requires_extra\n\n\n"
        '@requires_extra("onnx", "onnx")\ndef test_marked():\n    import onnx  # noqa: F401\n\n\n'
        "def test_unmarked():\n    import onnx  # noqa: F401\n"
    )
    command = [sys.executable, "-m", "tests.extras", "--without", "onnx", str(tmp_path / "test_needs_onnx.py")]
    flags = ["-q", "-rs", "-p", "no:cacheprovider", "-p", "no:e2e.plugin", "--rootdir", str(tmp_path)]
    done = subprocess.run([*command, *flags], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert 'needs the onnx extra (onnx not installed): pip install -e ".[onnx]"' in done.stdout
    assert "ModuleNotFoundError: No module named 'onnx'" in done.stdout  # test_unmarked
    assert done.stdout.rstrip().splitlines()[-1].startswith("1 failed, 1 skipped")


@requires_extra("onnx", "onnx")  # the run "with the extras" has them only where this test does
def test_the_tests_skipped_for_a_missing_extra_then_run_with_the_extras(tmp_path):
    """`--then-with-extras`: the README's command without the extras, then only what it
    skipped for one, with them (the options kept, the path replaced by those tests)."""
    (tmp_path / "test_some_need_onnx.py").write_text(
        "from tests.extras import requires_extra\n\n\n"
        '@requires_extra("onnx", "onnx")\ndef test_marked():\n    import onnx  # noqa: F401\n\n\n'
        "def test_plain():\n    pass\n"
    )
    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:e2e.plugin", "--rootdir", str(tmp_path)]
    command = [sys.executable, "-m", "tests.extras", "--without", "onnx", "--then-with-extras", "--"]
    readme = ["python", "-m", "pytest", str(tmp_path / "test_some_need_onnx.py"), *flags]
    done = subprocess.run([*command, *readme], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    first, second = [line for line in done.stdout.splitlines() if " in " in line and ("passed" in line)]
    assert first.startswith("1 passed, 1 skipped") and second.startswith("1 passed")
    assert "the 1 tests skipped for a missing extra, with the extras" in done.stderr


def test_the_extras_are_pyprojects_optional_dependencies():
    import tomllib

    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) == set(optional) - {"dev"}

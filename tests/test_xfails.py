"""Expected-failure sets: validation, groups, signature checks, the updater, and the
plugin reporting a listed test that fails differently."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from e2e.configs.update_xfails import check, own_code, update
from e2e.configs.xfails import XfailError, load_xfails
from e2e.framework.signature import Signature


def write(tmp_path, text, name="linalg.txt"):
    (tmp_path / name).write_text(text)
    return tmp_path


def test_xfail_sets_are_validated(tmp_path):
    known = {"A_basic", "B_basic"}
    ok = write(tmp_path, "# comment\nA_basic  # needs op X\nB_basic  # needs op Y\n")
    entries = load_xfails("linalg", known, ok)
    assert entries["B_basic"].reason == "needs op Y" and entries["B_basic"].line == 3
    for text, message in [
        ("A_basic\n", "has no reason"),
        ("B_basic  # y\nA_basic  # x\n", "out of order"),
        ("A_basic  # x\nA_basic  # x\n", "listed twice"),
        ("Gone_basic  # x\n", "unknown test 'Gone_basic'"),
        ("[fail: backend | p | x]\nB_basic\nA_basic\n", "out of order"),
    ]:
        with pytest.raises(XfailError, match=message):
            load_xfails("linalg", known, write(tmp_path, text))


def test_a_group_gives_its_reason_to_its_names_and_notes_stay_beside_them(tmp_path):
    text = "C  # crash: crash | lower | boom\n[fail: lower | one-shot-bufferize | loc: op was not bufferized]\nA\nB  # see #42\n"
    entries = load_xfails("linalg", None, write(tmp_path, text))
    assert entries["A"].reason == entries["B"].reason == "fail: lower | one-shot-bufferize | loc: op was not bufferized"
    assert entries["B"].note == "see #42" and entries["C"].expected == ("crash", Signature("crash", "lower", "boom"))


def test_an_entry_checks_outcome_stage_and_pass_but_not_the_message(tmp_path):
    entry = load_xfails("linalg", None, write(tmp_path, "A  # fail: backend | convert-torch-to-tosa | loc: x\n"))["A"]
    assert not entry.differs_from("fail", Signature.parse("backend | convert-torch-to-tosa | loc: another message"))
    assert entry.differs_from("fail", Signature.parse("compare | values"))  # a lowering error became a miscompile
    assert entry.differs_from("crash", Signature.parse("crash | backend | Segmentation fault"))
    hand_written = load_xfails("linalg", None, write(tmp_path, "A  # waiting for upstream #123\n"))["A"]
    assert not hand_written.differs_from("fail", Signature.parse("compare | values"))
    nan = load_xfails("linalg", None, write(tmp_path, "A  # fail: compare | nan\n"))["A"]
    assert nan.differs_from(
        "fail", Signature.parse("compare | values")
    )  # NaN handling right, numbers wrong: another bug


def test_update_xfails_adds_failures_drops_passes_and_keeps_hand_written_reasons(tmp_path):
    write(tmp_path, "A_basic  # hand-written reason\nB_basic  # fixed since\n")
    rows = [
        {"test": "A_basic", "config": "linalg", "outcome": "fail", "signature": "backend | p | x"},
        {"test": "B_basic", "config": "linalg", "outcome": "pass", "signature": None},
        {"test": "C_basic", "config": "linalg", "outcome": "crash", "signature": "crash | lower | boom"},
        {
            "test": "D_basic",
            "config": "linalg",
            "outcome": "error",
            "stage": "golden",
            "signature": "golden | broken test | invoker",
        },
        *({"test": f"G{i}", "config": "linalg", "outcome": "fail", "signature": "lower | p | same"} for i in range(3)),
        {
            "test": "S_basic",
            "config": "linalg",
            "outcome": "fail",
            "signature": "compare | values",
            "shape_mode": "static",
        },
    ]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(rows))
    assert update(results, tmp_path) == {tmp_path / "linalg.txt": (4, 1), tmp_path / "linalg.static.txt": (1, 0)}
    assert (tmp_path / "linalg.txt").read_text() == (
        "A_basic  # hand-written reason\nC_basic  # crash: crash | lower | boom\n"
        "G0  # fail: lower | p | same\nG1  # fail: lower | p | same\nG2  # fail: lower | p | same\n"
    )
    assert (tmp_path / "linalg.static.txt").read_text() == "S_basic  # fail: compare | values\n"


def test_an_entry_marked_with_platforms_holds_only_there(tmp_path):
    write(
        tmp_path, "A_basic @avx512  # fail: compare | nan\nA_basic @default  # fail: compare | values\nB_basic  # x\n"
    )
    on_avx512 = load_xfails("linalg", None, tmp_path, platform="avx512")
    on_avx2 = load_xfails("linalg", None, tmp_path, platform="avx2")
    assert on_avx512["A_basic"].reason == "fail: compare | nan" and on_avx512["A_basic"].label == "A_basic @avx512"
    assert load_xfails("linalg", None, tmp_path, platform="default")["A_basic"].reason == "fail: compare | values"
    assert set(on_avx2) == {"B_basic"}  # expected to pass on AVX2
    for text, message in [
        ("A_basic @avx512  # x\nA_basic  # y\n", "listed twice"),
        ("A_basic @avx512,avx2  # x\nA_basic @avx2  # y\n", "listed twice"),
        ("A_basic @avx-512  # x\n", "unknown platform 'avx-512'"),
        ("A_basic avx512  # x\n", "unexpected 'avx512'"),
    ]:
        with pytest.raises(XfailError, match=message):
            load_xfails("linalg", None, write(tmp_path, text), platform="avx2")


def test_update_xfails_judges_only_the_platform_the_results_come_from(tmp_path):
    write(
        tmp_path,
        "A_basic @avx512  # fail: compare | nan\nB_basic  # fail: compare | nan\nC_basic @avx2,avx512  # fail: lower | p | x\n",
    )
    rows = [
        {"test": "A_basic", "config": "linalg", "outcome": "pass", "signature": None},  # holds on avx512 only: kept
        {"test": "B_basic", "config": "linalg", "outcome": "pass", "signature": None},  # everywhere: gone
        {"test": "C_basic", "config": "linalg", "outcome": "pass", "signature": None},  # avx2 dropped
        {"test": "D_basic", "config": "linalg", "outcome": "fail", "signature": "compare | values"},
    ]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(rows))
    (tmp_path / "run.json").write_text(json.dumps({"platform": "avx2"}))
    update(results, tmp_path)
    assert (tmp_path / "linalg.txt").read_text() == (
        "A_basic @avx512  # fail: compare | nan\nC_basic @avx512  # fail: lower | p | x\nD_basic  # fail: compare | values\n"
    )
    # The same failure on another platform widens the entry rather than adding one.
    results.write_text(
        json.dumps([{"test": "A_basic", "config": "linalg", "outcome": "fail", "signature": "compare | nan"}])
    )
    update(results, tmp_path, platform="default")
    assert load_xfails("linalg", None, tmp_path, platform="default")["A_basic"].label == "A_basic @avx512,default"


CONFIGS = '''
import torch
from compiler.stages import StageError
from e2e.configs import load_config

class Broken:
    """linalg, except that `Tanh` fails to lower (as`mode="error"`) or is miscompiled."""
    def __init__(self, mode):
        self.name, self.mode, self.linalg = "broken", mode, load_config("linalg")
    def compile(self, prepared, snapshots):
        if self.mode == "hang":
            snapshots.enter("backend")
            __import__("ctypes").CDLL(None).sleep(600)
        if self.mode == "error":
            snapshots.enter("backend")
            raise StageError("backend", "failed to legalize operation 'torch.aten.tanh'", failing_pass="convert-torch-to-linalg")
        return self.linalg.compile(prepared, snapshots)
    def run(self, artifact, golden):
        trace = self.linalg.run(artifact, golden)
        if self.mode == "miscompile":
            trace[0].outputs = trace[0].outputs + 1
        return trace

ERROR = Broken("error")
WORKS = Broken("works")
MISCOMPILE = Broken("miscompile")
HANG = Broken("hang")
'''


def run_broken(tmp_path, xfail_line: str):
    """A runner of the suite `Tanh` on a config of CONFIGS, with `xfail_line` as its set."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "tanh.py").write_text(
        "import torch\nfrom e2e.framework import op_test\nop_test('Tanh', torch.tanh, lambda tu: [tu.rand(2, 3)])\n"
    )
    (tmp_path / "my_configs.py").write_text(textwrap.dedent(CONFIGS))
    (tmp_path / "xfail").mkdir()
    (tmp_path / "xfail" / "broken.txt").write_text(xfail_line + "\n")

    def run(config, *extra):
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "e2e.plugin",
            "-p",
            "no:cacheprovider",
            "--e2e-suite",
            str(tmp_path / "suite"),
            "--config",
            f"my_configs:{config}",
            "--xfail-dir",
            str(tmp_path / "xfail"),
            "--no-reduce",
            "--reports-dir",
            str(tmp_path / "reports"),
            "-q",
            *extra,
        ]
        return subprocess.run(
            command,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)},
        )

    return run


def test_a_listed_backend_failure_that_becomes_a_miscompile_fails_differently(tmp_path):
    run = run_broken(tmp_path, "Tanh  # fail: backend | convert-torch-to-linalg | loc: x")
    as_listed = run("ERROR")
    assert as_listed.returncode == 0 and "1 xfailed" in as_listed.stdout, as_listed.stdout + as_listed.stderr
    differently = run("MISCOMPILE")
    assert differently.returncode == 1 and "1 failed" in differently.stdout, differently.stdout + differently.stderr
    assert "fails differently than its xfail entry says" in differently.stdout
    assert "expected: fail: backend | convert-torch-to-linalg" in differently.stdout
    assert "now:      fail: compare | values" in differently.stdout


def test_a_pair_listed_as_a_timeout_gets_the_short_budget_not_the_whole_one_again(tmp_path):
    from e2e.configs.xfails import EXPECTED_HANG_SECONDS

    run = run_broken(tmp_path, "Tanh  # timeout: timeout | backend")
    hung = run("HANG", "--timeout", "250")
    assert hung.returncode == 0 and "1 xfailed" in hung.stdout, hung.stdout + hung.stderr
    (row,) = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert row["outcome"] == "timeout" and row["stage"] == "backend"
    # The short budget, not the 250 s one (said by the result, not timed here).
    assert f"no result after {EXPECTED_HANG_SECONDS:.0f} s" in row["error"]


def test_a_flaky_entry_accepts_a_pass_and_a_failure_and_the_updater_keeps_it(tmp_path):
    """A miscompile reading garbage passes on some runs: `flaky:` makes its xfail non-strict;
    any other entry still fails the run when its test passes."""
    run = run_broken(tmp_path, "Tanh  # flaky: reads outside its input; the garbage is sometimes right")
    for config, shown in (("MISCOMPILE", "1 xfailed"), ("WORKS", "1 xpassed")):
        done = run(config)
        assert done.returncode == 0 and shown in done.stdout, done.stdout + done.stderr
    results = tmp_path / "reports" / "results.json"
    update(results, tmp_path / "xfail")
    assert "flaky: reads outside" in (tmp_path / "xfail" / "broken.txt").read_text()
    (tmp_path / "xfail" / "broken.txt").write_text("Tanh  # a hand-written reason\n")
    strict = run("WORKS")
    assert strict.returncode == 1 and "1 failed" in strict.stdout, strict.stdout + strict.stderr


def test_an_entry_without_a_signature_bounds_its_pairs_budget():
    """Undefined behaviour that ends another way each run may also deadlock a corrupted
    allocator: its pair gets RUN_TO_RUN_SECONDS, not the whole budget; a recorded failure
    other than a timeout keeps the whole budget."""
    from e2e.configs.xfails import EXPECTED_HANG_SECONDS, RUN_TO_RUN_SECONDS, XfailEntry

    def entry(reason):
        return XfailEntry("T", reason, Path("linalg.txt"), 1)

    assert entry("writes out of bounds: a crash or wrong values, from run to run").budget(300) == RUN_TO_RUN_SECONDS
    assert entry("flaky: reads outside its input").budget(300) == RUN_TO_RUN_SECONDS
    assert entry("timeout: timeout | backend").budget(300) == EXPECTED_HANG_SECONDS
    assert entry("crash: crash | execute | Fatal Python error: Aborted").budget(300) == 300
    assert entry("writes out of bounds, from run to run").budget(20) == 20


FRONTEND_TRACEBACK = """capture | - | lazy tensor trace: RuntimeError: unknown type specifier
Traceback (most recent call last):
  File "/src/project/compiler/frontends/lazy.py", line 40, in capture
    return _capture(module, example_inputs, method)
  File "/src/project/compiler/frontends/lazy.py", line 82, in _capture
    graph = torch._C.parse_ir(graph_text, parse_tensor_constants=True)
RuntimeError: unknown type specifier"""
TORCH_TRACEBACK = FRONTEND_TRACEBACK.replace(
    "line 82, in _capture", 'line 82, in _capture\n  File "/venv/site-packages/torch/export/a.py", line 9, in f'
)


def test_a_failure_raised_in_this_projects_code_is_refused_and_check_lists_it(tmp_path, capsys):
    signature = Signature("capture", "-", "lazy tensor trace: RuntimeError: unknown type specifier")
    assert own_code(signature, FRONTEND_TRACEBACK) == "raised in this project's compiler/frontends/lazy.py:82"
    assert own_code(signature, TORCH_TRACEBACK) is None  # raised in torch, called by the frontend
    test_body = FRONTEND_TRACEBACK.replace("compiler/frontends/lazy.py", "e2e/test_suite/matmul.py")
    assert own_code(signature, test_body) is None  # a test's own body: the op it calls raised
    sample_call = FRONTEND_TRACEBACK.replace("compiler/frontends/lazy.py", "e2e/opinfo/collect.py")
    assert own_code(signature, sample_call) is None  # an OpInfo sample's call is its test's body
    assert own_code(Signature.parse("lower | python:e2e.reducer.x:p | KeyError: 1")) is not None
    assert (
        own_code(Signature.parse("lower | python:compiler.executors.replay:iree_torch | iree-compile: error")) is None
    )
    write(tmp_path, "Old_basic  # fail: capture | - | an older signature\nPass_basic  # fail: execute | - | x\n")
    rows = [
        {
            "test": "Old_basic",
            "config": "linalg",
            "outcome": "fail",
            "signature": signature.format(),
            "error": FRONTEND_TRACEBACK,
        },
        {
            "test": "New_basic",
            "config": "linalg",
            "outcome": "fail",
            "signature": signature.format(),
            "error": FRONTEND_TRACEBACK,
        },
        {
            "test": "Torch_basic",
            "config": "linalg",
            "outcome": "fail",
            "signature": signature.format(),
            "error": TORCH_TRACEBACK,
        },
        {"test": "Pass_basic", "config": "linalg", "outcome": "pass", "signature": None},
    ]
    results = tmp_path / "results.json"
    results.write_text(json.dumps(rows))
    assert check(results, tmp_path) == [
        "Old_basic on linalg (fail): raised in this project's compiler/frontends/lazy.py:82",
        "New_basic on linalg (fail): raised in this project's compiler/frontends/lazy.py:82",
    ]
    assert (tmp_path / "linalg.txt").read_text().count("\n") == 2  # check writes nothing
    update(results, tmp_path)
    assert (
        "refused: New_basic on linalg: raised in this project's compiler/frontends/lazy.py:82"
        in capsys.readouterr().err
    )
    assert (tmp_path / "linalg.txt").read_text() == (
        "Old_basic  # fail: capture | - | an older signature\n"  # left as it was, not brought up to date
        f"Torch_basic  # fail: {signature}\n"
    )


def test_a_stage_error_raised_while_handling_an_exception_keeps_its_frames_across_the_fork():
    import pickle

    from compiler.stages import StageError

    try:
        try:
            {}["missing"]
        except KeyError as cause:
            raise StageError("capture", "a frontend's KeyError") from cause
    except StageError as error:
        carried = pickle.loads(pickle.dumps(error))
    text = "\n".join(carried.diagnostics)
    assert carried.diagnostics[0] == "a frontend's KeyError" and "KeyError: 'missing'" in text
    assert own_code(Signature.parse("capture | - | x"), text) is None  # raised here, in tests/
    assert (
        own_code(Signature.parse("capture | - | x"), text.replace("tests/test_xfails.py", "e2e/framework/x.py"))
        is not None
    )
    assert StageError("lower", "no exception handled").diagnostics == []

"""What a run of one test or one pair does not pay for: the one-test loop
(docs/running.md, "The one-test loop")."""

import gc
import os
import sys
import threading
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from e2e import host_pool
from e2e.collect import KeywordPrefilter
from e2e.framework import isolation
from e2e.framework.suite_files import TestInfo

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _warm_up_imports_outlive_pytester():
    """The warm-up below imports torch._dynamo (and through it op libraries that register
    once per process) in this process. Imported before `pytester` snapshots sys.modules,
    they survive its restore; imported after, they would be removed with it and the next
    capture would import them again ("Only a single TORCH_LIBRARY can be used to register
    the namespace _inductor_test"), failing a later test of this worker."""
    from compiler.frontends.fx import warm_up_capture_imports

    warm_up_capture_imports()


class _Counting:
    """An expression that counts its evaluations."""

    def __init__(self, text: str):
        self.expression = Expression.compile(text)
        self.evaluations = 0

    def evaluate(self, matcher) -> bool:
        self.evaluations += 1
        return self.expression.evaluate(matcher)


def test_k_is_evaluated_once_per_distinct_answer_of_its_identifiers_not_per_item():
    """Which tests `-k` keeps is pytest's answer (tests/test_plugin.py checks it against
    pytest alone); its cost is one evaluation per distinct answer, not 24 per test."""
    prefilter = KeywordPrefilter(Expression.compile("Mm and not tosa"))
    counting = prefilter.expression = _Counting("Mm and not tosa")
    tests = [TestInfo(f"Tanh{i}") for i in range(200)] + [TestInfo("MmModule", marks=("models",))]
    chosen = [t.name for t in tests if prefilter.may_select(("suite", "ops.py"), t, ["linalg", "tosa"])]
    assert chosen == ["MmModule"]
    assert counting.evaluations <= 4  # (Mm?, tosa?): at most four answers
    assert KeywordPrefilter(Expression.compile("ops and linalg")).may_select(("suite", "ops.py"), tests[0], ["linalg"])


SUITE = "import torch\nfrom e2e.framework import op_test\nop_test('{name}', torch.tanh, lambda tu: [tu.rand(2, 3)])\n"


def test_a_collection_that_warms_up_while_probing_ends_the_spare_host(pytester):
    """One file probed: the spare host (forked at the plugin's registration) stays for the
    first test. A second file probed: collection warms this process up for every host it
    forks (the capture, then each config while probing goes on), and the spare, which
    would do the same work again, is ended."""
    from e2e.session import STATE

    suite = pytester.mkdir("suite")
    for name in ("first", "second"):
        suite.joinpath(f"{name}.py").write_text(SUITE.format(name=name.title()))
    config = pytester.parseconfigure("--e2e-suite", "suite", "--config", "linalg", "-p", "no:cacheprovider")
    state = config.stash[STATE]
    spare = state.hosts.spare
    host_pool.warm_up_config.cache_clear()
    try:
        assert spare is not None and spare.child.alive
        state.suite.suite_file(suite / "first.py")
        assert state.hosts.spare is spare
        state.suite.suite_file(suite / "second.py")
        assert state.hosts.spare is None and not spare.child.alive
        host_pool.join_warming()
        # Collection did not end meanwhile: the config's own warm-up (its backends' first
        # compiles) ran too, for every host forked from here.
        assert host_pool.warm_up_config.cache_info().misses == 1
    finally:
        host_pool.join_warming()
        state.suite.close_prober()
        state.hosts.close_spare()


def test_what_a_warm_up_thread_built_is_frozen_once_it_is_joined():
    """pytest collects garbage five times at its end: what the warm-up imported lives for
    the whole run, and is kept out of those collections' reach."""
    built = []
    thread = threading.Thread(target=lambda: built.append([[i] for i in range(5000)]))
    host_pool._WARMING.append(thread)
    thread.start()
    before = gc.get_freeze_count()
    host_pool.join_warming()
    assert gc.get_freeze_count() >= before + 5000
    assert not host_pool._WARMING


def test_a_child_imports_without_pytests_assertion_rewriting():
    """A probe or host imports suite files and libraries, not pytest test modules."""
    rewriting = [type(f).__module__ for f in sys.meta_path if type(f).__module__ == "_pytest.assertion.rewrite"]
    if not rewriting:
        pytest.skip("this pytest process does not rewrite assertions (--assert=plain)")
    in_child = isolation.run_forked(lambda: [type(f).__module__ for f in sys.meta_path], timeout=60)
    assert isinstance(in_child, list) and "_pytest.assertion.rewrite" not in in_child


TEARDOWN_WITNESS = """
import atexit
from pathlib import Path


class _Witness:
    def __del__(self, write=Path.write_text, where=Path("teardown.txt").resolve()):
        write(where, "ran")  # at the interpreter's teardown


WITNESS = _Witness()
atexit.register(Path.write_text, Path("atexit.txt").resolve(), "ran")
"""


def test_a_suite_run_ends_with_its_exit_status_without_the_interpreters_teardown(pytester, monkeypatch):
    """A suite run that is the process's command ends at exit with pytest's status (5 here:
    nothing selected), after the `atexit` handlers, without freeing the modules' objects;
    a pytest run that is not a suite run ends as usual."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    pytester.mkdir("suite").joinpath("ops.py").write_text(SUITE.format(name="Tanh"))
    pytester.makeconftest(TEARDOWN_WITNESS)
    common = ("-p", "e2e.plugin", "-p", "no:cacheprovider", "--config", "linalg")
    result = pytester.runpytest_subprocess(*common, "--e2e-suite", "suite", "-k", "Nothing", timeout=300)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*no tests ran*"])
    assert (pytester.path / "atexit.txt").read_text() == "ran"
    assert not (pytester.path / "teardown.txt").exists()

    (pytester.path / "atexit.txt").unlink()
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    plain = pytester.runpytest_subprocess(*common, "test_plain.py", timeout=300)
    assert plain.ret == pytest.ExitCode.OK
    assert (pytester.path / "atexit.txt").read_text() == "ran"
    assert (pytester.path / "teardown.txt").read_text() == "ran"


def test_e2e_spare_host_0_runs_without_a_spare_host(pytester, monkeypatch):
    """The switch that measures what the spare saves on a machine: no spare is forked."""
    from e2e.host_pool import SPARE_ENV
    from e2e.session import STATE

    pytester.mkdir("suite").joinpath("ops.py").write_text(SUITE.format(name="Tanh"))
    monkeypatch.setenv(SPARE_ENV, "0")
    config = pytester.parseconfigure("--e2e-suite", "suite", "--config", "linalg", "-p", "no:cacheprovider")
    assert config.stash[STATE].hosts.spare is None


def test_a_suite_file_is_imported_here_only_once_the_warm_up_thread_ended(pytester):
    """The first pair of a test imports its file in this process: never while the warm-up
    thread exports (torch.fx's node metadata is a module global both would use)."""
    from e2e.session import STATE

    pytester.syspathinsert()
    pytester.makepyfile(e2e_import_order="events = []")
    import e2e_import_order

    suite = pytester.mkdir("suite")
    # The file says when its import starts (the probe's import, in a child, says it there).
    order = "import e2e_import_order\ne2e_import_order.events.append('imported')\n"
    suite.joinpath("first.py").write_text(order + SUITE.format(name="First"))
    config = pytester.parseconfigure("--e2e-suite", "suite", "--config", "linalg", "-p", "no:cacheprovider")
    state = config.stash[STATE]
    name = next(iter(state.suite.suite_file(suite / "first.py").infos))  # probed: no fork is left to join it
    release = threading.Event()
    warming = threading.Thread(target=lambda: (release.wait(5), e2e_import_order.events.append("warmed up")))
    host_pool._WARMING.append(warming)
    warming.start()
    threading.Timer(0.5, release.set).start()
    try:
        state.suite.test(suite / "first.py", name)
        assert e2e_import_order.events == ["warmed up", "imported"], "the file was imported beside the warm-up"
    finally:
        release.set()
        host_pool.join_warming()
        state.suite.close_prober()
        state.hosts.close_spare()

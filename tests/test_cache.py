"""The result cache's key: a pair reruns when anything its result depends on is edited,
and only then. Every edit is made to a copy in a temporary project (`PROJECT` of the
fingerprints and the dependencies points there), never to the project's own files; nothing is compiled."""

import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch

from compiler.stages import Snapshots
from e2e.framework import cache, fingerprints, registry
from e2e.framework import dependencies as deps
from e2e.framework.result import PASS, TIMEOUT, Result
from e2e.framework.stores import JsonStore
from e2e.framework.suite_files import ProbeCache, TestInfo, load_suite
from e2e.mutation import run as mutation_run

REAL_PROJECT = fingerprints.PROJECT

# A suite file that registers its test through a helper (as zoo_vision.py does through
# zoo_common.py): the invoker is defined in the helper, which imports a second helper.
FILES = {
    "suite/zoo_like.py": "from helpers.registering import register_neg\n\nregister_neg('Tmp_Neg')\n",
    "suite/unrelated.py": "from e2e.framework import op_test\n",
    "helpers/__init__.py": "",
    "helpers/registering.py": (
        "import torch\n\n"
        "from e2e.framework import op_test\n\n"
        "from .shapes import SHAPE\n\n\n"
        "def register_neg(name):\n"
        "    op_test(name, torch.neg, lambda tu: [tu.rand(*SHAPE)])\n"
    ),
    "helpers/shapes.py": "SHAPE = (2, 3)\n",
    "e2e/mutation/catalogue.py": "MUTATIONS = []\n",
}
# Copies of the project's own files the key must cover though no suite file imports them.
COPIED = (
    "torch_mlir_e2e_test/registry.py",
    "e2e/properties/strategies.py",
    "e2e/opinfo/collect.py",
    "e2e/onnx_backend/cases.py",
)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A temporary project with `FILES` and `COPIED`, `suite/zoo_like.py` loaded (its test
    registered in an empty registry), and every file digest forgotten before and after."""
    root = tmp_path / "project"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name in COPIED:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REAL_PROJECT / name, root / name)
    monkeypatch.setattr(fingerprints, "PROJECT", root)
    monkeypatch.setattr(deps, "PROJECT", root)
    # torch's OpInfo database, where the toolchain looks for it (`torch.__file__`'s directory)
    database = root / "torch" / "testing" / "_internal" / "common_methods_invocations.py"
    database.parent.mkdir(parents=True)
    database.write_text("op_db = []\n")
    monkeypatch.setattr(torch, "__file__", str(root / "torch" / "__init__.py"))
    tests: dict = {}
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", tests)
    monkeypatch.setattr(mutation_run, "GLOBAL_TEST_REGISTRY", tests)
    monkeypatch.syspath_prepend(str(root))
    modules = set(sys.modules)
    cache.forget_files()
    loaded = load_suite([root / "suite" / "zoo_like.py"], isolate=False)
    assert [f.tests for f in loaded.values()] == [["Tmp_Neg"]]
    yield root
    for name in set(sys.modules) - modules:
        if name.split(".")[0] not in ("torch", "torch_mlir"):  # a library's op registrations happen once
            del sys.modules[name]
    cache.forget_files()


def _key() -> str:
    cache.forget_files()  # a new run: every file read again
    return cache.pair_key(registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"], "linalg", "annotated", 300.0)


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited\n")


def test_the_registry_records_the_registering_file_and_the_helper_as_source(project):
    test = registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"]
    assert test.origin == str(project / "suite" / "zoo_like.py")
    assert Path(test.defined_in) == project / "helpers" / "registering.py"
    assert set(deps.test_dependencies(test)) == {
        project / "suite" / "zoo_like.py",
        project / "helpers" / "__init__.py",
        project / "helpers" / "registering.py",
        project / "helpers" / "shapes.py",
    }


@pytest.mark.parametrize(
    "edited",
    [
        "suite/zoo_like.py",  # the file that registered the test
        "helpers/registering.py",  # the test's source, imported by it
        "helpers/shapes.py",  # two imports away
        "torch_mlir_e2e_test/registry.py",  # the upstream compat layer
        "e2e/properties/strategies.py",  # the property families' data
        "e2e/opinfo/collect.py",  # OpInfo cases' making
        "e2e/onnx_backend/cases.py",  # ONNX backend cases' making
        "torch/testing/_internal/common_methods_invocations.py",  # torch's OpInfo database
    ],
)
def test_an_edit_to_what_the_result_depends_on_changes_the_key(project, edited):
    before = _key()
    assert _key() == before  # read again, unedited: the same key
    _edit(project / edited)
    assert _key() != before


def test_an_edit_to_another_suite_file_keeps_the_key(project):
    before = _key()
    _edit(project / "suite" / "unrelated.py")
    _edit(project / "e2e" / "mutation" / "catalogue.py")  # mutation testing's, not a pair's
    assert _key() == before


def test_imports_are_followed_only_in_the_project_and_the_suite_directory(project, tmp_path):
    outside = tmp_path / "site-packages" / "lib"  # where a test's invoker may come from
    outside.mkdir(parents=True)
    (outside / "__init__.py").write_text("")
    (outside / "invokers.py").write_text("from . import other\n")
    (outside / "other.py").write_text("")
    test = dataclasses.replace(registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"], defined_in=str(outside / "invokers.py"))
    dependencies = deps.test_dependencies(test)
    assert outside / "invokers.py" in dependencies  # the file that defines it counts
    assert outside / "other.py" not in dependencies  # what it imports there is not followed
    assert project / "helpers" / "shapes.py" in dependencies


def test_the_key_is_the_pairs(project):
    test = registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"]
    keys = {
        cache.pair_key(test, "linalg", "annotated", 300.0),
        cache.pair_key(test, "tosa", "annotated", 300.0),
        cache.pair_key(test, "linalg", "static", 300.0),
        cache.pair_key(test, "linalg", "annotated", 60.0),
    }
    assert len(keys) == 4


def test_the_mutation_record_key_is_built_like_a_pairs_with_the_mutation_sources(project):
    before = mutation_run._record_key("Tmp_Neg", "linalg", "annotated")
    assert before != _key()
    _edit(project / "e2e" / "mutation" / "catalogue.py")
    cache.forget_files()
    after_mutation_edit = mutation_run._record_key("Tmp_Neg", "linalg", "annotated")
    assert after_mutation_edit != before
    _edit(project / "helpers" / "shapes.py")
    cache.forget_files()
    assert mutation_run._record_key("Tmp_Neg", "linalg", "annotated") != after_mutation_edit


class PytestCache(dict):
    """The two methods of pytest's Cache that ProbeCache uses, over a dict."""

    def get(self, key, default):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value


def test_an_import_probe_is_forgotten_when_a_module_the_file_imports_changes(project):
    store = PytestCache()
    suite_file = project / "suite" / "zoo_like.py"
    ProbeCache(store).put(suite_file, [["Tmp_Neg", "torch", None, ["slow"]]])
    cache.forget_files()
    assert ProbeCache(store).get(suite_file) == [TestInfo("Tmp_Neg", "torch", None, ("slow",))]  # a later run
    _edit(project / "helpers" / "shapes.py")
    cache.forget_files()
    assert ProbeCache(store).get(suite_file) is None


def test_an_import_probe_outlives_a_torch_mlir_rebuild_but_not_a_result(project, monkeypatch):
    """A rebuild of torch-mlir (its identity salted, as `benchmarks/loop.py` stands for one)
    registers the same tests: the probe is kept; the pair's result is not."""
    store = PytestCache()
    suite_file = project / "suite" / "zoo_like.py"
    ProbeCache(store).put(suite_file, [["Tmp_Neg", "torch", None, []]])
    before = fingerprints.versions_fingerprint()
    monkeypatch.setenv(fingerprints.IDENTITY_SALT_ENV, "rebuilt")
    cache.forget_files()
    assert fingerprints.versions_fingerprint() != before
    assert ProbeCache(store).get(suite_file) == [TestInfo("Tmp_Neg", "torch", None, ())]


def test_a_probe_record_of_another_shape_is_probed_again(project):
    store = PytestCache()
    suite_file = project / "suite" / "zoo_like.py"
    ProbeCache(store).put(suite_file, ["Tmp_Neg"])  # what the loader wrote when a probe was names alone
    assert ProbeCache(store).get(suite_file) is None


# --- the project's own suites, read (not edited) ----------------------------------------


def test_a_zoo_test_depends_on_its_suite_file_and_helpers_not_on_other_suite_files():
    suite = REAL_PROJECT / "e2e" / "test_suite"
    test = registry.Test("ZooResNet_Static", lambda: None, lambda m, tu: None, defined_in=str(suite / "zoo_common.py"))
    test = dataclasses.replace(test, origin=str(suite / "zoo_vision.py"))
    dependencies = deps.test_dependencies(test)
    assert dependencies[:2] == [suite / "zoo_vision.py", suite / "zoo_common.py"]
    assert REAL_PROJECT / "e2e" / "framework" / "registry.py" in dependencies
    assert suite / "matmul.py" not in dependencies
    assert all(path.is_relative_to(REAL_PROJECT) for path in dependencies)  # never site-packages


def test_a_suite_test_does_not_depend_on_the_compiler_it_runs_through():
    # An edit to a lowering is the engineer's loop: it must keep every test's capture.
    suite = REAL_PROJECT / "e2e" / "test_suite"
    test = registry.Test("MmModule_basic", lambda: None, lambda m, tu: None, defined_in=str(suite / "matmul.py"))
    test = dataclasses.replace(test, origin=str(suite / "matmul.py"))
    dependencies = deps.test_dependencies(test)
    assert REAL_PROJECT / "e2e" / "framework" / "testutils.py" in dependencies
    assert [path for path in dependencies if path.is_relative_to(REAL_PROJECT / "compiler")] == []


def test_generated_cases_name_their_suite_file_or_none():
    opinfo_ci = REAL_PROJECT / "e2e" / "opinfo" / "ci" / "opinfo_ci.py"
    test = registry.Test("add_float32_0", lambda: None, lambda m, tu: None, source="op_db: add (float32 sample 0)")
    test = dataclasses.replace(test, origin=str(opinfo_ci))
    assert test.defined_in == ""  # an OpInfo case's code is the suite's own
    dependencies = deps.test_dependencies(test)
    assert dependencies[0] == opinfo_ci
    assert REAL_PROJECT / "e2e" / "opinfo" / "collect.py" in dependencies
    from e2e.onnx_backend.cases import OnnxCase
    from e2e.onnx_backend.register import register_cases

    onnx_suite = REAL_PROJECT / "e2e" / "onnx_backend" / "suite" / "onnx_backend.py"
    register_cases([OnnxCase("node/test_made_up", "node")], str(onnx_suite))
    try:  # an ONNX case is defined by its suite file, which reads the backend's cases
        assert registry.GLOBAL_TEST_REGISTRY["node/test_made_up"].defined_in == str(onnx_suite)
    finally:
        del registry.GLOBAL_TEST_REGISTRY["node/test_made_up"]


def test_the_opinfo_database_is_where_the_toolchain_looks_for_it():
    torch_root = Path(torch.__file__).resolve().parent
    assert (torch_root / "testing" / "_internal" / "common_methods_invocations.py").is_file()
    assert fingerprints.tree_digest(
        torch_root, ("testing/_internal/common_methods_invocations.py",)
    ) != fingerprints.tree_digest(torch_root, ("testing/_internal/no_such_file.py",))


# --- the store ------------------------------------------------------------------------


def test_the_json_store_round_trips_and_leaves_no_temporary_files(tmp_path):
    store = JsonStore(tmp_path / "store")
    assert store.get("k") is None
    store.put("k", {"a": 1})
    store.put("k", {"a": 2})
    assert store.get("k") == {"a": 2}
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["k.json"]
    (tmp_path / "store" / "bad.json").write_text("{not json")
    assert store.get("bad") is None
    disabled = JsonStore(None)
    disabled.put("k", {"a": 1})
    assert disabled.get("k") is None


def test_result_and_record_caches_share_the_store(tmp_path):
    results = cache.ResultCache(tmp_path / "results")
    results.put("pass", Result("T", "linalg", PASS))
    results.put("timeout", Result("T", "linalg", TIMEOUT))
    cached = results.get("pass")
    assert cached is not None and cached.cached and cached.outcome == PASS
    assert results.get("timeout") is None  # never cached: it depends on the machine's load

    records = mutation_run.RecordCache(tmp_path / "records")
    record = mutation_run.TestRecord("T", "file", "pass", {"m1": 1, "m2": 1}, {"m1": ["wrong-values", ""]})
    record.verdicts["m2"] = [mutation_run.TIMEOUT, "over 20 s"]
    records.put("key", record)
    assert JsonStore(tmp_path / "records").get("key")["verdicts"] == {"m1": ["wrong-values", ""]}
    kept = records.get("key")
    assert kept.verdicts == {"m1": ["wrong-values", ""]} and kept.sites == {"m1": 1}


# --- the frontend cache ------------------------------------------------------------------


def _frontend_files(project: Path, monkeypatch) -> None:
    """A capture source, an importer and a lowering in the temporary project; the capture's
    sources are the first, the frontend's the first two."""
    for name in ("compiler/frontends/fx.py", "compiler/frontends/jit.py", "compiler/pipelines.py"):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("# a stand-in\n")
    monkeypatch.setattr(fingerprints, "FRONTEND_SOURCES", ("compiler/frontends",))
    monkeypatch.setattr(fingerprints, "CAPTURE_SOURCES", ("compiler/frontends/fx.py",))


def test_a_capture_is_kept_by_test_shape_mode_and_what_was_captured(project, monkeypatch, tmp_path):
    _frontend_files(project, monkeypatch)
    test = registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"]
    store = cache.FrontendCache(tmp_path / "frontend")
    key = ("fx-import", "forward", None, ((-1, 3),))
    assert store.for_test(test, "annotated").get(key) is None
    store.for_test(test, "annotated").put(key, {"raw_ir": "module {}"})
    assert store.for_test(test, "annotated").get(key) == {"raw_ir": "module {}"}
    assert store.for_test(test, "static").get(key) is None
    assert store.for_test(test, "annotated").get(("fx-import", "forward", None, ((2, 3),))) is None
    assert cache.FrontendCache(None).for_test(test, "annotated") is None  # disabled: keeps nothing


@pytest.mark.parametrize("stage", [fingerprints.CAPTURE, fingerprints.IMPORT])
def test_an_edit_to_a_lowering_keeps_the_capture_and_an_edit_to_the_frontend_or_the_test_drops_it(
    project, monkeypatch, tmp_path, stage
):
    _frontend_files(project, monkeypatch)
    test = registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"]
    store, key = cache.FrontendCache(tmp_path / "frontend"), ("fx-import", "forward", None, None)
    for edited, kept in (
        ("compiler/pipelines.py", True),  # a lowering: the engineer's loop
        ("compiler/frontends/jit.py", stage == fingerprints.CAPTURE),  # an importer: only the imports go
        ("compiler/frontends/fx.py", False),
        ("helpers/shapes.py", False),  # what the test builds
    ):
        cache.forget_files()
        store.for_test(test, "annotated").put(key, "captured", stage)
        _edit(project / edited)
        cache.forget_files()
        assert (store.for_test(test, "annotated").get(key, stage) == "captured") is kept, edited


@pytest.mark.parametrize("frontend", ["fx", "ltc", "torchscript"])
def test_the_frontend_sources_cover_every_project_file_a_capture_runs(frontend):
    """A capture and import (torch.export, decompositions, the FX importer; a lazy trace or
    torch.jit and the JIT IR importer) traced call by call: the frontend cache's key would
    miss an edit to a project file it runs outside `FRONTEND_SOURCES`."""
    from compiler.frontends import load_frontend
    from compiler.frontends.fx import fx_import
    from compiler.frontends.jit_frontend import jit_capture, jit_import_captured

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.gelu(x @ y).sum(0), x.t()

    inputs = [torch.rand(3, 4), torch.rand(4, 5)]
    ran: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        if frontend == "fx":
            fx_import(Model(), inputs, [[-1, 4], None])
        else:
            jit_import_captured(jit_capture(Model(), inputs, load_frontend(frontend)))
    finally:
        sys.setprofile(None)
    files = [Path(name).resolve() for name in ran if not name.startswith("<")]
    project = [path for path in files if path.is_relative_to(REAL_PROJECT) and path != Path(__file__).resolve()]
    covered = [REAL_PROJECT / entry for entry in fingerprints.FRONTEND_SOURCES]
    assert any(path.name == f"{'fx' if frontend == 'fx' else 'jit'}.py" for path in project)  # it saw the frontend
    outside = [p for p in project if not any(p == c or p.is_relative_to(c) for c in covered)]
    assert outside == []


def _import_neg(store: "cache.FrontendCache", frontend: str = "fx") -> tuple[str, set, list[str]]:
    """`Tmp_Neg`'s capture and import by `frontend` in a new run (every fingerprint computed
    again): the raw torch IR, what the run took from the frontend cache of earlier runs, the notes."""
    from compiler.frontends import load_frontend
    from e2e.framework.prepared import prepare

    cache.forget_files()
    prepared = prepare(registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"])
    prepared.frontend_cache = store.for_test(prepared.test, prepared.shape_mode)
    item = prepared.golden[0]
    shapes = [[-1, 3]] if frontend == "fx" else None  # the JIT frontends' traces are static
    imported = prepared.imported(load_frontend(frontend), item, ("forward", None), shapes, Snapshots())
    return imported.raw_ir, {key[0] for key in prepared.from_earlier_run}, imported.notes


@pytest.mark.parametrize("frontend", ["fx", "ltc", "torchscript"])
def test_a_rebuild_of_torch_mlir_reuses_the_capture_and_imports_it_again(project, monkeypatch, tmp_path, frontend):
    store = cache.FrontendCache(tmp_path / "frontend")
    raw_ir, reused, _ = _import_neg(store, frontend)
    assert reused == set() and "torch.aten.neg" in raw_ir
    assert _import_neg(store, frontend)[:2] == (raw_ir, {f"{frontend}-import"})  # nothing changed: the import
    monkeypatch.setenv(fingerprints.IDENTITY_SALT_ENV, "rebuilt")  # torch-mlir's identity, as a rebuild changes it
    assert _import_neg(store, frontend)[:2] == (raw_ir, {f"{frontend}-capture"})  # the capture, imported again
    monkeypatch.setattr(torch, "__version__", torch.__version__ + "+other")
    assert _import_neg(store, frontend)[:2] == (raw_ir, set())  # another torch: captured again


def test_a_test_outside_a_frontends_reach_is_kept_as_such(project, monkeypatch, tmp_path):
    """Why a capture does not apply (torchscript fell back to a static trace, and dynamic dims
    were asked for) is decided by torch, the test and the capture code, as a capture is: a
    rerun after a rebuild of torch-mlir takes it from the frontend cache and reports the same."""
    from compiler.frontends import load_frontend
    from e2e.framework.prepared import prepare
    from e2e.framework.result import NotApplicable

    store = cache.FrontendCache(tmp_path / "frontend")
    reasons, taken = [], []
    for salt in ("", "rebuilt"):
        monkeypatch.setenv(fingerprints.IDENTITY_SALT_ENV, salt)
        cache.forget_files()
        prepared = prepare(registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"])
        prepared.frontend_cache = store.for_test(prepared.test, prepared.shape_mode)
        with pytest.raises(NotApplicable) as refused:
            prepared.imported(
                load_frontend("torchscript"), prepared.golden[0], ("forward", None), [[-1, 3]], Snapshots()
            )
        reasons.append(str(refused.value))
        taken.append({key[0] for key in prepared.from_earlier_run})
    assert "traces static shapes" in reasons[0] and reasons[1] == reasons[0]
    assert taken == [set(), {"torchscript-capture"}]


def test_a_capture_that_does_not_serialize_is_captured_again_and_says_so(project, monkeypatch, tmp_path):
    from compiler.frontends import fx_kept

    def refuse(program, buffer):
        raise RuntimeError("no serializer for this op")

    monkeypatch.setattr(fx_kept.torch.export, "save", refuse)
    store = cache.FrontendCache(tmp_path / "frontend")
    raw_ir, _, notes = _import_neg(store)
    lost = "frontend cache: the capture is not kept across runs (torch.export.save: RuntimeError: no serializer"
    assert any(note.startswith(lost) for note in notes)
    monkeypatch.setenv(fingerprints.IDENTITY_SALT_ENV, "rebuilt")
    again, reused, notes = _import_neg(store)
    assert again == raw_ir and reused == set() and any(note.startswith(lost) for note in notes)


class _TanhMatmulLike(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(4, 3))

    def forward(self, x):
        return torch.tanh(x @ self.weight)


class _LayerNorm(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.layer_norm(x, (4,))


def test_a_kept_capture_imports_as_the_captured_one_or_is_not_kept():
    """A pickled capture (torch.export.save bytes) loads and imports to the same IR; one
    whose dynamic dim torch.export forced static (layer_norm's normalized dim) would import
    more precisely typed after a load: it is not kept, and says why."""
    import pickle

    from compiler.frontends.fx import fx_capture, fx_import_captured

    x = torch.rand(2, 4)
    kept = fx_capture(_TanhMatmulLike(), [x], [[-1, 4]])
    loaded = pickle.loads(pickle.dumps(kept))
    assert fx_import_captured(loaded).raw_ir == fx_import_captured(kept).raw_ir
    forced = pickle.loads(pickle.dumps(fx_capture(_LayerNorm(), [x], [[-1, -1]])))
    assert forced.program is None and "specialized a dynamic dim" in forced.lost


class _SplitSum(torch.nn.Module):
    def forward(self, x):
        a, b = torch.split(x, [2, 3], dim=1)
        return a.sum(1) + b.sum(1) + torch.max(x, dim=1).values  # (Tensor, Tensor) stays a tuple


class _TimesItem(torch.nn.Module):
    def forward(self, x, y):
        return x * y.item()


class _SortAndTopk(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=1), torch.topk(x, 2)  # torch.return_types.sort, .topk


@pytest.mark.parametrize(
    "model, inputs",
    [
        (_SplitSum, (torch.rand(4, 5),)),
        (lambda: torch.nn.LSTM(3, 4), (torch.rand(2, 1, 3),)),
        (_TimesItem, (torch.rand(3), torch.rand(()))),
        (_SortAndTopk, (torch.rand(3, 4),)),
    ],
)
def test_a_loaded_capture_imports_as_the_captured_one(model, inputs):
    """What torch.export.load does not give back as captured, and the FX importer reads: a
    `Tensor[]` op's value (split, the LSTM's parts) comes back a tuple, not a list (81 pairs
    failed in `import` after a torch-mlir rebuild), and no value has its `tensor_meta`
    (`.item()`'s import reads its operand's: 3 pairs). A program returning torch's own
    structured results (`torch.return_types.sort`) is kept too (torch registers them with
    no serialized name: 51 captures were made again after every rebuild)."""
    import pickle

    from compiler.frontends.fx import fx_capture, fx_import_captured

    captured = fx_capture(model(), list(inputs), None)
    loaded = pickle.loads(pickle.dumps(captured))
    assert loaded.lost_on_the_way() is None
    assert fx_import_captured(loaded).raw_ir == fx_import_captured(captured).raw_ir


def test_a_kept_capture_leaves_its_example_inputs_behind():
    """torch.export.save writes the inputs a program was exported with; a kept capture
    does not (upstream's 512 MiB InstanceNorm input went into the cache and over the pipe),
    and the program it saved still keeps them in memory."""
    import pickle

    from compiler.frontends.fx import fx_capture, fx_import_captured

    x = torch.rand(1 << 20, 4)  # 16 MiB
    captured = fx_capture(_TanhMatmulLike(), [x], None)
    kept = pickle.dumps(captured)
    assert len(kept) < (1 << 20)
    assert captured.program.example_inputs is not None
    assert fx_import_captured(pickle.loads(kept)).raw_ir == fx_import_captured(captured).raw_ir


@pytest.mark.parametrize("frontend", ["fx", "ltc", "torchscript"])
def test_the_capture_sources_cover_every_project_file_a_capture_runs(frontend):
    """A kept capture traced call by call (torch.export and the decompositions; a lazy trace
    or torch.jit and the JIT importer's text): the CAPTURE key would miss an edit to a project
    file it runs outside `CAPTURE_SOURCES` and the frontend's `capture_sources`; and what
    runs after it is not among them (an edit to the FX importer or to a lowering reuses the
    captures)."""
    from compiler.frontends import load_frontend
    from compiler.frontends.fx import fx_capture
    from compiler.frontends.jit_frontend import jit_capture

    class Model(torch.nn.Module):
        def forward(self, x, y):
            return torch.nn.functional.gelu(x @ y).sum(0), x.t()

    inputs = [torch.rand(3, 4), torch.rand(4, 5)]
    chosen = load_frontend(frontend)
    ran: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        if frontend == "fx":
            fx_capture(Model(), inputs, [[-1, 4], None])
        else:
            jit_capture(Model(), inputs, chosen)
    finally:
        sys.setprofile(None)
    files = [Path(name).resolve() for name in ran if not name.startswith("<")]
    project = [path for path in files if path.is_relative_to(REAL_PROJECT) and path != Path(__file__).resolve()]
    own = [fingerprints.module_file(name).resolve() for name in chosen.capture_sources]
    covered = [REAL_PROJECT / entry for entry in fingerprints.CAPTURE_SOURCES] + own
    seen = "decompose.py" if frontend == "fx" else f"{'lazy' if frontend == 'ltc' else 'torchscript'}.py"
    assert any(path.name == seen for path in project)  # it saw the capture
    assert [p for p in project if not any(p == c or p.is_relative_to(c) for c in covered)] == []
    assert not any("pipelines" in str(path) or "replay_runtime/mlir.py" in str(path) for path in covered)
    if frontend == "fx":
        assert not any("jit" in str(path) for path in covered)  # the FX capture is not the JIT importer's
    else:  # the JIT importer's text depends on the torch dialect's op names, in torch-mlir's Python
        assert any(path.name == "_torch_ops_gen.py" for path in own)


def test_a_capture_source_that_is_not_installed_is_keyed_as_missing():
    """Another torch-mlir may not ship a module a frontend names (its decomposition table):
    the key says so, and differs, rather than the run failing to compute it."""
    cache.forget_files()
    absent = fingerprints.module_file("torch_mlir.not_a_module_of_it")
    assert absent is None and fingerprints.module_file("no_such_package.module") is None
    there = fingerprints.frontend_fingerprint(fingerprints.CAPTURE, ("compiler.frontends.fx",))
    missing = fingerprints.frontend_fingerprint(fingerprints.CAPTURE, ("torch_mlir.not_a_module_of_it",))
    assert there != missing


@pytest.mark.parametrize("frontend", ["ltc", "torchscript"])
def test_a_kept_jit_capture_imports_as_a_new_one(frontend):
    """A JIT frontend keeps its capture as the importer's text: pickled and parsed again (as
    after a rebuild of torch-mlir), it gives the same raw IR, arguments and notes as a new
    capture's import, and it holds no live graph."""
    import pickle

    from compiler.frontends import KEEPS_CAPTURE, load_frontend
    from compiler.frontends.jit_frontend import jit_capture, jit_import_captured

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 3)

        def forward(self, x):
            return torch.tanh(self.linear(x)).max(dim=1)

    chosen = load_frontend(frontend)
    assert chosen.keeps == KEEPS_CAPTURE
    captured = jit_capture(Model(), [torch.rand(2, 4)], chosen)
    kept = pickle.dumps(captured)
    assert b"torch._C" not in kept
    again, new = jit_import_captured(pickle.loads(kept)), jit_import_captured(captured)
    assert again.raw_ir == new.raw_ir and "torch.aten.tanh" in again.raw_ir
    assert (again.argument_indices, again.notes, again.out_spec) == (new.argument_indices, new.notes, new.out_spec)


def test_the_least_recently_used_captures_go_first_and_a_large_one_is_not_kept(project, monkeypatch, tmp_path):
    _frontend_files(project, monkeypatch)
    test = registry.GLOBAL_TEST_REGISTRY["Tmp_Neg"]
    store = cache.FrontendCache(tmp_path / "frontend")
    for n in range(3):
        store.for_test(test, "annotated").put(("k", n), "x" * 1000)
    store.for_test(test, "annotated").get(("k", 0))  # used again: now the most recent
    old = time.time() - 100
    entries = sorted((tmp_path / "frontend").glob("*.pickle"), key=lambda p: p.stat().st_mtime)
    for age, path in enumerate(entries):  # an order the filesystem's coarse clock cannot blur
        os.utime(path, (old + age, old + age))
    used_last = (
        tmp_path / "frontend" / f"{store.for_test(test, 'annotated')._name(('k', 0), fingerprints.IMPORT)}.pickle"
    )
    os.utime(used_last, (old + 10, old + 10))
    assert store.trim(limit=2500) == 1
    assert store.for_test(test, "annotated").get(("k", 0)) is not None
    assert sum(store.for_test(test, "annotated").get(("k", n)) is not None for n in (1, 2)) == 1
    monkeypatch.setattr(cache, "FRONTEND_ENTRY_BYTES", 100)
    store = cache.FrontendCache(tmp_path / "frontend")
    store.for_test(test, "annotated").put(("k", 3), "x" * 1000)
    assert store.for_test(test, "annotated").get(("k", 3)) is None


def test_a_lowered_program_is_kept_by_its_key_and_an_edit_to_the_compiler_drops_it(project, monkeypatch, tmp_path):
    """The program cache: an edit to the compiler (a lowering, a pass pipeline) compiles
    every program again; an edit to a test or the framework keeps them."""
    _frontend_files(project, monkeypatch)
    (project / "e2e" / "framework").mkdir(parents=True, exist_ok=True)
    (project / "e2e" / "framework" / "runner.py").write_text("# a stand-in\n")
    for edited, kept in (
        ("helpers/shapes.py", True),
        ("e2e/framework/runner.py", True),
        ("compiler/pipelines.py", False),
        ("compiler/frontends/fx.py", False),
    ):
        cache.forget_files()
        cache.ProgramCache(tmp_path / "programs").put("aten.neg.default f32[2,3]", "lowered")
        _edit(project / edited)
        cache.forget_files()
        store = cache.ProgramCache(tmp_path / "programs")
        assert (store.get("aten.neg.default f32[2,3]") == "lowered") is kept, edited
        assert store.get("aten.neg.default f32[2,4]") is None
    assert cache.ProgramCache(None).get("aten.neg.default f32[2,3]") is None  # disabled: keeps nothing


def test_kept_import_statements_follow_the_text_of_the_file(tmp_path):
    """What a file imports is kept by its text: an edit that imports another helper
    changes the dependencies (and so the keys) even though the statements were kept."""
    (tmp_path / "helper_b.py").write_text("X = 1\n")
    (tmp_path / "helper_c.py").write_text("Y = 2\n")
    suite = tmp_path / "suite_file.py"
    suite.write_text("import helper_b\n")
    deps.keep_imports(tmp_path / "kept")
    try:
        cache.forget_files()
        assert tmp_path / "helper_b.py" in deps.module_dependencies(suite)
        cache.forget_files()  # a new process: the statements come from the kept file
        assert tmp_path / "helper_b.py" in deps.module_dependencies(suite)
        suite.write_text("def later():\n    from helper_c import Y\n")
        cache.forget_files()
        dependencies = deps.module_dependencies(suite)
        assert tmp_path / "helper_c.py" in dependencies and tmp_path / "helper_b.py" not in dependencies
        assert len(list((tmp_path / "kept").glob("*.json"))) == 4  # two texts of the suite file, two helpers
    finally:
        deps.keep_imports(None)
        cache.forget_files()

import sys

import pytest
import torch

from e2e.framework import registry
from e2e.framework.registry import RegistryError, annotate_args, e2e_test, export, op_test, register_test_case
from e2e.framework.testutils import TestUtils, seed_for, seed_global_rng
from e2e.framework.trace import golden_trace


@pytest.fixture
def empty_registry(monkeypatch):
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    return registry.GLOBAL_TEST_REGISTRY


class MmModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True), ([-1, -1], torch.float32, True)])
    def forward(self, lhs, rhs):
        return torch.mm(lhs, rhs)


def test_upstream_form_registers_under_the_invoker_name(empty_registry):
    @register_test_case(module_factory=lambda: MmModule())
    def MmModule_basic(module, tu: TestUtils):
        module.forward(tu.rand(4, 3), tu.rand(3, 5))

    test = empty_registry["MmModule_basic"]
    module = test.module_factory()
    assert test.arg_shapes(module) == [[-1, -1], [-1, -1]]
    trace = golden_trace(test, module)
    assert [item.method for item in trace] == ["forward"]
    assert trace[0].outputs.shape == (4, 5)
    torch.testing.assert_close(trace[0].outputs, trace[0].inputs[0] @ trace[0].inputs[1])


def test_duplicate_names_are_an_error(empty_registry):
    op_test("Twice", torch.neg, lambda tu: [tu.rand(2)])
    with pytest.raises(RegistryError, match="duplicate e2e test name 'Twice'"):
        op_test("Twice", torch.abs, lambda tu: [tu.rand(2)])


def test_short_form_parametrizes_and_passes_variant_kwargs_to_inputs(empty_registry):
    @e2e_test(
        inputs=lambda tu, dtype: [tu.rand(2, 3, dtype=dtype)],
        params={"F32": dict(dtype=torch.float32), "F64": dict(dtype=torch.float64)},
        dynamic=True,
    )
    class Double(torch.nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.dtype = dtype

        def forward(self, x):
            return x * 2

    assert sorted(empty_registry) == ["Double_F32", "Double_F64"]
    test = empty_registry["Double_F64"]
    module = test.module_factory()
    assert test.arg_shapes(module) == [[-1, -1]]
    trace = golden_trace(test, module)
    assert trace[0].inputs[0].dtype == torch.float64
    torch.testing.assert_close(trace[0].outputs, trace[0].inputs[0] * 2)


def test_explicit_dynamic_shapes(empty_registry):
    op_test("Add", torch.add, lambda tu: [tu.rand(3, 4), tu.rand(4)], dynamic=[[-1, 4], None])
    test = empty_registry["Add"]
    assert test.arg_shapes(test.module_factory()) == [[-1, 4], None]


def test_inputs_are_seeded_per_test_name():
    a, b = TestUtils(seed_for("A")), TestUtils(seed_for("A"))
    assert torch.equal(a.rand(5), b.rand(5))
    assert not torch.equal(TestUtils(seed_for("A")).rand(5), TestUtils(seed_for("B")).rand(5))
    ints = TestUtils(1).randint(100, low=3, high=7)
    assert ints.dtype == torch.int64 and ints.min() >= 3 and ints.max() < 7
    assert torch.isnan(TestUtils(1).nans(2)).all()


def test_the_global_rng_is_seeded_as_torch_manual_seed_seeds_it():
    """An invoker's own `torch.rand` draws what it would after `torch.manual_seed`."""
    torch.manual_seed(7)
    expected = torch.rand(4), torch.randn(3, dtype=torch.float64), torch.randint(0, 100, (5,))
    torch.manual_seed(8)
    seed_global_rng(7)
    drawn = torch.rand(4), torch.randn(3, dtype=torch.float64), torch.randint(0, 100, (5,))
    assert all(torch.equal(a, b) for a, b in zip(drawn, expected))
    TestUtils(6)  # seeds the global generator with seed + 1
    assert torch.equal(torch.rand(4), expected[0])


def test_golden_trace_does_not_disturb_the_module_or_inputs(empty_registry):
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.count += 1
            x.add_(1)
            return x + self.count

    op_test("Unused", torch.neg, lambda tu: [tu.rand(1)])
    test = registry.Test("Counter", Counter, lambda m, tu: m.forward(torch.zeros(2)))
    module = Counter()
    trace = golden_trace(test, module)
    assert module.count.item() == 0  # golden ran on a copy
    assert torch.equal(trace[0].inputs[0], torch.zeros(2))  # inputs recorded before the call
    assert torch.equal(trace[0].outputs, torch.full((2,), 2.0))


def test_params_go_to_whichever_of_constructor_and_inputs_names_them(empty_registry):
    @e2e_test(
        inputs=lambda tu, rows: [tu.rand(rows, 2)],
        params={"Two": dict(rows=2, scale=2.0), "Three": dict(rows=3, scale=3.0)},
    )
    class Scale(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return x * self.scale

    trace = golden_trace(empty_registry["Scale_Three"], empty_registry["Scale_Three"].module_factory())
    assert trace[0].inputs[0].shape == (3, 2)
    torch.testing.assert_close(trace[0].outputs, trace[0].inputs[0] * 3.0)

    with pytest.raises(RegistryError, match=r"params \['typo'\] are taken neither"):
        e2e_test(inputs=lambda tu: [tu.rand(2)], params={"A": dict(typo=1)})(Scale)


def test_testutils_make_zero_d_tensors():
    tu = TestUtils(0)
    assert tu.rand().shape == () and tu.randn().shape == () and tu.randint(high=3).shape == ()


def test_a_tests_source_line_is_the_one_inspect_gives(tmp_path, monkeypatch):
    """`Test.source` (in the result cache's keys) names the line `inspect.getsourcelines`
    names, for decorated, nested and plain classes, functions and lambdas."""
    import importlib.util
    import inspect

    from e2e.framework.registry import _source_of

    (tmp_path / "shapes.py").write_text(
        "import functools\n\n"
        "class Plain:\n    class Inner:\n        pass\n\n"
        "@functools.total_ordering\nclass Decorated:\n    def __lt__(self, other):\n        return False\n\n"
        "def outer():\n    class Local:\n        pass\n    return Local\n\n"
        "def invoker(module, tu):\n    pass\n\n"
        "@functools.lru_cache\n\ndef cached(x):\n    return x\n\n"
        "inputs = (\n    lambda tu: [tu.rand(2)]\n)\n"
    )
    spec = importlib.util.spec_from_file_location("shapes_for_source", tmp_path / "shapes.py")
    shapes = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "shapes_for_source", shapes)  # a class's file is its module's
    spec.loader.exec_module(shapes)
    objects = [shapes.Plain, shapes.Plain.Inner, shapes.Decorated, shapes.outer(), shapes.invoker, shapes.cached]
    objects.append(shapes.inputs)
    for obj in objects:
        try:
            expected = f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
        except TypeError:  # an lru_cache wrapper has no source file of its own
            expected = repr(obj)
        assert _source_of(obj) == expected, obj

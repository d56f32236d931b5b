"""The program cache and the eager config: an op lowered by one session (a test host, a
run) is JIT-compiled by the next from its text, with the same values; a different key
misses; an op that fails compiles again and fails the same way. And the stage memo it
holds for every config's pipelines: the same input (locations too) takes a stage's
output from it; a failing stage is never kept."""

from __future__ import annotations

import torch

from compiler.backend_compile import compile_torch_backend_ir
from compiler.frontends.eager_mode import EagerSession, from_eager, op_key, to_eager
from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.stages import Snapshots, StageError, parse_module, run_stage
from e2e.framework.cache import ProgramCache
from e2e.framework.host import TestHost
from e2e.framework.isolation import Limits
from e2e.framework.registry import Test
from e2e.framework.result import FAIL, PASS

LIMITS = Limits(120.0, None)


def _run(session: EagerSession, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    try:
        ea, eb = to_eager(a, session), to_eager(b, session)
        return from_eager(torch.tanh(ea @ eb) * 2)
    finally:
        session.close()


def test_a_second_session_loads_what_the_first_lowered_and_gives_the_same_values(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    first = EagerSession(opt_level=0, lowered_ops=store)
    first_values = _run(first, a, b)
    assert sum(first.report.compiles.values()) == 3 and not first.report.loaded  # mm, tanh, mul
    second = EagerSession(opt_level=0, lowered_ops=store)
    second_values = _run(second, a, b)
    assert not second.report.compiles and sum(second.report.loaded.values()) == 3
    assert torch.equal(first_values, second_values)
    torch.testing.assert_close(second_values, torch.tanh(a @ b) * 2)


def test_another_shape_or_opt_level_misses(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    _run(EagerSession(opt_level=0, lowered_ops=store), torch.randn(3, 4), torch.randn(4, 5))
    other_shape = EagerSession(opt_level=0, lowered_ops=store)
    _run(other_shape, torch.randn(3, 4), torch.randn(4, 6))
    assert not other_shape.report.loaded
    other_level = EagerSession(opt_level=2, lowered_ops=store)
    _run(other_level, torch.randn(3, 4), torch.randn(4, 5))
    assert not other_level.report.loaded


def test_an_argument_without_a_stable_text_is_never_stored():
    key = (torch.ops.aten.add.Tensor, ((torch.float32, torch.Size([2])), (object, object())), ())
    assert op_key(key, "linalg", 0) is None
    assert op_key(key[:1] + (((torch.float32, torch.Size([2])), (float, "1.0")), ()), "linalg", 0) == (
        "(aten.add.Tensor, ((torch.float32, torch.Size([2])), (builtins.float, '1.0')), ()) backend=linalg opt_level=0"
    )


def test_a_failing_op_is_not_stored_and_fails_the_same_way_again(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    fallbacks = []
    for _ in range(2):
        session = EagerSession(opt_level=0, lowered_ops=store)
        q, k, v = (to_eager(torch.randn(1, 2, 4, 8), session) for _ in range(3))
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
        session.close()
        (fallback,) = session.report.fallbacks
        fallbacks.append(fallback)
        assert not session.report.loaded
    first, second = fallbacks
    assert (
        first.signature
        == second.signature
        == "aten._scaled_dot_product_flash_attention_for_cpu.default @ torch-backend"
    )
    assert (first.message, first.torch_ir, first.failing_pass, first.failing_ir) == (
        second.message,
        second.torch_ir,
        second.failing_pass,
        second.failing_ir,
    )


class _MatmulTanh(torch.nn.Module):
    def forward(self, x, y):
        return torch.tanh(x @ y)


class _FlashAttention(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]


def test_the_eager_config_on_a_second_host_takes_the_first_hosts_programs(tmp_path):
    """Test hosts of a run (and of later runs) share the program cache on disk: the second
    host JIT-compiles the first one's ops (noted), and the pair's outcome, and a failing
    pair's signature and saved IR, are the same."""
    from e2e.configs import load_config

    tests = [
        Test("Probe_program_cache", _MatmulTanh, lambda m, tu: m.forward(tu.rand(3, 4), tu.rand(4, 5))),
        Test(
            "Probe_program_cache_fallback",
            _FlashAttention,
            lambda m, tu: m.forward(tu.rand(1, 2, 4, 8), tu.rand(1, 2, 4, 8), tu.rand(1, 2, 4, 8)),
        ),
    ]
    store = ProgramCache(tmp_path / "programs")
    runs = []
    for _ in range(2):
        results = []
        for test in tests:
            host = TestHost(
                test, shape_mode="annotated", config_loader=load_config, golden_limits=LIMITS, program_cache=store
            )
            try:
                results.append(host.run("eager", tmp_path / "reports", LIMITS))
            finally:
                host.close()
        runs.append(results)
    (first_pass, first_fail), (second_pass, second_fail) = runs
    assert [first_pass.outcome, second_pass.outcome] == [PASS, PASS], second_pass.error
    assert not any(n.startswith("program cache") for n in first_pass.notes)
    (note,) = [n for n in second_pass.notes if n.startswith("program cache")]
    words = note.split()
    assert words[2] == words[4] != "0", note  # "program cache: N of N op programs ...": every op loaded
    assert [first_fail.outcome, second_fail.outcome] == [FAIL, FAIL]
    assert first_fail.signature == second_fail.signature and first_fail.stage == second_fail.stage
    assert first_fail.failing_pass == second_fail.failing_pass


# --- the stage memo: every config's pipelines ------------------------------------------


def _torch_ir(model: torch.nn.Module, *inputs: torch.Tensor) -> str:
    return fx_to_torch_backend_ir(model, list(inputs))[0]


class _TanhMm(torch.nn.Module):
    def forward(self, a, b):
        return torch.tanh(a @ b)


def test_a_second_compile_of_the_same_input_takes_each_stage_from_the_memo(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    torch_ir = _torch_ir(_TanhMm(), a, b)
    values, lowered = [], []
    for _ in range(2):
        snapshots = Snapshots(memo=store)
        program = compile_torch_backend_ir(torch_ir, "tosa", snapshots=snapshots)
        values.append(program(a, b)[0])
        lowered.append(snapshots.memo_hits)
        program.close()
    assert lowered == [[], ["backend", "lower"]]
    assert torch.equal(values[0], values[1])
    torch.testing.assert_close(values[1], torch.tanh(a @ b))


def test_a_failing_stage_is_not_kept_and_fails_the_same_way_again(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    # An op the TOSA conversion does not legalize: the stage fails in the same pass each time.
    text = 'func.func @main(%arg0: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {\n  %0 = torch.operator "foo.bar"(%arg0) : (!torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32>\n  return %0 : !torch.vtensor<[3],f32>\n}'
    errors = []
    for _ in range(2):
        snapshots = Snapshots(memo=store)
        try:
            run_stage(parse_module(text), "backend", ("torch-backend-to-tosa-backend-pipeline",), snapshots)
        except StageError as error:
            errors.append((error.failing_pass, error.message))
        assert not snapshots.memo_hits
    assert len(errors) == 2 and errors[0] == errors[1]
    assert not list((tmp_path / "programs").glob("*.pickle"))


def test_the_same_ir_with_other_locations_is_another_entry(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    body = "func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {{\n  return %arg0 : tensor<3xf32> {}\n}}"
    for location in ('loc("a.py":1:1)', 'loc("b.py":2:2)', 'loc("a.py":1:1)'):
        snapshots = Snapshots(memo=store)
        run_stage(parse_module(body.format(location)), "lower", ("canonicalize",), snapshots)
    assert len(list((tmp_path / "programs").glob("*.pickle"))) == 2
    assert snapshots.memo_hits == ["lower"]


def test_a_damaged_entry_is_run_again_and_replaced(tmp_path):
    store = ProgramCache(tmp_path / "programs")
    text = "func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n  return %arg0 : tensor<3xf32>\n}"
    run_stage(parse_module(text), "lower", ("canonicalize",), Snapshots(memo=store))
    (entry,) = (tmp_path / "programs").glob("*.pickle")
    store.store.put(entry.stem, b"not zlib")
    snapshots = Snapshots(memo=store)
    output = run_stage(parse_module(text), "lower", ("canonicalize",), snapshots)
    assert not snapshots.memo_hits and "func.func @main" in str(output)
    again = Snapshots(memo=store)
    run_stage(parse_module(text), "lower", ("canonicalize",), again)
    assert again.memo_hits == ["lower"]

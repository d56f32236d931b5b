"""The eager frontend: each aten op compiled alone and run on the reference backend."""

from __future__ import annotations

import copy

import pytest
import torch

import compiler.frontends.eager_mode as dispatcher
from compiler import backend_compile, refbackend, stages
from compiler.frontends import eager_ops
from compiler.frontends.eager_mode import EagerSession, EagerTensor, eager_mode, from_eager, to_eager


@pytest.fixture
def session():
    session = EagerSession(opt_level=0)  # the JIT's quickest: these tests call each op a few times
    yield session
    session.close()


def eager_pair(session, *shape):
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(*shape, generator=generator), torch.randn(*shape, generator=generator)
    return a, b, to_eager(a.clone(), session), to_eager(b.clone(), session)


def test_op_runs_compiled(session):
    a, b, ea, eb = eager_pair(session, 4, 4)
    result = torch.add(ea, eb, alpha=2)
    assert type(result) is EagerTensor
    torch.testing.assert_close(from_eager(result), a + 2 * b)
    assert session.report.compiled_calls["aten.add.Tensor"] == 1
    assert session.report.passed


def test_results_come_from_the_compiled_program(session, monkeypatch):
    # Compile `sub` where `add` was asked for: the eager result must change with it.
    build = eager_ops.single_op_graph

    def sub_for_add(func, *rest):
        return build(torch.ops.aten.sub.Tensor if func == torch.ops.aten.add.Tensor else func, *rest)

    monkeypatch.setattr(eager_ops, "single_op_graph", sub_for_add)
    a, b, ea, eb = eager_pair(session, 3, 5)
    torch.testing.assert_close(from_eager(ea + eb), a - b)


def test_cache_hits_do_not_recompile(session, monkeypatch):
    compiles = []
    compile_single_op = eager_ops.compile_single_op

    def counting(call, snapshots):
        compiles.append(str(call.func))
        return compile_single_op(call, snapshots)

    monkeypatch.setattr("compiler.frontends.eager_mode.compile_single_op", counting)
    a, b, ea, eb = eager_pair(session, 4, 4)
    for _ in range(3):
        torch.testing.assert_close(from_eager(ea * eb), a * b)
    assert compiles == ["aten.mul.Tensor"]
    assert session.report.cache_hits["aten.mul.Tensor"] == 2
    ea * to_eager(torch.ones(4, 1), session)  # another shape
    ea * 3.0  # a non-tensor argument
    ea * 4.0  # another value
    ea.mul(3)  # another type (int, not float)
    ea * 4.0
    assert len(compiles) == 5
    assert session.report.compiles["aten.mul.Tensor"] == 5
    assert session.report.cache_hits["aten.mul.Tensor"] == 3


def test_a_session_compiles_and_loads_its_ops_in_one_mlir_context(session, monkeypatch):
    made = []
    new_context = stages.new_context

    def counting():
        made.append(1)
        return new_context()

    for module in (dispatcher, eager_ops, refbackend, backend_compile):
        monkeypatch.setattr(module, "new_context", counting)
    a, b, ea, eb = eager_pair(session, 2, 3)
    torch.testing.assert_close(from_eager(torch.tanh(ea * eb) + ea), torch.tanh(a * b) + a)
    assert sum(session.report.compiles.values()) == 3
    assert len(made) == 1  # not three per op: import, backend, the JIT's parse
    session.close()
    torch.testing.assert_close(from_eager(ea - eb), a - b)  # a closed session's next op: a new context
    assert len(made) == 2


def test_fallback_is_recorded_with_stage_and_single_op_ir(session):
    q, k, v = (to_eager(torch.randn(1, 2, 4, 8), session) for _ in range(3))
    expected = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(*from_eager((q, k, v)))
    for _ in range(2):
        out, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
        torch.testing.assert_close(from_eager(out), expected[0])
    (fallback,) = session.report.fallbacks
    assert fallback.op == "aten._scaled_dot_product_flash_attention_for_cpu.default"
    assert fallback.stage == "torch-backend"
    assert fallback.signature == f"{fallback.op} @ torch-backend"
    assert fallback.calls == 2
    assert "torch.aten._scaled_dot_product_flash_attention_for_cpu" in fallback.torch_ir
    assert fallback.torch_ir.count("func.func") == 1
    assert not session.report.passed


def test_data_dependent_shape_falls_back_at_capture(session):
    x = torch.tensor([0.0, 1.0, 0.0, 2.0])
    result = torch.nonzero(to_eager(x, session))
    assert torch.equal(from_eager(result), torch.nonzero(x))
    assert [f.signature for f in session.report.fallbacks] == ["aten.nonzero.default @ capture"]


def test_in_place_op_on_a_view_writes_through(session):
    a, _, ea, _ = eager_pair(session, 3, 4)
    view = ea.t()
    returned = view.mul_(2.0)
    assert returned is view
    torch.testing.assert_close(from_eager(ea), a * 2)
    assert session.report.compiled_calls["aten.mul.Tensor"] == 1
    assert session.report.native_calls["aten.t.default"] == 1


def test_out_variants_compute_then_copy(session):
    a, b, ea, eb = eager_pair(session, 4, 4)
    out = to_eager(torch.empty(4, 4), session)
    assert torch.mul(ea, eb, out=out) is out
    torch.testing.assert_close(from_eager(out), a * b)
    values, indices = to_eager((torch.empty(4), torch.empty(4, dtype=torch.int64)), session)
    torch.max(ea, 1, out=(values, indices))
    torch.testing.assert_close(from_eager(values), a.max(1).values)
    assert torch.equal(from_eager(indices), a.max(1).indices)
    assert session.report.compiled_calls["aten.max.dim"] == 1


def test_copy_into_an_eager_tensor_casts_and_broadcasts(session):
    target = to_eager(torch.zeros(2, 3, dtype=torch.float64), session)
    target.copy_(to_eager(torch.tensor([1, 2, 3]), session))
    assert torch.equal(from_eager(target), torch.tensor([[1.0, 2, 3], [1, 2, 3]], dtype=torch.float64))
    assert session.report.compiled_calls["aten.copy.default"] == 1


def test_views_alias_and_stay_native_by_design(session):
    a, _, ea, _ = eager_pair(session, 2, 6)
    view = ea.view(3, 4)[1:, 2]
    assert torch.equal(from_eager(view), a.view(3, 4)[1:, 2])
    ea.zero_()
    assert torch.equal(from_eager(view), torch.zeros(2))
    report = session.report
    assert set(report.native_calls) == {"aten.view.default", "aten.slice.Tensor", "aten.select.int"}
    assert "alias" in report.native_reasons["aten.view.default"]
    assert report.passed


def test_ops_with_several_results(session):
    a, _, ea, _ = eager_pair(session, 3, 5)
    values, indices = torch.max(ea, dim=1)
    torch.testing.assert_close(from_eager(values), a.max(dim=1).values)
    assert torch.equal(from_eager(indices), a.max(dim=1).indices)
    weight, bias = torch.randn(5), torch.randn(5)
    out, mean, rstd = torch.ops.aten.native_layer_norm(ea, [5], *to_eager((weight, bias), session), 1e-5)
    expected = torch.ops.aten.native_layer_norm(a, [5], weight, bias, 1e-5)
    for got, want in zip((out, mean, rstd), expected):
        torch.testing.assert_close(from_eager(got), want)
    assert session.report.compiled_calls["aten.native_layer_norm.default"] == 1
    assert session.report.passed


def sample(dtype: torch.dtype, *shape: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    if dtype == torch.bool:
        return torch.rand(*shape, generator=generator) > 0.5
    if dtype.is_complex:
        return torch.randn(*shape, 2, generator=generator).to(dtype.to_real()).view(dtype).squeeze(-1)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=generator).to(dtype)
    return torch.randint(-(2**40), 2**40, shape, generator=generator).to(dtype)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64]
)
def test_cached_calls_match_native_on_any_layout(dtype):
    """The cached call path passes tensors' memory as it is: contiguous, transposed, with a
    storage offset, conjugated; and 0-d tensors and scalars. At the session's default opt level."""
    session = EagerSession()
    base = sample(dtype, 4, 6)
    wide = sample(dtype, 6, 9)
    layouts = [
        base,
        sample(dtype, 6, 4).t(),  # non-contiguous
        wide[1:5, 2:8],  # offset and row stride 9
        wide[2:, 3:].t().t(),
    ]
    if dtype.is_complex:
        layouts.append(base.conj())  # the conjugate bit, not conjugated memory
    other = sample(dtype, 4, 6).flip(0)
    for x in layouts:
        got = from_eager(torch.mul(*to_eager((x, other), session)))
        assert got.dtype == dtype, x.stride()
        if dtype.is_complex:  # native complex mul rounds differently by layout (vectorized or not)
            torch.testing.assert_close(got, torch.mul(x, other), rtol=1e-6, atol=1e-6)
        else:
            assert torch.equal(got, torch.mul(x, other)), x.stride()
    assert session.report.cache_hits["aten.mul.Tensor"] == len(layouts) - 1
    zero_d = sample(dtype, 1).reshape(())
    for _ in range(2):
        got = from_eager(torch.mul(*to_eager((zero_d, zero_d), session)))
        assert got.shape == () and torch.equal(got, zero_d * zero_d)
        if dtype != torch.bool and not dtype.is_complex:  # complex * Python scalar: a fallback today
            got = from_eager(to_eager(base, session) * 3)
            assert torch.equal(got, base * 3)
    assert session.report.passed
    session.close()


def test_scalar_results(session):
    a, b, ea, eb = eager_pair(session, 4, 4)
    total = ea.sum()
    assert total.dim() == 0
    torch.testing.assert_close(from_eager(total), a.sum())
    assert total.item() == pytest.approx(a.sum().item(), rel=1e-6)  # .item(): native by design
    # `equal` returns a Python bool, no tensor to compile: native by design, not a fallback.
    assert torch.equal(ea, ea) is True
    assert torch.equal(ea, eb) is False
    assert session.report.compiled_calls["aten.sum.default"] == 1
    assert session.report.native_calls["aten._local_scalar_dense.default"] == 1
    assert session.report.native_calls["aten.equal.default"] == 2
    assert session.report.passed


def test_gradients_match_native(session):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    eager_model = to_eager(copy.deepcopy(model), session)
    x = torch.randn(3, 4, requires_grad=True)
    model(x).square().mean().backward()
    ex = to_eager(x.detach().requires_grad_(), session)
    eager_model(ex).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), eager_model.parameters()):
        assert type(q.grad) is EagerTensor, name
        torch.testing.assert_close(from_eager(q.grad), p.grad, msg=name)
    torch.testing.assert_close(from_eager(ex.grad), x.grad)
    compiled = session.report.compiled_calls
    assert compiled["aten.tanh_backward.default"] == 1 and compiled["aten.mm.default"] >= 2
    assert session.report.passed


def test_eager_mode_compiles_factory_ops_and_plain_tensors():
    x = torch.randn(5)
    with eager_mode() as session:
        result = torch.arange(5) * x + torch.full((5,), 2.0)
    assert type(result) is EagerTensor
    torch.testing.assert_close(from_eager(result), torch.arange(5) * x + 2)
    assert {"aten.arange.default", "aten.full.default", "aten.mul.Tensor", "aten.add.Tensor"} <= set(
        session.report.compiled_calls
    )
    session.close()


def test_report_summary_lists_ops_and_reasons(session):
    _, _, ea, _ = eager_pair(session, 4, 4)
    (ea + 1).t()
    torch.nonzero(ea)
    summary = session.report.summary()
    assert "aten.add.Tensor" in summary and "aten.t.default" in summary
    assert "fallbacks:\n  aten.nonzero.default(float32[4,4]): [capture]" in summary
    assert "native by design:\n  aten.t.default: view" in summary


def test_errors_of_the_program_are_not_fallbacks(session):
    _, _, ea, _ = eager_pair(session, 4, 4)
    with pytest.raises(RuntimeError, match="size of tensor"):
        ea + to_eager(torch.ones(3), session)
    assert session.report.passed


def test_in_place_metadata_ops_change_the_wrapper_too(session):
    a, _, ea, _ = eager_pair(session, 2, 3)
    assert ea.t_() is ea
    assert ea.shape == (3, 2)
    torch.testing.assert_close(from_eager(ea + 1), a.t() + 1)


def test_random_in_place_ops_stay_native_and_return_their_input(session):
    x = to_eager(torch.zeros(3, 4), session)
    torch.manual_seed(0)
    assert x.normal_() is x
    torch.manual_seed(0)
    assert torch.equal(from_eager(x), torch.zeros(3, 4).normal_())
    assert session.report.native_calls["aten.normal_.default"] == 1 and session.report.passed


# --- what real models bring ---------------------------------------------------------


def test_in_place_transpose_keeps_the_wrapper_in_step(session):
    # nn.GRU(batch_first=True) transposes in place; a stale wrapper broke the next view.
    x = torch.randn(2, 3, 4)
    wrapped = to_eager(x.clone(), session)
    assert wrapped.transpose_(0, 1) is wrapped
    assert wrapped.shape == (3, 2, 4) and wrapped.stride() == wrapped.elem.stride()
    torch.testing.assert_close(from_eager(wrapped.reshape(3, 8) * 1.0), x.transpose(0, 1).reshape(3, 8))
    assert session.report.passed
    assert "aten.transpose_.default" in session.report.native_calls


def test_eval_batch_norm_compiles_through_its_decomposition(session):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    model[1].running_mean.uniform_(-1, 1)
    x = torch.randn(2, 3, 6, 6)
    eager_model = to_eager(copy.deepcopy(model), session)
    with torch.no_grad():
        expected = model(x)
        with eager_mode(session):
            result = from_eager(eager_model(x))
    torch.testing.assert_close(result, expected)
    assert session.report.compiled_calls["aten.native_batch_norm.default"] == 1
    assert "aten.native_batch_norm.default" in session.report.decomposed
    assert session.report.passed, session.report.summary()


def test_query_returning_a_bool_is_not_a_fallback(session):
    a, _, ea, _ = eager_pair(session, 3)
    assert torch.equal(ea, to_eager(a.clone(), session))
    assert session.report.passed
    assert "query" in session.report.native_reasons["aten.equal.default"]


def test_decomposition_with_other_result_types_is_not_used(session):
    # torch's decomposition of flash attention returns the attention weights where
    # PyTorch returns the log-sum-exp: the op falls back, blamed on its own failure,
    # without running the decomposition op by op.
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=generator) for _ in range(3))
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    expected = flash(q, k, v, is_causal=True)
    result = from_eager(flash(*to_eager((q, k, v), session), is_causal=True))
    torch.testing.assert_close(result, expected)
    (fallback,) = session.report.fallbacks
    assert fallback.op == "aten._scaled_dot_product_flash_attention_for_cpu.default"
    assert fallback.stage == "torch-backend"
    assert not session.report.decomposed and not session.report.decomposed_calls


def test_default_attention_compiles_op_by_op(session):
    # On CPU, PyTorch runs `scaled_dot_product_attention` as one fused kernel
    # (`_scaled_dot_product_flash_attention_for_cpu`) that torch-mlir cannot lower; in
    # eager mode it takes its math path, whose ops are compiled.
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=generator) for _ in range(3))
    switches = (torch.backends.cuda.flash_sdp_enabled(), torch._C._get_mkldnn_enabled())
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with eager_mode(session):
        result = from_eager(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    torch.testing.assert_close(result, expected)
    assert session.report.passed, session.report.summary()
    assert session.report.compiled_calls["aten.bmm.default"] == 2
    # PyTorch's own switches are back as they were.
    assert (torch.backends.cuda.flash_sdp_enabled(), torch._C._get_mkldnn_enabled()) == switches


def test_lstm_compiles_its_cells_not_the_mkldnn_layer(session):
    lstm = torch.nn.LSTM(3, 4)
    x = torch.randn(2, 1, 3)
    eager_lstm = to_eager(copy.deepcopy(lstm), session)
    with torch.no_grad():
        expected = lstm(x)
        with eager_mode(session):
            result = from_eager(eager_lstm(x))
    torch.testing.assert_close(result, expected)
    assert session.report.passed, session.report.summary()
    assert session.report.compiled_calls["aten.sigmoid.default"] > 0


def test_cond_runs_the_chosen_branch_op_by_op(session):
    def nested(x):
        inner = lambda y: torch.cond(y.max() > 1, lambda z: z * 3, lambda z: z * 4, (y,))  # noqa: E731
        return torch.cond(x.sum() > 0, inner, lambda y: y.abs(), (x,))

    x = torch.tensor([[0.5, 2.0], [1.0, -1.0]])
    with eager_mode(session):
        result = from_eager(nested(x))
    torch.testing.assert_close(result, x * 3)
    assert session.report.passed, session.report.summary()
    assert (
        session.report.compiled_calls["aten.mul.Tensor"] == 1
        and "aten.abs.default" not in session.report.compiled_calls
    )
    # Run in eager mode, `cond` leaves nothing behind that breaks it natively.
    torch.testing.assert_close(nested(-x), (-x).abs())


def test_while_loop_runs_its_body_op_by_op(session):
    from torch._higher_order_ops.while_loop import while_loop

    x = torch.randn(3)
    with eager_mode(session):
        steps, result = from_eager(while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (torch.tensor(0), x)))
    assert int(steps) == 3
    torch.testing.assert_close(result, x * 8)
    assert session.report.passed, session.report.summary()
    assert session.report.compiled_calls["aten.mul.Tensor"] == 3


def test_eager_config_warms_up_what_every_host_would_pay():
    """The worker warms up before forking hosts once an eager pair ran: its first op
    compiles (1.4 s a host) are then inherited, the decomposition table among them."""
    from e2e.configs import WarmsUp
    from e2e.configs.eager import CONFIG

    assert isinstance(CONFIG, WarmsUp)
    eager_ops._decompositions.cache_clear()
    CONFIG.warm_up()
    assert eager_ops._decompositions.cache_info().currsize == 1
    assert CONFIG.host_paid_warm_up(None)


def _sin_or_cos(x: torch.Tensor) -> torch.Tensor:
    return x.sin() if x.sum() > 0 else x.cos()


torch.library.custom_op("eager_test::sin_or_cos", _sin_or_cos, mutates_args=()).register_fake(torch.empty_like)


def test_an_op_runs_as_its_decomposition_op_by_op_when_no_program_holds_it(session, monkeypatch):
    # A branch on a value: no single program holds the decomposition; op by op it runs.
    monkeypatch.setitem(eager_ops._decompositions(), torch.ops.eager_test.sin_or_cos.default, _sin_or_cos)
    x = torch.tensor([1.0, -2.0, 3.0])
    result = from_eager(torch.ops.eager_test.sin_or_cos(to_eager(x, session)))
    torch.testing.assert_close(result, x.sin())
    report = session.report
    assert report.passed, report.summary()
    assert report.decomposed_calls == {"eager_test.sin_or_cos.default": 1}
    assert report.compiled_calls["aten.sum.default"] == 1 and report.compiled_calls["aten.sin.default"] == 1


# --- compiled ahead: a rehearsal, then one lowering and one JIT for a run's ops -------------


def _program(x, y):
    return torch.tanh(x * y) + x


def _ahead(session, a, b):
    """`compile_ahead` with a rehearsal of `_program` on copies, as the eager config runs one."""
    session.compile_ahead(lambda: _program(to_eager(a.clone(), session), to_eager(b.clone(), session)))


def test_ops_compiled_ahead_share_one_engine_and_are_the_runs_compiles(session):
    a, b, ea, eb = eager_pair(session, 2, 3)
    _ahead(session, a, b)
    report = session.report
    assert sum(report.compiles.values()) == 3 and not report.compiled_calls  # the rehearsal's calls are not kept
    engines = {id(entry.program._engine) for entry in session._cache.values()}
    assert len(session._cache) == 3 and len(engines) == 1
    torch.testing.assert_close(from_eager(_program(ea, eb)), _program(a, b))
    assert sum(report.compiled_calls.values()) == 3
    assert sum(report.compiles.values()) == 3  # nothing compiled again in the run
    assert not report.cache_hits  # a first call of an op compiled ahead is no hit
    torch.testing.assert_close(from_eager(_program(ea, eb)), _program(a, b))
    assert sum(report.cache_hits.values()) == 3


def test_results_of_ops_compiled_ahead_come_from_their_programs(session, monkeypatch):
    build = eager_ops.single_op_graph

    def sub_for_add(func, *rest):
        return build(torch.ops.aten.sub.Tensor if func == torch.ops.aten.add.Tensor else func, *rest)

    monkeypatch.setattr(eager_ops, "single_op_graph", sub_for_add)
    a, b, ea, eb = eager_pair(session, 3, 5)
    _ahead(session, a, b)
    torch.testing.assert_close(from_eager(_program(ea, eb)), torch.tanh(a * b) - a)


def test_a_rehearsal_leaves_no_fallback_nor_random_draw_behind(session):
    x = torch.tensor([0.0, 1.0, 0.0, 2.0])

    def program(t):
        return torch.nonzero(t) + torch.randint(0, 100, (1,))

    state = torch.random.get_rng_state()
    session.compile_ahead(lambda: program(to_eager(x.clone(), session)))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert session.report.passed and not session.report.native_calls
    torch.manual_seed(0)
    expected = program(x)
    torch.manual_seed(0)
    with eager_mode(session):
        torch.testing.assert_close(from_eager(program(to_eager(x, session))), expected)
    # nonzero's data-dependent shape fails to stage ahead: the run compiles it and records its fallback.
    assert [f.signature for f in session.report.fallbacks] == ["aten.nonzero.default @ capture"]


def test_ops_compile_alone_in_the_run_when_lowering_them_together_fails(session, monkeypatch):
    def failing(programs, keep_text=False):
        raise stages.StageError("lower", "refused together")

    monkeypatch.setattr(dispatcher, "lower_together", failing)
    a, b, ea, eb = eager_pair(session, 2, 3)
    _ahead(session, a, b)
    assert not session._cache and not session.report.compiles
    torch.testing.assert_close(from_eager(_program(ea, eb)), _program(a, b))
    assert sum(session.report.compiles.values()) == 3 and session.report.passed


def test_ops_lowered_together_are_loaded_together_by_a_later_session():
    store: dict = {}

    class Store:
        get, put = store.get, store.__setitem__

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    values = []
    for _ in range(2):
        session = EagerSession(opt_level=0, lowered_ops=Store())
        _ahead(session, a, b)
        values.append(from_eager(_program(*to_eager((a, b), session))))
        reports = session.report
        session.close()
    torch.testing.assert_close(values[0], values[1])
    batches = [key for key in store if key.startswith("lowered together ")]
    assert len(batches) == 1 and len(store) == 4  # the batch once, and each op's place in it
    assert not reports.compiles and sum(reports.loaded.values()) == 3


def test_a_session_that_shares_one_op_of_a_stored_batch_compiles_it_with_its_own():
    store: dict = {}

    class Store:
        get, put = store.get, store.__setitem__

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    first = EagerSession(opt_level=0, lowered_ops=Store())
    _ahead(first, a, b)  # mul, tanh, add: one batch of three
    first.close()
    second = EagerSession(opt_level=0, lowered_ops=Store())
    second.compile_ahead(lambda: torch.sin(to_eager(a.clone(), second) * to_eager(b.clone(), second)))
    ea, eb = to_eager((a, b), second)
    torch.testing.assert_close(from_eager(torch.sin(ea * eb)), torch.sin(a * b))
    assert not second._batches  # mul alone is not worth the other test's whole batch
    assert sum(second.report.compiles.values()) == 2 and not second.report.loaded
    second.close()

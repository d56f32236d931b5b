"""The fuzzing campaign: its oracle, its grouping of failures into bugs, and a tiny real campaign."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from e2e.framework.compare import compare_traces
from e2e.framework.judge import Outcome
from e2e.framework.prepared import prepare
from e2e.framework.registry import Test
from e2e.framework.signature import Signature
from e2e.framework.trace import TraceItem
from e2e.generate.oracle import (
    F64_DISTANCE,
    NARROW_ACCUMULATION,
    ROUNDING_BAND,
    SPEC_REFUSAL,
    Float64Oracle,
    SpecRefusal,
)
from e2e.generate.program import InputSpec


class Cancel(torch.nn.Module):
    """(a + b) - a: float32 rounds b away next to 1e8 (spacing 8); float64 keeps it."""

    def forward(self, a, b):
        return (a + b) - a


def cancel_test() -> Test:
    return Test(
        "Fuzz_Cancel",
        Cancel,
        lambda module, tu: module.forward(torch.full((2,), 1e8), torch.full((2,), 1.5)),
    )


def judged(compiled: float):
    """The oracle's explanation of a made-up compiled answer `compiled` to the Cancel program."""
    prepared = prepare(cancel_test())
    golden = prepared.golden[0]
    trace = [TraceItem(golden.method, golden.inputs, torch.full((2,), compiled))]
    mismatch = compare_traces(prepared.golden, trace)
    assert mismatch is not None and mismatch.kind == "values"  # torch's float32 says 0
    return Float64Oracle().explain(prepared, Outcome("compare", mismatch=mismatch, trace=trace))


def test_f64_oracle_acquits_a_result_closer_to_float64_than_torch():
    explanation = judged(1.5)  # the exact answer; torch's float32 gives 0
    assert explanation.acquit and explanation.check == F64_DISTANCE and explanation.turned_away


def test_f64_oracle_keeps_a_result_further_from_float64_than_torch():
    explanation = judged(5.0)  # 3.5 from float64; torch is 1.5 from it
    assert not explanation.acquit and explanation.stage is None
    assert explanation.check == ROUNDING_BAND and not explanation.turned_away  # every later check failed too


class HalfSum(torch.nn.Module):
    def forward(self, x):
        return x.sum()


def judged_half_sum(compiled: float):
    """The oracle on a bf16 sum of 1 and 256 terms of 2**-9: torch accumulates in float32 and
    gives 1.5, exactly float64's answer; accumulated in bfloat16, each term rounds away (1.0)."""
    terms = torch.cat([torch.ones(1), torch.full((256,), 2.0**-9)]).to(torch.bfloat16)
    prepared = prepare(Test("Fuzz_HalfSum", HalfSum, lambda module, tu: module.forward(terms)))
    golden = prepared.golden[0]
    assert float(golden.outputs) == 1.5
    trace = [TraceItem(golden.method, golden.inputs, torch.tensor(compiled, dtype=torch.bfloat16))]
    mismatch = compare_traces(prepared.golden, trace)
    assert mismatch is not None and mismatch.kind == "values"
    return Float64Oracle().explain(prepared, Outcome("compare", mismatch=mismatch, trace=trace))


def test_a_half_precision_result_no_further_than_narrow_accumulation_is_acquitted():
    explanation = judged_half_sum(1.0)  # what accumulating in bfloat16 gives
    assert explanation.acquit and explanation.check == NARROW_ACCUMULATION


def test_a_half_precision_result_further_than_narrow_accumulation_is_a_wrong_result():
    explanation = judged_half_sum(0.5)
    assert not explanation.acquit and explanation.check == ROUNDING_BAND and not explanation.turned_away


def judged_half_cancel(compiled: float):
    """The oracle on (a + b) - a in float16, a = 1000, b = 0.3: torch rounds a + b to 1000.5
    (float16's spacing there is 0.5) and gives 0.5; float64 gives b. One rounding of a + b,
    wherever a compiler makes it, moves the answer by up to half that spacing."""
    a, b = torch.full((2,), 1000.0, dtype=torch.float16), torch.full((2,), 0.3, dtype=torch.float16)
    prepared = prepare(Test("Fuzz_HalfCancel", Cancel, lambda module, tu: module.forward(a, b)))
    golden = prepared.golden[0]
    trace = [TraceItem(golden.method, golden.inputs, torch.full((2,), compiled, dtype=torch.float16))]
    mismatch = compare_traces(prepared.golden, trace)
    assert mismatch is not None and mismatch.kind == "values"
    return Float64Oracle().explain(prepared, Outcome("compare", mismatch=mismatch, trace=trace))


def test_a_half_precision_result_within_one_rounding_of_its_values_is_acquitted():
    # 0.0: a + b rounded down to 1000 (0.3 from float64, torch 0.2): no further check acquits it
    explanation = judged_half_cancel(0.0)
    assert explanation.acquit and explanation.check == ROUNDING_BAND
    assert "rounding band 0.4" in explanation.notes[0]  # a + b moved by up to 1000 * 2**-11 = 0.49


def test_a_half_precision_result_beyond_rounding_is_a_wrong_result():
    explanation = judged_half_cancel(2.0)  # 1.7 from float64: more than two roundings of a + b
    assert not explanation.acquit and explanation.check == ROUNDING_BAND and not explanation.turned_away


def test_the_rounding_band_perturbs_only_what_an_op_computes_in_half_precision():
    """float32 values are not perturbed (a compiler computes them in float32 too), nor views;
    a float16 value is, by at most float16's unit roundoff, the same way for the same seed."""
    from e2e.generate.oracle import run_perturbed

    class Mixed(torch.nn.Module):
        def forward(self, x, h):
            return x * 3.0, (h * 3.0).view(-1), h.view(-1)

    x, h = torch.full((64,), 0.1), torch.full((64,), 0.1, dtype=torch.float16)
    item = TraceItem("forward", [x, h], None)
    f32, f16, view = run_perturbed(Mixed(), item, seed=0)
    assert f32.dtype == torch.float64 and torch.equal(f32, x.double() * 3.0)
    assert torch.equal(view, h.double())
    exact = h.double() * 3.0
    assert 0 < float(((f16 - exact) / exact).abs().max()) <= 2.0**-11
    assert torch.equal(f16, run_perturbed(Mixed(), item, seed=0)[1])


def test_the_rounding_band_runs_a_composite_op_that_checks_its_operands_dtypes():
    """conv1d compares its input's dtype with its bias's before any aten op runs: a computed
    (float64) input beside a bfloat16 bias raised, and the band was never measured."""
    from e2e.generate.oracle import run_perturbed

    class PooledConv(torch.nn.Module):
        def forward(self, x, w, b):
            return torch.nn.functional.conv1d(torch.nn.functional.avg_pool1d(x, 1), w, b, groups=2)

    bf16 = torch.bfloat16
    x, w, b = torch.rand(4, 2, 5, dtype=bf16), torch.rand(4, 1, 3, dtype=bf16), torch.rand(4, dtype=bf16)
    item = TraceItem("forward", [x, w, b], None)
    exact = torch.nn.functional.conv1d(x.double(), w.double(), b.double(), groups=2)
    perturbed = run_perturbed(PooledConv(), item, seed=0)
    assert perturbed.dtype == torch.float64 and not torch.equal(perturbed, exact)  # the conv's bf16 result perturbed
    assert torch.allclose(perturbed, exact, rtol=2.0**-7)


def test_narrow_accumulation_computes_the_ops_exactly_where_nothing_rounds():
    """Small integers are exact in bfloat16: the term-by-term reductions must give torch's answers."""
    from e2e.generate.oracle import NarrowAccumulationMode

    def ints(*shape):
        return torch.randint(-3, 4, shape).to(torch.bfloat16)

    x, a, b, w, bias = ints(2, 3, 4), ints(3, 4), ints(4, 2), ints(4, 3, 2, 2), ints(4)
    y, bias2, image, signal, kernel = ints(2, 4, 3), ints(2), ints(1, 3, 5, 5), ints(2, 4, 6), ints(6, 2, 3)
    cases = [
        lambda: x.sum(),
        lambda: x.sum(dim=(0, 2), keepdim=True),
        lambda: x.mean(dim=1),
        lambda: x.cumsum(2),
        lambda: a @ b,
        lambda: torch.bmm(x, y),
        lambda: torch.nn.functional.linear(a, b.t(), bias2),
        lambda: torch.nn.functional.conv2d(image, w, bias, padding=1),
        lambda: torch.nn.functional.conv1d(signal, kernel, groups=2, stride=2),
    ]
    for case in cases:
        expected = case()
        with NarrowAccumulationMode():
            got = case()
        assert got.dtype == expected.dtype and torch.equal(got, expected), case


def test_a_reduction_the_narrow_mode_cannot_emulate_runs_as_torch_runs_it():
    from e2e.generate.oracle import NarrowAccumulationMode

    empty = torch.ones(2, 0, 3).to(torch.bfloat16)
    with NarrowAccumulationMode():
        got = empty.cumsum(1), empty.sum(1)
    assert got[0].shape == (2, 0, 3) and torch.equal(got[1], torch.zeros(2, 3, dtype=torch.bfloat16))


def test_narrow_accumulation_decomposes_softmax_around_a_half_precision_sum():
    from e2e.generate.oracle import NarrowAccumulationMode

    x = torch.randn(3, 40).to(torch.float16)
    cases = [
        lambda v: torch.softmax(v, 1),
        lambda v: torch.log_softmax(v, 0),
        lambda v: torch.logsumexp(v, 1),
        lambda v: torch.logsumexp(v, (0, 1), keepdim=True),
    ]
    for case in cases:
        expected = case(x)
        with NarrowAccumulationMode():
            got = case(x)
        assert got.dtype == expected.dtype and got.shape == expected.shape, case
        assert torch.allclose(got.float(), expected.float(), rtol=2e-2, atol=2e-2), case
        with NarrowAccumulationMode():
            wide = case(x.float())
        assert torch.equal(wide, case(x.float())), case  # float32: torch's own kernels, untouched


def test_spec_refusal_blames_the_lowering_of_a_defined_program():
    prepared = prepare(cancel_test())
    refused = RuntimeError("tosa_reference_model failed (exit 1): OpPow: x is less than 0")
    explanation = SpecRefusal().explain(prepared, Outcome("execute", error=refused))
    assert explanation.stage == "backend" and "convert-torch-to-tosa" in explanation.error
    assert explanation.check == SPEC_REFUSAL and explanation.turned_away
    assert SpecRefusal().explain(prepared, Outcome("execute", error=RuntimeError("out of memory"))) is None


# Grouping: rows as the suite writes them (results.json), an xfail file as the suites keep them.

LEGALIZE = "backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.cumsum'"
CRASHED = "crash | execute | Segmentation fault"


def row(test: str, config: str, stage: str, signature: str, outcome: str = "fail", error: str = "") -> dict:
    return {"test": test, "config": config, "outcome": outcome, "stage": stage, "signature": signature, "error": error}


def grouped(rows, tmp_path, xfail_text: str = "", untaken=lambda failure: None):
    """`rows` (results rows) classified against an xfail file of tosa's."""
    from e2e.framework.result import Result
    from e2e.fuzz.bugs import classify

    return classify([Result.from_json(r) for r in rows], known_on_tosa(tmp_path, xfail_text), untaken)


def known_on_tosa(tmp_path, xfail_text: str):
    from e2e.fuzz.bugs import KnownSignatures
    from e2e.fuzz.programs import seed_of

    (tmp_path / "tosa.txt").write_text(xfail_text)
    return KnownSignatures.load(tmp_path, ["tosa"], generated=lambda test: seed_of(test) is not None)


def test_two_pairs_with_one_signature_are_one_bug(tmp_path):
    found = grouped([row("Gen_1", "tosa", "backend", LEGALIZE), row("Gen_2", "tosa", "backend", LEGALIZE)], tmp_path)
    assert len(found.bugs) == 1 and [f.test for f in found.bugs[0].failures] == ["Gen_1", "Gen_2"]
    assert found.bugs[0].guilty_op == "torch.aten.cumsum"


def test_one_bug_in_two_programs_is_one_bug_whatever_their_sizes_and_types(tmp_path):
    """The where-fold bug of stop 48's campaign, as two programs show it (another operand,
    another type), is one bug; the same message from another pass, or naming another op, is
    another."""
    fold = "torch-backend | torch-decompose-complex-ops | loc: 'func.return': type of return operand {} ('{}') doesn't match"
    rows = [
        row("Gen_1", "tosa", "torch-backend", fold.format(0, "!torch.vtensor<[N,?,N],f32>")),
        row("Gen_2", "tosa", "torch-backend", fold.format(3, "!torch.vtensor<[],si64>")),
        row(
            "Gen_3",
            "tosa",
            "torch-backend",
            fold.format(0, "!torch.vtensor<[N],f32>").replace("decompose", "recompose"),
        ),
        row("Gen_4", "tosa", "backend", "backend | tosa-x | loc: 'tosa.mul' op shift 1 is not 0"),
        row("Gen_5", "tosa", "backend", "backend | tosa-x | loc: 'tosa.add' op shift 1 is not 0"),
    ]
    found = grouped(rows, tmp_path)
    assert sorted([f.test for f in bug.failures] for bug in found.bugs) == [
        ["Gen_1", "Gen_2"],
        ["Gen_3"],
        ["Gen_4"],
        ["Gen_5"],
    ]
    known = grouped(rows[:1], tmp_path, f"Where_Fold  # fail: {fold.format(2, '!torch.vtensor<[4],f16>')}\n")
    assert len(known.known) == 1


def test_a_signature_an_xfail_entry_carries_is_a_known_bug(tmp_path):
    rows = [row("Gen_1", "tosa", "backend", LEGALIZE), row("Gen_3", "tosa", "execute", CRASHED, outcome="crash")]
    found = grouped(rows, tmp_path, f"Cumsum_Basic  # fail: {LEGALIZE}\n")
    assert [b.signature.format() for b in found.known] == [LEGALIZE]
    assert [b.signature.format() for b in found.new] == [CRASHED]


def test_a_refusal_of_an_op_the_config_refuses_alone_is_a_coverage_gap(tmp_path):
    """The real check: each node of the failing program run alone on the config."""
    from e2e.fuzz.coverage import Support
    from e2e.fuzz.shrink import run_program
    from e2e.generate.program import Node, Program
    from e2e.generate.types import Domain, TensorType

    x = InputSpec("x0", TensorType((3,), "float32"), Domain(-0.5, 0.5))
    double = Node("v0", "add", ("x0", "x0"), (), TensorType((3,), "float32"))
    asin = Node("v1", "asin", ("v0",), (), TensorType((3,), "float32"))
    program = Program(7, (x,), (double, asin), ("v1",))
    result = run_program(program, "tosa", tmp_path / "work")
    assert not result.passed, result  # tosa refuses asin
    failures = [row("Gen_7", "tosa", result.stage, result.signature.format(), error=result.error)]
    checked = []

    def check(one, config):
        checked.append(one.ops)
        alone = run_program(one, config, tmp_path / "work")
        return None if alone.passed else alone.signature

    support = Support(lambda test: program, check=check, matrix={})
    found = grouped(failures, tmp_path, untaken=support.untaken)
    assert list(found.gaps) == [("tosa", "asin")] and not found.bugs
    assert checked == [["asin"]]  # the refused op's node first, and found refused alone


def test_wrong_results_and_crashes_are_bugs_whatever_the_config_takes(tmp_path):
    rows = [row("Gen_2", "tosa", "compare", "compare | values"), row("Gen_3", "tosa", "execute", CRASHED, "crash")]
    found = grouped(rows, tmp_path, untaken=lambda failure: "cumsum")
    assert sorted(b.kind for b in found.bugs) == ["crash or hang", "wrong result"] and not found.gaps


SHAPES = "func.func(torch-simplify-shape-calculations)"
SEGFAULT = "crash | torch-backend | Fatal Python error: Segmentation fault"


def crash_bundle(tmp_path, test: str, crashing_pass: str, body: str) -> dict:
    """A crash's row with a bundle of `body` (torch ops on `%arg0: !torch.vtensor<[2,2],f32>`)."""
    import json

    bundle = tmp_path / "repro" / test
    bundle.mkdir(parents=True)
    (bundle / "case.json").write_text(json.dumps({"kind": "crash", "pipeline": ["inline", crashing_pass]}))
    lines = body.strip().splitlines()
    returned = lines[-1].split("=")[0].strip()
    (bundle / "repro.mlir").write_text(
        "func.func @main(%arg0: !torch.vtensor<[2,2],f32>) -> !torch.vtensor {\n"
        "  %int4 = torch.constant.int 4\n  %list = torch.prim.ListConstruct %int4 : (!torch.int) -> !torch.list<int>\n"
        + "".join(f"  {line.strip()}\n" for line in lines)
        + f"  return {returned} : !torch.vtensor\n}}\n"
    )
    crashed = row(test, "torchscript", "torch-backend", SEGFAULT, outcome="crash")
    return {**crashed, "repro_path": str(bundle)}


def test_crashes_whose_bundles_end_in_one_op_in_one_pass_are_one_bug(tmp_path):
    """Seeds 93, 815, 953 and 1413 of a campaign crashed shape simplification on a `reshape`
    of a tensor of unknown rank that other ops made (`cosh`, `to`, ...): one bug, named by
    the op they end in, not four op lists. The same op crashing another pass is another."""
    reshape = "%2 = torch.aten.reshape %1, %list : !torch.vtensor, !torch.list<int> -> !torch.vtensor"
    rows = [
        crash_bundle(
            tmp_path,
            "Gen_815",
            SHAPES,
            f"%1 = torch.aten.cosh %arg0 : !torch.vtensor<[2,2],f32> -> !torch.vtensor\n{reshape}",
        ),
        crash_bundle(
            tmp_path,
            "Gen_1413",
            SHAPES,
            f"%1 = torch.aten.neg %arg0 : !torch.vtensor<[2,2],f32> -> !torch.vtensor\n{reshape}",
        ),
        crash_bundle(
            tmp_path,
            "Gen_953",
            SHAPES,
            "%0 = torch.aten.tanh %arg0 : !torch.vtensor<[2,2],f32> -> !torch.vtensor\n"
            f"%1 = torch.aten.exp %arg0 : !torch.vtensor<[2,2],f32> -> !torch.vtensor\n{reshape}\n"
            "%3 = torch.aten.add.Tensor %0, %0, %int4 : !torch.vtensor, !torch.vtensor, !torch.int -> !torch.vtensor",
        ),
        crash_bundle(
            tmp_path,
            "Gen_40",
            "func.func(torch-decompose-complex-ops)",
            f"%1 = torch.aten.cosh %arg0 : !torch.vtensor<[2,2],f32> -> !torch.vtensor\n{reshape}",
        ),
    ]
    found = grouped(rows, tmp_path)
    assert sorted(([f.test for f in b.failures], b.guilty_op) for b in found.bugs) == [
        (["Gen_40"], "torch.aten.reshape"),
        (["Gen_815", "Gen_1413", "Gen_953"], "torch.aten.reshape"),
    ]


def test_a_tiny_real_campaign_writes_a_run_and_its_report(tmp_path):
    """Three generated programs on linalg: the run format merge and diff read, and fuzz.md."""
    import json

    from e2e.framework.results_files import load_rows
    from e2e.fuzz.__main__ import main

    reports = tmp_path / "campaign"
    assert (
        main(["--programs", "3", "--block", "3", "--config", "linalg", "-n", "1", "--reports-dir", str(reports)]) == 0
    )
    rows, run = load_rows(reports)
    assert sorted(r["test"] for r in rows) == ["Gen_0", "Gen_1", "Gen_2"]
    campaign = json.loads((reports / "campaign.json").read_text())
    assert run["campaign"]["last_seed"] == campaign["last_seed"] == 2 and campaign["pairs"] == 3
    report = (reports / "fuzz.md").read_text()
    assert "3 programs, 3 pairs" in report and "new distinct bugs" in report
    block_command = (Path(campaign["batches"][0]["directory"]) / "pytest.log").read_text().splitlines()[0]
    assert " --timeout 10 " in block_command  # linalg alone: a built-in config's budget
    spent = campaign["batches"][0]["worker_seconds"]  # the block's worker: its items hold its pairs
    assert spent["items"] > spent["pairs"] > 0 and "% in pairs, " in report, spent
    assert "<svg" in (reports / "fuzz.html").read_text()
    assert "Fuzzing campaign: distinct bugs" in (reports / "index.html").read_text()
    assert (reports / "cache" / "d" / "e2e-programs").is_dir()  # the blocks' shared program cache


def test_a_block_holds_about_the_same_pairs_whatever_the_configs():
    """A block's fixed start-up is spread over `BLOCK_PAIRS` pairs: more programs on fewer
    configs, up to `MAX_BLOCK`; `--block` still chooses exactly."""
    from e2e.fuzz.__main__ import parser
    from e2e.fuzz.campaign import MAX_BLOCK, default_block

    built_in = ["linalg", "tosa", "stablehlo", "ltc", "torchscript", "eager"]
    assert default_block(built_in) == MAX_BLOCK == 1024
    assert default_block(built_in + [f"runtime{i}" for i in range(7)]) == 472
    assert default_block(["linalg"]) == MAX_BLOCK
    assert parser().parse_args(["--reports-dir", "r"]).block is None  # the default follows the configs
    assert parser().parse_args(["--reports-dir", "r", "--block", "3"]).block == 3


def test_a_campaigns_last_block_is_cut_to_what_fits_in_its_budget():
    """A block starts with as many programs as the previous block's pace says end within the
    budget, and not at all when fewer than a first block's would."""
    from e2e.fuzz.campaign import Batch, fitting

    last = Batch(0, 512, 3072, wall_s=320.0, cpu_s=600.0, exit_status=1, directory="b")  # 1.6 programs/s
    assert fitting(512, 400.0, last) == 512
    assert fitting(512, 200.0, last) == 320
    assert fitting(512, 100.0, last) == 160
    assert fitting(512, 70.0, last) == 112  # a quarter of the block: still worth a block
    assert fitting(512, 29.0, last) == 0  # 46 programs: fewer than a first block's 48
    assert fitting(40, 70.0, last) == 40  # a --programs remainder that fits
    assert fitting(40, 20.0, last) == 0  # 32 of its 40


def test_a_campaign_gives_its_pairs_a_budget_of_their_own(tmp_path):
    """A generated pair is small: the campaign's pytest runs end a pair at `--timeout` (unless
    given, 10 s on the six built-in configs alone, else 30 s), not at the suite's 300 s, so a
    hang (run twice) does not hold a worker for a block's length."""
    from e2e.fuzz import PAIR_BUDGET, pair_budget
    from e2e.fuzz.__main__ import parser
    from e2e.fuzz.campaign import Campaign, Plan

    def budget(command: list[str]) -> str:
        return command[command.index("--timeout") + 1]

    assert pair_budget(["linalg", "tosa", "eager"]) == 10 and pair_budget(["linalg", "tosa@tosa-ref"]) == 30
    assert parser().parse_args(["--reports-dir", "r"]).timeout is None  # then `pair_budget(configs)`
    assert parser().parse_args(["--reports-dir", "r", "--timeout", "15"]).timeout == 15 and PAIR_BUDGET == 30
    campaign = Campaign(["linalg"], Plan(0, 4), tmp_path)
    assert budget(campaign.pytest_command(0, 4, tmp_path / "b")) == "30"
    campaign = Campaign(["linalg"], Plan(0, 4), tmp_path, pair_budget=15)
    assert budget(campaign.pytest_command(0, 4, tmp_path / "b")) == "15"


def test_a_campaign_block_bundles_only_failures_whose_signature_names_no_op():
    """`--reduce-unnamed`: a wrong result or a crash needs its bundle's guilty op to be told
    apart; a compile failure names its op and is reduced once, after triage."""
    from e2e.framework.result import Result
    from e2e.pair import _names_no_op

    def failing(signature: str) -> Result:
        return Result("Gen_0", "linalg", "fail", signature=Signature.parse(signature))

    assert _names_no_op(failing("compare | values"))
    assert _names_no_op(failing("crash | execute | Fatal Python error: Aborted"))
    assert not _names_no_op(
        failing("backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.cumsum'")
    )
    assert not _names_no_op(failing("capture | - | LTC has no lowering for aten::amax"))


def test_a_node_alone_and_a_node_cut_keep_the_types_of_what_they_replace():
    from e2e.fuzz.shrink import alone, cut
    from e2e.generate.program import Node, Program
    from e2e.generate.types import TensorType

    f32 = TensorType((3,), "float32")
    x = InputSpec("x0", f32, dynamic=(0,))
    a = Node("v0", "exp", ("x0",), (), f32)
    b = Node("v1", "add", ("v0", "x0"), (), f32)
    program = Program(5, (x,), (a, b), ("v1",))
    one = alone(program, 1)
    assert one.ops == ["add"] and [(i.name, i.type, i.dynamic) for i in one.inputs] == [
        ("v0", f32, (0,)),  # computed in a dynamic program: dynamic
        ("x0", f32, (0,)),
    ]
    smaller = cut(program, 0)
    assert smaller.ops == ["add"] and [i.name for i in smaller.inputs] == ["x0", "v0_in"]
    assert smaller.nodes[0].inputs == ("v0_in", "x0") and smaller.outputs == ("v1",)


def test_a_cut_node_becomes_an_input_drawn_where_its_values_were():
    """log(exp(x)) with exp cut: its new input, drawn in exp's range, is positive (valid);
    drawn anywhere in [-2, 2] it is not (the generator's domain check turns it away)."""
    from e2e.fuzz.shrink import cut, cut_nodes, value_domains
    from e2e.generate.grow import invalid
    from e2e.generate.program import Node, Program
    from e2e.generate.types import TensorType

    f32 = TensorType((16,), "float32")
    x = InputSpec("x0", f32)
    program = Program(3, (x,), (Node("v0", "exp", ("x0",), (), f32), Node("v1", "log", ("v0",), (), f32)), ("v1",))
    assert invalid(program) is None
    kept = cut_nodes(program, ["v0"], value_domains(program))
    assert kept.ops == ["log"] and kept.inputs[0].domain.low > 0 and invalid(kept) is None
    assert invalid(cut(program, 0)) == "domain"


def test_a_shrink_reaches_one_op_on_the_smallest_shapes_in_plain_dtypes():
    """The search alone (any `still_fails` will do): a bug that needs `exp` shrinks to exp
    of a float32 scalar tensor, cones, cuts, shapes, dims and dtypes each taking a step."""
    from e2e.fuzz.shrink import shrink
    from e2e.generate.program import Node, Program
    from e2e.generate.types import TensorType

    f16 = TensorType((4, 3), "float16")
    nodes = (
        Node("v0", "abs", ("x0",), (), f16),
        Node("v1", "exp", ("v0",), (), f16),
        Node("v2", "neg", ("v1",), (), f16),
        Node("v3", "add", ("v2", "x0"), (), f16),
    )
    program = Program(11, (InputSpec("x0", f16, dynamic=(0,)),), nodes, ("v3",))
    tried = []
    reduced, count = shrink(program, lambda c: tried.append(c) or "exp" in c.ops, seconds=60)
    assert reduced.ops == ["exp"] and count == len(tried)
    assert [(i.type.shape, i.type.dtype, i.dynamic) for i in reduced.inputs] == [((), "float32", ())]
    assert reduced.nodes[0].type == TensorType((), "float32")


ORPHAN_CPU = """
import os, sys, time
from e2e.fuzz.campaign import adopt_orphans, cpu_seconds, reap_orphans

adopted = sys.argv[1] == "adopt" and adopt_orphans()
before = cpu_seconds()  # after the imports, whose cost varies
ended, alive = os.pipe()  # EOF on `ended` once the grandchild has exited
if os.fork() == 0:  # a child that leaves behind a grandchild burning 0.5 s of CPU
    if os.fork() == 0:
        os.close(ended)
        end = time.process_time() + 0.5
        while time.process_time() < end:
            pass
    os._exit(0)
os.close(alive)
os.wait()
os.read(ended, 1)
deadline = time.monotonic() + 30
while adopted and not reap_orphans() and time.monotonic() < deadline:
    time.sleep(0.05)
print(adopted, cpu_seconds() - before)
"""


def test_the_campaigns_cpu_counts_a_descendant_orphaned_under_it():
    """A grandchild whose parent never waits for it: counted once the campaign adopts it."""
    import subprocess
    import sys

    def measured(mode: str) -> tuple[str, float]:
        done = subprocess.run([sys.executable, "-c", ORPHAN_CPU, mode], capture_output=True, text=True, check=True)
        adopted, cpu = done.stdout.split()
        return adopted, float(cpu)

    (adopted, with_it), (_, without) = measured("adopt"), measured("no")
    assert adopted == "True" and with_it > 0.45 and without < 0.25


def test_a_shrink_keeps_the_guilty_op_only_where_the_signature_names_none():
    from e2e.fuzz.shrink import op_to_keep

    crashed = Signature("crash", "backend", "Fatal Python error: Segmentation fault")
    assert op_to_keep(crashed, "torch.aten.matmul") == "matmul"
    assert op_to_keep(Signature("compare", "values"), "aten.remainder.Tensor") == "remainder"
    assert op_to_keep(Signature("compare", "values"), "arith.select") is None  # not a program's op
    named = Signature("backend", "convert-torch-to-tosa", "loc: failed to legalize operation 'torch.aten.cumsum'")
    assert op_to_keep(named, "torch.aten.cumsum") is None  # the signature keeps it


def test_a_candidate_a_spec_cannot_type_is_refused_not_raised():
    """any(x, dim=0) of a (1,) input: its one dim dropped, the spec's infer divides by the rank."""
    from e2e.fuzz.shrink import fewer_dims
    from e2e.generate.program import Node, Program
    from e2e.generate.types import TensorType

    x = InputSpec("x0", TensorType((1,), "bool"))
    node = Node("v0", "any", ("x0",), (("dim", 0), ("keepdim", False)), TensorType((), "bool"))
    assert list(fewer_dims(Program(1, (x,), (node,), ("v0",)))) == [None, None]


def test_a_bypassed_node_hands_its_operand_to_what_read_it():
    from e2e.fuzz.shrink import bypass
    from e2e.generate.program import Node, Program
    from e2e.generate.types import TensorType

    f32 = TensorType((3,), "float32")
    x = InputSpec("x0", f32, dynamic=(0,))
    nodes = (Node("v0", "exp", ("x0",), (), f32), Node("v1", "neg", ("v0",), (), f32))
    smaller = bypass(Program(2, (x,), nodes, ("v1",)), "v0", "x0")
    assert smaller.ops == ["neg"] and smaller.nodes[0].inputs == ("x0",) and smaller.inputs == (x,)


def test_a_limited_reduction_takes_one_bug_per_signature_and_op_round_robin_over_configs():
    """`--reduce-bugs K`: one frontend failure on several configs is one program to shrink;
    each config gets its turn before any gets a second bug."""
    from e2e.fuzz.bugs import COMPILE, Bug
    from e2e.fuzz.triage import chosen_for_reduction

    def bug(config: str, signature: str) -> Bug:
        return Bug(config, Signature.parse(signature), "torch.aten.where", COMPILE, known=False)

    shared = "torch-backend | p | loc: 'func.return': type mismatch"
    bugs = [bug("linalg", shared), bug("linalg", "backend | q | a"), bug("tosa", shared), bug("tosa", "lower | r | b")]
    chosen = chosen_for_reduction(bugs, 3)
    assert [(b.config, b.signature.format()) for b in chosen] == [
        ("linalg", shared),
        ("tosa", "lower | r | b"),  # tosa's copy of the shared failure is skipped
        ("linalg", "backend | q | a"),
    ]
    assert chosen_for_reduction(bugs, None) == bugs


def test_the_triage_names_the_step_that_broke_a_bugs_types(tmp_path):
    """A bug the campaign's reducer did not look at (its signature names an op): the triage
    replays its first pair's saved torch-backend input with the types checked. torch-mlir's
    `fmod.Tensor` shape function types the broadcast as its first operand (the pinned wheel's)."""
    from e2e.fuzz.bugs import COMPILE, Bug, Failure
    from e2e.fuzz.triage import check_types

    saved = tmp_path / "ir" / "Gen_7" / "torchscript"
    saved.mkdir(parents=True)
    (saved / "2-torch-backend.mlir").write_text(
        "func.func @main(%a: !torch.tensor {torch.type_bound = !torch.vtensor<[1,?,1,1],si64>},\n"
        "                %b: !torch.tensor {torch.type_bound = !torch.vtensor<[2],si64>}) -> !torch.tensor {\n"
        "  %0 = torch.aten.fmod.Tensor %a, %b : !torch.tensor, !torch.tensor -> !torch.tensor\n"
        "  return %0 : !torch.tensor\n}\n"
    )
    signature = Signature("backend", "convert-torch-to-linalg", "loc: 'tensor.cast' op operand type")
    bug = Bug(
        "torchscript",
        signature,
        "tensor.cast",
        COMPILE,
        False,
        [Failure("Gen_7", "torchscript", COMPILE, signature, "tensor.cast")],
    )
    untouched = Bug("linalg", signature, None, COMPILE, False, [Failure("Gen_8", "linalg", COMPILE, signature, None)])
    assert check_types([bug, untouched], tmp_path, log=lambda line: None) == 1
    assert bug.types_broke.startswith("types first disagree after torch-lower-to-backend-contract")
    assert "torch.aten.fmod.Tensor declares !torch.vtensor<[1,?,1,1]," in bug.types_broke
    types_bundle = tmp_path / "repro" / "Gen_7" / "torchscript" / "types"
    assert f"bundle={types_bundle} (verified, " in bug.types_broke  # from the step's input, reduced
    assert "torch.aten.fmod.Tensor" in (types_bundle / "repro.mlir").read_text()
    assert bug.types_root == "the result shape of torch.aten.fmod.Tensor"
    assert untouched.types_broke is None  # nothing saved to replay


def test_bugs_whose_types_one_fold_broke_are_one_root_across_configs_and_passes():
    """The where(c, x, x) fold shows as a `func.return` mismatch on linalg and as a refused
    `lt` after torchscript's calling-convention pass: two bugs, one root in the report."""
    from e2e.fuzz.bugs import COMPILE, Bug, Classified, Failure
    from e2e.fuzz.report import roots

    def bug(config: str, message: str, root: str | None) -> Bug:
        signature = Signature("backend", "some-pass", message)
        failure = Failure(f"Gen_{config}", config, COMPILE, signature, None, None, "types first disagree ...", root)
        return Bug(config, signature, None, COMPILE, False, [failure])

    fold = "a fold or rewrite of torch.aten.where.self"
    classified = Classified(
        [
            bug("linalg", "func.return type mismatch", fold),
            bug("torchscript", "tensor.cast cannot cast", fold),
            bug("tosa", "failed to legalize", None),
        ]
    )
    found = roots(classified)
    assert list(found) == [fold]  # tosa's bug: no guilty op, no root
    assert [(number, b.config) for number, b in found[fold]] == [(1, "linalg"), (2, "torchscript")]


def test_a_campaign_reads_its_programs_back_as_its_blocks_ran_them(tmp_path):
    """A seed names a program for one version of the generator: triage reads a block's saved
    programs (a later generator could grow another from the same seed), grows only the rest."""
    from e2e.fuzz.programs import CampaignPrograms
    from e2e.generate.grow import generate
    from e2e.generate.register import PROGRAMS_FILE

    # As if an older generator had grown another program for seed 3: the block's file wins.
    other = generate(11).to_json()
    block = tmp_path / "batches" / "00000003"
    block.mkdir(parents=True)
    (block / PROGRAMS_FILE).write_text(json.dumps({"seeds": [3, 4], "programs": [other, generate(4).to_json()]}))
    programs = CampaignPrograms.load(tmp_path)
    assert programs(3).to_json() == other != generate(3).to_json()
    assert programs(4).to_json() == generate(4).to_json()
    assert programs(5).to_json() == generate(5).to_json()  # no block saved it: grown
    assert programs.of_test("Gen_3").to_json() == other and programs.of_test("MmModule_basic") is None


def test_a_kept_regression_is_reused_only_for_the_program_it_was_shrunk_from():
    from e2e.fuzz.triage import shrunk_from
    from e2e.generate.grow import generate

    original = next(p for p in map(generate, range(50)) if len(p.nodes) >= 3)
    last = original.nodes[-1]
    kept = original.__class__(original.seed, original.inputs, (last,), (last.name,), original.checks)
    assert shrunk_from(kept, original)
    stranger = next(
        p
        for p in map(generate, range(50, 100))
        if {(n.name, n.op) for n in p.nodes} - {(n.name, n.op) for n in original.nodes}
    )
    assert not shrunk_from(stranger, original)


def test_the_report_counts_the_verdicts_each_oracle_check_turned_away():
    """From the Results' fields (`check`, `check_turned_away`), as the runner fills them from
    the oracle's Explanation; a note that says the same words counts for nothing."""
    from e2e.framework.result import Result
    from e2e.fuzz.report import oracle_counts

    def ruled(explanation, note: str = "") -> Result:
        return Result(
            "Gen_1", "linalg", "pass", check=explanation.check, check_turned_away=explanation.turned_away, notes=[note]
        )

    acquitted, kept = judged_half_cancel(0.0), judged_half_cancel(2.0)
    results = [ruled(acquitted), ruled(kept), Result("Gen_2", "linalg", "fail", notes=[acquitted.notes[0]])]
    counts = oracle_counts(results)
    assert counts["rounding band"] == 1 and counts["narrow accumulation"] == 0 and counts["float64 distance"] == 0


def test_a_timed_campaign_measures_its_pace_on_a_small_first_block(tmp_path, monkeypatch):
    """With a time budget, the first block is small (nothing is measured yet: the default
    block of 1,024 programs on six configs is an hour on 2 cores), and each next block at
    most twice the last, as many as its pace says end in time."""
    import e2e.fuzz.campaign as campaign_module
    from e2e.fuzz.campaign import FIRST_TIMED_BLOCK, Batch, Campaign, Plan

    clock = [0.0]
    monkeypatch.setattr(campaign_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(campaign_module, "adopt_orphans", lambda: None)
    counts = []

    def run_batch(self, first_seed, count):
        counts.append(count)
        clock[0] += count * 2.0  # 0.5 programs/s
        batch = Batch(first_seed, count, 6 * count, wall_s=count * 2.0, cpu_s=0.0, exit_status=0, directory="b")
        self.batches.append(batch)
        return batch

    monkeypatch.setattr(Campaign, "run_batch", run_batch)
    monkeypatch.setattr(Campaign, "record", lambda self, wall: {})
    Campaign(["linalg"], Plan(0, 1024), tmp_path, minutes=10).run(log=lambda line: None)
    assert counts[0] == FIRST_TIMED_BLOCK
    assert all(b <= 2 * a for a, b in zip(counts, counts[1:])), counts
    assert sum(counts) * 2.0 <= 10 * 60 + FIRST_TIMED_BLOCK * 2.0, counts

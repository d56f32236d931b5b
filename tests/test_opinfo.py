"""The OpInfo sweep's collection and coverage table, on a few hand-made OpInfo entries (no op_db import)."""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

from e2e.opinfo import collect as c
from e2e.opinfo.op_matrix import cell_text, coverage, op_of


def _op(name, fn, samples, **kwargs):
    def sample_inputs(op, device, dtype, requires_grad, **_):
        for make in samples:
            yield make(dtype)

    return OpInfo(
        name,
        op=fn,
        sample_inputs_func=sample_inputs,
        dtypes=kwargs.pop("dtypes", (torch.float32, torch.int64)),
        **kwargs,
    )


def _ones(*shape):
    return lambda dtype: torch.ones(*shape, dtype=dtype)


OPS = [
    _op(
        "add",
        torch.add,
        [lambda d: SampleInput(torch.ones(2, dtype=d), args=(torch.ones(2, dtype=d),), kwargs={"alpha": 2})] * 4,
    ),
    _op(
        "nn.functional.pad",
        torch.nn.functional.pad,
        [
            lambda d: SampleInput(
                torch.ones(1, 2, 3, dtype=d), args=((1, 1),), kwargs={"mode": "constant", "value": None}
            )
        ],
        variant_test_name="constant",
    ),
    _op(
        "rand_like",
        lambda x: torch.rand_like(x.float()),
        [lambda d: SampleInput(torch.ones(50, dtype=d))],
        dtypes=(torch.float32,),
    ),
    _op("raises", lambda x: x.view(7), [lambda d: SampleInput(torch.ones(3, dtype=d))], dtypes=(torch.float32,)),
    _op("item", lambda x: x.item(), [lambda d: SampleInput(torch.ones((), dtype=d))], dtypes=(torch.float32,)),
    _op("int_only", torch.bitwise_not, [lambda d: SampleInput(torch.ones(2, dtype=d))], dtypes=(torch.int64,)),
]


def test_collection_takes_first_samples_and_classifies_the_rest():
    collection = c.collect(OPS)
    names = [case.name for case in collection.cases]
    assert names == [
        "OpInfo_add_0",
        "OpInfo_add_1",
        "OpInfo_add_2",
        "OpInfo_add_int64_0",
        "OpInfo_nn_functional_pad_constant_0",
        "OpInfo_nn_functional_pad_constant_int64_0",
        "OpInfo_int_only_int64_0",
    ]
    reasons = {(s.op, s.reason) for s in collection.skips}
    assert ("rand_like", c.RANDOM) in reasons
    assert ("raises", c.NATIVE_RAISES) in reasons
    assert ("item", c.NON_TENSOR_OUTPUT) in reasons
    assert ("int_only", c.NO_FLOAT32) in reasons
    assert ("add", c.INPLACE) in reasons  # torch.add has an in-place variant, add_
    assert "entries with no test at all: 3" in collection.summary()


def test_a_case_rebuilds_its_sample_from_forward_arguments():
    case = next(x for x in c.collect(OPS).cases if x.name == "OpInfo_nn_functional_pad_constant_0")
    module = c.OpInfoModule(case)
    out = module(torch.full((1, 2, 3), 5.0))  # value=None (a constant) and the pad widths are kept
    assert out.shape == (1, 2, 5) and out[0, 0, 0] == 0 and out[0, 0, 1] == 5
    test = c.as_test(case)
    assert test.marks[0] == "opinfo" and test.timeout_seconds == c.TIMEOUT_SECONDS


def test_coverage_table_per_op_and_config():
    rows = [
        {"test": "OpInfo_add_0", "config": "linalg", "outcome": "pass", "stage": None},
        {"test": "OpInfo_add_int64_0", "config": "linalg", "outcome": "fail", "stage": "backend"},
        {"test": "OpInfo_add_0", "config": "tosa", "outcome": "pass", "stage": None},
        {"test": "OpInfo_nn_functional_pad_constant_1", "config": "tosa", "outcome": "pass", "stage": None},
        {"test": "Unrelated", "config": "tosa", "outcome": "fail", "stage": "lower"},
    ]
    report = coverage(rows)
    assert op_of("OpInfo_add_int64_0") == "add" and op_of("Unrelated") is None
    assert report["ops_passing_everywhere"] == {"linalg": 0, "tosa": 2}
    assert cell_text(report["ops"]["add"]["linalg"]) == "1/2 backend"
    assert cell_text(report["ops"]["add"]["tosa"]) == "pass"


def test_a_case_survives_the_golden_trace_deep_copy():
    import copy

    case = next(x for x in c.collect(OPS).cases if x.name == "OpInfo_add_0")
    module = copy.deepcopy(c.OpInfoModule(case))
    assert module(torch.ones(2), torch.ones(2)).tolist() == [3.0, 3.0]  # alpha=2 kept


def test_an_op_that_reseeds_per_call_is_random():
    def reseeded_rand_like(x):  # as OpInfo's wrapper_set_seed: seed 42 inside, the RNG state restored
        with torch.random.fork_rng():
            torch.manual_seed(42)
            return torch.rand_like(x)

    seeded = _op("seeded", reseeded_rand_like, [lambda d: SampleInput(torch.ones(4, dtype=d))], dtypes=(torch.float32,))
    collection = c.collect([seeded])
    assert not collection.cases and collection.skips[0].reason == c.RANDOM


def test_the_opinfo_slice_option_chooses_the_suite_and_its_xfail_sets(pytester):
    from e2e.opinfo import SLICES
    from e2e.session import STATE

    pytester.makeini("[pytest]\ne2e_suite = my_suite\ne2e_xfail_dir = my_xfails\n")  # as this checkout's pyproject
    state = pytester.parseconfigure("--opinfo-slice", "ci", "--collect-only", "-p", "no:cacheprovider").stash[STATE]
    assert state.settings.suite_paths == [SLICES["ci"].suite] and state.settings.xfail_dir == SLICES["ci"].xfail_dir
    assert state.settings.xfail_dir.name == "ci" and (state.settings.xfail_dir / "linalg.txt").is_file()
    rerun = state.settings.rerun_command(SLICES["ci"].suite / "opinfo_ci.py", "OpInfo_abs_0::linalg")
    assert rerun.endswith("opinfo_ci.py::OpInfo_abs_0::linalg --opinfo-slice ci")
    full = (
        pytester.parseconfigure(
            "--opinfo-slice", "full", "--xfail-dir", "mine", "--import-timeout", "600", "--collect-only"
        )
        .stash[STATE]
        .settings
    )
    assert state.settings.rerun_command(SLICES["ci"].suite / "opinfo_ci.py", "T::linalg").count("--import-timeout") == 0
    assert full.rerun_command(SLICES["full"].suite / "opinfo_sweep.py", "T::linalg").endswith(
        "--opinfo-slice full --xfail-dir mine --import-timeout 600"
    )
    assert full.suite_paths == [SLICES["full"].suite] and full.xfail_dir.name == "mine"  # an explicit dir wins
    with pytest.raises(pytest.UsageError, match="--opinfo-slice chooses the suite"):
        pytester.parseconfigure("--opinfo-slice", "ci", "--e2e-suite", "elsewhere", "--collect-only")


def test_the_ini_xfail_sets_belong_to_the_ini_suite(pytester):
    from e2e.session import STATE

    pytester.makeini("[pytest]\ne2e_suite = my_suite\ne2e_xfail_dir = my_xfails\n")
    assert pytester.parseconfigure("--collect-only").stash[STATE].settings.xfail_dir.name == "my_xfails"
    other = pytester.parseconfigure("--e2e-suite", "other_suite", "--collect-only").stash[STATE].settings
    assert other.xfail_dir is None  # the issue's `pytest e2e/opinfo/suite --e2e-suite e2e/opinfo/suite`

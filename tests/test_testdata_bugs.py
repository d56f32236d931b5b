"""The distinct bugs of StableHLO's testdata xfail sets (`benchmarks/testdata_bugs.py`),
grouped from real entries of the recorded sets."""

from pathlib import Path

import pytest

from benchmarks.testdata_bugs import distinct_bugs, element_kind
from e2e.configs.xfails import read_xfails
from e2e.stablehlo_testdata.explain import program_op_under_test
from e2e.stablehlo_testdata.ops import OpUse
from e2e.stablehlo_testdata.register import corpus_dir, program_path

# Real lines of e2e/stablehlo_testdata/xfail/testdata-{refbackend,iree}.txt (without their notes).
REFBACKEND = """\
stablehlo/acosh_complex64_20_20_chlo  # fail: compare | - | check.expect_close of result 0: 3 of 400 elements: ULP distance outside [N, 3] (largest 8); first at [N, 11]: got (0.10132493078708649+0.9986892342567444j), expected (0.10132497549057007+0.9986892342567444j)
stablehlo/asinh_float32_20_20_chlo  # fail: compare | - | check.expect_close of result 0: 12 of 400 elements: ULP distance outside [N, 3] (largest 54); first at [N, 14]: got -0.11035820841789246, expected -0.11035826057195663
stablehlo/cosh_complex128_20_20_chlo  # fail: lower | convert-complex-to-llvm | loc: failed to legalize operation 'complex.log' that was explicitly marked illegal: %v = "complex.log"(%v) <{fastmath = #arith.fastmath<none>}> : (complex<f64>) -> complex<f64>
stablehlo/cosh_complex64_20_20_chlo  # fail: lower | convert-complex-to-llvm | loc: failed to legalize operation 'complex.log' that was explicitly marked illegal: %v = "complex.log"(%v) <{fastmath = #arith.fastmath<none>}> : (complex<f32>) -> complex<f32>
stablehlo/dot_general_int32_4_3_float16_3_6  # fail: compare | - | check.expect_almost_eq of result 0: 5 of 24 elements: not within 0.0001 (absolute, same sign); first at [N, 3]: got -16.390625, expected -16.375
stablehlo/dot_general_uint32_4_3_bfloat16_3_6  # fail: compare | - | check.expect_almost_eq of result 0: 3 of 24 elements: not within 0.0001 (absolute, same sign); first at [N, 1]: got 39.75, expected 39.5
stablehlo/fft_complex64_14_15_16_17  # fail: lower | one-shot-bufferize | loc: op was not bufferized
stablehlo/random_gamma_float32_chlo  # fail: lower | one-shot-bufferize | loc: op was not bufferized
stablehlo/scatter_add_float32_1_1_float32_1  # fail: lower | one-shot-bufferize | loc: op was not bufferized
stablehlo/scatter_add_int32_1_125_int32_1  # fail: lower | one-shot-bufferize | loc: op was not bufferized
"""
IREE = """\
stablehlo/fft_complex64_14_15_16_17  # fail: lower | python:compiler.executors.replay:iree_stablehlo | iree-compile: error: failed to legalize operation 'stablehlo.fft' that was explicitly marked illegal: %v = "stablehlo.fft"(%v) <{fft_length = array<i64: 15, 16, 32>, fft_type = #stablehlo<fft_type IRFFT>}> : (tensor<NxNxNxNxcomplex<f32>>) -> tensor<NxNxNxNxf32> loc
stablehlo/scatter_float32_1_5_float32_1  # timeout: timeout | lower
stablehlo/select_and_scatter_add_bfloat16_1_3_5_bfloat16_2_4_6  # fail: lower | python:compiler.executors.replay:iree_stablehlo | iree-compile: error: failed to legalize operation 'stablehlo.select_and_scatter' that was explicitly marked illegal: %v = "stablehlo.select_and_scatter"(%v, %v, %v) <{window_dimensions = array<i64: 2, 2, 2>}> ({...}, {...}) : (tensor<NxNxNxbf16>, tensor<NxNxNxbf16>, tensor<bf16>) -> tensor<NxNxNxbf1
"""
OPS = {
    "stablehlo/scatter_add_float32_1_1_float32_1": OpUse("stablehlo.scatter", "f32"),
    "stablehlo/scatter_float32_1_5_float32_1": OpUse("stablehlo.scatter", "f32"),
    "stablehlo/scatter_add_int32_1_125_int32_1": OpUse("stablehlo.scatter", "i32"),
    "stablehlo/fft_complex64_14_15_16_17": OpUse("stablehlo.fft", "complex<f32>->f32"),
    "stablehlo/random_gamma_float32_chlo": None,  # a composite: a while loop of many ops
    "stablehlo/dot_general_int32_4_3_float16_3_6": OpUse("stablehlo.dot_general", "f16"),
    "stablehlo/dot_general_uint32_4_3_bfloat16_3_6": OpUse("stablehlo.dot_general", "bf16"),
    "stablehlo/acosh_complex64_20_20_chlo": OpUse("chlo.acosh", "complex<f32>"),
    "stablehlo/asinh_float32_20_20_chlo": OpUse("chlo.asinh", "f32"),
}


def bugs_of(tmp_path: Path, config: str, lines: str, asked: list[str]):
    path = tmp_path / f"{config}.txt"
    path.write_text(lines)
    entries = [(entry.test, entry.reason) for entry in read_xfails(path, None)]

    def op_of(test: str) -> OpUse | None:
        asked.append(test)
        return OPS[test]

    return {bug.label(): sorted(bug.programs) for bug in distinct_bugs(config, entries, op_of)}


def test_generic_messages_split_by_op_under_test(tmp_path):
    asked: list[str] = []
    bugs = bugs_of(tmp_path, "testdata-refbackend", REFBACKEND, asked)
    bufferize = "fail: lower | one-shot-bufferize | loc: op was not bufferized"
    assert bugs[f"{bufferize} [stablehlo.scatter]"] == [
        "stablehlo/scatter_add_float32_1_1_float32_1",
        "stablehlo/scatter_add_int32_1_125_int32_1",
    ]  # one op on two types: one bug
    assert bugs[f"{bufferize} [stablehlo.fft]"] == ["stablehlo/fft_complex64_14_15_16_17"]
    assert bugs[f"{bufferize} [no op under test: random]"] == ["stablehlo/random_gamma_float32_chlo"]
    # A message that names its op is one bug whatever the programs test; their ops are not read.
    complex_log = [label for label in bugs if "'complex.log'" in label]
    assert len(complex_log) == 1 and len(bugs[complex_log[0]]) == 2
    assert not any(test.startswith("stablehlo/cosh_") for test in asked)
    # Wrong results: by op and the kind of element type (f16 and bf16 both float).
    dot = [label for label in bugs if label.endswith("[stablehlo.dot_general on float]")]
    assert len(dot) == 1 and len(bugs[dot[0]]) == 2
    assert any(label.endswith("[chlo.acosh on complex]") for label in bugs)
    assert any(label.endswith("[chlo.asinh on float]") for label in bugs)
    assert len(bugs) == 7


def test_message_cut_short_keeps_the_op_it_names(tmp_path):
    bugs = bugs_of(tmp_path, "testdata-iree", IREE, [])
    assert len(bugs) == 3  # fft and select_and_scatter differ only after 60 characters
    assert any(label.endswith("... stablehlo.select_and_scatter") for label in bugs)
    assert "timeout: timeout | lower [stablehlo.scatter]" in bugs  # no message: by op under test


def test_element_kind():
    assert element_kind("complex<f64>") == "complex"
    assert element_kind("bf16") == element_kind("f64") == "float"
    assert element_kind("ui8->i32") == "unsigned->integer"
    assert element_kind("i8->i32") == "integer"
    assert element_kind("!quant.uniform<i8:f32>") == "quantized"


@pytest.mark.skipif(corpus_dir() is None, reason="no StableHLO testdata (set $STABLEHLO_TESTDATA)")
def test_the_ops_above_are_the_programs_ops_under_test():
    for test, use in OPS.items():
        assert program_op_under_test(program_path(corpus_dir(), test), test) == use, test

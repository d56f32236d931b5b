"""Failure signatures: one type, its text as results, bundles and xfail files carry it."""

from pathlib import Path

import pytest

from e2e.configs.xfails import read_xfails
from e2e.framework.signature import (
    Signature,
    broken_test_signature,
    crash_signature,
    ended_signature,
    mismatch_signature,
    stage_signature,
)

ROOT = Path(__file__).resolve().parents[1]
XFAIL_DIRS = ("e2e/configs/xfail", "e2e/opinfo/xfail", "e2e/onnx_backend/xfail", "e2e/stablehlo_testdata/xfail")


def recorded_signatures() -> list[str]:
    """Every `<outcome>: <signature>` the checkout's xfail sets record."""
    found = []
    for directory in XFAIL_DIRS:
        for path in sorted((ROOT / directory).glob("*.txt")):
            for entry in read_xfails(path, None):
                if entry.expected:  # the entry read its signature; its text is the reason's rest
                    text = entry.reason.partition(": ")[2]
                    assert Signature.parse(text) == entry.expected[1]
                    found.append(text)
    return found


def test_every_recorded_signature_reads_back_to_its_own_text():
    signatures = recorded_signatures()
    assert len(signatures) > 1000
    stages = set()
    for text in signatures:
        signature = Signature.parse(text)
        assert signature.format() == str(signature) == text
        place = " | ".join(part for part in (signature.stage, signature.where) if part is not None)
        assert text.startswith(place) and signature.key().startswith(place)
        assert signature.op is None or signature.op in text
        stages.add(signature.stage)
    assert {"backend", "capture", "compare", "crash", "timeout"} <= stages


@pytest.mark.parametrize(
    "text, fields, key",
    [
        (
            "backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.asin'",
            ("backend", "convert-torch-to-tosa", "loc: failed to legalize operation 'torch.aten.asin'"),
            "backend | convert-torch-to-tosa | torch.aten.asin",
        ),
        ("compare | values", ("compare", "values", None), "compare | values"),
        ("compare | nan", ("compare", "nan", None), "compare | nan"),
        ("timeout | torch-backend", ("timeout", "torch-backend", None), "timeout | torch-backend"),
        (
            "crash | backend | Fatal Python error: Segmentation fault",
            ("crash", "backend", "Fatal Python error: Segmentation fault"),
            "crash | backend",
        ),
        ("capture | - | a | b in the message", ("capture", "-", "a | b in the message"), "capture | -"),
        ("lower | one-shot-bufferize |", ("lower", "one-shot-bufferize", ""), "lower | one-shot-bufferize"),
        (
            "lower | one-shot-bufferize | loc: 'stablehlo.scatter': op was not bufferized",
            ("lower", "one-shot-bufferize", "loc: 'stablehlo.scatter': op was not bufferized"),
            "lower | one-shot-bufferize | stablehlo.scatter",
        ),
        ("", ("", None, None), ""),
    ],
    ids=["stage", "mismatch", "nan", "timeout", "crash", "bar-in-message", "stripped-line", "bufferize-op", "none"],
)
def test_parse_splits_stage_where_message_and_keys_the_place(text, fields, key):
    signature = Signature.parse(text)
    assert (signature.stage, signature.where, signature.message) == fields
    assert signature.key() == key


def test_the_key_carries_the_op_the_message_blames():
    legalize = Signature.parse("backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.asin'")
    assert legalize.op == "torch.aten.asin"
    assert legalize.key() == "backend | convert-torch-to-tosa | torch.aten.asin"
    unknown = Signature.parse(
        "torch-backend | torch-reduce-op-variants | loc: failed to legalize operation 'torch.operator' that was "
        'explicitly marked illegal: %v = "torch.operator"(%v) <{name = "torch.aten.special_i0e"}>'
    )
    assert unknown.op == "torch.aten.special_i0e"  # the op torch.operator stands for
    assert Signature.parse("lower | tosa-to-linalg | loc: 'tosa.reshape' op expected rank 2").op == "tosa.reshape"
    assert Signature.parse("compare | values").op is None


def test_an_entry_that_names_no_op_covers_any_op_and_one_that_names_one_only_its_own():
    scatter = Signature.parse("lower | one-shot-bufferize | loc: 'stablehlo.scatter': op was not bufferized")
    sort = Signature.parse("lower | one-shot-bufferize | loc: 'stablehlo.sort': op was not bufferized")
    unnamed = Signature.parse("lower | one-shot-bufferize | loc: op was not bufferized")
    assert scatter.covers(scatter) and not scatter.covers(sort) and not scatter.covers(unnamed)
    assert unnamed.covers(scatter) and unnamed.covers(sort)
    assert not unnamed.covers(Signature.parse("lower | convert-complex-to-llvm | loc: 'complex.exp' op bad"))


def test_a_pass_failure_whose_message_names_no_op_is_signed_with_the_op_its_note_prints():
    from compiler.stages import StageError, parse_module, run_stage

    module = parse_module(
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.abs %a : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}"
    )
    with pytest.raises(StageError) as raised:
        run_stage(module, "lower", ["one-shot-bufferize{bufferize-function-boundaries}"])
    error = raised.value
    signature = stage_signature(error.stage, error.message, error.failing_pass)
    assert signature.format() == "lower | one-shot-bufferize | loc: 'stablehlo.abs': op was not bufferized"
    assert signature.key() == "lower | one-shot-bufferize | stablehlo.abs"


def test_the_constructors_make_values_whose_text_reads_back():
    made = [
        stage_signature("backend", "'tosa.add' op at 0x7f00dead bad", "func.func(p{x=1})"),
        crash_signature("lower", "noise\nLLVM ERROR: boom\n", "killed by SIGABRT"),
        mismatch_signature("shape"),
        ended_signature("memory", "execute"),
        broken_test_signature("deepcopy"),
        stage_signature("import", ""),
    ]
    assert made == [
        Signature("backend", "p", "'tosa.add' op at <addr> bad"),
        Signature("crash", "lower", "LLVM ERROR: boom"),
        Signature("compare", "shape"),
        Signature("memory", "execute"),
        Signature("golden", "broken test", "deepcopy"),
        Signature("import", "-", ""),
    ]
    assert [signature.format() for signature in made[2:]] == [
        "compare | shape",
        "memory | execute",
        "golden | broken test | deepcopy",
        "import | - | ",
    ]
    assert all(Signature.parse(signature.format()) == signature for signature in made)

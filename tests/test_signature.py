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
            found += [entry.expected[1] for entry in read_xfails(path, None) if entry.expected]
    return found


def test_every_recorded_signature_reads_back_to_its_own_text():
    signatures = recorded_signatures()
    assert len(signatures) > 1000
    stages = set()
    for text in signatures:
        signature = Signature.parse(text)
        assert signature.format() == str(signature) == text
        assert text.startswith(signature.key()) or signature.key() == "compare | values"
        stages.add(signature.stage)
    assert {"backend", "capture", "compare", "crash", "timeout"} <= stages


@pytest.mark.parametrize(
    "text, fields, key",
    [
        (
            "backend | convert-torch-to-tosa | loc: failed to legalize operation 'torch.aten.asin'",
            ("backend", "convert-torch-to-tosa", "loc: failed to legalize operation 'torch.aten.asin'"),
            "backend | convert-torch-to-tosa",
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
        ("", ("", None, None), ""),
    ],
    ids=["stage", "mismatch", "nan", "timeout", "crash", "bar-in-message", "stripped-line", "none"],
)
def test_parse_splits_stage_where_message_and_keys_the_place(text, fields, key):
    signature = Signature.parse(text)
    assert (signature.stage, signature.where, signature.message) == fields
    assert signature.key() == key


def test_the_constructors_write_what_parse_reads():
    assert Signature.parse(stage_signature("backend", "'tosa.add' op at 0x7f00dead bad", "func.func(p{x=1})")) == (
        Signature("backend", "p", "'tosa.add' op at <addr> bad")
    )
    assert Signature.parse(crash_signature("lower", "noise\nLLVM ERROR: boom\n", "killed by SIGABRT")) == Signature(
        "crash", "lower", "LLVM ERROR: boom"
    )
    assert mismatch_signature("shape") == "compare | shape"
    assert ended_signature("memory", "execute") == "memory | execute"
    assert broken_test_signature("deepcopy") == "golden | broken test | deepcopy"
    assert Signature.parse(stage_signature("import", "")).format() == "import | - | "

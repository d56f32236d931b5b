"""The ONNX backend test suite as an e2e suite file (generated from the installed onnx).

    python -m pytest e2e/onnx_backend/suite --e2e-suite e2e/onnx_backend/suite \
        --xfail-dir e2e/onnx_backend/xfail --config onnx -n 2

Needs the onnx extra; without it the file is skipped with the reason.
"""

import pytest

pytest.importorskip("onnx", reason='needs the onnx extra: pip install -e ".[onnx]"')

from e2e.onnx_backend.cases import all_cases  # noqa: E402
from e2e.onnx_backend.register import register_cases  # noqa: E402

SKIPPED = register_cases(all_cases(), __file__)

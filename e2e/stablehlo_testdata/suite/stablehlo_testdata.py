"""StableHLO's testdata as an e2e suite file: one test per program of the corpus that
`--stablehlo-testdata DIR` (or $STABLEHLO_TESTDATA) names, by default the shared copy
`<checkout>/../shared/corpora/stablehlo-testdata`.

    python -m pytest e2e/stablehlo_testdata/suite --e2e-suite e2e/stablehlo_testdata/suite \
        --xfail-dir e2e/stablehlo_testdata/xfail \
        --config e2e.stablehlo_testdata.configs:REFBACKEND,e2e.stablehlo_testdata.configs:INTERP -n 2

Without a corpus the file is skipped with the reason.
"""

import pytest

from e2e.stablehlo_testdata.register import ENV, OPTION, corpus_dir, register_programs

ROOT = corpus_dir()
if ROOT is None or not ROOT.is_dir():
    pytest.skip(
        f"no StableHLO testdata: pass {OPTION} DIR (or set ${ENV}) to a checkout of openxla/stablehlo "
        "or its stablehlo/testdata directory",
        allow_module_level=True,
    )

SKIPPED = register_programs(ROOT, __file__)

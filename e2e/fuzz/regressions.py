"""Regression tests of a campaign's bugs, written into the suite.

Each new distinct bug's smallest program is saved, as its JSON, in
`e2e/test_suite/generated_regressions.py` (`PROGRAMS`: test name -> program), which
registers them as ordinary suite tests (`register_regressions`). The campaign then runs
those tests on its configs through pytest (so the plugin writes each failure's reduced,
verified bundle under `<reports>/regressions/repro/<test>/<config>/`), records each
failing pair in its config's xfail set with its signature (`e2e.configs.update_xfails`,
which touches only the pairs that ran), and runs each bundle's `repro.py`, which must
exit 1 while the bug is there.
"""

from __future__ import annotations

import ast
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from compiler.replay_runtime.replay import HANG_ARMED, REPRODUCED
from e2e.framework import isolation
from e2e.fuzz import PAIR_BUDGET, pytest_command
from e2e.generate.program import Program

SUITE_FILE = Path(__file__).resolve().parents[1] / "test_suite" / "generated_regressions.py"
HEADER = '''"""Regression tests from fuzzing campaigns (`python -m e2e.fuzz`, docs/fuzz.md).

Each entry is the smallest generated program that shows one distinct bug, as its JSON
(`e2e.generate.program.Program`), its inputs drawn as the generator drew them; the
campaign writes this file and the xfail entries of the configs each program fails on.
"""

from e2e.fuzz.regressions import register_regressions

'''


def test_name(program: Program, config: str) -> str:
    """`GenBug_<seed>_<config>`: one regression per (seed, config)."""
    return f"GenBug_{program.seed}_{re.sub(r'[^0-9A-Za-z]', '_', config)}"


def register_regressions(programs: Mapping[str, str]) -> list[str]:
    """Register each program (name -> its JSON) as a suite test carrying the generated
    programs' oracle; the names."""
    from e2e.framework.registry import register
    from e2e.generate.register import program_test

    return [register(program_test(Program.from_json(text), name)).name for name, text in programs.items()]


def read_programs(path: Path = SUITE_FILE) -> dict[str, str]:
    """The `PROGRAMS` a regressions file holds ({} when it does not exist)."""
    if not path.is_file():
        return {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PROGRAMS" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def write_programs(programs: Mapping[str, str], path: Path = SUITE_FILE) -> None:
    """Write the regressions file: `programs` added to those it holds, sorted by name."""
    merged = {**read_programs(path), **programs}
    # As ruff formats it: names in double quotes; JSON (double quotes inside) in single ones.
    body = "".join(f'    "{name}": {text!r},\n' for name, text in sorted(merged.items()))
    path.write_text(HEADER + "PROGRAMS = {\n" + body + "}\n\nTESTS = register_regressions(PROGRAMS)\n")


def run_regressions(names: list[str], configs: list[str], reports_dir: Path, workers: int = 1) -> int:
    """Run the regression tests `names` on `configs` through pytest (bundles written);
    pytest's exit status."""
    command = pytest_command(
        configs,
        reports_dir,
        workers,
        str(SUITE_FILE),
        "--no-result-cache",
        "-k",
        " or ".join(names),
        "--timeout",  # a new regression's hang is not listed yet: the campaign's budget, not the suite's
        f"{PAIR_BUDGET:g}",
    )
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    reports_dir.mkdir(parents=True, exist_ok=True)
    (reports_dir / "pytest.log").write_text(" ".join(command) + "\n" + done.stdout)
    return done.returncode


def verify_bundle(bundle: Path, seconds: float = 300.0) -> bool:
    """Whether the bundle's `repro.py` exits 1 saying REPRODUCED (the bug is there, as the
    bundle says; an exception in the replay exits 1 too, without the word), or, a hang's
    bundle, ends by the SIGALRM it armed (`HANG_ARMED`) before its replay gave a result."""
    try:
        done = isolation.run_command([sys.executable, "repro.py"], timeout=seconds, cwd=bundle)
    except subprocess.TimeoutExpired:
        return False
    if done.returncode == -signal.SIGALRM:
        return HANG_ARMED in done.stdout
    return done.returncode == 1 and REPRODUCED in done.stdout

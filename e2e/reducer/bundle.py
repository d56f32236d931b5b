"""Reproducer bundles: `reports/repro/<test>/<config>/`, shared by failures of one signature.

A bundle holds `repro.mlir` (reduced, weights as resources, MLIR's `mlir_reproducer`
resource naming the pipeline), `repro.py` (exits 1 while the bug is there),
`case.json`, `inputs.npz` / `expected.npz` for mismatches, `original.mlir`,
`tests.txt` (every test that hit it) and an issue-ready `README.md`. Writes are atomic
and names are unique per process, so `pytest -n 2` workers never collide; the first
worker to claim a signature (an O_EXCL file) writes the bundle, the others add their
test to it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from compiler.pipelines import as_text
from compiler.stages import write_atomic
from e2e.reducer.case import CRASH, MISMATCH, Case

REPO_ROOT = Path(__file__).resolve().parents[2]
INDEX_DIR = "_signatures"


@dataclass
class BundleInfo:
    test: str
    config: str
    case: Case
    repro_ir: str
    original_ir: str
    ops_before: int
    ops_after: int
    queries: int = 0
    seconds: float = 0.0
    minimal: bool = False
    inputs: list[np.ndarray] | None = None
    expected: list[np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)


def with_reproducer_resource(text: str, pipeline: list[str]) -> str:
    """Append MLIR's reproducer resource (as `mlir-opt --run-reproducer` reads it)."""
    pipeline_text = as_text(pipeline).replace("\\", "\\\\").replace('"', '\\"')
    entry = (
        "  external_resources: {\n    mlir_reproducer: {\n"
        f'      pipeline: "{pipeline_text}",\n'
        "      disable_threading: true,\n      verify_each: true\n    }\n  }"
    )
    text = text.rstrip()
    if text.endswith("#-}"):  # already has resources (dense_resource weights): one section
        head, _, tail = text.rpartition("{-#")
        return f"{head}{{-#\n{entry},{tail.lstrip(chr(10))}\n"
    return f"{text}\n\n{{-#\n{entry}\n#-}}\n"


def signature_key(config: str, case: Case) -> str:
    return hashlib.sha1(f"{config}\n{case.signature}\n{case.guilty_op}".encode()).hexdigest()[:16]


def claim(repro_root: Path, key: str, bundle_dir: Path) -> Path | None:
    """Claim `key` for `bundle_dir`; the existing bundle when another failure got there first."""
    index = repro_root / INDEX_DIR / key
    index.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(index, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        owner = Path(index.read_text().strip() or bundle_dir)
        return owner if (owner / "case.json").exists() else None
    with os.fdopen(fd, "w") as f:
        f.write(str(bundle_dir))
    return None


def add_test(bundle_dir: Path, test: str, config: str) -> list[str]:
    """Record that `test` on `config` hits this bundle; every test so far."""
    bundle_dir.mkdir(parents=True, exist_ok=True)
    with open(bundle_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = bundle_dir / "tests.txt"
        tests = path.read_text().splitlines() if path.exists() else []
        line = f"{test} [{config}]"
        if line not in tests:
            tests.append(line)
            write_atomic(path, "\n".join(tests) + "\n")
        readme = bundle_dir / "README.md"
        if readme.exists():
            text = readme.read_text()
            head, marker, _ = text.partition("## Tests that hit it\n")
            if marker:
                write_atomic(readme, head + marker + "\n" + "".join(f"- {t}\n" for t in tests))
        return tests


REPRO_PY = '''#!/usr/bin/env python3
"""Reproducer: {signature}

Runs repro.mlir through the failing pipeline from Python (the torch-mlir wheel's
torch-mlir-opt lacks some passes). Exits 1 while the bug is there, 0 once it is fixed,
2 on a different failure. A crash takes this process down (non-zero exit).
"""
import sys
from pathlib import Path

sys.path.insert(0, {root!r})  # the conformance suite checkout: e2e.reducer.replay
from e2e.reducer.replay import main

sys.exit(main(Path(__file__).resolve().parent))
'''


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("torch", "torch-mlir"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def readme(info: BundleInfo, bundle_dir: Path, tests: list[str], verified: str) -> str:
    case = info.case
    v = versions()
    what = {
        "error": f"the pass `{case.pipeline[-1]}` fails",
        "crash": f"the process crashes in `{case.pipeline[-1]}`",
        "mismatch": f"`{case.guilty_op}` computes wrong results ({case.signature})",
    }[case.kind]
    lines = [
        f"# {info.test} on {info.config}: {case.signature}",
        "",
        f"In stage `{case.stage}`, {what}.",
        "",
        f"- test: `{info.test}`",
        f"- config: `{info.config}`",
        f"- stage: `{case.stage}`",
        f"- signature: `{case.signature}`",
        f"- guilty op: `{case.guilty_op or 'unknown'}`",
        f"- ops: {info.ops_before} in original.mlir, {info.ops_after} in repro.mlir "
        f"({info.queries} reduction queries, {info.seconds:.1f} s{', 1-minimal' if info.minimal else ', time box reached'})",
        f"- versions: torch {v['torch']}, torch-mlir {v['torch-mlir']}, Python {sys.version.split()[0]}",
        f"- re-verified in a fresh process: {verified}",
        "",
        "## Reproduce",
        "",
        "```sh",
        f"python {bundle_dir / 'repro.py'}",
        "```",
        "",
        "Exit status 1 means the bug is there. `repro.mlir` carries MLIR's `mlir_reproducer`",
        "resource with the pipeline"
        + (" (Python passes, `python:<module>:<fn>`, run only through repro.py)." if "python:" in as_text(case.pipeline) else ":"),
        "",
        "```",
        as_text(case.pipeline),
        "```",
    ]
    if case.kind == MISMATCH:
        lines += ["", "`inputs.npz` and `expected.npz` (native torch) hold `arg0`, `arg1`, ... in order."]
    lines += [f"\nnote: {n}" for n in info.notes]
    lines += ["", "## Tests that hit it", ""] + [f"- {t}" for t in tests]
    return "\n".join(lines) + "\n"


def _save_arrays(path: Path, arrays: list[np.ndarray]) -> None:
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **{f"arg{i}": a for i, a in enumerate(arrays)})
    os.replace(tmp, path)


def verify(bundle_dir: Path, case: Case, timeout: float = 120) -> tuple[bool, str]:
    """Run repro.py in a fresh process: does it still show the bug?"""
    try:
        done = subprocess.run(
            [sys.executable, str(bundle_dir / "repro.py")],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=bundle_dir,
        )
    except subprocess.TimeoutExpired:
        return False, f"repro.py gave no answer in {timeout:.0f} s"
    if case.kind == CRASH:
        ok = done.returncode < 0 or done.returncode not in (0, 1, 2)
        return ok, f"exit status {done.returncode}" + ("" if ok else f": {done.stdout.strip()[-300:]}")
    ok = done.returncode == 1
    return ok, f"exit status {done.returncode}" + ("" if ok else f": {(done.stdout + done.stderr).strip()[-300:]}")


def write_bundle(info: BundleInfo, bundle_dir: Path, *, check: bool = True) -> tuple[bool, str]:
    """Write every file of the bundle, then re-verify it in a fresh process."""
    bundle_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(bundle_dir / "repro.mlir", with_reproducer_resource(info.repro_ir, info.case.pipeline))
    write_atomic(bundle_dir / "original.mlir", info.original_ir)
    write_atomic(bundle_dir / "case.json", info.case.to_json())
    write_atomic(bundle_dir / "repro.py", REPRO_PY.format(signature=info.case.signature, root=str(REPO_ROOT)))
    if info.inputs is not None:
        _save_arrays(bundle_dir / "inputs.npz", info.inputs)
        _save_arrays(bundle_dir / "expected.npz", info.expected or [])
    verified, detail = verify(bundle_dir, info.case) if check else (False, "not checked")
    tests = add_test(bundle_dir, info.test, info.config)
    write_atomic(bundle_dir / "README.md", readme(info, bundle_dir, tests, ("yes, " if verified else "NO, ") + detail))
    return verified, detail

"""Reproducer bundles: `reports/repro/<test>/<config>/`, shared by failures of one signature.

A bundle holds `repro.mlir` (reduced, weights as resources, MLIR's `mlir_reproducer`
resource naming the pipeline), `repro.py` (exits 1 while the bug is there) and the
replay runtime it calls (`replay_runtime/`, see `e2e.reducer.standalone`), `case.json`, `inputs.npz` / `expected.npz` for mismatches (and `model.onnx`, the
reduced ONNX model, for the onnx config's), `original.mlir`,
`tests.txt` (every test that hit it), the failing step's one upstream command and its input
(`upstream.mlir`, see `e2e.reducer.upstream`), `bundle.json` (the verification and that
command's run, as fields) and an issue-ready `README.md`. Writes are atomic
and names are unique per process, so `pytest -n 2` workers never collide; the first
worker to claim a signature (an O_EXCL file) writes the bundle, the others add their
test to it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from compiler.executors import INSTALL_RUNTIMES
from compiler.pipelines import as_text
from compiler.replay_runtime.replay import REPRODUCED, RUNTIME_PASS
from compiler.stages import write_atomic
from compiler.type_check import TYPES_AGREE
from e2e.framework import isolation
from e2e.reducer.case import HANG, MISMATCH, Case
from e2e.reducer.issue import issue_of
from e2e.reducer.native import NATIVE_DIR, NativeRepro, write_native_repro
from e2e.reducer.outcome import BUNDLE_RECORD
from e2e.reducer.standalone import LOADER, RUNTIME_COPY, NotStandalone, write_runtime
from e2e.reducer.upstream import UPSTREAM_IR, NoStep, Upstream, signal_name, upstream

INDEX_DIR = "_signatures"
# Where failures claim their bundles when not in the run's own `repro/` (`index_root`): a
# campaign's blocks are runs of their own, and share one index so that a bug found by an
# earlier block is not reduced again by each later one.
REPRO_INDEX_ENV = "E2E_REPRO_INDEX"


def index_root(reports_dir: Path) -> Path:
    """The directory whose `_signatures/` says which bundle each failure signature has:
    `$E2E_REPRO_INDEX` when set, else the run's own `repro/`."""
    return Path(os.environ.get(REPRO_INDEX_ENV) or Path(reports_dir) / "repro")


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
    expected_from: str = "native PyTorch"  # what computed expected.npz (a mismatch)
    files: dict[str, bytes] = field(default_factory=dict)  # more files for the bundle (the onnx config: model.onnx)
    # A mismatch: what the compiled program returned for `inputs` (the README's "compiled
    # gives"; without it, the replay's comparison says it). For the searches to fill.
    actual: list[np.ndarray] | None = None


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
        return f"{head}{{-#\n{entry},\n{tail.lstrip(chr(10))}\n"  # own line: replay strips the entry alone
    return f"{text}\n\n{{-#\n{entry}\n#-}}\n"


def signature_key(config: str, case: Case) -> str:
    return hashlib.sha1(f"{config}\n{case.signature}\n{case.guilty_op}".encode()).hexdigest()[:16]


def claim(repro_root: Path, key: str, bundle_dir: Path, fits: Callable[[Path], bool] | None = None) -> Path | None:
    """Claim `key` for `bundle_dir` (None); the existing bundle when another failure got there
    first (None while that one is still being written: this failure is reduced on its own).

    With `fits`, a key holds a bundle per bug: a crash's signature names no op, so crashes
    with one signature can be different bugs, told apart only by the ops their bundles name
    guilty. The first bundle of the key that `fits` this failure is its bundle; when none
    does, `bundle_dir` joins the key's bundles (None), for the failures after it."""
    index = repro_root / INDEX_DIR / key  # the key's bundles, one directory a line, first claimed first
    index.parent.mkdir(parents=True, exist_ok=True)
    with open(index, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        owners = [Path(line) for line in f.read().splitlines() if line.strip()]
        written = [owner for owner in owners if (owner / "case.json").exists()]
        if fits is None and owners:  # one bundle a key: the first claimant's, once written
            return owners[0] if owners[0] in written else None
        if fits is not None and (fitting := next((owner for owner in written if fits(owner)), None)):
            return fitting
        f.write(f"{bundle_dir}\n")
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


TYPES_SECTION = "## Where the types broke\n"


def add_to_readme(bundle_dir: Path, types_broke: str, types_bundle: Path | None = None) -> None:
    """Say in the bundle's README where the torch dialect's types first disagreed with what
    its ops compute (`compiler.type_check`): the failing pass may only have tripped over them;
    and where the bundle that starts from that step's input is, when one re-verified."""
    readme = bundle_dir / "README.md"
    with open(bundle_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not readme.exists() or TYPES_SECTION in (text := readme.read_text()):
            return
        section = (
            f"{TYPES_SECTION}\nReplaying the config's torch-backend stage pass by pass, with every torch op's "
            f"result type checked against what torch computes from its operand types (the shapes): "
            f"{types_broke}. The failing pass above may only report what that step broke.\n\n"
        )
        if types_bundle is not None:
            where = os.path.relpath(types_bundle, bundle_dir)
            section += (
                f"`{where}/` is a bundle of that step alone: it starts from the step's input, whose types "
                "agree, and reproduces the disagreement (`python repro.py` there).\n\n"
            )
        head, marker, tail = text.partition("## Tests that hit it\n")
        write_atomic(readme, head + section + marker + tail if marker else text.rstrip() + "\n\n" + section)


REPRO = '''#!/usr/bin/env python3
"""Reproducer: {signature}

Self-contained: needs torch, torch-mlir and numpy only (the replay code is in
{runtime}/ next to this file). Runs repro.mlir through the failing pipeline from
Python. Exits 1 while the bug is there, 0 once it is fixed, 2 on a different failure.
A crash is replayed in a child process: 1 when the child dies with this signature.
"""
{loader}

if __name__ == "__main__":
    sys.exit(runtime("replay").main(Path(__file__).resolve().parent))
'''


def repro_py(case: Case) -> str:
    return REPRO.format(signature=case.signature.format().replace("\\", "/"), runtime=RUNTIME_COPY, loader=LOADER)


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("torch", "torch-mlir"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


@dataclass
class Verification:
    """What re-running the bundle in a fresh, isolated process showed."""

    ok: bool
    detail: str  # "exit status 1"
    output: str = ""  # what repro.py printed (the README's "actual")
    # a runtime's crash: the reduced program run with the runtime's own tools (`native/`), or why not
    native: NativeRepro | str | None = None
    upstream: Upstream | None = None  # the failing step's one upstream command, and what it did here


def _fresh_env() -> dict[str, str]:
    """No PYTHONPATH (the checkout must not be needed) and one thread."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


# One child process of a reduction (its bundle's re-verification: repro.py, then
# torch-mlir-opt; a crashing stage replayed pass by pass) runs at most twice the reduction's
# time box, within these bounds: a fresh interpreter imports torch and torch-mlir in 1-4 s
# here. Under fixed limits (120 s, and 60 s more for the tool), a campaign's 10 s reductions
# of one torchscript crash, whose replay sometimes allocates until the cap instead of
# crashing, held a worker 118 s to verify its bundle; its stage's replay, which then did not
# crash, could run its whole 120 s as well.
CHILD_MIN_SECONDS = 20.0
CHILD_MAX_SECONDS = 120.0


def child_seconds(time_box: float) -> float:
    """How long one child process of a reduction with this time box may run."""
    return min(CHILD_MAX_SECONDS, max(CHILD_MIN_SECONDS, 2 * time_box))


def verify(bundle_dir: Path, case: Case, timeout: float = CHILD_MAX_SECONDS) -> Verification:
    """Run repro.py with `python -I` from the bundle's directory: does it still show the bug?

    Isolated mode ignores PYTHONPATH, the user's site and the script's neighbours on
    sys.path, so a bundle that passes here runs wherever torch and torch-mlir are installed.
    """
    try:
        done = isolation.run_command(
            [sys.executable, "-I", "repro.py"], timeout=timeout, cwd=bundle_dir, env=_fresh_env()
        )
    except subprocess.TimeoutExpired:
        return Verification(False, f"repro.py gave no answer in {timeout:.0f} s")
    output = (done.stdout + done.stderr).strip()
    if done.returncode < 0:  # buffered output of the dying process may be lost: say how it ended
        output += f"\n(the process was killed by {_signal_name(-done.returncode)})"
    if case.kind == HANG:  # repro.py ends itself by SIGALRM after the case's hang_seconds
        import signal

        ok = done.returncode == -signal.SIGALRM
    else:
        # Exit 1 and the replay's own word: an uncaught exception in the replay exits 1 too.
        ok = done.returncode == 1 and REPRODUCED in done.stdout
    detail = f"exit status {done.returncode}" + ("" if ok else f": {output[-300:]}")
    return Verification(ok, detail, output[-3000:])


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _body(text: str, limit: int = 60) -> str | None:
    """repro.mlir without its resources, when short enough to paste into an issue."""
    head = text.split("{-#")[0].strip()
    return head if len(head.splitlines()) <= limit and len(head) < 8000 else None


def readme(info: BundleInfo, bundle_dir: Path, tests: list[str], verification: Verification) -> str:
    case = info.case
    v = versions()
    breaks_types = case.pipeline[-1] == TYPES_AGREE
    what = {
        "error": f"the pass `{case.pipeline[-2]}` leaves an op whose declared result type is not what torch "
        "computes from its operand types (the bundle's type check, which the module passes before the pass, "
        "says which after it)"
        if breaks_types
        else f"the pass `{case.pipeline[-1]}` fails on the module below",
        "crash": "the compiled program crashes the process when run"
        if case.stage == "execute"
        else f"the process crashes in the pass `{case.pipeline[-1]}`",
        "hang": f"the pass `{case.pipeline[-1]}` gives no result in {case.hang_seconds or 0:.0f} s on the module below",
        "mismatch": f"`{case.guilty_op}` computes wrong results ({case.signature.where} mismatch)",
    }[case.kind]
    expected = {
        "error": "Every op keeps the result type its operands give."
        if breaks_types
        else "the pipeline lowers the module without an error.",
        "crash": "the module runs without taking the process down."
        if case.stage == "execute"
        else "the pipeline finishes (or reports an error) without taking the process down.",
        "hang": "the pass finishes (or reports an error) in well under a second: the module is tiny.",
        "mismatch": f"the compiled module returns `expected.npz` ({info.expected_from}) for `inputs.npz`"
        + (
            f" within rtol={case.tolerance[0]}, atol={case.tolerance[1]}."
            if case.tolerance
            else " (the suite's default tolerance)."
        ),
    }[case.kind]
    issue = issue_of(
        case, verification.upstream or Upstream(NoStep("not made")), info.expected, info.actual, verification.output
    )
    lines = [
        f"# {issue.title}",
        "",
        f"- component: {issue.component.name} (`{issue.failing_pass}`)",
        f"- torch gives: {issue.torch_gives}",
        f"- the compiled program gives: {issue.compiled_gives}",
        "",
        f"With torch {v['torch']} and torch-mlir {v['torch-mlir']} (Python {sys.version.split()[0]}), {what}.",
        "",
        *_upstream_section(verification.upstream),
        "## Reproduce",
        "",
        _needs(case),
        "",
        "```sh",
        "python repro.py          # exits 1 while the bug is there, 0 once fixed"
        + (" (a hang: ends by SIGALRM)" if case.kind == HANG else ""),
    ]
    lines += [
        "```",
        "",
        "Pipeline (also stored in `repro.mlir` as MLIR's `mlir_reproducer` resource):",
        "",
        "```",
        as_text(case.pipeline),
        "```",
    ]
    if "python:" in as_text(case.pipeline):
        lines += [
            "",
            "`python:<module>:<function>` entries are Python passes over the module; the bundle carries them.",
        ]
    body = _body(with_reproducer_resource(info.repro_ir, []))
    if body:
        lines += ["", "## repro.mlir", "", "```mlir", body, "```"]
    lines += _native_section(verification.native)
    if case.kind == MISMATCH:
        lines += [
            "",
            "`inputs.npz` and `expected.npz` hold `arg0`, `arg1`, ... in the order of @main's arguments and results.",
        ]
    lines += ["", "## Expected", "", expected, "", "## Actual", "", "```", verification.output or "(no output)", "```"]
    lines += [
        "",
        "## How it was found",
        "",
        f"- test: `{info.test}` on config `{info.config}`, stage `{case.stage}`",
        f"- signature: `{case.signature}`; guilty op: `{case.guilty_op or 'unknown'}`",
        f"- ops: {info.ops_before} in original.mlir, {info.ops_after} in repro.mlir "
        f"({info.queries} reduction queries, {info.seconds:.1f} s{', 1-minimal' if info.minimal else ', time box reached'})",
        f"- re-verified with `python -I repro.py` in a fresh process: {('yes, ' if verification.ok else 'NO, ') + verification.detail}",
    ]
    lines += [f"- {n}" for n in info.notes]
    lines += ["", "## Tests that hit it", ""] + [f"- {t}" for t in tests]
    return relative_paths("\n".join(lines) + "\n", bundle_dir)


def _upstream_section(upstream: Upstream | None) -> list[str]:
    """The one upstream command of the failing step and what it did here."""
    lines = ["## Upstream command", ""]
    if upstream is None or isinstance(upstream.step, NoStep):
        return lines + [f"None: {upstream.step.why if upstream else 'not made'}.", ""]
    step, run = upstream.step, upstream.run
    source = (
        f"repro.mlir's module after the bundle's own passes before the step ({', '.join(f'`{e}`' for e in step.before)})"
        if step.before
        else "repro.mlir's module without the `mlir_reproducer` resource and this project's `e2e.*` attributes"
    )
    lines += [
        f"It {step.needs}{'' if step.installed else ' (not installed here)'}, and reads `{UPSTREAM_IR}`, {source}:",
        "",
        "```sh",
        step.command,
        "```",
        "",
    ]
    if step.judged_by is not None:
        lines += [f"It gives the step's output; no tool fails on it: {step.judged_by} checks it.", ""]
    if run is None:
        return lines + ["Not run (the bundle was not verified).", ""]
    shows = {True: "it shows the failure", False: "it does NOT show the failure", None: "the check is not the tool's"}
    killed = signal_name(run.exit) if run.exit is not None else None
    ended = "no answer" if run.exit is None else f"killed by {killed}" if killed else f"exit status {run.exit}"
    lines += [f"Run here: {ended}; {shows[run.fails]}.", ""]
    return lines + (["```", run.output, "```", ""] if run.output else [])


_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/-])(/[\w.+-]+)+/?")


def relative_paths(text: str, bundle_dir: Path) -> str:
    """Paths in the bundle made relative to it; any other absolute path cut to its last two
    parts (a README travels with its bundle, not with this machine)."""
    root = str(Path(bundle_dir).resolve())

    def relative(match: re.Match) -> str:
        path = match[0]
        if path == root or path.startswith(root + "/"):
            return os.path.relpath(path, root)
        if path.startswith("/dev/"):
            return path
        parts = [p for p in path.split("/") if p]
        return path if len(parts) <= 1 else ".../" + "/".join(parts[-2:])

    return _ABSOLUTE_PATH.sub(relative, text.replace(str(bundle_dir) + "/", ""))


def _needs(case: Case) -> str:
    if case.pipeline and case.pipeline[-1].startswith(RUNTIME_PASS):
        return (
            f"Needs `torch`, `torch-mlir`, `numpy` (`repro.py` runs the replay code in `{RUNTIME_COPY}/`), and this "
            f"project installed with the runtime (`{INSTALL_RUNTIMES}`): the runtime's replay entry is its "
            "`compiler.executors.replay`:"
        )
    return f"Needs only `torch`, `torch-mlir` and `numpy` (`repro.py` runs the replay code in `{RUNTIME_COPY}/`):"


def _native_section(native: NativeRepro | str | None) -> list[str]:
    if native is None:
        return []
    if isinstance(native, str):
        return ["", f"({native})"]
    return [
        "",
        f"## Reproduce with {native.runtime}'s own tools",
        "",
        f"`{NATIVE_DIR}/` holds repro.mlir as {native.runtime} is given it and the made-up inputs `repro.py` "
        f"calls @main with; `{NATIVE_DIR}/run.sh` needs nothing of this project:",
        "",
        "```sh",
        f"sh {NATIVE_DIR}/run.sh   # runs: {' && '.join(native.command.strip().splitlines())}",
        "```",
        "",
        f"Run by the reducer: {native.detail} ({'the same signature' if native.verified else 'NOT the signature above'}).",
    ]


def _upstream(info: BundleInfo, bundle_dir: Path, run: bool, timeout: float) -> Upstream:
    """The bundle's upstream command (`upstream.mlir` written), run when the bundle is verified;
    a failure to make it costs the command, said in its place, not the bundle."""
    try:
        return upstream(info.case, info.repro_ir, bundle_dir, run=run, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - recorded as the reason there is no command
        return Upstream(NoStep(f"making it failed: {type(error).__name__}: {error}"))


def save_arrays(path: Path, arrays: list[np.ndarray]) -> None:
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **{f"arg{i}": a for i, a in enumerate(arrays)})
    os.replace(tmp, path)


def write_bundle(
    info: BundleInfo, bundle_dir: Path, *, check: bool = True, timeout: float = CHILD_MAX_SECONDS
) -> tuple[bool, str]:
    """Write every file of the bundle, then re-verify it in a fresh process (within `timeout`)."""
    bundle_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(bundle_dir / "repro.mlir", with_reproducer_resource(info.repro_ir, info.case.pipeline))
    write_atomic(bundle_dir / "original.mlir", info.original_ir)
    write_atomic(bundle_dir / "case.json", info.case.to_json())
    try:
        write_runtime(bundle_dir, info.case.pipeline)
    except NotStandalone as error:
        return False, f"repro.py cannot stand alone: {error}"
    write_atomic(bundle_dir / "repro.py", repro_py(info.case))
    if info.inputs is not None:
        save_arrays(bundle_dir / "inputs.npz", info.inputs)
        save_arrays(bundle_dir / "expected.npz", info.expected or [])
    for name, content in info.files.items():
        tmp = bundle_dir / f".{name}.{os.getpid()}.tmp"
        tmp.write_bytes(content)
        os.replace(tmp, bundle_dir / name)
    verification = verify(bundle_dir, info.case, timeout) if check else Verification(False, "not checked")
    if check:
        verification.native = write_native_repro(bundle_dir, info.case, info.repro_ir, _fresh_env())
        if isinstance(verification.native, NativeRepro) and not verification.native.verified:
            verification.ok = False
            verification.detail += f"; {NATIVE_DIR}/run.sh did not show the crash: {verification.native.detail}"
    verification.upstream = _upstream(info, bundle_dir, check, timeout)
    tests = add_test(bundle_dir, info.test, info.config)
    write_atomic(bundle_dir / "README.md", readme(info, bundle_dir, tests, verification))
    # The verification as fields, for whatever reads bundles (the reproducer service).
    record = {"verified": verification.ok if check else None, "detail": verification.detail}
    record |= {"ops_before": info.ops_before, "ops_after": info.ops_after, "minimal": info.minimal}
    record |= verification.upstream.record()
    write_atomic(bundle_dir / BUNDLE_RECORD, json.dumps(record, indent=1) + "\n")
    return verification.ok, verification.detail

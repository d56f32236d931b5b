"""The releases a bug was born and fixed in: a reproducer bundle run, as data, on a component's
installed releases, and the range found ClusterFuzz-style.

    python -m e2e.service.releases reports/repro/GenBug_600000_linalg_iree/linalg@iree --component iree

A release is installed once into a folder of its own under the cache (`pip install --target
CACHE/iree-3.4.0 --no-deps ...`), side by side, never into this environment. Each run of the
bundle is a subprocess in a scratch copy of it, with a time and a memory limit, the release's
folder first on `sys.path` (then this project, for a runtime bundle's replay entry).

What a run says (the rule, from `repro.py`'s contract and what the replay prints):
- exit 1 with `REPRODUCED` on stdout: the bug is there (`fails`);
- exit 0: it is gone (`passes`);
- anything else cannot tell: exit 2 is a different failure (the release's IR reader or
  flags refuse the program: "custom op ... is unknown", "unknown command line flag"); exit 1
  without `REPRODUCED` is an exception in the replay (ImportError, an API the release lacks);
  a signal, the time limit, the memory limit, a failed install, or a module of the component
  that came from elsewhere than the release's folder (`MIXED`).
A release that cannot tell is skipped, as ClusterFuzz skips a bad build.

The search: releases sorted by version; the newest that tells gives the verdict to explain.
Exponential search back (1, 2, 4, ... releases) for a release with the other verdict, then
binary search between the two for the adjacent pair where the verdict changes: a bug that
fails on the newest was introduced in the first failing release after the last passing one;
one that passes on the newest was fixed in the first passing release after the last failing
one. When the oldest releases probed cannot tell, the releases not yet tried just below the
oldest that told are tried one by one, down to one that tells (ClusterFuzz moves past a bad
oldest build). Each step runs the bundle `runs` times: runs that disagree make the step
`flaky`, which is skipped as cannot-tell (a first run that cannot tell is not repeated). A
history that changes more than once shows one of its changes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from packaging.version import InvalidVersion, Version

FAILS, PASSES, CANNOT_TELL, FLAKY = "fails", "passes", "cannot tell", "flaky"
REPRODUCED = "REPRODUCED"  # what repro.py prints when the bug is there (compiler.replay_runtime.replay)
MIXED = "MIXED RELEASE"  # a module of the component was imported from outside the release's folder
MIXED_EXIT = 3
RELEASE_RECORD = ".release.json"  # in a release's folder once its install completed
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # a runtime bundle's replay entry imports this project


@dataclass(frozen=True)
class Component:
    """Something with installable releases: distributions installed together at one version."""

    name: str
    distributions: tuple[str, ...] = ()
    oldest: str = "0"  # releases before it are not offered
    wheels: Path | None = None  # a directory of wheels instead of the package index

    def releases(self) -> list[str]:
        """Every release, oldest first: the versions all its distributions have (IREE 3.7.1 is
        a compiler without a runtime), or the versions of the wheels in its directory."""
        if self.wheels is not None:
            found = sorted({wheel_version(p) for p in self.wheels.glob("*.whl")}, key=Version)
        else:
            sets = [set(index_versions(d)) for d in self.distributions]
            found = sorted(set.intersection(*sets), key=Version) if sets else []
        return [v for v in found if Version(v) >= Version(self.oldest)]

    def requirements(self, version: str) -> list[str]:
        if self.wheels is not None:
            return [str(p) for p in sorted(self.wheels.glob("*.whl")) if wheel_version(p) == version]
        return [f"{d}=={version}" for d in self.distributions]

    def folder_name(self, version: str) -> str:
        return f"{self.name}-{version}"


# jax and jaxlib at one version, with this environment's numpy and ml_dtypes (--no-deps): a
# release that needs others cannot tell (its import fails) rather than replace torch's numpy.
COMPONENTS = {
    "iree": Component("iree", ("iree-base-compiler", "iree-base-runtime"), oldest="3.0.0"),
    "jaxlib": Component("jaxlib", ("jax", "jaxlib"), oldest="0.4.0"),
}


def wheels_component(directory: Path) -> Component:
    directory = Path(directory).resolve()
    tag = hashlib.sha1(str(directory).encode()).hexdigest()[:8]
    return Component(f"wheels-{directory.name}-{tag}", wheels=directory)


def wheel_version(path: Path) -> str:
    return path.name.split("-")[1]  # name-version-(build-)python-abi-platform.whl (PEP 427)


def index_versions(distribution: str) -> list[str]:
    """The versions the package index offers (`pip index versions`)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", distribution, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = re.search(r"Available versions: (.*)", done.stdout)
    if line is None:
        raise RuntimeError(f"pip index versions {distribution}: {done.stderr.strip() or done.stdout.strip()}")
    versions = []
    for v in line[1].split(","):
        try:
            Version(v.strip())
            versions.append(v.strip())
        except InvalidVersion:
            continue
    return versions


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "e2e-conformance" / "releases"


@dataclass
class Installed:
    folder: Path | None  # None: the install failed
    cached: bool
    seconds: float  # the install's own time (recorded when it was made, for a cached one)
    error: str = ""


def install(component: Component, version: str, cache: Path) -> Installed:
    """The release's folder under `cache`, installed once (atomically: a half-written install
    is never taken for a release)."""
    folder = cache / component.folder_name(version)
    record = folder / RELEASE_RECORD
    if record.exists():
        return Installed(folder, True, json.loads(record.read_text()).get("install_seconds", 0.0))
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=cache))
    requirements = component.requirements(version)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        + ["--target", str(partial), *requirements],
        capture_output=True,
        text=True,
    )
    seconds = round(time.monotonic() - start, 1)
    if done.returncode != 0 or not requirements:
        shutil.rmtree(partial, ignore_errors=True)
        error = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        return Installed(None, False, seconds, f"install failed: {error}")
    (partial / RELEASE_RECORD).write_text(
        json.dumps(
            {"component": component.name, "version": version, "install_seconds": seconds, "packages": requirements}
        )
    )
    try:
        partial.rename(folder)
    except OSError:  # another job installed it first
        shutil.rmtree(partial, ignore_errors=True)
    return Installed(folder, False, seconds)


# Run by `python -c` in the bundle's scratch copy: argv = release folder, script, the release's
# top-level modules. repro.py replays a crash in `sys.executable -I ...`, which would drop
# PYTHONPATH: the shim it is given instead runs python without -I.
BOOTSTRAP = f"""
import os, runpy, sys
release, script, tops = sys.argv[1], sys.argv[2], set(filter(None, sys.argv[3].split(",")))
sys.executable = os.environ["E2E_RELEASE_SHIM"]
sys.argv = [script]
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as ended:
    code = ended.code if isinstance(ended.code, int) else (0 if ended.code is None else 1)
    if isinstance(ended.code, str):
        print(ended.code, file=sys.stderr)
sys.stdout.flush()
strays = sorted({{name.split(".")[0] for name, module in list(sys.modules.items())
    if name.split(".")[0] in tops and getattr(module, "__file__", None)
    and not os.path.realpath(module.__file__).startswith(os.path.join(os.path.realpath(release), ""))}})
if strays:
    print("{MIXED}: " + ", ".join(strays) + " imported from outside " + release, file=sys.stderr)
    code = {MIXED_EXIT}
sys.exit(code)
"""
SHIM = '#!/bin/sh\nfor a do shift; [ "$a" = -I ] || set -- "$@" "$a"; done\nexec {python} "$@"\n'


@dataclass
class Run:
    outcome: str  # fails | passes | cannot tell
    exit_code: int | None  # None: killed at the time limit
    seconds: float
    reason: str = ""  # why it cannot tell


def top_level_modules(folder: Path) -> list[str]:
    names = []
    for entry in folder.iterdir():
        if entry.name.startswith((".", "_")) or entry.name.endswith((".dist-info", ".data")) or entry.name == "bin":
            continue
        if entry.is_dir() or entry.suffix == ".py":
            names.append(entry.stem)
    return sorted(names)


def run_bundle(bundle: Path, release: Path, timeout: float = 300.0, memory_gib: float = 8.0) -> Run:
    """One run of the bundle's repro.py on `release`, in a scratch copy, as data."""
    with tempfile.TemporaryDirectory(prefix="e2e-release-run-") as scratch:
        copy = Path(scratch) / "bundle"
        shutil.copytree(bundle, copy, ignore=shutil.ignore_patterns("__pycache__"))
        shim = Path(scratch) / "python"
        shim.write_text(SHIM.format(python=sys.executable))
        shim.chmod(0o755)
        path = [str(release), str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path)), "E2E_RELEASE_SHIM": str(shim)}
        limit = int(memory_gib * 2**30)

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        tops = ",".join(top_level_modules(release))
        command = [sys.executable, "-c", BOOTSTRAP, str(release), "repro.py", tops]
        start = time.monotonic()
        child = subprocess.Popen(
            command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=limits, start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return Run(CANNOT_TELL, None, round(time.monotonic() - start, 1), f"timeout after {timeout:.0f} s")
        seconds = round(time.monotonic() - start, 1)
    return judge_run(child.returncode, stdout, stderr, seconds)


def judge_run(exit_code: int, stdout: str, stderr: str, seconds: float) -> Run:
    """The module docstring's rule."""
    if exit_code == 1 and REPRODUCED in stdout:
        return Run(FAILS, 1, seconds)
    if exit_code == 0:
        return Run(PASSES, 0, seconds)
    if exit_code == 2:
        first = next((line for line in stdout.splitlines() if line.startswith("different failure")), "")
        return Run(CANNOT_TELL, 2, seconds, first[:300] or "exit 2: a different failure")
    if exit_code == MIXED_EXIT and MIXED in stderr:
        return Run(CANNOT_TELL, exit_code, seconds, stderr.strip().splitlines()[-1])
    if exit_code < 0:
        return Run(CANNOT_TELL, exit_code, seconds, f"killed by signal {-exit_code}")
    last = (stderr.strip().splitlines() or ["no output"])[-1]
    return Run(CANNOT_TELL, exit_code, seconds, f"exit {exit_code} without {REPRODUCED}: {last[:300]}")


@dataclass
class Step:
    """A release tried: its runs and what they say together."""

    release: str
    verdict: str  # fails | passes | cannot tell | flaky
    runs: list[Run]
    seconds: float  # the runs' time
    cached: bool | None = None  # was the release installed before (None: a fake runner's)
    install_seconds: float | None = None

    @property
    def reason(self) -> str:
        if self.verdict == FLAKY:
            return "runs disagree: " + ", ".join(r.outcome for r in self.runs)
        return next((r.reason for r in self.runs if r.reason), "")


def step(release: str, run: Callable[[], Run], runs: int = 3) -> Step:
    """`runs` runs of one release; a first run that cannot tell is not repeated."""
    done = [run()]
    while len(done) < runs and done[0].outcome != CANNOT_TELL:
        done.append(run())
    outcomes = {r.outcome for r in done}
    if outcomes == {FAILS} or outcomes == {PASSES}:
        verdict = outcomes.pop()
    else:
        verdict = FLAKY if {FAILS, PASSES} <= outcomes else CANNOT_TELL
    return Step(release, verdict, done, round(sum(r.seconds for r in done), 1))


INTRODUCED, FIXED, FAILS_EVERYWHERE, PASSES_EVERYWHERE, UNTOLD = (
    "introduced", "fixed", "fails on every release tried", "passes on every release tried", "cannot tell on any release",
)  # fmt: skip


@dataclass
class ReleaseRange:
    """Where a bug's verdict changes among a component's releases."""

    component: str
    bundle: str
    releases: list[str]  # every candidate, oldest first
    kind: str  # INTRODUCED | FIXED | FAILS_EVERYWHERE | PASSES_EVERYWHERE | UNTOLD
    before: str | None = None  # the last release with the older verdict (passes for INTRODUCED)
    after: str | None = None  # the first with the newer one: the release it was introduced / fixed in
    newest_told: str | None = None  # the newest release that told (the verdict explained)
    steps: list[Step] = field(default_factory=list)  # in the order tried
    seconds: float = 0.0

    @property
    def tried(self) -> list[Step]:
        return sorted(self.steps, key=lambda s: Version(s.release))

    @property
    def skipped(self) -> list[str]:
        """Releases between `before` and `after` that could not tell: the range is that wide."""
        if self.before is None or self.after is None:
            return []
        low, high = Version(self.before), Version(self.after)
        return [s.release for s in self.tried if low < Version(s.release) < high]

    def summary(self) -> str:
        if self.kind in (INTRODUCED, FIXED):
            exact = not self.skipped
            told = f"(fails on {self.before}, passes on {self.after})"
            if self.kind == INTRODUCED:
                told = f"(passes on {self.before}, fails on {self.after})"
            if exact:
                return f"{self.kind} in {self.after} {told}"
            return (
                f"{self.kind} after {self.before}, in or before {self.after} ({', '.join(self.skipped)} could not tell)"
            )
        told = [s.release for s in self.tried if s.verdict in (FAILS, PASSES)]
        if self.kind == UNTOLD or not told:
            return UNTOLD
        older = [s.release for s in self.tried if Version(s.release) < Version(told[0])]
        untold = f"; older: {', '.join(older)} could not tell" if older else ""
        return f"{self.kind} ({told[0]} .. {told[-1]}, {len(told)} told{untold})"

    def markdown(self) -> str:
        """One line for an issue's text."""
        untold = [
            f"{s.release} ({s.verdict if s.verdict == FLAKY else s.reason.split(':')[0]})"
            for s in self.tried
            if s.verdict not in (FAILS, PASSES)
        ]
        line = f"**Release range ({self.component})**: {self.summary()}; {len(self.steps)} releases tried"
        return line + (f"; could not tell: {', '.join(untold)}" if untold else "") + "."

    def table(self) -> str:
        rows = ["| release | verdict | exit codes | run s | install | note |", "|---|---|---|---|---|---|"]
        for s in self.tried:
            codes = " ".join("timeout" if r.exit_code is None else str(r.exit_code) for r in s.runs)
            install = "" if s.cached is None else ("cached" if s.cached else f"{s.install_seconds} s")
            rows.append(f"| {s.release} | {s.verdict} | {codes} | {s.seconds} | {install} | {s.reason[:120]} |")
        return "\n".join(rows)

    def to_json(self) -> str:
        data = asdict(self)
        data.update(summary=self.summary(), skipped=self.skipped)
        return json.dumps(data, indent=1)


class Bisection(NamedTuple):
    kind: str
    before: str | None  # ReleaseRange's fields of the same names
    after: str | None
    newest_told: str | None
    steps: list[Step]


def bisect(releases: Sequence[str], probe: Callable[[str], Step]) -> Bisection:
    """The search of the module docstring over `releases`, with `probe` giving one release's
    Step (called once a release at most)."""
    ordered = sorted(releases, key=Version)
    steps: dict[int, Step] = {}

    def told(i: int) -> str | None:
        if i not in steps:
            steps[i] = probe(ordered[i])
        verdict = steps[i].verdict
        return verdict if verdict in (FAILS, PASSES) else None

    def result(kind, before=None, after=None):
        newest_told = ordered[newest] if newest is not None else None
        return Bisection(kind, before, after, newest_told, list(steps.values()))

    newest = next((i for i in reversed(range(len(ordered))) if told(i)), None)
    if newest is None:
        return result(UNTOLD)
    verdict = told(newest)
    same, other, distance = newest, None, 1
    while other is None and same > 0:
        j = max(newest - distance, 0)
        if (seen := told(j)) == verdict:
            same = j
        elif seen is not None:
            other = j
        if j == 0:
            break
        distance *= 2
    # The oldest probes could not tell: as ClusterFuzz moves past a bad oldest build, walk down
    # from the oldest release that told through the releases not tried yet.
    j = same - 1
    while other is None and j >= 0:
        tried_before, seen = j in steps, told(j)
        if seen == verdict:
            same = j
        elif seen is not None:
            other = j
        elif tried_before:
            break
        j -= 1
    if other is None:
        return result(FAILS_EVERYWHERE if verdict == FAILS else PASSES_EVERYWHERE)
    low, high = other, same  # low has the other verdict, high this one
    while high - low > 1:
        middle = (low + high) // 2
        between = sorted(range(low + 1, high), key=lambda i: (abs(i - middle), i))
        pick = next((i for i in between if told(i)), None)
        if pick is None:
            break  # every release between cannot tell: the range is that wide
        if told(pick) == verdict:
            high = pick
        else:
            low = pick
    return result(INTRODUCED if verdict == FAILS else FIXED, ordered[low], ordered[high])


def release_range(
    bundle: Path,
    component: Component,
    releases: Sequence[str] | None = None,
    cache: Path | None = None,
    runs: int = 3,
    timeout: float = 300.0,
    memory_gib: float = 8.0,
    log: Callable[[str], None] = lambda line: None,
) -> ReleaseRange:
    """The release range of the bug `bundle` reproduces, over `component`'s releases."""
    bundle, cache = Path(bundle), Path(cache) if cache else default_cache()
    if not (bundle / "repro.py").exists():
        raise FileNotFoundError(f"{bundle} holds no repro.py: not a reproducer bundle")
    candidates = sorted(releases or component.releases(), key=Version)
    start = time.monotonic()

    def probe(version: str) -> Step:
        installed = install(component, version, cache)
        if installed.folder is None:
            found = Step(version, CANNOT_TELL, [Run(CANNOT_TELL, None, 0.0, installed.error)], 0.0)
        else:
            found = step(version, lambda: run_bundle(bundle, installed.folder, timeout, memory_gib), runs)
        found.cached, found.install_seconds = installed.cached, installed.seconds
        log(f"{component.name} {version}: {found.verdict} {found.reason}".rstrip())
        return found

    found = bisect(candidates, probe)
    seconds = round(time.monotonic() - start, 1)
    return ReleaseRange(component.name, str(bundle), candidates, *found, seconds=seconds)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.service.releases", description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path, help="a reproducer bundle (its directory holds repro.py)")
    parser.add_argument("--component", choices=sorted(COMPONENTS), default="iree")
    parser.add_argument("--releases", help="comma-separated versions to search (default: every release)")
    parser.add_argument("--wheels", type=Path, help="a directory of wheels: its versions are the releases")
    parser.add_argument("--cache", type=Path, help=f"where releases are installed (default {default_cache()})")
    parser.add_argument("--runs", type=int, default=3, help="runs a release; runs that disagree are flaky (3)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a run (300)")
    parser.add_argument("--memory", type=float, default=8.0, help="address space a run, GiB (8)")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    component = wheels_component(args.wheels) if args.wheels else COMPONENTS[args.component]
    releases = [v.strip() for v in args.releases.split(",")] if args.releases else None
    found = release_range(
        args.bundle, component, releases, args.cache, args.runs, args.timeout, args.memory,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    print(f"{args.bundle}: {found.summary()} ({len(found.steps)} releases tried, {found.seconds} s)\n")
    print(found.table())
    print("\n" + found.markdown())
    if args.json:
        args.json.write_text(found.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())

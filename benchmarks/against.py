"""One command in an older commit's checkout and in this one, taking turns on this machine:
the ratio of their times, which holds across machines where seconds do not.

    python benchmarks/against.py 37eafdb [--runs 1] -- python -m pytest e2e -n 2 -q \\
        --no-result-cache -p no:cacheprovider --reports-dir {reports}

The older commit is checked out with `git worktree` (removed at the end) and runs with the
packages installed here. Each run has its checkout first on `PYTHONPATH`, so its own `e2e` and
`compiler` are imported whatever the command's form (`pytest`, not only `python -m pytest`,
where the editable install would otherwise give this checkout's code to both); `{reports}` in
the command becomes a new directory for each run, so
every run is cold as the command makes it. Turns alternate (old, new, old, new, ...), and the
medians are compared. A figure recorded on another machine (issue 44's 531 s at 37eafdb on
its AMD EPYC with AVX-512, say) becomes a bar here as a ratio: 360 s against 531 s is 0.678x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.loop import ROOT, commit, machine, timed  # noqa: E402


def checkout(older: str, into: Path) -> Path:
    path = into / f"at-{older}"
    done = subprocess.run(
        ["git", "worktree", "add", "--detach", str(path), older], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"git worktree add {older}: {done.stderr.strip()}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help="the older commit (anything `git worktree add` takes)")
    parser.add_argument("--runs", type=int, default=1, help="turns of each (default 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command, with {reports}")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    print(f"{machine()}; this checkout {commit()}, against {args.commit}")
    times: dict[str, list[tuple[float, float]]] = {args.commit: [], "this": []}
    with tempfile.TemporaryDirectory(prefix="against-") as scratch:
        scratch_dir = Path(scratch)
        old = checkout(args.commit, scratch_dir)
        try:
            for turn in range(args.runs):
                for name, cwd in ((args.commit, old), ("this", ROOT)):
                    reports = scratch_dir / f"reports-{name}-{turn}"
                    words = [word.replace("{reports}", str(reports)) for word in command]
                    env = {
                        **os.environ,
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")])),
                    }
                    wall, cpu, _ = timed(words, cwd, env)
                    times[name].append((wall, cpu))
                    print(f"  turn {turn + 1}, {name}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    (old_wall, old_cpu), (new_wall, new_cpu) = (
        (statistics.median(w for w, _ in times[n]), statistics.median(c for _, c in times[n]))
        for n in (args.commit, "this")
    )
    print(f"{args.commit}: {old_wall:.1f} s wall, {old_cpu:.1f} s CPU (median of {args.runs})")
    print(f"this:    {new_wall:.1f} s wall, {new_cpu:.1f} s CPU")
    print(f"this / {args.commit}: {new_wall / old_wall:.3f}x wall, {new_cpu / old_cpu:.3f}x CPU")


if __name__ == "__main__":
    main()

"""A bug as a maintainer's issue: the Markdown body a bug page offers to copy into
torch-mlir's, IREE's or another tracker, and the one-line summary of a pull request's
failures that CI posts (`summary`, sorted as Dr.CI sorts them)."""

from __future__ import annotations

from e2e.service import queries
from e2e.service.reports import bundle_folder
from e2e.service.store import Store

# Where a failure in a stage most likely lies, by the config's executor (after `@`).
RUNTIMES = {"iree": "IREE", "iree-vmvx": "IREE (vmvx)", "xla": "XLA (jaxlib)", "interp": "StableHLO's interpreter"}
RUNTIMES["tosa-ref"] = "the TOSA reference model"


def component(bug: dict) -> str:
    """The project a report of the bug goes to, as far as its config and stage tell."""
    executor = bug["config"].split("@", 1)[1] if "@" in bug["config"] else None
    if bug["stage"] in ("capture",):
        return "PyTorch (capture)"
    if bug["stage"] in ("import", "torch-backend", "backend"):
        return "torch-mlir"
    if executor is not None:
        return RUNTIMES.get(executor, executor)
    if bug["stage"] == "lower":
        return "MLIR upstream (lowering to LLVM) or torch-mlir's RefBackend passes"
    return "torch-mlir (a lowering that computes the wrong values, or crashes when run)"


def issue_markdown(bug: dict, base_url: str = "") -> str:
    """The issue body: title, component, signature, versions, the reduced program and the
    one command that shows it."""
    bundle = bug.get("bundle")
    lines = [
        f"### {bug['title']}",
        "",
        f"- component: {component(bug)}",
        f"- signature: `{bug['signature']}`",
        f"- guilty op: `{bug['guilty_op'] or 'not localized'}`",
        f"- seen in {bug['runs_total']} run(s), {bug['hits']} failing pair(s); first in run {bug['first_run_id']}, "
        f"last in run {bug['last_run_id']}",
    ]
    if bug.get("release_range"):
        lines.append(f"- {bug['release_range']['markdown']}")
    for versions in bug["versions"][:3]:
        lines.append("- reproduces on: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    if bundle is not None:
        lines += [
            "",
            f"Reduced program (`repro.mlir`, {bundle['size']} bytes, from `{bundle['test']}` on `{bundle['config']}`;"
            f" re-verified: {'yes' if bundle['verified'] else 'no' if bundle['verified'] is False else 'not recorded'}):",
            "",
            "```mlir",
            _clip(bundle["repro_mlir"]),
            "```",
            "",
            "To reproduce (needs torch, torch-mlir and numpy; exits 1 while the bug is there):",
            "",
            "```sh",
            f"curl -sL {base_url}/bugs/{bug['id']}/bundle.tar.gz | tar xz && cd {bundle_folder(bundle['test'], bundle['config'])} && python repro.py",
            "```",
        ]
    else:
        lines += ["", "No bundle was written for this bug (its failure could not be reduced)."]
    if base_url:
        lines += ["", f"Tracked at {base_url}/bugs/{bug['id']}"]
    return "\n".join(lines) + "\n"


def _clip(text: str, lines: int = 80) -> str:
    body = [line for line in text.splitlines() if not line.startswith("{-#")]
    cut = "\n".join(body[:lines])
    return cut if len(body) <= lines else cut + f"\n// ... {len(body) - lines} more lines in repro.mlir"


def summary(store: Store, run_id: int, base_branch: str, base_url: str = "") -> str:
    """A pull request's run, sorted as Dr.CI sorts failures: new, already failing on the
    base branch (its latest run there), or flaky there; each with its bug and bundle."""
    run = queries.run(store, run_id)
    if run is None:
        raise KeyError(f"no run {run_id}")
    base = queries.runs(store, branch=base_branch, limit=1)["runs"]
    base_rows = {(r["test"], r["config"]): r for r in queries.rows_of(store, base[0]["id"])} if base else {}
    flaky_pairs = {(f["test"], f["config"]) for f in queries.flaky(store, limit=100_000)}
    sorted_failures: dict[str, list[dict]] = {"new": [], "broken on the base branch": [], "flaky": []}
    for row in queries.rows_of(store, run_id):
        if row["final"] != "failed":
            continue
        pair = (row["test"], row["config"])
        before = base_rows.get(pair)
        if pair in flaky_pairs:
            sorted_failures["flaky"].append(row)
        elif before is not None and before["outcome"] not in ("pass", "skip"):
            sorted_failures["broken on the base branch"].append(row)
        else:
            sorted_failures["new"].append(row)
    base_text = f"run {base[0]['id']} of `{base_branch}`" if base else f"no run of `{base_branch}` yet"
    lines = [
        f"## e2e: run {run_id} ({run['pairs']} pairs; baseline {base_text})",
        "",
        "| failures | pairs |",
        "|---|---|",
        *(f"| {kind} | {len(rows)} |" for kind, rows in sorted_failures.items()),
    ]
    for kind, rows in sorted_failures.items():
        if not rows:
            continue
        lines += ["", f"### {kind}", ""]
        for row in rows[:50]:
            link = f" ([bug {row['bug_id']}]({base_url}/bugs/{row['bug_id']}))" if row["bug_id"] else ""
            lines.append(f"- `{row['test']}` on `{row['config']}`: `{row['signature'] or row['outcome']}`{link}")
        if len(rows) > 50:
            lines.append(f"- ... and {len(rows) - 50} more")
    return "\n".join(lines) + "\n"

"""The HTML report, rendered from a small real run and opened in real headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from e2e.configs.xfails import load_xfails
from e2e.framework.html_report import main, render_html, write_html
from e2e.framework.run_summary import summarize
from e2e.tools.diff import compare

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_INSTALL = "apt-get update && apt-get install -y chromium chromium-driver"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",  # console messages, uncaught errors included, go to stderr
    "--v=0",
]
# Three tests on two configs, with xfail sets of our own so the run has each kind of cell:
# passed, xfailed (compare, backend), failed (backend), and a strict XPASS.
SELECTION = "Activation_GeluTanh or Binary_Atan2SameShape or (MmModule_basic and not Bmm)"


def xfail_line(config: str, test: str) -> str:
    """The project's own entry, so its recorded failure is the one these tests have."""
    entry = load_xfails(config, None, ROOT / "e2e" / "configs" / "xfail").get(test)
    if entry is not None:
        return f"{test}  # {entry.reason}\n"
    raise AssertionError(f"{test} is no longer in the {config} xfail set; pick another failing test")


XFAILS = {
    # MmModule_basic passes on linalg: listed there, it XPASSes (strict).
    "linalg.txt": xfail_line("linalg", "Activation_GeluTanh") + xfail_line("tosa", "MmModule_basic"),
    "tosa.txt": xfail_line("tosa", "MmModule_basic"),
}
EXPECTED = {
    ("Activation_GeluTanh", "linalg"): ("xfailed", "compare"),
    ("Activation_GeluTanh", "tosa"): ("passed", None),
    ("Binary_Atan2SameShape", "linalg"): ("passed", None),
    ("Binary_Atan2SameShape", "tosa"): ("failed", "backend"),
    ("MmModule_basic", "linalg"): ("failed", None),
    ("MmModule_basic", "tosa"): ("xfailed", "backend"),
}


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    message = f"the HTML report test needs Chromium, which is not installed; install it with:\n    {CHROMIUM_INSTALL}"
    if os.environ.get("CI") == "true":  # CI installs it (.ci/run): missing there is a failure
        pytest.fail(message)
    pytest.skip(message)


def open_in_chromium(page: Path, fragment: str = "") -> tuple[str, list[str]]:
    """The DOM of `page` after its scripts ran, and the console errors Chromium logged."""
    with tempfile.TemporaryDirectory(prefix="e2e-chromium-") as profile:
        done = subprocess.run(
            [
                chromium(),
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.resolve().as_uri() + fragment,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, f"chromium exited with {done.returncode}:\n{done.stderr[-3000:]}"
    errors = [
        line for line in done.stderr.splitlines() if ":CONSOLE" in line and re.search(r"error|uncaught", line, re.I)
    ]
    return done.stdout, errors


def loaded_cleanly(dom: str, errors: list[str]) -> None:
    assert not errors, "console errors:\n" + "\n".join(errors)
    thrown = re.search(r'<html[^>]* data-js-errors="([^"]*)"', dom)
    assert thrown is None, f"uncaught script errors: {thrown and thrown.group(1)}"
    assert 'data-ready="1"' in dom, "the page's script did not run to its end"


def shown(dom: str) -> tuple[int, int]:
    tests = re.search(r'id="shown-tests">(\d+)<', dom)
    pairs = re.search(r'id="shown-pairs">(\d+)<', dom)
    assert tests and pairs, "the matrix caption is missing"
    return int(tests.group(1)), int(pairs.group(1))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real run of the suite on SELECTION x {linalg, tosa}, through the plugin, without bundles."""
    base = tmp_path_factory.mktemp("html-run")
    xfail_dir = base / "xfail"
    xfail_dir.mkdir()
    for name, text in XFAILS.items():
        (xfail_dir / name).write_text(text)
    command = [
        sys.executable, "-m", "pytest", "-p", "e2e.plugin", "e2e", "-q", "-p", "no:cacheprovider", "--no-reduce",
        "--config", "linalg,tosa", "--xfail-dir", str(xfail_dir), "--reports-dir", str(base / "reports"),
        "-k", SELECTION,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    (base / "output.txt").write_text(done.stdout + done.stderr)  # shown when the rows are not the expected ones
    assert (base / "reports" / "results.json").exists(), (
        f"the run wrote no results:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    )
    return base


@pytest.fixture(scope="module")
def rows(run_dir) -> list[dict]:
    rows = json.loads((run_dir / "reports" / "results.json").read_text())
    got = {(r["test"], r["config"]): (r["final"], r["stage"]) for r in rows}
    assert got == EXPECTED, f"the run's output:\n{(run_dir / 'output.txt').read_text()[-6000:]}"
    return rows


RUN = {
    "status": "finished",
    "torch": "2.13.0",
    "torch_path": "/site-packages/torch",
    "torch_mlir": "20261001",
    "torch_mlir_path": "/site-packages/torch_mlir",
    "shape_mode": "annotated",
    "configs": ["linalg", "tosa"],
    "started": "2026-11-22T02:00:00Z",
    "duration": 75.5,
    "command": ["pytest", "e2e", "--config", "linalg,tosa"],
}


def test_report_of_a_real_run_loads_in_chromium_with_the_summary_counts(rows, run_dir):
    page = write_html(rows, RUN, run_dir / "reports" / "index.html")
    dom, errors = open_in_chromium(page)
    loaded_cleanly(dom, errors)
    # Per-config counts are the terminal's e2e summary: "linalg: 3 run: 1 failed, 1 passed, 1 xfailed".
    for line in summarize(rows).splitlines():
        config, total, parts = re.match(r"\s*(\S+): (\d+) run: ([^\[]+)", line).groups()
        row = re.search(rf'<tr data-config="{config}">(.*?)</tr>', dom).group(1)
        assert re.search(rf'data-outcome="total">{total}<', row)
        for count, outcome in (part.split() for part in parts.split(", ")):
            assert re.search(rf'data-outcome="{outcome}">{count}<', row), (config, outcome, count)
        stages = re.search(r"\[failing stages: (.*)\]", line)
        assert (stages.group(1) if stages else "") in row
    # The matrix: one row per test, one cell per pair, each labelled with its failing stage.
    assert shown(dom) == (3, 6)
    matrix = re.search(r'<table id="matrix">(.*?)</table>', dom, re.S).group(1)
    assert len(re.findall(r'class="cell ', matrix)) == 6
    assert re.search(r'class="cell f-failed"[^>]*>backend<', matrix)
    assert re.search(r'class="cell f-xfailed"[^>]*>compare<', matrix)
    assert re.search(r'class="cell f-xfailed"[^>]*>backend<', matrix)
    assert re.search(r'class="cell f-failed"[^>]*>XPASS\(strict\)<', matrix)
    # One section per signature of a pair that did not pass, the largest first.
    sections = re.findall(
        r'<details class="sig"[^>]*><summary><span class="count">(\d+)</span> <code>([^<]*)</code>', dom
    )
    hits = Counter(r["signature"] for r in rows if r["final"] != "passed" and r["signature"])
    assert sorted(hits.items(), key=lambda kv: (-kv[1], kv[0])) == [
        (html.unescape(text), int(n)) for n, text in sections
    ]
    assert 'id="run"' in dom and "torch-mlir imported from" in dom and "/site-packages/torch_mlir" in dom


@pytest.mark.parametrize(
    "fragment, expected",
    [
        ("#outcome=failed", (2, 2)),  # Atan2 on tosa, Mm (strict XPASS) on linalg
        ("#config=linalg&stage=compare&test=gelu", (1, 1)),
        ("#signature=compare%20%7C%20values", (1, 1)),
    ],
)
def test_filters_in_the_address_select_rows_in_chromium(rows, run_dir, fragment, expected):
    page = write_html(rows, RUN, run_dir / "filtered" / "index.html")
    dom, errors = open_in_chromium(page, fragment)
    loaded_cleanly(dom, errors)
    assert shown(dom) == expected


def test_pairs_changed_since_a_baseline_are_marked_and_filtered_in_chromium(rows, run_dir):
    # A baseline in which Atan2 passed on tosa: now it fails there (newly failing).
    base = [{**r, "outcome": "pass", "final": "passed", "stage": None, "signature": None}
            if (r["test"], r["config"]) == ("Binary_Atan2SameShape", "tosa") else r for r in rows]  # fmt: skip
    changes = compare(base, rows).by_pair()
    assert list(changes) == [("Binary_Atan2SameShape", "tosa")]
    page = write_html(rows, RUN, run_dir / "changed" / "index.html", changes=changes)
    dom, errors = open_in_chromium(page, "#outcome=changed")
    loaded_cleanly(dom, errors)
    assert shown(dom) == (1, 1)
    assert '<option value="changed">changed since the baseline (1)</option>' in outcome_filter(dom)
    marked = changed_cells(dom)
    assert len(marked) == 1, marked
    title, label = (html.unescape(text) for text in marked[0])
    assert label.startswith("\u0394 ") and "since the baseline: newly failing: passed -> failed (fail: backend" in title
    # Without a baseline, the same rows mark nothing and the filter is not offered.
    plain, errors = open_in_chromium(write_html(rows, RUN, run_dir / "unchanged" / "index.html"))
    loaded_cleanly(plain, errors)
    assert changed_cells(plain) == [] and 'value="changed"' not in outcome_filter(plain)


def outcome_filter(dom: str) -> str:
    """The outcome filter as the script rendered it (the page's script text holds its source too)."""
    return dom.split('<div id="filters">', 1)[1].split('<select id="f-outcome">', 1)[1].split("</select>", 1)[0]


def changed_cells(dom: str) -> list[tuple[str, str]]:
    """(title, label) of each matrix cell marked as changed since the baseline."""
    return re.findall(r'<span class="cell [^"]*\bchanged\b[^"]*"[^>]*title="([^"]*)"[^>]*>([^<]*)<', dom)


def test_a_failing_pair_shows_its_error_rerun_command_and_links(rows, run_dir):
    # The run had --no-reduce: give the pair a bundle folder, as the reducer would write it.
    bundle = run_dir / "reports" / "repro" / "Binary_Atan2SameShape" / "tosa"
    bundle.mkdir(parents=True, exist_ok=True)
    for name in ("README.md", "repro.mlir"):
        (bundle / name).write_text("...")
    rows = [{**r, "repro_path": str(bundle)} if r["final"] == "failed" and r["stage"] else r for r in rows]
    page = write_html(rows, RUN, run_dir / "reports" / "index.html")
    dom, errors = open_in_chromium(page, "#pair=Binary_Atan2SameShape/tosa")
    loaded_cleanly(dom, errors)
    panel = re.search(r'<aside id="detail"([^>]*)>(.*?)</aside>', dom, re.S)
    assert "hidden" not in panel.group(1), "the pair's details are not shown"
    assert "Binary_Atan2SameShape on tosa" in panel.group(2)
    rerun = next(r["rerun"] for r in rows if (r["test"], r["config"]) == ("Binary_Atan2SameShape", "tosa"))
    assert rerun.startswith("python -m pytest e2e/test_suite/elementwise_binary.py::Binary_Atan2SameShape::tosa ")
    assert f'rerun: <code id="rerun">{rerun}</code>' in html.unescape(panel.group(2))
    assert "failed to legalize operation 'torch.aten.atan2'" in html.unescape(panel.group(2))
    links = dict((text, href) for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', panel.group(2)))
    assert links["bundle README.md"] == "repro/Binary_Atan2SameShape/tosa/README.md"
    assert links["repro.mlir"] == "repro/Binary_Atan2SameShape/tosa/repro.mlir"
    assert (page.parent / unquote(links["IR given to the failing stage"])).is_file()


def test_a_script_error_is_seen(tmp_path):
    """The check above must be able to fail: a page whose script throws is caught."""
    empty = tmp_path / "empty.html"
    empty.write_text(render_html([], {}, tmp_path))
    loaded_cleanly(*open_in_chromium(empty))  # a run without rows is a valid page
    page = tmp_path / "broken.html"
    text = empty.read_text().replace('JSON.parse(document.getElementById("e2e-data").textContent)', "JSON.parse('{')")
    page.write_text(text)
    dom, errors = open_in_chromium(page)
    with pytest.raises(AssertionError, match="console errors"):
        loaded_cleanly(dom, errors)
    assert 'data-ready="1"' not in dom


def _links(text: str) -> list[str]:
    data = json.loads(re.search(r'<script type="application/json" id="e2e-data">(.*?)</script>', text, re.S).group(1))
    return [cell[key] for cell in data["cells"] for key in ("ir", "rp") if cell.get(key)]


def test_links_are_relative_and_survive_moving_the_folder(rows, run_dir, tmp_path):
    failing = [r for r in rows if r["ir_path"]]
    assert failing, "the run saved no IR for its failures"
    page = write_html(rows, RUN, run_dir / "reports" / "index.html")
    links = _links(page.read_text())
    assert links and all(not link.startswith(("/", "file:")) for link in links)
    assert all((page.parent / unquote(urlsplit(link).path)).is_file() for link in links)
    # Copied to another machine, where the rows' absolute paths do not exist: found under the folder.
    moved = tmp_path / "elsewhere" / "reports"
    shutil.copytree(run_dir / "reports", moved)
    elsewhere = [{**r, "ir_path": r["ir_path"] and r["ir_path"].replace(str(run_dir), "/gone/ci")} for r in rows]
    links = _links(write_html(elsewhere, RUN, moved / "index.html").read_text())
    assert len(links) == len(failing)
    assert all(not link.startswith("..") and (moved / unquote(link)).is_file() for link in links)


def test_cli_writes_the_page_beside_the_results(rows, run_dir, capsys):
    results = run_dir / "reports" / "results.json"
    output = run_dir / "cli" / "index.html"
    assert main([str(results), "-o", str(output)]) == 0
    assert f"{len(rows)} pairs" in capsys.readouterr().out
    assert 'id="e2e-data"' in output.read_text()


def test_cli_names_a_file_that_is_not_results(tmp_path, capsys):
    bogus = tmp_path / "results.json"
    bogus.write_text(json.dumps([{"name": "x"}]))
    assert main([str(bogus)]) == 2
    assert "lacks test, config or final" in capsys.readouterr().err


def test_a_large_run_stays_one_compact_page(tmp_path):
    """Upstream's size: 1,750 tests x 3 configs embed as data, not 5,000 table rows of HTML."""
    rows = [
        {"test": f"Test{t:04d}", "config": config, "final": "failed" if t % 7 == 0 else "passed", "outcome": "fail",
         "stage": "backend", "signature": f"backend | pass{t % 13} | error", "error": "x" * 300, "duration": 0.4}
        for t in range(1750) for config in ("linalg", "stablehlo", "tosa")
    ]  # fmt: skip
    page = write_html(rows, {"status": "interrupted"}, tmp_path / "index.html")
    text = page.read_text()
    assert len(text) < 2_500_000
    assert "This run was interrupted" in text
    counts = Counter(r["final"] for r in rows if r["config"] == "tosa")
    assert f'data-outcome="failed">{counts["failed"]}<' in text
    dom, errors = open_in_chromium(page)
    loaded_cleanly(dom, errors)
    assert shown(dom) == (1750, 5250)
    # How long the page took to build is measured in benchmarks/, not asserted here.
    assert re.search(r'data-render-ms="\d+"', dom)


def test_runtimes_are_shown_beside_their_refbackend_twins(tmp_path):
    from e2e.configs.runtime import CONFIGS, Departs, Departure
    from e2e.framework.html_report import runtime_verdicts

    tosa_ref = CONFIGS["tosa@tosa-ref"]
    wrong = Departure(Departs.WRONG_RESULTS, "values mismatch")
    runtime_bug, refbackend_bug = tosa_ref.verdict(wrong, None), tosa_ref.verdict(None, wrong)
    assert (runtime_bug.verdict, refbackend_bug.verdict) == ("runtime-side", "RefBackend-side")
    rows = [
        {"test": "A", "config": "tosa", "final": "passed"},
        {"test": "A", "config": "tosa@tosa-ref", "final": "failed", "twin": "tosa",
         "verdict": runtime_bug.verdict, "verdict_reason": runtime_bug.verdict_reason},
        {"test": "B", "config": "tosa@tosa-ref", "final": "passed", "twin": "tosa",
         "verdict": refbackend_bug.verdict, "verdict_reason": refbackend_bug.verdict_reason},
        {"test": "C", "config": "tosa@tosa-ref", "final": "passed", "twin": "tosa"},
        {"test": "C", "config": "linalg", "final": "passed"},
    ]  # fmt: skip
    verdicts = runtime_verdicts(rows)
    assert list(verdicts) == ["tosa@tosa-ref"]
    entry = verdicts["tosa@tosa-ref"]
    assert entry["twin"] == "tosa"
    assert dict(entry["counts"]) == {"runtime-side": 1, "RefBackend-side": 1, "agree": 1}
    assert sorted(entry["disagreements"])[0][:3] == ("A", "passed", "failed")
    assert sorted(entry["disagreements"])[1][:3] == ("B", "not in this run", "passed")
    assert sorted(entry["disagreements"])[0][3] == runtime_bug.verdict_reason
    page = render_html(rows, {}, tmp_path)
    assert '<section id="runtimes">' in page and "tosa@tosa-ref vs tosa: 2 disagreements" in page
    assert '<section id="runtimes">' not in render_html(rows[-1:], {}, tmp_path)


def test_a_timed_out_pair_links_the_stacks_its_host_had_when_killed(tmp_path):
    """The hang's diagnosis (`hang_stack`, written beside the pair's IR) is one click from
    its cell, shown in Chromium; a timeout without one has no such link."""
    from e2e.framework.html_report import page_data

    rows = [
        {"test": "Spin", "config": "linalg", "final": "failed", "outcome": "timeout", "stage": "lower",
         "error": "timeout in stage lower: no result after 300 s (killed)"},
        {"test": "Wait", "config": "linalg", "final": "failed", "outcome": "timeout", "stage": "execute",
         "error": "timeout in stage execute: no result after 300 s (killed)"},
    ]  # fmt: skip
    stack = tmp_path / "ir" / "Spin" / "linalg" / "hang-stack.txt"
    stack.parent.mkdir(parents=True)
    stack.write_text("Thread 1: spinning\n")
    # A hang confirmed by a rerun: the Result is the first attempt's, and so is its stack
    # (the only one gdb was given), not the rerun's beside it.
    rows.append({**rows[0], "test": "Twice"})
    for attempt in ("linalg.first-attempt", "linalg"):
        (tmp_path / "ir" / "Twice" / attempt).mkdir(parents=True)
        (tmp_path / "ir" / "Twice" / attempt / "hang-stack.txt").write_text(f"{attempt}\n")
    cells = {data["tests"][cell["t"]]: cell for data in [page_data(rows, tmp_path)] for cell in data["cells"]}
    assert cells["Spin"]["hs"] == "ir/Spin/linalg/hang-stack.txt"
    assert cells["Twice"]["hs"] == "ir/Twice/linalg.first-attempt/hang-stack.txt"
    assert cells["Wait"].get("hs") is None
    page = write_html(rows, RUN, tmp_path / "index.html")
    dom, errors = open_in_chromium(page, "#pair=Spin/linalg")
    loaded_cleanly(dom, errors)
    panel = re.search(r'<aside id="detail"([^>]*)>(.*?)</aside>', dom, re.S).group(2)
    links = dict((text, href) for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', panel))
    assert links["threads and stacks when killed"] == "ir/Spin/linalg/hang-stack.txt"

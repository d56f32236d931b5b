"""The README and docs/ pages hold what they promise.

Each ```python block of README.md and docs/*.md runs alone, given only what its prose takes as
the reader's own: `torch`, a `model` (a Linear layer 16 -> 4) and its input `x`. Blocks that
register tests do so in an empty registry, so they neither clash with the suite nor leak into
it. The README stays short and opens with the two commands CI runs (`.ci/run`), and every
relative link of these pages points at a file (and heading) that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from e2e.framework import registry

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Pages whose links are checked: the README, docs/ and the results file they link to.
PAGES = [README, *DOCS, ROOT / "benchmarks" / "RESULTS.md"]

INSTALL_AND_RUN = 'pip install torch==2.13.0 && pip install -e ".[models,service]" && python -m pytest e2e -n 2'
PROJECT_TESTS = "python -m pytest tests"
MAX_README_LINES = 150


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


BLOCKS = [(page, block) for page in [README, *DOCS] for block in _python_blocks(page)]
BLOCK_IDS = [
    f"{page.relative_to(ROOT).as_posix()}:block{i}"
    for page in [README, *DOCS]
    for i in range(len(_python_blocks(page)))
]


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 4, BLOCK_IDS
    assert any(page.parent.name == "docs" for page, _ in BLOCKS)


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=BLOCK_IDS)
def test_readme_block_runs(page, block, monkeypatch):
    monkeypatch.setattr(registry, "GLOBAL_TEST_REGISTRY", {})
    model = torch.nn.Linear(16, 4)
    x = torch.rand(3, 16)
    namespace = {"torch": torch, "model": model, "x": x, "__name__": "readme_example"}
    exec(compile(block, str(page), "exec"), namespace)
    if "out" in namespace:  # an example that computes the model's output computes it right
        torch.testing.assert_close(namespace["out"], model(x))


def test_the_readme_is_short_and_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; at most {MAX_README_LINES}"
    commands = [
        line.strip()
        for line in lines
        if line.startswith("    ") and line.strip().startswith(("pip install", "python -m pytest"))
    ]
    assert commands[:2] == [INSTALL_AND_RUN, PROJECT_TESTS]
    # They open it: nothing but the title and one paragraph before the first.
    first = lines.index("    " + INSTALL_AND_RUN)
    assert lines[0].startswith("# ")
    assert [line for line in lines[1:first] if line.strip()] and not any(
        line.startswith(("#", "    ", "```")) for line in lines[1:first]
    )


def _prose(text: str) -> str:
    """`text` without fenced code blocks, indented code lines and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("    "))
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub makes for `page` (lower case, punctuation dropped, spaces as -)."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(
        r"^#{1,6} +(.+?) *#*$", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M), re.M
    ):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


LINKS = list(
    dict.fromkeys(  # each (page, link) once
        (page, target)
        for page in PAGES
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(page.read_text()))
        if not re.match(r"[a-z]+:", target)  # http:, https:, mailto:
    )
)


def test_the_readme_links_every_docs_page_and_the_results():
    linked = {(README.parent / target.partition("#")[0]).resolve() for page, target in LINKS if page == README}
    missing = {page.relative_to(ROOT).as_posix() for page in PAGES[1:] if page.resolve() not in linked}
    assert DOCS and not missing, f"README.md does not link {sorted(missing)}"


@pytest.mark.parametrize(
    ("page", "target"), LINKS, ids=[f"{page.relative_to(ROOT).as_posix()}->{target}" for page, target in LINKS]
)
def test_every_relative_link_points_at_an_existing_file(page, target):
    path, _, anchor = target.partition("#")
    linked = (page.parent / path).resolve() if path else page
    assert linked.is_file(), f"{page.relative_to(ROOT)}: {target} is not a file"
    if anchor and linked.suffix == ".md":
        assert anchor in _anchors(linked), f"{page.relative_to(ROOT)}: {target}: no such heading"

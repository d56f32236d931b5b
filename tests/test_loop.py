"""What a run of one test or one pair does not pay for: the one-test loop
(docs/running.md, "The one-test loop")."""

from pathlib import Path

from _pytest.mark.expression import Expression

from e2e.collect import KeywordPrefilter
from e2e.framework.suite_files import TestInfo

ROOT = Path(__file__).resolve().parents[1]


class _Counting:
    """An expression that counts its evaluations."""

    def __init__(self, text: str):
        self.expression = Expression.compile(text)
        self.evaluations = 0

    def evaluate(self, matcher) -> bool:
        self.evaluations += 1
        return self.expression.evaluate(matcher)


def test_k_is_evaluated_once_per_distinct_answer_of_its_identifiers_not_per_item():
    """Which tests `-k` keeps is pytest's answer (tests/test_plugin.py checks it against
    pytest alone); its cost is one evaluation per distinct answer, not 24 per test."""
    prefilter = KeywordPrefilter(Expression.compile("Mm and not tosa"))
    counting = prefilter.expression = _Counting("Mm and not tosa")
    tests = [TestInfo(f"Tanh{i}") for i in range(200)] + [TestInfo("MmModule", marks=("models",))]
    chosen = [t.name for t in tests if prefilter.may_select(("suite", "ops.py"), t, ["linalg", "tosa"])]
    assert chosen == ["MmModule"]
    assert counting.evaluations <= 4  # (Mm?, tosa?): at most four answers
    assert KeywordPrefilter(Expression.compile("ops and linalg")).may_select(("suite", "ops.py"), tests[0], ["linalg"])

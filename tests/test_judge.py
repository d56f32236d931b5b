"""The runner's explainers: asked in order, a re-attribution ends the asking, a raise costs a note."""

from e2e.framework.judge import Explanation, Outcome, explain


class Says:
    def __init__(self, explanation):
        self.explanation = explanation

    def explain(self, prepared, outcome):
        return self.explanation


class Raises:
    def explain(self, prepared, outcome):
        raise ValueError("broken explainer")


class Config:
    def __init__(self, *explainers):
        self._explainers = explainers

    def explainers(self):
        return self._explainers


def test_an_explainer_that_raises_costs_its_note_and_the_others_still_answer():
    found = explain(Config(Raises(), Says(Explanation(["second"]))), None, Outcome("compare"))
    assert found[0].notes[0].startswith("Raises raised ValueError: broken explainer (at ")
    assert found[1].notes == ["second"]


def test_a_failure_moved_to_another_stage_ends_the_asking():
    moved = Explanation(stage="capture", error="capture discrepancy")
    found = explain(Config(Says(moved), Says(Explanation(["never asked"]))), None, Outcome("compare"))
    assert found == [moved]


def test_a_config_without_explainers_has_none():
    assert explain(object(), None, Outcome(None)) == []

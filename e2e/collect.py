"""Collection: suite files become one collector per test and one item per config.

`<file>::<TestName>::<config>`: a test's items share a node id prefix, which is the
xdist scope that keeps them on one worker (see `e2e.hooks.scheduling.pytest_xdist_make_scheduler`).
"""

from __future__ import annotations

import pytest

from e2e.framework.result import SKIP, Result
from e2e.framework.run_summary import failure_text
from e2e.pair import Pair, PairOptions
from e2e.session import STATE, E2EState


class E2EFile(pytest.File):
    def collect(self):
        state = self.config.stash[STATE]
        suite_file = state.suite.suite_file(self.path)
        if suite_file.skip_reason:
            yield SkippedFileItem.from_parent(self, name="import", reason=suite_file.skip_reason)
            return
        if suite_file.broken is not None:
            yield BrokenFileItem.from_parent(self, name="import", result=suite_file.broken)
            return
        keyword = KeywordPrefilter.of(self.config)
        chain = keyword and keyword.chain_names(self)
        for name, info in suite_file.infos.items():
            if keyword is None or keyword.may_select(chain, info, configs_of(state, info)):
                yield E2ETest.from_parent(self, name=name)


def configs_of(state: E2EState, test) -> list[str]:
    """The configs that take the test's model format (an ONNX model: not a torch-capturing config)."""
    return [name for name, formats in state.settings.model_formats.items() if test.model_format in formats]


class KeywordPrefilter:
    """`-k EXPR` decided per test before its items exist. pytest builds every item and
    then deselects: for `-k ONE_TEST` across the suite that is 8,000 items built for a
    dozen, a second of the loop. Here a test is collected only when one of its items
    could match, evaluated with pytest's own expression and matcher over exactly the
    names pytest would match that item on (its chain's names, its config, its marks)
    and each combination of the marks this plugin adds later (`xfail`, `timeout`);
    pytest still deselects among the items of the tests collected.

    The expression is evaluated once per distinct answer of its identifiers, not per item:
    pytest's matcher asks whether an identifier is part of any of the item's names, so
    an item's answers are those of its name groups (chain, test, config, later marks)
    or'ed together, and the expression's value depends on nothing else. `-k ONE_TEST`
    over 1,400 tests on six configs evaluated it 34,000 times, a third of a second."""

    LATER_MARKS = ((), ("xfail",), ("timeout",), ("xfail", "timeout"))

    def __init__(self, expression):
        self.expression = expression
        self.identifiers = _identifiers(expression)  # None: evaluate per item, as pytest does
        self._answers: dict[tuple[str, ...], tuple[bool, ...]] = {}  # a name group's, by its names
        self._values: dict[tuple[bool, ...], bool] = {}  # the expression's, by its identifiers' answers

    @staticmethod
    def of(config) -> KeywordPrefilter | None:
        """The run's prefilter; None without `-k` (or if pytest's internals moved: no prefilter)."""
        text = (getattr(config.option, "keyword", "") or "").lstrip()
        if not text:
            return None
        try:
            from _pytest.mark import KeywordMatcher  # noqa: F401 - used by may_select
            from _pytest.mark.expression import Expression

            return KeywordPrefilter(Expression.compile(text))
        except Exception:  # noqa: BLE001 - pytest reports a bad expression itself, when it deselects
            return None

    @staticmethod
    def chain_names(node) -> tuple[str, ...]:
        """The names pytest's KeywordMatcher takes from a node's chain (not the session's, nor
        the root directory's)."""
        return tuple(
            n.name
            for n in node.listchain()
            if not isinstance(n, pytest.Session)
            and not (isinstance(n, pytest.Directory) and isinstance(n.parent, pytest.Session))
        )

    def may_select(self, chain: tuple[str, ...], test, configs: list[str]) -> bool:
        from _pytest.mark import KeywordMatcher

        own = (test.name,) if test.skip_reason is not None else (test.name, *test.marks)  # SkippedTestItem: no marks
        later = ((),) if test.skip_reason is not None else self.LATER_MARKS
        if self.identifiers is None:
            return any(
                self.expression.evaluate(KeywordMatcher({*chain, *own, config, *added}))
                for config in configs
                for added in later
            )
        test_answers = _or(self._group(chain), self._group(own, keep=False))
        for config in configs:
            config_answers = _or(test_answers, self._group((config,)))
            for added in later:
                answers = _or(config_answers, self._group(added))
                value = self._values.get(answers)
                if value is None:
                    value = self.expression.evaluate(KeywordMatcher({*chain, *own, config, *added}))
                    self._values[answers] = value
                if value:
                    return True
        return False

    def _group(self, names: tuple[str, ...], keep: bool = True) -> tuple[bool, ...]:
        """Whether each identifier is part of one of `names`, as pytest's matcher decides it
        (kept for the groups many items share: chains, configs, marks)."""
        from _pytest.mark import KeywordMatcher

        answers = self._answers.get(names) if keep else None
        if answers is None:
            matcher = KeywordMatcher(set(names))
            answers = tuple(matcher(identifier) for identifier in self.identifiers)
            if keep:
                self._answers[names] = answers
        return answers


def _or(a: tuple[bool, ...], b: tuple[bool, ...]) -> tuple[bool, ...]:
    return tuple(x or y for x, y in zip(a, b))


def _identifiers(expression) -> tuple[str, ...] | None:
    """The identifiers a compiled `-k` expression asks its matcher about (pytest compiles
    each to a name with a prefix); None if pytest's internals moved."""
    try:
        from _pytest.mark.expression import IDENT_PREFIX

        names = expression._code.co_names
    except (ImportError, AttributeError):
        return None
    if not all(name.startswith(IDENT_PREFIX) for name in names):
        return None  # a name pytest's matcher does not answer (a call's keyword, say)
    return tuple(dict.fromkeys(name[len(IDENT_PREFIX) :] for name in names))


class E2ETest(pytest.Collector):
    """One registered test: its items are its configs (one xdist scope, one host)."""

    def collect(self):
        state = self.config.stash[STATE]
        test = state.suite.suite_file(self.path).infos[self.name]
        for config_name in configs_of(state, test):
            if test.skip_reason is not None:
                yield SkippedTestItem.from_parent(self, name=config_name, reason=test.skip_reason)
                continue
            item = E2EItem.from_parent(self, name=config_name, test_name=self.name, config_name=config_name)
            for mark in test.marks:
                item.add_marker(getattr(pytest.mark, mark))
            yield item


class E2EError(Exception):
    pass


class E2EFailure(Exception):
    """A pair failed (what an xfail entry expects)."""

    def __init__(self, result: Result):
        super().__init__(result.error)
        self.result = result


class E2EInternalError(Exception):
    """The framework failed before a pair had a result: reported failed (never xfailed,
    whatever the pair's entry says), with a row of its own."""

    def __init__(self, result: Result):
        super().__init__(result.error)
        self.result = result


class E2EFailsDifferently(Exception):
    """A listed test failed, but not the way its xfail entry says: a new bug hides there."""

    def __init__(self, result: Result, entry):
        super().__init__(result.error)
        self.result = result
        self.entry = entry


class ResultItem(pytest.Item):
    result: Result | None = None

    @property
    def rerun_command(self) -> str:
        return self.config.stash[STATE].settings.rerun_command(self.path, self.nodeid.split("::", 1)[1])


class BrokenFileItem(ResultItem):
    """A suite file that does not import: one failing item, the run goes on."""

    def __init__(self, *, result: Result, **kwargs):
        super().__init__(**kwargs)
        self.result = result

    def runtest(self):
        raise E2EError(self.result.error)

    def repr_failure(self, excinfo):
        return f"{self.result.signature}\n\n{excinfo.value}"

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::import"


class SkippedFileItem(pytest.Item):
    def __init__(self, *, reason: str, **kwargs):
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self):
        pytest.skip(f"{self.path.name}: {self.reason}")

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::import"


class SkippedTestItem(pytest.Item):
    """A registered test that cannot run on any config (its `skip_reason`)."""

    def __init__(self, *, reason: str, **kwargs):
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self):
        pytest.skip(self.reason)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name} on {self.name}"


class E2EItem(ResultItem):
    def __init__(self, *, test_name: str, config_name: str, **kwargs):
        super().__init__(**kwargs)
        self.test_name = test_name
        self.config_name = config_name
        self.xfail_entry = None

    def runtest(self):
        """The pair's final Result (`e2e.pair.Pair`) as pytest's outcome, and nothing else."""
        option = self.config.getoption
        options = PairOptions(option("runxfail"), option("reduce_xfailed"), option("reduce_timeout"))
        state = self.config.stash[STATE]
        settled = Pair(state, self.path, self.test_name, self.config_name, self.xfail_entry, options).settle()
        self.result = result = settled.result
        if settled.internal:
            raise E2EInternalError(result)
        if result.outcome == SKIP:
            pytest.skip(f"{self.config_name} cannot run {self.test_name} as asked: {result.error}")
        if result.passed:
            return
        self.ihook.pytest_e2e_after_result(item=self, result=result)
        if settled.differently:
            raise E2EFailsDifferently(result, settled.entry)
        raise E2EFailure(result)

    def repr_failure(self, excinfo):
        value = excinfo.value
        if isinstance(value, E2EFailsDifferently):
            return (
                f"{self.test_name} on {self.config_name} fails differently than its xfail entry says "
                f"({value.entry.where}):\n  expected: {value.entry.reason}\n"
                f"  now:      {value.result.outcome}: {value.result.signature}\n"
                "Look at the new failure (a new bug may hide behind the old one); then update the entry.\n\n"
                + failure_text(value.result, self.rerun_command)
            )
        if isinstance(value, (E2EFailure, E2EInternalError)):
            return failure_text(value.result, self.rerun_command)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.test_name} on {self.config_name}"

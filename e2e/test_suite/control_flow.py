"""Control flow: torch.cond, Python loops and branches the frontends unroll, data-dependent selects."""

import torch

from e2e.framework import e2e_test, op_tests


def _cond(pred_of, true_fn, false_fn):
    return lambda x: torch.cond(pred_of(x), true_fn, false_fn, (x,))


op_tests(
    "Cond",
    inputs=lambda tu: [tu.randn(3, 4)],
    fns={
        "SumPositive": _cond(lambda x: x.sum() > 0, lambda x: x.sin(), lambda x: x.cos()),
        "SumNegative": _cond(lambda x: x.sum() < -100, lambda x: x + 1, lambda x: x - 1),
        "ShapePredicate": _cond(lambda x: x.shape[0] > 2, lambda x: x * 2, lambda x: x / 2),
        "ConstantPredicate": _cond(lambda x: torch.tensor(True), lambda x: x.relu(), lambda x: -x),
        "MatmulBranches": _cond(lambda x: x.mean() > 0, lambda x: x @ x.t(), lambda x: x @ x.t() * 0),
        "ReductionBranches": _cond(lambda x: x.max() > 1.0, lambda x: x.sum(0), lambda x: x.mean(0)),
        "NestedCond": _cond(
            lambda x: x.sum() > 0,
            lambda x: torch.cond(x.max() > 1, lambda y: y * 3, lambda y: y * 4, (x,)),
            lambda x: x.abs(),
        ),
    },
)
op_tests(
    "CondDynamic",
    {"SumPositive": _cond(lambda x: x.sum() > 0, lambda x: x.exp(), lambda x: x.tanh())},
    inputs=lambda tu: [tu.randn(3, 5)],
    dynamic=True,
)


class CondTwoOperands(torch.nn.Module):
    def forward(self, x, y):
        return torch.cond(x.sum() > y.sum(), lambda a, b: a + b, lambda a, b: a - b, (x, y))


e2e_test(inputs=lambda tu: [tu.randn(2, 3), tu.randn(2, 3)])(CondTwoOperands)


class Loop(torch.nn.Module):
    """A Python loop with a fixed trip count: traced into a straight-line program."""

    def __init__(self, steps, body):
        super().__init__()
        self.steps, self.body = steps, body

    def forward(self, x):
        for _ in range(self.steps):
            x = self.body(x)
        return x


e2e_test(
    inputs=lambda tu: [tu.rand(3, 4)],
    params={
        "Scale10": dict(steps=10, body=lambda x: x * 1.1),
        "Tanh5": dict(steps=5, body=torch.tanh),
        "Accumulate8": dict(steps=8, body=lambda x: x + x.mean()),
        "Matmul4": dict(steps=4, body=lambda x: (x @ x.t() @ x) / 4),
        "Softmax3": dict(steps=3, body=lambda x: torch.softmax(x, -1)),
        "Single": dict(steps=1, body=torch.sigmoid),
        "Zero": dict(steps=0, body=torch.sigmoid),
    },
)(Loop)
e2e_test(
    inputs=lambda tu: [tu.rand(3, 4)],
    name="LoopDynamic",
    dynamic=True,
    params={"Scale6": dict(steps=6, body=lambda x: x * 0.9 + 0.1)},
)(Loop)

op_tests(
    "DataDependentSelect",
    inputs=lambda tu: [tu.randn(4, 5)],
    fns={
        "WhereBranches": lambda x: torch.where(x > 0, x.exp(), x.sin()),
        "WhereScalar": lambda x: torch.where(x.sum(1, keepdim=True) > 0, x, 0.0),
        "MaskMultiply": lambda x: (x > 0).float() * x + (x <= 0).float() * 2 * x,
        "ClampedLoopFree": lambda x: torch.clamp(x, min=x.mean()),
        "ShapeBranch": lambda x: x.sum(0) if x.shape[0] > x.shape[1] else x.sum(1),
        "ListComprehension": lambda x: torch.stack([row * i for i, row in enumerate(x.unbind(0))]),
        "WhileUnrolled": lambda x: _halve_until(x, 4),
    },
)


def _halve_until(x, limit):
    steps = 0
    while steps < limit:  # the trip count is static, so tracing unrolls it
        x = x / 2 + 1
        steps += 1
    return x


class Scan(torch.nn.Module):
    """A recurrence written as a loop over the leading dim (a cumulative product of maps)."""

    def forward(self, xs, h):
        outputs = []
        for x in xs.unbind(0):
            h = torch.tanh(x + h)
            outputs.append(h)
        return torch.stack(outputs), h


e2e_test(inputs=lambda tu: [tu.randn(5, 2, 3), tu.randn(2, 3)])(Scan)

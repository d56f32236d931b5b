"""Concatenation and stacking, and their inverses (split/chunk/unbind)."""

import torch

from e2e.framework import (
    FunctionModule,
    TestUtils,
    annotate_args,
    e2e_test,
    export,
    op_test,
    op_tests,
    register_test_case,
)

e2e_test(
    inputs=lambda tu, shapes, dtype=torch.float32: [tu.randn(*s).to(dtype) for s in shapes],
    name="Concat",
    params={
        "CatDim0": dict(fn=lambda a, b: torch.cat([a, b]), shapes=[(2, 4), (3, 4)]),
        "CatDim1": dict(fn=lambda a, b: torch.cat([a, b], 1), shapes=[(3, 2), (3, 5)]),
        "CatNegativeDim": dict(fn=lambda a, b: torch.cat([a, b], -1), shapes=[(2, 3, 1), (2, 3, 4)]),
        "CatThree": dict(fn=lambda a, b, c: torch.cat([a, b, c], 1), shapes=[(2, 1), (2, 2), (2, 3)]),
        "CatSameInputTwice": dict(fn=lambda a: torch.cat([a, a], 0), shapes=[(2, 3)]),
        "CatInt64": dict(fn=lambda a, b: torch.cat([a, b]), shapes=[(2, 3), (1, 3)], dtype=torch.int64),
        "StackDim0": dict(fn=lambda a, b: torch.stack([a, b]), shapes=[(3, 4), (3, 4)]),
        "StackDim1": dict(fn=lambda a, b: torch.stack([a, b], 1), shapes=[(3, 4), (3, 4)]),
        "StackLastDim": dict(fn=lambda a, b, c: torch.stack([a, b, c], -1), shapes=[(3, 4), (3, 4), (3, 4)]),
        "Hstack": dict(fn=lambda a, b: torch.hstack([a, b]), shapes=[(3, 2), (3, 4)]),
        "Vstack": dict(fn=lambda a, b: torch.vstack([a, b]), shapes=[(4,), (4,)]),
    },
)(FunctionModule)


op_tests(
    "ConcatDynamic",
    inputs=lambda tu: [tu.randn(2, 4), tu.randn(3, 4)],
    dynamic=True,
    fns={"Cat": lambda a, b: torch.cat([a, b]), "CatWithItself": lambda a, b: torch.cat([a, b, a])},
)


op_test("StackDynamic", lambda a, b: torch.stack([a, b], 1), lambda tu: [tu.randn(3, 4), tu.randn(3, 4)], dynamic=True)
op_test("CatBool", lambda a, b: torch.cat([a, b], 1), lambda tu: [tu.bools(2, 3), tu.bools(2, 2)])
op_test("CatMixedDtypePromotes", lambda a, b: torch.cat([a, b]), lambda tu: [tu.randint(2, 3), tu.randn(2, 3)])
op_test("SplitEqual", lambda x: torch.split(x, 2, dim=1), lambda tu: [tu.randn(3, 6)])
op_test("SplitSizes", lambda x: torch.split(x, [1, 3, 2], dim=1), lambda tu: [tu.randn(3, 6)])
op_test("ChunkUneven", lambda x: torch.chunk(x, 3, dim=0), lambda tu: [tu.randn(5, 2)])
op_test("Unbind", lambda x: torch.unbind(x, 1), lambda tu: [tu.randn(2, 3, 4)])
op_test("SplitThenCatSwapped", lambda x: torch.cat(torch.split(x, 2, dim=0)[::-1]), lambda tu: [tu.randn(4, 3)])


class TensorsConcatModule(torch.nn.Module):
    @export
    @annotate_args(
        [
            None,
            ([-1, -1, -1], torch.float32, True),
            ([-1, -1, -1], torch.float32, True),
            ([-1, -1, -1], torch.float32, True),
        ]
    )
    def forward(self, x, y, z):
        return torch.cat([x, y, z], 1)


@register_test_case(module_factory=lambda: TensorsConcatModule())
def TensorsConcatModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 2, 4), tu.rand(2, 1, 4), tu.rand(2, 3, 4))


class TensorsStackModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1, -1], torch.float32, True), ([-1, -1, -1], torch.float32, True)])
    def forward(self, x, y):
        return torch.stack([x, y], 1)


@register_test_case(module_factory=lambda: TensorsStackModule())
def TensorsStackModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(2, 3, 4), tu.rand(2, 3, 4))

"""The model zoo's one registration helper: a model at a static and a dynamic shape.

Every zoo architecture registers two tests:

- `Zoo<Name>_Static`: one call at a fixed batch/sequence shape, no annotations;
- `Zoo<Name>_Dynamic`: batch and sequence dims annotated `-1`, called twice at two
  different shapes, so a config that compiled static shapes cannot pass it by accident.

Models are tiny (hidden <= 64, 2 layers, vocab <= 128) and built from a fixed seed, so
every process gets the same random weights. This file registers no test itself.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from e2e.framework import TestUtils, Tolerance, register_test_case
from e2e.framework.registry import annotate_args

# (batch, sequence) of the static test, and of the dynamic test's two calls. No size is
# 1: torch.export specializes dims of size 1.
STATIC_SHAPE = (2, 8)
DYNAMIC_SHAPES = ((2, 8), (3, 5))

# Whole models accumulate float32 rounding over two layers; the single-op table's 1e-4
# is for one op.
MODEL_TOLERANCE = Tolerance(rtol=1e-3, atol=1e-4)

VOCAB = 128


def seeded(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """`build()` with the global RNG seeded (the same weights in every process), in eval mode."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return build().eval()


@dataclass(frozen=True)
class ZooModel:
    """One architecture: how to build it and make its inputs at a (batch, seq) shape."""

    name: str
    factory: Callable[[], torch.nn.Module]
    inputs: Callable[[TestUtils, int, int], Sequence[Any]]
    # Per forward argument, its shape with -1 at the dims that vary (batch, sequence).
    dynamic_dims: Sequence[Sequence[int] | None]
    static_shape: tuple[int, int] = STATIC_SHAPE
    dynamic_shapes: tuple[tuple[int, int], ...] = DYNAMIC_SHAPES
    tolerance: Tolerance = MODEL_TOLERANCE


# Every registered architecture, for tools that run the zoo outside pytest
# (benchmarks/eager_zoo.py).
ZOO: list[ZooModel] = []

_ANNOTATED: dict[tuple[type, str], type] = {}


def _annotated_class(cls: type, dims: Sequence[Sequence[int] | None]) -> type:
    """A subclass whose forward (the same code) carries `annotate_args` for `dims`."""
    key = (cls, repr(dims))
    if key not in _ANNOTATED:
        forward = cls.forward
        # A copy of the function, so the annotation does not leak to the static test;
        # same code object, so torch.jit.script still finds its source.
        copied = types.FunctionType(
            forward.__code__, forward.__globals__, forward.__name__, forward.__defaults__, forward.__closure__
        )
        copied.__qualname__ = forward.__qualname__
        copied.__kwdefaults__ = forward.__kwdefaults__
        copied.__annotations__ = dict(forward.__annotations__)
        annotations = [None] + [None if d is None else (list(d), None, True) for d in dims]
        subclass = type(cls.__name__, (cls,), {"forward": annotate_args(annotations)(copied)})
        subclass.__module__ = cls.__module__
        _ANNOTATED[key] = subclass
    return _ANNOTATED[key]


def register_zoo(model: ZooModel) -> None:
    """Register `Zoo<name>_Static` and `Zoo<name>_Dynamic`."""
    ZOO.append(model)

    def static(module, tu: TestUtils) -> None:
        module.forward(*model.inputs(tu, *model.static_shape))

    def dynamic(module, tu: TestUtils) -> None:
        for batch, seq in model.dynamic_shapes:
            module.forward(*model.inputs(tu, batch, seq))

    def dynamic_factory() -> torch.nn.Module:
        module = model.factory()
        module.__class__ = _annotated_class(type(module), model.dynamic_dims)
        return module

    static.__name__ = f"Zoo{model.name}_Static"
    dynamic.__name__ = f"Zoo{model.name}_Dynamic"
    register_test_case(module_factory=model.factory, tolerance=model.tolerance)(static)
    register_test_case(module_factory=dynamic_factory, tolerance=model.tolerance)(dynamic)


# --- inputs shared by the text models --------------------------------------------------


def token_ids(tu: TestUtils, batch: int, seq: int, vocab: int = VOCAB, low: int = 3) -> torch.Tensor:
    """Token ids in [low, vocab): ids below `low` are kept for pad/bos/eos."""
    return tu.randint(batch, seq, low=low, high=vocab)


def padding_mask(batch: int, seq: int) -> torch.Tensor:
    """1 for tokens, 0 for padding: the last row is padded at its end (a real batch)."""
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq - 2 :] = 0
    return mask


TEXT_DIMS = ([-1, -1], [-1, -1])  # input_ids and attention_mask: batch and sequence vary


class HfModel(torch.nn.Module):
    """A `transformers` model from its config class with random weights; returns one output field.

    `call(model, *inputs)` maps the test's positional inputs to the model's keywords
    (tests pass tensors positionally, so every config sees the same signature).
    """

    def __init__(self, config_class: str, model_class: str, output: str = "last_hidden_state", **config: Any):
        super().__init__()
        import transformers

        hf_config = getattr(transformers, config_class)(**config)
        self.model = seeded(lambda: getattr(transformers, model_class)(hf_config))
        self.output = output


class HfText(HfModel):
    """Token ids and an attention mask in, `output` out (decoders and encoders)."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(input_ids=input_ids, attention_mask=attention_mask), self.output)


def text_inputs(tu: TestUtils, batch: int, seq: int) -> list[torch.Tensor]:
    return [token_ids(tu, batch, seq), padding_mask(batch, seq)]


def text_model(name: str, config_class: str, model_class: str, **config: Any) -> ZooModel:
    """A zoo entry for a text model taking (input_ids, attention_mask)."""
    return ZooModel(name, lambda: HfText(config_class, model_class, **config), text_inputs, TEXT_DIMS)

"""The program generator: deterministic, its op specs agree with torch, its programs valid,
and `pytest --generate` runs them as suite tests."""

import json
import os
import subprocess
import sys
from pathlib import Path
from random import Random

import pytest
import torch

from e2e.framework.testutils import TestUtils, seed_for
from e2e.generate.grow import FAMILY_WEIGHTS, generate
from e2e.generate.ops import CATALOGUE, Draw
from e2e.generate.program import NAMESPACE, InputSpec, Program
from e2e.generate.register import PROGRAMS_ENV, programs_for, save_programs, seed_of
from e2e.generate.types import FLOAT_LIMIT, TensorType

ROOT = Path(__file__).resolve().parents[1]


def test_the_same_seed_gives_the_same_program_and_json_rebuilds_it():
    for seed in (0, 7, 123):
        program = generate(seed)
        again = generate(seed)
        assert again == program
        assert again.to_python() == program.to_python()
        assert Program.from_json(program.to_json()) == program
    assert generate(1).to_python() != generate(2).to_python()
    assert seed_of(generate(42).name) == 42


def test_a_program_is_the_same_in_another_process():
    """No hash order, no global RNG: a forked host or an xdist worker rebuilds the same program."""
    code = "from e2e.generate import generate; print(generate(11).to_json())"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert other.stdout.strip() == generate(11).to_json(), other.stderr


def test_the_catalogue_covers_the_families_the_suite_needs():
    assert len(CATALOGUE) >= 80
    families = {spec.family for spec in CATALOGUE.values()}
    assert families == set(FAMILY_WEIGHTS)  # every op can be drawn


def _drawn_cases(name, count=6):
    """Operands and attributes the op's own `draw` makes, on tensors drawn inside its domains."""
    spec = CATALOGUE[name]
    for case in range(count):
        rng = Random(f"test/{name}/{case}")
        rank = rng.randint(*spec.ranks)
        x = TensorType(tuple(rng.randint(1, 4) for _ in range(rank)), rng.choice(spec.dtypes))
        draw = Draw(rng, x)
        attrs = spec.draw(draw)
        if attrs is None:
            continue
        tu = TestUtils(case)
        first = InputSpec("x0", x, spec.domain(attrs, x.dtype))
        others = [InputSpec(f"x{i + 1}", t, domain) for i, (t, domain) in enumerate(draw.operands)]
        yield spec, [i.type for i in [first, *others]], attrs, [i.draw(tu) for i in [first, *others]]


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_each_spec_infers_the_type_torch_computes(name):
    cases = 0
    for spec, types, attrs, tensors in _drawn_cases(name):
        names = [f"x{i}" for i in range(len(tensors))]
        result = eval(spec.render(names, attrs), NAMESPACE, dict(zip(names, tensors)))
        inferred = spec.infer(types, attrs)
        assert (tuple(result.shape), result.dtype) == (inferred.shape, getattr(torch, inferred.dtype)), (
            f"{name}{attrs} on {[str(t) for t in types]}"
        )
        cases += 1
    assert cases, f"{name}: its draw applied to none of the drawn operands"


def test_generated_programs_are_valid_on_their_inputs():
    """200 seeds: every input inside its domain, every float intermediate finite and
    within the limit (but the NaN an op with a NaN contract returns), each node's result of
    the type the program says."""
    sizes, dynamic = [], 0
    for seed in range(200):
        program = generate(seed)
        inputs = program.make_inputs(TestUtils(seed_for(program.name)))
        assert all(i.domain.holds(t) for i, t in zip(program.inputs, inputs)), program.name
        values = program.intermediates(inputs)
        for node in program.nodes:
            value = values[node.name]
            assert (tuple(value.shape), str(value.dtype)) == (node.type.shape, f"torch.{node.type.dtype}")
            assert value.numel() <= 2**16
            if value.is_floating_point():
                if CATALOGUE[node.op].nan is not None:  # NaN where its contract returns one, and only there
                    value = value[~torch.isnan(value)]
                assert torch.isfinite(value).all(), f"{program.name}: {node.name} not finite"
                if value.numel():
                    assert value.abs().max() <= FLOAT_LIMIT[node.type.dtype], f"{program.name}: {node.name}"
        sizes.append(len(program.nodes))
        dynamic += program.dynamic
    assert min(sizes) >= 1 and max(sizes) <= 20
    assert 40 <= dynamic <= 95  # about a third declare dynamic dims


def test_the_python_text_is_the_program():
    program = generate(5)
    inputs = program.make_inputs(TestUtils(seed_for(program.name)))
    values = program.intermediates(inputs)
    for output, value in zip(program.outputs, program.run(inputs)):
        torch.testing.assert_close(value, values[output], rtol=0, atol=0)


def test_the_widened_program_computes_in_float64_near_the_program():
    program = next(p for p in map(generate, range(50)) if {"float16", "float32"} & {n.type.dtype for n in p.nodes})
    inputs = program.make_inputs(TestUtils(seed_for(program.name)))
    wide = program.widened()
    values = wide.intermediates([t.double() if t.is_floating_point() else t for t in inputs])
    for node in wide.nodes:
        assert node.type.dtype not in ("float16", "bfloat16", "float32")
        assert str(values[node.name].dtype) == f"torch.{node.type.dtype}"
    narrow = program.intermediates(inputs)
    for name in program.outputs:
        if narrow[name].is_floating_point():
            torch.testing.assert_close(values[name], narrow[name].double(), rtol=0.05, atol=0.05)


def test_saved_programs_are_read_back_instead_of_grown(tmp_path, monkeypatch):
    """The pytest process saves its programs once; its children read them (JSON rebuilds
    a program exactly) and grow only seeds the file does not hold."""
    monkeypatch.setenv(PROGRAMS_ENV, "")  # restored after the test: save_programs sets it
    assert programs_for([4]) == [generate(4)]  # nothing saved: grown here
    path = tmp_path / "programs.json"
    save_programs([4, 9], path)
    assert os.environ[PROGRAMS_ENV] == str(path)
    assert programs_for([4, 9]) == [generate(4), generate(9)]
    # Read, not grown: a file holding another program under these seeds is taken as it is.
    data = json.loads(path.read_text())
    data["programs"][0] = generate(5).to_json()
    path.write_text(json.dumps(data))
    assert programs_for([4, 9])[0] == generate(5)
    assert programs_for([4]) == [generate(4)]  # other seeds than the file's: grown
    path.unlink()
    assert programs_for([4, 9]) == [generate(4), generate(9)]  # the file gone: grown


def test_pytest_generate_runs_programs_as_suite_tests(tmp_path):
    """From the checkout (its own `e2e`, whatever the installed one is)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--no-reduce", "-v", "-n", "0"]
    command += ["--generate", "3", "--generate-seed", "1", "--config", "linalg", f"--reports-dir={tmp_path}"]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    for seed in (1, 2, 3):
        assert f"e2e/generate/suite.py::Gen_{seed}::linalg" in run.stdout, run.stdout + run.stderr
    rows = json.loads((tmp_path / "results.json").read_text())
    assert sorted(r["test"] for r in rows) == ["Gen_1", "Gen_2", "Gen_3"]
    saved = json.loads((tmp_path / "programs.json").read_text())  # grown once, read by every process
    assert saved["seeds"] == [1, 2, 3] and saved["programs"][1] == generate(2).to_json()
    # Each failure's rerun line names exactly its own program.
    for line in run.stdout.splitlines():
        if line.startswith("rerun: "):
            name = line.split("::")[1]
            assert f"--generate 1 --generate-seed {seed_of(name)}" in line


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))

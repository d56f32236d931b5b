"""The generated suite file: the programs of the seeds `pytest --generate N --generate-seed S`
asks for (through `$E2E_GENERATE`, so a forked host or the reducer loading this file by
path rebuilds the same programs). Without the option it registers nothing."""

from e2e.generate.register import register_programs, seeds_from_env

TESTS = register_programs(seeds_from_env())

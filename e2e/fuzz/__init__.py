"""The fuzzing campaign (`python -m e2e.fuzz`): see docs/fuzz.md."""

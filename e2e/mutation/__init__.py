"""Mutation testing of the compiler: how many injected miscompiles the suite catches.

`python -m e2e.mutation --config linalg -n 2`; the catalogue and how to add mutations
are in `catalogue.py`.
"""

from e2e.mutation.catalogue import BOUNDARIES, CATALOGUE, Mutation, load, mutations, register

__all__ = ["BOUNDARIES", "CATALOGUE", "Mutation", "load", "mutations", "register"]

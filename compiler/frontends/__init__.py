"""Frontends: ways to capture a PyTorch program and import it into the torch dialect."""

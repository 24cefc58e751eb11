"""Deterministic simulation of the store: a scheduler preempts it at every file operation (issue 9)."""

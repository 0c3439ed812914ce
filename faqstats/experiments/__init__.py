"""Experiments built on the core library: demos, trials and sweeps (no statistics of their own)."""

from .demo import DemoRow, run_demo

__all__ = ["DemoRow", "run_demo"]

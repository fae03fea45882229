"""Timing helpers shared by the benchmarks (one process, nothing asserted)."""

from __future__ import annotations

import importlib.metadata
import os
from typing import Callable

from experiments import timing as exp_timing


def version(pkg: str) -> str:
  try:
    return importlib.metadata.version(pkg)
  except importlib.metadata.PackageNotFoundError:
    return 'not installed'


def num_cpus() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def median_time(fn: Callable[[], object], repeats: int,
                budget_s: float, *, min_calls: int = 1,
                warmup_s: float = 0.25) -> tuple[float, int]:
  """`experiments.timing.median_time` with a budget and, by default, 0.25 s
  of warm-up calls (the first calls after compiling are slower at small
  sizes); returns (median seconds, calls timed)."""
  return exp_timing.median_time(fn, repeats, budget_s, min_calls=min_calls,
                                warmup_s=warmup_s)

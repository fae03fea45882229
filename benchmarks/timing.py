"""Timing helpers shared by the benchmarks (one process, nothing asserted)."""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import time
from typing import Callable


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
                budget_s: float) -> tuple[float, int]:
  """Median seconds of `fn()` (a call that blocks) after warm-up calls.

  Warm-up: one call (it compiles), then at least one more, repeated until
  0.25 s have passed (the first calls after compiling are slower at small
  sizes). Fewer than `repeats` timed calls (at least one) when the last
  warm-up call shows that they would take over `budget_s`; returns
  (median, calls timed).
  """
  fn()
  start = time.perf_counter()
  while True:
    t0 = time.perf_counter()
    fn()
    last = time.perf_counter() - t0
    if time.perf_counter() - start >= 0.25:
      break
  repeats = max(1, min(repeats, int(budget_s / max(last, 1e-9))))
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times), repeats

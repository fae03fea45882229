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
                budget_s: float, *, min_calls: int = 1,
                warmup_s: float = 0.25) -> tuple[float, int]:
  """Median seconds of `fn()` (a call that blocks) after warm-up calls.

  Warm-up: one call (it compiles), then more until `warmup_s` have passed
  (at least one more when warmup_s > 0: the first calls after compiling are
  slower at small sizes; 0 for a call compiled already). Fewer than `repeats` timed calls, but at least
  `min_calls`, when the last warm-up call shows that they would take over
  `budget_s`; returns (median, calls timed).
  """
  t0 = time.perf_counter()
  fn()
  last = time.perf_counter() - t0
  start = time.perf_counter()
  while time.perf_counter() - start < warmup_s:
    t0 = time.perf_counter()
    fn()
    last = time.perf_counter() - t0
  repeats = max(min_calls, 1,
                min(repeats, int(budget_s / max(last, 1e-9))))
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times), repeats

"""Wall-clock timing shared by experiments and benchmarks.

Speed is measured, never asserted: a median over repeated calls of a function
that blocks until its result is ready (`jax.block_until_ready`).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], repeats: int,
                budget_s: float | None = None, *, min_calls: int = 1,
                warmup_s: float = 0.0) -> tuple[float, int]:
  """Median seconds of `fn()` (a call that blocks) after warm-up calls.

  Warm-up: one call (it compiles), then more until `warmup_s` have passed
  (the first calls after compiling are slower at small sizes; 0 for a call
  compiled already). With a `budget_s`, fewer than `repeats` timed calls, but
  at least `min_calls`, when the last warm-up call shows that they would take
  over `budget_s`. Returns (median seconds, calls timed).
  """
  t0 = time.perf_counter()
  fn()
  last = time.perf_counter() - t0
  start = time.perf_counter()
  while time.perf_counter() - start < warmup_s:
    t0 = time.perf_counter()
    fn()
    last = time.perf_counter() - t0
  if budget_s is not None:
    repeats = min(repeats, int(budget_s / max(last, 1e-9)))
  repeats = max(min_calls, 1, repeats)
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return statistics.median(times), repeats
